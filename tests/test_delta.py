"""The Delta path for real: l4spark.io.storage with ``storage.format = "delta"`` over Spark Connect
to a local Sail server (pysail), every table read back with delta-rs (``deltalake``), which
knows nothing of Spark.

A classic and a Connect session cannot share one Python process (the generic builder refuses
a remote session next to a classic one, and a Connect session made beside it gets classic
Columns from ``pyspark.sql.functions``), and the suite's ``spark`` fixture is classic. So the
Spark side of these tests runs in one spawned worker process that holds the Connect session;
the Sail server runs in this process and the assertions read the Delta logs directly.
"""

from __future__ import annotations

import re

import gzip
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path

import deltalake
import pandas as pd
import pytest
from pysail.spark import SparkConnectServer
from pyspark.errors import AnalysisException

from l4spark.config import SparkConfig, StorageConfig, load_config
from l4spark.io.session import delta_settings, remote_url
from l4spark.io.storage import replace_where, stored_format, table_exists

pytestmark = pytest.mark.spark

LINES_SCHEMA = "job_id string, line_no long, message string"
PATTERNS_SCHEMA = "pattern_id string, name string"
TRICKY_JOB = "job-b'\\7"  # a quote and a backslash: the replaceWhere literal must escape both


# ---- the Connect side, run in the worker process ------------------------------------------------

_SESSIONS: dict = {}


def _config(url: str, warehouse: str):
    return load_config(overrides={"storage.warehouse": warehouse, "storage.format": "delta",
                                  "spark.shuffle_partitions": 2, "spark.extra": {"spark.remote": url}})


def _session(url: str):
    """The worker's Connect session, built by l4spark's own factory from the conf."""
    if url not in _SESSIONS:
        from l4spark.io.session import build_session

        _SESSIONS[url] = build_session(_config(url, "unused").spark)
    return _SESSIONS[url]


def _write_job_rows(url: str, warehouse: str, table: str, rows: list, job_ids: list, with_rows: list) -> str:
    from l4spark.io.storage import write_job_rows

    spark = _session(url)
    write_job_rows(spark.createDataFrame(rows, LINES_SCHEMA), _config(url, warehouse).storage, table, job_ids,
                   set(with_rows))
    return type(spark).__module__


def _write_table(url: str, warehouse: str, table: str, rows: list, schema: str) -> None:
    from l4spark.io.storage import write_table

    write_table(_session(url).createDataFrame(rows, schema), _config(url, warehouse).storage, table)


def _read_table(url: str, warehouse: str, table: str) -> list[tuple]:
    from l4spark.io.storage import read_table

    frame = read_table(_session(url), _config(url, warehouse).storage, table)
    return sorted(tuple(row) for row in frame.select(*sorted(frame.columns)).collect())


def _write_diagnosis(url: str, warehouse: str, jobs: dict[str, int]) -> None:
    """A hand-built Diagnosis: job -> number of flagged events (0: an error row, nothing else)."""
    from l4spark.diagnosis.assemble import Diagnosis, write_diagnosis

    at = datetime(2026, 11, 20, 3, 0, 0)
    job_rows, event_rows, node_rows, iteration_rows = [], [], [], []
    for job_id, n_events in jobs.items():
        job_rows.append({"job_id": job_id, "status": "diagnosed" if n_events else "error",
                         "suspect_nodes": ["gpu-002"] if n_events else [], "matched_patterns": [],
                         "n_lines": 100, "error": None if n_events else "no lines", "run_id": "run-1",
                         "processed_at": at, "version": "test"})
        for rank in range(1, n_events + 1):
            event_rows.append({"job_id": job_id, "event_id": f"E{rank}", "template": f"template {rank}",
                               "rank": rank, "score": 1.0 / rank, "sources": ["spatial"]})
            iteration_rows.append({"job_id": job_id, "iteration": rank, "score": 0.5, "anomalous": rank == 1,
                                   "event_ids": [f"E{rank}"]})
        if n_events:
            node_rows.append({"job_id": job_id, "node": "gpu-002", "rank": 1, "score": 0.9, "suspect": True,
                              "evidence": ["E1"]})
    empty = pd.DataFrame()
    diagnosis = Diagnosis(run_id="run-1", jobs=pd.DataFrame(job_rows), events=pd.DataFrame(event_rows),
                          nodes=pd.DataFrame(node_rows), iterations=pd.DataFrame(iteration_rows), scored=empty,
                          patterns={}, stages=empty, first_errors=empty, heat=empty)
    write_diagnosis(_session(url), _config(url, warehouse), diagnosis)


def _parse(url: str, warehouse: str, logs: str) -> list[str]:
    from l4spark.parse.pipeline import parse_jobs

    return parse_jobs(_session(url), _config(url, warehouse), logs, progress=lambda message: None).jobs


