"""The whole nightly over Spark Connect: a real Spark Connect server (the spark-connect jar that
ships with pyspark, started with spark-submit on a free 127.0.0.1 port) runs ``l4spark nightly``
on the nightly tests' generated fleet, and its tables equal those of the same fleet's nightly on
classic Spark (``nightly_clean``, the shared session's run), row for row.

Why a test: the PySpark Connect client copies a plan into its checkpoint command with Python
protobuf, which refuses plans nested more than 100 levels; the diagnosis' per-line plans are
deeper, so every job used to end as an error row over Connect (``frames.materialize``). The
Connect run is a process of its own (one process holds either a classic or a Connect session);
the classic tables are the ones the other nightly tests compare with, so no second classic run
is paid for (session 48's clean-clone CI: 160 s -> 91 s of ``make test``).

The tables are Delta through delta-spark: the Connect server is started with Delta's jars, SQL
extension and catalog (as a platform's Connect endpoint would be), the client asks for
``--format delta`` (the default ``auto`` cannot see the server's classpath), and delta-rs reads
the diagnosis back as an analyst's tool would.
"""

from __future__ import annotations

import re

import deltalake
import pytest

from tests.connect_server import connect_server, l4spark_over
from tests.nightly_support import assert_same, snapshot

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def test_nightly_over_spark_connect_equals_classic(spark, nightly_logs, nightly_clean, tmp_path):
    warehouse = tmp_path / "wh-connect"
    with connect_server(tmp_path / "server.log") as url:
        run = l4spark_over(url, "nightly", "--logs-root", str(nightly_logs), "--warehouse", str(warehouse),
                           "--format", "delta", "--reports", str(tmp_path / "reports"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _, local_run, local_tables = nightly_clean
    assert local_run.diagnosed, "the fleet has failed jobs to diagnose"
    assert re.search(rf"diagnosed +{len(local_run.diagnosed)} of .*errors 0", run.stdout), run.stdout[-3000:]
    assert_same(snapshot(spark, warehouse, storage_format="delta"), local_tables)
    jobs = deltalake.DeltaTable(str(warehouse / "diagnosis_jobs")).to_pandas()
    assert sorted(jobs["job_id"]) == sorted(local_run.diagnosed) and set(jobs["status"]) == {"diagnosed"}
    assert list((tmp_path / "reports").glob("*.html")), "the reports were written over Connect"
