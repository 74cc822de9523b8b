"""Delta Lake on classic Spark with the real delta-spark jars (``make jars``, docs/delta.md): the
nightly end to end, a rerun of one job, time travel, concurrent writers, and every table read
back with delta-rs (``deltalake``), which knows nothing of Spark.

The suite's shared ``spark`` session gets the jars from ``build_session`` (``jars/`` of the
checkout); tests/test_delta.py checks the same writes over Spark Connect against Sail.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import deltalake
import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from l4spark.io.delta_jars import DELTA_SQL_SETTINGS
from l4spark.io.lock import warehouse_lock
from l4spark.io.storage import read_table, table_exists, table_path, write_job_rows
from l4spark.io.tables import JOB_EVENT_COUNTS, TABLES
from tests.nightly_support import DIAGNOSIS_TABLES, RESULT_TABLES, nightly_config, snapshot

pytestmark = pytest.mark.spark

# The tables a job's rediagnosis replaces (diagnosis_jobs last), each in one commit.
REDIAGNOSED = ("diagnosis_attempts", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations", "diagnosis_jobs")


@pytest.fixture(scope="module")
def delta_spark(spark):
    extension = spark.conf.get("spark.sql.extensions", "")
    if extension != DELTA_SQL_SETTINGS["spark.sql.extensions"]:
        pytest.fail(f"the test session has no Delta (spark.sql.extensions={extension!r}): "
                    "`make jars` copies Delta's jars into jars/")
    return spark


@pytest.fixture(scope="module")
def delta_nightly(delta_spark, nightly_logs, tmp_path_factory):
    """One nightly run with ``storage.format = "delta"``: (warehouse, config, run)."""
    from l4spark.nightly.batch import run_nightly

    warehouse = tmp_path_factory.mktemp("delta") / "warehouse"
    config = nightly_config(warehouse, "delta")
    run = run_nightly(delta_spark, config, nightly_logs)
    return warehouse, config, run


@pytest.fixture(scope="module")
def rediagnosed(delta_spark, delta_nightly):
    """One job of the Delta nightly diagnosed again and written: (job, its new run id, versions
    of the rediagnosed tables before the write). Runs after the tests that read the first state."""
    from l4spark.diagnosis.assemble import diagnose_jobs, write_diagnosis

    warehouse, config, run = delta_nightly
    job = sorted(run.diagnosed)[0]
    before = {table: _version(warehouse, table) for table in REDIAGNOSED}
    diagnosis = diagnose_jobs(delta_spark, config, [job], run_id="rerun-one-job")
    write_diagnosis(delta_spark, config, diagnosis)
    return job, "rerun-one-job", before


def _commits(warehouse: Path, table: str) -> list[dict]:
    """The commitInfo of every commit of ``table``, oldest first."""
    log = Path(warehouse) / table / "_delta_log"
    infos = []
    for path in sorted(log.glob("*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        infos.append(next(a["commitInfo"] for a in actions if "commitInfo" in a))
    return infos


def _version(warehouse: Path, table: str) -> int:
    return len(_commits(warehouse, table)) - 1


def _value(value):
    """A cell as a comparable Python value: arrays as tuples, every null as None, naive UTC times."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(_value(v) for v in value)
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return None
    if isinstance(value, (pd.Timestamp, datetime)):
        stamp = pd.Timestamp(value)
        return stamp.tz_convert(None) if stamp.tzinfo is not None else stamp
    if isinstance(value, np.generic):
        return value.item()
    return value


def _rows(frame: pd.DataFrame) -> list[tuple]:
    columns = sorted(frame.columns)
    return sorted((tuple(_value(v) for v in row) for row in frame[columns].itertuples(index=False)), key=repr)