# ---- fixtures and helpers in the test process ----------------------------------------------------


@pytest.fixture(scope="module")
def sail(tmp_path_factory):
    """A Sail Spark Connect server on 127.0.0.1 (free port); its URL. ``localCheckpoint``, which
    the parser and the diagnosis writer use, needs Sail's checkpoint folder configured."""
    checkpoints = tmp_path_factory.mktemp("sail-checkpoints")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAIL_EXECUTION__CHECKPOINT__PATH", checkpoints.as_uri())
        server = SparkConnectServer("127.0.0.1", 0)
        server.start(background=True)
        host, port = server.listening_address
        try:
            yield f"sc://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture(scope="module")
def connect(sail):
    """Run ``function(url, *args)`` in the worker process holding the Connect session."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as worker:
        yield lambda function, *args: worker.submit(function, sail, *args).result(timeout=300)


def delta_rows(path: Path, version: int | None = None) -> list[tuple]:
    """The rows of a Delta table (at ``version``) as delta-rs reads them, columns by name."""
    frame = deltalake.DeltaTable(str(path), version=version).to_pandas()
    frame = frame[sorted(frame.columns)]
    return sorted(tuple(None if pd.isna(v) else v for v in row) for row in frame.itertuples(index=False))


def history(path: Path) -> list[tuple[int, str]]:
    """(version, operation) of every commit, oldest first."""
    return sorted((h["version"], h["operation"]) for h in deltalake.DeltaTable(str(path)).history())


def lines(job_id: str, count: int, tag: str) -> list[tuple]:
    return [(job_id, n, f"{tag} line {n}") for n in range(1, count + 1)]


def as_read(rows: list[tuple]) -> list[tuple]:
    """LINES rows in sorted column order (job_id, line_no, message), as the readers return them."""
    return sorted((job, line_no, message) for job, line_no, message in rows)


# ---- tests ----------------------------------------------------------------------------------------


def test_remote_url_from_conf_or_environment(monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert remote_url(SparkConfig()) is None
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert remote_url(SparkConfig()) == "sc://127.0.0.1:15002"
    assert remote_url(SparkConfig(extra={"spark.remote": "sc://127.0.0.1:1"})) == "sc://127.0.0.1:1"


def test_a_local_session_replays_a_delta_log_in_one_task(tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar"):
        (jars / name).write_bytes(b"")
    key = "spark.databricks.delta.snapshotPartitions"
    assert delta_settings(SparkConfig(master="local[2]", delta_jars=str(jars)))[key] == "1"
    assert delta_settings(SparkConfig(master="spark://127.0.0.1:7077", shuffle_partitions=16,
                                      delta_jars=str(jars)))[key] == "16"
    assert delta_settings(SparkConfig(delta_jars=str(tmp_path / "none"))) == {}


def test_replace_where_escapes_values_for_spark_sql():
    assert replace_where("job_id", ["a", "o'k\\x"]) == "`job_id` IN ('a', 'o\\'k\\\\x')"
    assert replace_where("run_id", []) == "false"


def test_job_rows_replaced_one_commit_per_write(connect, tmp_path):
    warehouse = tmp_path / "warehouse"
    storage = StorageConfig(str(warehouse), "delta")
    path = warehouse / "events"
    a_first, b_rows = lines("job-a", 3, "first"), lines(TRICKY_JOB, 2, "only")
    assert not table_exists(storage, "events")

    session_module = connect(_write_job_rows, str(warehouse), "events", a_first + b_rows,
                             ["job-a", TRICKY_JOB], ["job-a", TRICKY_JOB])
    assert session_module.startswith("pyspark.sql.connect")
    assert table_exists(storage, "events")
    # as Delta no table is partitioned, events neither (Table.partition_columns)
    assert deltalake.DeltaTable(str(path)).metadata().partition_columns == []
    assert delta_rows(path) == as_read(a_first + b_rows)

    a_second = lines("job-a", 1, "second")
    connect(_write_job_rows, str(warehouse), "events", a_second, ["job-a"], ["job-a"])
    assert delta_rows(path) == as_read(a_second + b_rows)

    connect(_write_job_rows, str(warehouse), "events", [], ["job-a"], [])
    assert delta_rows(path) == as_read(b_rows)
    assert table_exists(storage, "events")
    assert connect(_read_table, str(warehouse), "events") == as_read(b_rows)

    # one atomic commit per write: every version holds exactly the state after that write
    assert [version for version, _ in history(path)] == [0, 1, 2]
    assert [op for _, op in history(path)][1:] == ["WRITE", "WRITE"]
    assert delta_rows(path, version=0) == as_read(a_first + b_rows)
    assert delta_rows(path, version=1) == as_read(a_second + b_rows)
    predicates = [h["operationParameters"].get("predicate") for h in deltalake.DeltaTable(str(path)).history()
                  if h["version"] > 0]
    assert predicates == ["`job_id` IN ('job-a')"] * 2

    # no job ids: replaces nothing (Sail commits nothing; delta-spark would add an empty commit)
    connect(_write_job_rows, str(warehouse), "events", [], [], [])
    assert [version for version, _ in history(path)] in ([0, 1, 2], [0, 1, 2, 3])
    assert delta_rows(path) == as_read(b_rows)


def test_small_table_overwritten_whole_with_its_schema(connect, tmp_path):
    warehouse = tmp_path / "warehouse"
    path = warehouse / "fault_patterns"
    connect(_write_table, str(warehouse), "fault_patterns", [("p1", "nccl timeout"), ("p2", "oom")], PATTERNS_SCHEMA)
    connect(_write_table, str(warehouse), "fault_patterns", [("p3", "ecc error", "hardware")],
            PATTERNS_SCHEMA + ", fault_class string")

    table = deltalake.DeltaTable(str(path))
    assert table.metadata().partition_columns == []
    assert [version for version, _ in history(path)] == [0, 1]
    assert delta_rows(path, version=0) == sorted([("nccl timeout", "p1"), ("oom", "p2")])
    assert delta_rows(path) == [("hardware", "ecc error", "p3")]
    assert connect(_read_table, str(warehouse), "fault_patterns") == [("hardware", "ecc error", "p3")]


def test_table_exists_needs_a_delta_commit(tmp_path):
    storage = StorageConfig(str(tmp_path / "warehouse"), "delta")
    assert not table_exists(storage, "events")
    # what a crash during a first write leaves: data files, no commit
    (tmp_path / "warehouse" / "events" / "job_id=a").mkdir(parents=True)
    (tmp_path / "warehouse" / "events" / "job_id=a" / "part-0.parquet").write_bytes(b"PAR1")
    (tmp_path / "warehouse" / "events" / "_delta_log").mkdir()
    assert not table_exists(storage, "events")
    # a folder with a Delta log is never read as Parquet, whatever storage.format says
    assert not table_exists(StorageConfig(str(tmp_path / "warehouse"), "parquet"), "events")
    (tmp_path / "warehouse" / "events" / "_delta_log" / "00000000000000000000.json").write_text("{}")
    assert table_exists(storage, "events")
    assert stored_format(StorageConfig(str(tmp_path / "warehouse"), "parquet"), "events") == "delta"
    # a completed Parquet write is a Parquet table under storage.format = "delta" too (read as such)
    (tmp_path / "warehouse" / "jobs" / "job_id=a").mkdir(parents=True)
    (tmp_path / "warehouse" / "jobs" / "job_id=a" / "part-0.parquet").write_bytes(b"PAR1")
    assert stored_format(storage, "jobs") is None
    (tmp_path / "warehouse" / "jobs" / "_SUCCESS").write_bytes(b"")
    assert stored_format(storage, "jobs") == "parquet"


def check_diagnosis_tables(warehouse: Path, flagged: dict[str, int], errors: list[str]) -> None:
    """The four diagnosis tables as delta-rs reads them: ``flagged`` events (E1..En, one node and
    one iteration per event) of each diagnosed job, and an error row alone for ``errors``."""
    events = deltalake.DeltaTable(str(warehouse / "diagnosis_events")).to_pandas()
    assert sorted(zip(events["job_id"], events["event_id"], events["rank"])) == [
        (job, f"E{rank}", rank) for job, n in sorted(flagged.items()) for rank in range(1, n + 1)]
    assert sorted(map(list, events["sources"])) == [["spatial"]] * sum(flagged.values())
    nodes = deltalake.DeltaTable(str(warehouse / "diagnosis_nodes")).to_pandas()
    assert sorted(zip(nodes["job_id"], nodes["node"])) == [(job, "gpu-002") for job in sorted(flagged)]
    iterations = deltalake.DeltaTable(str(warehouse / "diagnosis_iterations")).to_pandas()
    assert sorted(zip(iterations["job_id"], iterations["iteration"])) == [
        (job, rank) for job, n in sorted(flagged.items()) for rank in range(1, n + 1)]
    jobs = deltalake.DeltaTable(str(warehouse / "diagnosis_jobs")).to_pandas().sort_values("job_id")
    expected = sorted([(job, "diagnosed", None, ["gpu-002"]) for job in flagged]
                      + [(job, "error", "no lines", []) for job in errors])
    assert [(j, s, e, list(n)) for j, s, e, n in zip(jobs["job_id"], jobs["status"], jobs["error"],
                                                      jobs["suspect_nodes"])] == expected


def test_diagnosis_tables_written_as_delta(connect, tmp_path):
    warehouse = tmp_path / "warehouse"
    connect(_write_diagnosis, str(warehouse), {"job-a": 3, "job-b": 2, "job-c": 0})
    check_diagnosis_tables(warehouse, {"job-a": 3, "job-b": 2}, ["job-c"])
    for table in ("diagnosis_events", "diagnosis_nodes", "diagnosis_iterations", "diagnosis_jobs"):
        assert [version for version, _ in history(warehouse / table)] == [0], table
        # small per-job tables are one file per write, not partitioned (Table.partition_columns)
        assert deltalake.DeltaTable(str(warehouse / table)).metadata().partition_columns == []


@pytest.mark.xfail(strict=True, raises=AnalysisException,
                   reason="Sail 0.7.2: an overwrite with replaceWhere fails on any Delta table with an array "
                          "column (UnionExec: List(Utf8, field 'element') vs List(Utf8)); full overwrite, "
                          "append and DELETE work. Expected to pass with delta-spark.")
def test_diagnosis_rerun_replaces_only_its_jobs(connect, tmp_path):
    warehouse = tmp_path / "warehouse"
    connect(_write_diagnosis, str(warehouse), {"job-a": 3, "job-b": 2})
    connect(_write_diagnosis, str(warehouse), {"job-a": 1})
    check_diagnosis_tables(warehouse, {"job-a": 1, "job-b": 2}, [])
    connect(_write_diagnosis, str(warehouse), {"job-b": 0})
    check_diagnosis_tables(warehouse, {"job-a": 1}, ["job-b"])


def write_rank_files(root: Path, job_id: str, nodes: list[str], status: str) -> None:
    for n, node in enumerate(nodes):
        for r in range(2):
            rank = n * 2 + r
            text = "".join(f"[2026-11-20 01:00:{i:02d},000] [INFO] [Rank {rank}] iteration {i} | lm loss: 2.{i}\n"
                           for i in range(10))
            if status == "failed" and rank == 1:
                text += f"{node}:4242:4300 [1] NCCL WARN NET/IB : Got completion from peer 10.3.1.17 with error 12\n"
            path = root / job_id / node / f"rank-{rank}.log.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(text.encode(), mtime=0))
    (root / job_id / "job.json").write_text(json.dumps({
        "job_id": job_id, "status": status, "settings": {"model": "m", "framework": "megatron"},
        "start_time": "2026-11-20T01:00:00Z", "end_time": "2026-11-20T02:00:00Z"}))


def test_parse_writes_delta_tables_and_a_rerun_replaces_them(connect, tmp_path):
    logs, warehouse = tmp_path / "logs", tmp_path / "warehouse"
    write_rank_files(logs, "job-a", ["gpu-001"], "failed")
    write_rank_files(logs, "job-b", ["gpu-002"], "succeeded")

    assert connect(_parse, str(warehouse), str(logs)) == ["job-a", "job-b"]
    first = {table: delta_rows(warehouse / table) for table in ("events", "jobs", "templates", "job_event_counts")}
    events = deltalake.DeltaTable(str(warehouse / "events")).to_pandas()
    assert len(events) == 2 * 2 * 10 + 1
    assert sorted(events.loc[events["level"] == "WARN", "node"]) == ["gpu-001"]
    assert sorted(set(events["job_id"])) == ["job-a", "job-b"]

    first_runs = set(deltalake.DeltaTable(str(warehouse / "jobs")).to_pandas()["run_id"])
    assert connect(_parse, str(warehouse), str(logs)) == ["job-a", "job-b"]
    for table, rows in first.items():
        assert [version for version, _ in history(warehouse / table)] == [0, 1], table
        if table != "jobs":
            assert delta_rows(warehouse / table) == rows, table
    jobs = deltalake.DeltaTable(str(warehouse / "jobs")).to_pandas()
    assert sorted(jobs["job_id"]) == ["job-a", "job-b"]
    assert len(set(jobs["run_id"])) == 1 and not set(jobs["run_id"]) & first_runs


def test_plain_strings_writes_every_string_type_as_ddl_string(spark):
    """The cast that keeps ``string collate UTF8_BINARY`` out of a Delta log written over Spark
    Connect (storage.plain_strings): nested strings too, other types untouched, names kept."""
    from l4spark.io.storage import plain_strings

    frame = spark.createDataFrame([("a", ["b"], {"k": 1}, ("c", 2), 3)],
                                  "`job id` string, tags array<string>, m map<string,int>, s struct<x:string,y:int>, n long")
    plain = plain_strings(frame)
    assert plain.schema == frame.schema
    assert plain.collect() == frame.collect()
    plan = plain._jdf.queryExecution().analyzed().toString().lower()
    assert re.search(r"cast\(tags#\d+ as array<string>\)", plan) and re.search(r"cast\(`?job id", plan), plan
    assert not re.search(r"cast\(n#", plan), plan
