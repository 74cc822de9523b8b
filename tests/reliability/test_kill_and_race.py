"""Concurrent and killed nightly runs: the warehouse ends as after one clean run.

Kill points (l4spark/killpoints.py) make a real ``l4spark nightly`` process exit at a named
place with no cleanup, as a SIGKILL would; its warehouse lock stays behind and the next run
must take it over. To keep the time down (each process starts a JVM), one warehouse goes
through it all: two runs start at once (one proceeds, the other fails cleanly), the winner is
killed at the first point, each rerun is killed at the next point while it still has work to
do (the first kill leaves the parse unfinished, so the second run parses again, and so on), and
a last run must leave the tables of one clean run. ``tests/test_nightly.py`` also kills a
process at a random moment with SIGKILL.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from l4spark.killpoints import ENV, KILLED_EXIT
from l4spark.io.lock import lock_path, read_holder, warehouse_lock
from l4spark.io.storage import read_table, table_exists
from tests.nightly_support import assert_same, nightly_config, snapshot

pytestmark = pytest.mark.reliability

# (point, what the killed run must have found to do): every point is reached with work left
KILL_CHAIN = [
    ("after_write:events", "parse"),              # events written; jobs, templates... not yet
    ("after_normal_pool", "parse"),               # parsed again (no jobs table), pool written
    ("after_write:diagnosis_events", "diagnose"),  # diagnosis half written (no diagnosis_jobs)
    ("before_runs_row", "diagnose"),              # all written, the run not recorded
]


def _nightly(logs, warehouse, kill_at: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop(ENV, None)
    if kill_at:
        env[ENV] = kill_at
    # the format of the clean run it is compared with (nightly_config), not the default's Delta
    command = [sys.executable, "-m", "l4spark.cli", "nightly", "--logs-root", str(logs), "--warehouse", str(warehouse),
               "--master", "local[2]", "--no-reports", "--format", "parquet"]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_racing_and_killed_runs_then_a_rerun_equal_a_clean_run(spark, nightly_logs, nightly_clean, tmp_path):
    """Two runs start at once on a new warehouse: one takes the lock, the other exits 2 at once
    naming it. The winner is killed at the first point; each rerun is killed at the next."""
    from l4spark.nightly.batch import run_nightly

    warehouse = tmp_path / "warehouse"
    config = nightly_config(warehouse)
    first_point = KILL_CHAIN[0][0]
    racers = [_nightly(nightly_logs, warehouse, kill_at=first_point) for _ in range(2)]
    results = [(p, *p.communicate(timeout=900)) for p in racers]
    assert sorted(p.returncode for p, _, _ in results) == [2, KILLED_EXIT], [err[-1500:] for _, _, err in results]
    winner = next(p for p, _, _ in results if p.returncode == KILLED_EXIT)
    loser_err = next(err for p, _, err in results if p.returncode == 2)
    assert f"is locked by l4spark nightly (pid {winner.pid} on " in loser_err
    for index, (point, work) in enumerate(KILL_CHAIN):
        if index:
            process = _nightly(nightly_logs, warehouse, kill_at=point)
            out, err = process.communicate(timeout=900)
            assert process.returncode == KILLED_EXIT, (point, err[-2000:])
            assert work == "parse" or f"{len(nightly_clean[1].selected)} failed jobs to diagnose" in out, (point, out)
        else:
            process = winner
        holder = read_holder(lock_path(config.storage))
        assert holder is not None and holder.owner == "l4spark nightly" and holder.pid == process.pid, point
        assert not table_exists(config.storage, "runs"), point
        if point == "after_write:diagnosis_events":
            assert table_exists(config.storage, "diagnosis_events")
            assert not table_exists(config.storage, "diagnosis_jobs")
    with warehouse_lock(config.storage, "rerun"):  # takes over the dead run's lock
        rerun = run_nightly(spark, config, nightly_logs)
    assert rerun.parsed == [] and rerun.selected == []  # the killed runs had done everything but the record
    assert_same(nightly_clean[2], snapshot(spark, warehouse))
    assert read_table(spark, config.storage, "runs").count() == 1
    assert not lock_path(config.storage).exists()