def test_nightly_writes_every_table_as_delta_in_one_commit_each(delta_spark, delta_nightly, nightly_clean):
    """Every table of the nightly is a Delta table of one WRITE commit, diagnosis_jobs committed
    after the other diagnosis tables, and the tables equal those of the Parquet nightly."""
    warehouse, config, run = delta_nightly
    assert run.diagnosed and not run.errors
    written = sorted(p.name for p in warehouse.iterdir() if not p.name.startswith("_"))
    assert set(written) <= set(TABLES) and {"events", "jobs", "templates", "normal_pool", "runs",
                                            *DIAGNOSIS_TABLES} <= set(written)
    for table in written:
        assert table_exists(config.storage, table), table
        assert [c["operation"] for c in _commits(warehouse, table)] == ["WRITE"], table
        assert not list((warehouse / table).glob("_SUCCESS")), table  # Delta, not a Parquet folder
    last = _commits(warehouse, "diagnosis_jobs")[0]["timestamp"]
    for table in ("diagnosis_attempts", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations"):
        assert _commits(warehouse, table)[0]["timestamp"] <= last, table
    parquet, delta = nightly_clean[2], snapshot(delta_spark, warehouse, storage_format="delta")
    for table in RESULT_TABLES:  # Parquet puts the partition column last, Delta keeps the schema's order
        columns = list(parquet[table].columns)
        ordered = delta[table][columns].sort_values(columns).reset_index(drop=True) if columns else delta[table]
        pd.testing.assert_frame_equal(parquet[table], ordered, check_dtype=False, obj=table)


def test_delta_rs_reads_every_table_as_spark_does(delta_spark, delta_nightly):
    warehouse, config, _ = delta_nightly
    tables = sorted(p.name for p in warehouse.iterdir() if not p.name.startswith("_"))
    for table in tables:
        by_spark = read_table(delta_spark, config.storage, table).toPandas()
        by_delta_rs = deltalake.DeltaTable(table_path(config.storage, table)).to_pandas()
        assert sorted(by_delta_rs.columns) == sorted(by_spark.columns), table
        # quarantine: a clean fleet; diagnosis_pace: only jobs with per-rank timers or progress lines
        assert len(by_spark) > 0 or table in ("quarantine", "diagnosis_pace"), table
        assert _rows(by_delta_rs) == _rows(by_spark), table


def test_a_rerun_replaces_exactly_one_jobs_rows_in_one_commit_per_table(delta_spark, delta_nightly, rediagnosed):
    warehouse, config, run = delta_nightly
    job, run_id, before = rediagnosed
    for table in REDIAGNOSED:
        commits = _commits(warehouse, table)
        assert len(commits) == before[table] + 2, table  # exactly one new commit
        assert commits[-1]["operationParameters"]["predicate"] == f"[\"`job_id` IN ('{job}')\"]" \
            or commits[-1]["operationParameters"]["predicate"] == f"`job_id` IN ('{job}')", (table, commits[-1])
        path = table_path(config.storage, table)
        old = delta_spark.read.format("delta").option("versionAsOf", before[table]).load(path)
        new = delta_spark.read.format("delta").load(path)
        others_old, others_new = (frame.where(F.col("job_id") != job).toPandas() for frame in (old, new))
        assert _rows(others_new) == _rows(others_old), table  # other jobs untouched, run ids too
        job_new = new.where(F.col("job_id") == job).toPandas()
        assert not job_new.empty and set(job_new["run_id"] if "run_id" in job_new else [run_id]) == {run_id}, table
    assert _version(warehouse, "diagnosis_jobs") == before["diagnosis_jobs"] + 1
    jobs_commit = _commits(warehouse, "diagnosis_jobs")[-1]["timestamp"]
    for table in REDIAGNOSED[:-1]:
        assert _commits(warehouse, table)[-1]["timestamp"] <= jobs_commit, table


def test_time_travel_returns_the_previous_diagnosis_of_a_job(delta_spark, delta_nightly, rediagnosed):
    """The analyst's query of docs/delta.md: a job's diagnosis as of a version and a timestamp."""
    warehouse, config, run = delta_nightly
    job, run_id, before = rediagnosed
    path = table_path(config.storage, "diagnosis_jobs")

    def diagnosis(**options) -> list:
        reader = delta_spark.read.format("delta")
        for key, value in options.items():
            reader = reader.option(key, value)
        return [tuple(r) for r in reader.load(path).where(F.col("job_id") == job)
                .select("run_id", "status", "failure_stage", "suspect_nodes").collect()]

    previous, current = diagnosis(versionAsOf=before["diagnosis_jobs"]), diagnosis()
    assert [r[0] for r in previous] == [run.run_id] and [r[0] for r in current] == [run_id]
    assert [r[1:] for r in previous] == [r[1:] for r in current]  # same input, same diagnosis
    # timestampAsOf goes by the history's timestamp (the commit file's time), not commitInfo's
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where(F.col("version") == before["diagnosis_jobs"])
    as_of = history.select("timestamp").first()[0].isoformat(sep=" ")
    assert diagnosis(timestampAsOf=as_of) == previous


def test_a_second_writer_fails_on_the_lock_and_changes_nothing(delta_spark, delta_nightly):
    """A real ``l4spark diagnose`` process on a warehouse whose lock another run holds exits 2 and
    names the holder; no table gets a commit."""
    warehouse, config, run = delta_nightly
    versions = {table: _version(warehouse, table) for table in REDIAGNOSED}
    command = [sys.executable, "-m", "l4spark.cli", "diagnose", "--warehouse", str(warehouse), "--format", "delta",
               "--job", sorted(run.diagnosed)[-1], "--master", "local[2]"]
    with warehouse_lock(config.storage, "l4spark test holder"):
        done = subprocess.run(command, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "is locked by l4spark test holder" in done.stderr
    assert {table: _version(warehouse, table) for table in REDIAGNOSED} == versions


def test_concurrent_writers_of_one_job_never_interleave(delta_spark, tmp_path):
    """Two writers replace the same job's rows at once, three times (without the lock): Delta
    either orders their commits or fails one on its conflict check (a ``Concurrent...``
    exception); the job's rows are always exactly the rows of the last commit, never a mix."""
    storage = nightly_config(tmp_path / "warehouse", "delta").storage

    def rows(writer: str):
        return delta_spark.createDataFrame(
            [("job-a", f"{writer}-{i}", i, None) for i in range(40)], JOB_EVENT_COUNTS.schema).repartition(4)

    write_job_rows(rows("seed"), storage, "job_event_counts", ["job-a"])
    for round_no in range(3):
        start, outcomes = threading.Barrier(2), {}

        def write(writer: str) -> None:
            frame = rows(writer)
            start.wait()
            try:
                write_job_rows(frame, storage, "job_event_counts", ["job-a"])
                outcomes[writer] = "ok"
            except Exception as exc:  # the conflict Delta raises, checked below
                outcomes[writer] = f"{type(exc).__name__}: {exc}"

        before = _version(tmp_path / "warehouse", "job_event_counts")
        writers = [threading.Thread(target=write, args=(f"w{round_no}{side}",)) for side in "ab"]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join(timeout=300)
        succeeded = sorted(w for w, outcome in outcomes.items() if outcome == "ok")
        assert len(outcomes) == 2 and succeeded, outcomes
        for writer, outcome in outcomes.items():
            assert outcome == "ok" or "Concurrent" in outcome or "CONCURRENT" in outcome, outcome
        assert _version(tmp_path / "warehouse", "job_event_counts") == before + len(succeeded)
        events = read_table(delta_spark, storage, "job_event_counts").toPandas()["event_id"]
        owners = {event.rsplit("-", 1)[0] for event in events}
        assert len(owners) == 1 and owners <= set(succeeded) and len(events) == 40, (outcomes, sorted(owners))


def test_a_delta_write_looks_at_the_stored_table_once(delta_spark, tmp_path, monkeypatch):
    """``write_job_rows`` decides whether the Delta write creates the table or replaces rows from
    the same look that checks its format (on a remote warehouse each look is a listing), and
    still creates, then replaces."""
    from l4spark.io import storage

    config = nightly_config(tmp_path / "warehouse", "delta")
    looks = []
    original = storage.stored_format
    monkeypatch.setattr(storage, "stored_format", lambda *args: looks.append(args[1]) or original(*args))
    rows = delta_spark.createDataFrame([("job-a", "e1", 3, None), ("job-b", "e2", 4, None)], JOB_EVENT_COUNTS.schema)
    write_job_rows(rows, config.storage, "job_event_counts", ["job-a", "job-b"])
    write_job_rows(rows.where("job_id = 'job-a'").withColumn("n_lines", F.lit(5).cast("long")),
                   config.storage, "job_event_counts", ["job-a"])
    assert looks == ["job_event_counts", "job_event_counts"]
    monkeypatch.undo()
    table = read_table(delta_spark, config.storage, "job_event_counts").toPandas()
    assert sorted(zip(table["job_id"], table["n_lines"])) == [("job-a", 5), ("job-b", 4)]


def test_a_parse_looks_up_each_table_once_and_refuses_another_format_before_writing_any(delta_spark, tmp_path,
                                                                                       monkeypatch):
    """The parse looks up the stored format of each table it writes once, ahead, while it reads
    (``storage.StoredFormats``; on a remote warehouse each look is a listing): ``job_event_counts``
    was looked up twice, by the templates' write and its own. A table stored in the other format
    (here ``jobs``, written as Delta) stops the parse before it writes any table: the writes of
    ``events`` and the other tables no longer go first and leave a warehouse of two formats."""
    from collections import Counter

    from l4spark.errors import ConfigError
    from l4spark.io import storage
    from l4spark.parse.pipeline import WRITTEN, parse_jobs
    from tests.test_parse import write_job

    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001", "gpu-002"])
    (logs / "job-a" / "gpu-001" / "rank-7.log").write_bytes(b"")  # an empty file: a quarantine row
    config = nightly_config(tmp_path / "warehouse", "delta")
    looks = []
    original = storage.stored_format
    monkeypatch.setattr(storage, "stored_format", lambda *args: looks.append(args[1]) or original(*args))
    parse_jobs(delta_spark, config, logs, progress=lambda m: None)
    assert Counter(looks) == Counter(WRITTEN)
    monkeypatch.undo()
    assert all(table_exists(config.storage, table) for table in WRITTEN)

    mixed = nightly_config(tmp_path / "mixed", "parquet")
    jobs = delta_spark.createDataFrame(read_table(delta_spark, config.storage, "jobs").toPandas())
    write_job_rows(jobs, nightly_config(tmp_path / "mixed", "delta").storage, "jobs", ["job-a"])
    with pytest.raises(ConfigError, match="jobs is delta but storage.format is parquet"):
        parse_jobs(delta_spark, mixed, logs, progress=lambda m: None)
    assert [table for table in WRITTEN if table_exists(mixed.storage, table)] == ["jobs"]
