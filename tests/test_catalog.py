"""Tables by name (l4spark/io/catalog.py): after a Delta nightly, a Spark process with the
warehouse's persistent catalog (Hive metastore on Derby in ``<warehouse>/_metastore``) registers
every table and the analyst views as the nightly does (``register_by_name``, twice: idempotent);
a second, new Spark process finds each by name and reads the same rows that delta-rs reads from
the folders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import deltalake
import pytest

from l4spark.io.catalog import VIEWS
from l4spark.io.tables import TABLES
from l4spark.report import analysis
from tests.nightly_support import nightly_config

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]

# The first process: what the nightly does at its end, twice.
REGISTER = """
import json, sys
from l4spark.config import load_config
from l4spark.io.catalog import metastore_folder
from l4spark.io.session import build_session
from l4spark.nightly.batch import register_by_name

config = load_config(overrides={"storage.warehouse": sys.argv[1], "spark.master": "local[1]"})
spark = build_session(config.spark, metastore_folder(config.storage, config.catalog))
first, second = register_by_name(spark, config), register_by_name(spark, config)
print("RESULT " + json.dumps({"first": first, "second": second}))
spark.stop()
"""

# The second process: a session with the warehouse's metastore (or the one named by a second
# argument), registration run again (it must be idempotent), then every table and view read by name only.
READER = """
import json, sys
from l4spark.config import load_config
from l4spark.io.catalog import metastore_folder, register_tables
from l4spark.io.session import build_session

overrides = {"storage.warehouse": sys.argv[1], "spark.master": "local[1]"}
config = load_config(overrides={**overrides, **({"catalog.metastore": sys.argv[2]} if sys.argv[2:] else {})})
spark = build_session(config.spark, metastore_folder(config.storage, config.catalog))
before = sorted(r.tableName for r in spark.sql("SHOW TABLES IN l4spark").collect())
again = register_tables(spark, config.storage, config.catalog)
after = sorted(r.tableName for r in spark.sql("SHOW TABLES IN l4spark").collect())
counts = {name: spark.sql(f"SELECT count(*) AS n FROM l4spark.{name}").first().n for name in before}
recurring = {r.node: r.n_jobs for r in spark.sql("SELECT node, n_jobs FROM l4spark.recurring_suspects").collect()}
no_pattern = sorted(r.job_id for r in spark.sql("SELECT job_id FROM l4spark.jobs_without_pattern").collect())
per_week = spark.sql("SELECT sum(n_jobs) AS n FROM l4spark.faults_per_week").first().n
print("RESULT " + json.dumps({"before": before, "after": after, "again": again, "counts": counts,
                              "recurring": recurring, "no_pattern": no_pattern, "per_week": per_week}))
spark.stop()
"""


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _result(done: subprocess.CompletedProcess) -> dict:
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.fixture(scope="module")
def registered(spark, nightly_logs, tmp_path_factory):
    """A Delta warehouse of one nightly run (the suite's session: an in-memory catalog, so the run
    itself registers nothing), registered by a first process, read by name by a second."""
    from l4spark.nightly.batch import run_nightly

    warehouse = tmp_path_factory.mktemp("catalog") / "warehouse"
    run = run_nightly(spark, nightly_config(warehouse, "delta"), nightly_logs)
    assert run.diagnosed and run.registered == []
    names = _result(_run([sys.executable, "-c", REGISTER, str(warehouse)]))
    assert names["first"] == names["second"]
    return warehouse, _result(_run([sys.executable, "-c", READER, str(warehouse)]))


def test_a_second_process_finds_every_table_and_view_by_name(registered):
    warehouse, seen = registered
    written = sorted(p.name for p in warehouse.iterdir() if p.name in TABLES)
    assert {"events", "jobs", "templates", "normal_pool", "diagnosis_jobs", "diagnosis_events", "runs"} <= set(written)
    assert seen["before"] == sorted(written + list(VIEWS))
    assert seen["after"] == seen["before"] and sorted(seen["again"]) == seen["before"]
    for table in written:
        assert seen["counts"][table] == len(deltalake.DeltaTable(str(warehouse / table)).to_pandas()), table


def test_the_views_answer_as_the_analysis_helpers_do(registered):
    warehouse, seen = registered
    jobs = deltalake.DeltaTable(str(warehouse / "diagnosis_jobs")).to_pandas()
    diagnosed = jobs[jobs["status"] == "diagnosed"]
    assert seen["counts"]["latest_diagnosis"] == len(jobs)
    assert seen["per_week"] == len(diagnosed)
    assert seen["no_pattern"] == sorted(j for j, p in zip(diagnosed["job_id"], diagnosed["matched_patterns"])
                                        if p is None or len(p) == 0)
    expected = analysis.recurring_suspects(warehouse, min_jobs=2)
    assert seen["recurring"] == dict(zip(expected["node"], expected["n_jobs"].astype(int)))
