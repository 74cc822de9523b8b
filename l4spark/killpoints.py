"""Named points where a test can kill the process, to prove that a rerun repairs any crash.

``L4SPARK_TEST_KILL_AT=<point>`` makes the process exit at once at that point, with no cleanup
(``os._exit``: no ``finally``, no lock release, Spark not stopped), as a SIGKILL or a lost
node would. Unset (always, outside tests) it costs one environment lookup per point. Points:
``after_write:<table>`` (that table's write committed; the others of the step not yet),
``after_template_store`` (a new store version current, the events not written),
``after_parse``, ``after_normal_pool``, ``after_diagnose`` (diagnosis computed, nothing of it
written), ``before_runs_row`` (diagnosis and reports written, the run not recorded).
"""

from __future__ import annotations

import os

ENV = "L4SPARK_TEST_KILL_AT"
KILLED_EXIT = 137


def kill_point(name: str) -> None:
    """Exit the process now when ``L4SPARK_TEST_KILL_AT`` names this point."""
    if os.environ.get(ENV) == name:
        os._exit(KILLED_EXIT)
