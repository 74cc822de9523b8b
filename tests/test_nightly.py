"""The nightly batch: selection, idempotence, crash and rerun, the runs table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from l4spark.io.storage import read_table, table_exists

from tests.nightly_support import assert_same, nightly_config as _config, snapshot


@pytest.fixture(scope="module")
def logs(nightly_logs):
    return nightly_logs


@pytest.fixture(scope="module")
def clean(nightly_clean):
    return nightly_clean


def test_nightly_diagnoses_every_failed_job_and_records_the_run(spark, logs, clean):
    warehouse, run, tables = clean
    failed = sorted(p.stem for p in (logs / "_labels").glob("*.json"))
    assert run.selected == failed and run.diagnosed == failed and not run.errors
    assert sorted(tables["diagnosis_jobs"]["job_id"]) == failed
    runs = read_table(spark, _config(warehouse).storage, "runs").toPandas()
    assert runs["run_id"].tolist() == [run.run_id]
    assert runs.loc[0, "n_diagnosed"] == len(failed) and runs.loc[0, "status"] == "succeeded"


def test_rerun_selects_nothing_and_changes_nothing(spark, logs, clean):
    from l4spark.nightly.batch import run_nightly

    warehouse, _, tables = clean
    again = run_nightly(spark, _config(warehouse), logs)
    assert again.parsed == [] and again.selected == []
    assert_same(tables, snapshot(spark, warehouse))


def test_crash_between_tables_then_rerun_equals_a_clean_run(spark, logs, clean, tmp_path, monkeypatch):
    """A crash after the events were written but before diagnosis_jobs: the rerun finishes the work."""
    import l4spark.diagnosis.assemble as diagnose
    from l4spark.nightly.batch import run_nightly

    warehouse = tmp_path / "warehouse"
    real = diagnose.write_job_rows
    calls = []

    def crash_on_jobs(rows, storage, table, *args, **kwargs):
        calls.append(table)
        if table == "diagnosis_jobs":
            raise RuntimeError("killed")
        return real(rows, storage, table, *args, **kwargs)

    monkeypatch.setattr(diagnose, "write_job_rows", crash_on_jobs)
    with pytest.raises(RuntimeError, match="killed"):
        run_nightly(spark, _config(warehouse), logs)
    monkeypatch.setattr(diagnose, "write_job_rows", real)
    assert "diagnosis_events" in calls and not table_exists(_config(warehouse).storage, "runs")
    rerun = run_nightly(spark, _config(warehouse), logs)
    assert rerun.parsed == []  # parsing had finished: only the diagnosis is redone
    assert_same(clean[2], snapshot(spark, warehouse))


@pytest.mark.parametrize("fraction", [0.5])
def test_killed_process_then_rerun_equals_a_clean_run(spark, logs, clean, tmp_path, fraction):
    """SIGKILL a real ``l4spark nightly`` process part way, rerun it: the tables of a clean run."""
    warehouse = tmp_path / "warehouse"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    # the format of the clean run it is compared with (nightly_config), not the default's Delta
    command = [sys.executable, "-m", "l4spark.cli", "nightly", "--logs-root", str(logs), "--warehouse", str(warehouse),
               "--master", "local[2]", "--no-reports", "--format", "parquet"]
    # the in-process clean run's time plus a JVM start: the kill lands inside the work
    duration = clean[1].seconds["test_total"] + 8.0
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    time.sleep(duration * fraction)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert_same(clean[2], snapshot(spark, warehouse))

