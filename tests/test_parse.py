"""End to end: rank files -> events/templates/jobs/quarantine tables, reruns and id stability."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from l4spark.parse.pipeline import parse_jobs
from l4spark.parse.template_store import load_template_store

pytestmark = pytest.mark.spark

EVENTS_COLUMNS = [
    ("node", "string"), ("rank", "int"), ("file", "string"), ("line_no", "bigint"), ("ts", "timestamp"),
    ("level", "string"), ("event_id", "string"), ("message", "string"), ("stage", "string"),
    ("iteration", "bigint"), ("job_id", "string"),
]


def healthy_lines(node: str, rank: int, n: int = 20) -> list[str]:
    lines = [f"[2026-11-20 01:00:0{rank % 10},000] [INFO] [engine.py:12:init] [Rank {rank}] initializing model",
             f"{node}:4242:4300 [{rank % 8}] NCCL INFO Channel 00/02 :    0   1   2   3"]
    lines += [f" [2026-11-20 01:{i // 60:02d}:{i % 60:02d}] iteration {i:>8}/    1000 | lm loss: {2.5 - i / 1000:.6E} |"
              for i in range(1, n)]
    return lines


def write_job(root, job_id, nodes, status="failed", extra=None, gz=False):
    job = root / job_id
    for n, node in enumerate(nodes):
        for r in range(2):
            rank = n * 2 + r
            text = "\n".join(healthy_lines(node, rank) + (extra or {}).get((node, rank), [])) + "\n"
            path = job / node / (f"rank-{rank}.log" + (".gz" if gz else ""))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(text.encode(), mtime=0) if gz else text.encode())
    (job / "job.json").write_text(json.dumps({
        "job_id": job_id, "status": status, "settings": {"model": "m", "framework": "megatron"},
        "start_time": "2026-11-20T01:00:00Z", "end_time": "2026-11-20T02:00:00Z"}))


def read(warehouse, table):
    return pq.read_table(warehouse / table).to_pandas()


def event_ids_by_line(warehouse, job_id):
    events = read(warehouse, "events")
    events = events[events["job_id"] == job_id]
    return dict(zip(zip(events["file"], events["line_no"]), events["event_id"]))


def test_parse_writes_the_contract_tables(spark, test_config, tmp_path):
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001", "gpu-002"],
              extra={("gpu-002", 3): ["gpu-002:4242:4300 [3] NCCL WARN NET/IB : Got completion from peer "
                                       "10.3.1.17<52011> with error 12, opcode 0, len 0, vendor err 129 (Recv)"],
                     # torch elastic's glog header has no year: the job's start (job.json) gives it
                     ("gpu-002", 2): ["E1120 01:30:00.250000 4242 api.py:897] Sending process 77 closing signal"]})
    write_job(logs, "job-b", ["gpu-003"], status="succeeded", gz=True)
    summary = parse_jobs(spark, test_config, logs, progress=lambda m: None)
    warehouse = tmp_path / "warehouse"

    events = spark.read.parquet(str(warehouse / "events"))
    assert [(f.name, f.dataType.simpleString()) for f in events.schema.fields] == EVENTS_COLUMNS
    assert summary.lines == events.count() == 4 * 21 + 2 + 2 * 21
    assert summary.files == 6 and summary.jobs == ["job-a", "job-b"]
    assert events.where("event_id is null").count() == 0

    frame = read(warehouse, "events").sort_values(["job_id", "file", "line_no"])
    rank3 = frame[frame["file"] == "job-a/gpu-002/rank-3.log"]
    assert list(rank3["line_no"]) == list(range(1, 23))
    last = rank3.iloc[-1]
    assert (last["level"], last["node"], last["rank"]) == ("WARN", "gpu-002", 3)
    assert last["message"].startswith("NCCL WARN NET/IB : Got completion from peer 10.3.1.17<52011>")

    templates = read(warehouse, "templates").set_index("event_id")
    glog = frame[frame["message"].str.startswith("Sending process")].iloc[0]
    assert (glog["ts"], glog["level"]) == (pd.Timestamp("2026-11-20 01:30:00.25"), "ERROR")

    assert templates.loc[last["event_id"], "template"] == (
        "NCCL WARN NET/IB : Got completion from peer <*> with error <*>, opcode <*>, len <*>, "
        "vendor err <*> (Recv)")
    assert templates["n_lines"].sum() == summary.lines
    iteration_event = frame[frame["message"].str.contains("iteration")]["event_id"].unique()
    assert len(iteration_event) == 1 and templates.loc[iteration_event[0], "n_jobs"] == 2

    jobs = read(warehouse, "jobs").set_index("job_id")
    assert jobs.loc["job-a", "status"] == "failed" and jobs.loc["job-b", "status"] == "succeeded"
    assert jobs.loc["job-a", "n_lines"] == 4 * 21 + 2
    assert json.loads(jobs.loc["job-b", "settings"]) == {"framework": "megatron", "model": "m"}


def test_rerun_replaces_exactly_the_parsed_job(spark, test_config, tmp_path):
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001"])
    write_job(logs, "job-b", ["gpu-002"])
    parse_jobs(spark, test_config, logs, progress=lambda m: None)
    warehouse = tmp_path / "warehouse"
    before = read(warehouse, "events").sort_values(["job_id", "file", "line_no"]).reset_index(drop=True)

    parse_jobs(spark, test_config, logs, jobs=["job-a"], progress=lambda m: None)
    after = read(warehouse, "events").sort_values(["job_id", "file", "line_no"]).reset_index(drop=True)
    assert after.equals(before)

    # job-a loses a node: its old rows must go, job-b's stay
    import shutil
    shutil.rmtree(logs / "job-a" / "gpu-001")
    write_job(logs, "job-a-new", ["gpu-009"])
    (logs / "job-a" / "gpu-005").mkdir()
    (logs / "job-a" / "gpu-005" / "rank-0.log").write_text("only line\n")
    parse_jobs(spark, test_config, logs, jobs=["job-a"], progress=lambda m: None)
    final = read(warehouse, "events")
    assert list(final[final["job_id"] == "job-a"]["message"]) == ["only line"]
    assert len(final[final["job_id"] == "job-b"]) == len(before[before["job_id"] == "job-b"])


def test_event_ids_are_stable_across_runs_and_jobs(spark, test_config, tmp_path):
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001"], extra={("gpu-001", 0): ["CUDA error: an illegal memory access was encountered"]})
    write_job(logs, "job-b", ["gpu-002"], extra={("gpu-002", 1): ["checkpoint save to /ckpt/x/y failed, retrying"]})
    warehouse = tmp_path / "warehouse"
    parse_jobs(spark, test_config, logs, jobs=["job-a"], progress=lambda m: None)
    first = event_ids_by_line(warehouse, "job-a")
    parse_jobs(spark, test_config, logs, jobs=["job-b"], progress=lambda m: None)
    parse_jobs(spark, test_config, logs, jobs=["job-a"], progress=lambda m: None)
    assert event_ids_by_line(warehouse, "job-a") == first

    events = read(warehouse, "events")
    shared = events[events["message"].str.contains("NCCL INFO Channel")]
    assert set(shared["job_id"]) == {"job-a", "job-b"} and shared["event_id"].nunique() == 1
    assert len(load_template_store(test_config.storage, test_config.drain)) == read(warehouse, "templates").shape[0]


def test_templates_total_every_job_when_some_are_parsed_again(spark, test_config, tmp_path):
    """``templates`` is written at the same time as ``job_event_counts``, from this run's count
    rows plus the other jobs' stored rows (``_templates_writer``), not read back from the table
    after its write: after job-a is parsed again with one more line, its totals still equal the
    totals over the whole ``job_event_counts`` table, job-b's rows included."""
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001"], extra={("gpu-001", 0): ["CUDA error: an illegal memory access was encountered"]})
    write_job(logs, "job-b", ["gpu-002", "gpu-003"])
    parse_jobs(spark, test_config, logs, progress=lambda m: None)
    rank0 = logs / "job-a" / "gpu-001" / "rank-0.log"
    rank0.write_text(rank0.read_text() + "CUDA error: an illegal memory access was encountered\n")
    parse_jobs(spark, test_config, logs, jobs=["job-a"], progress=lambda m: None)

    warehouse = tmp_path / "warehouse"
    counts = read(warehouse, "job_event_counts").astype({"job_id": "string"})
    expected = (counts.groupby("event_id")
                .agg(n_lines=("n_lines", "sum"), n_jobs=("job_id", "nunique"), first_seen=("first_ts", "min")))
    templates = read(warehouse, "templates").set_index("event_id").sort_index()
    assert set(expected.index) <= set(templates.index)
    assert templates.loc[expected.index, ["n_lines", "n_jobs", "first_seen"]].equals(
        expected[["n_lines", "n_jobs", "first_seen"]].astype({"n_lines": "int64", "n_jobs": "int64"}))
    assert templates["n_jobs"].max() == 2 and expected["n_lines"].sum() == 3 * 2 * 21 + 2


def test_line_order_is_exact_in_a_file_bigger_than_a_task(spark, tmp_path):
    from l4spark.config import load_config
    config = load_config(overrides={"storage.warehouse": str(tmp_path / "warehouse"), "storage.format": "parquet",
                                    "ingest.target_task_bytes": 64 * 1024, "ingest.read_chunk_bytes": 4096,
                                    "ingest.batch_lines": 1000})
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001"])
    big = logs / "job-a" / "gpu-001" / "rank-0.log"
    big.write_text("".join(f"step {i} of the long run\n" for i in range(1, 30001)))
    spark.conf.set("spark.sql.files.maxPartitionBytes", 64 * 1024)
    try:
        parse_jobs(spark, config, logs, progress=lambda m: None)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    events = read(tmp_path / "warehouse", "events")
    rank0 = events[events["file"] == "job-a/gpu-001/rank-0.log"].sort_values("line_no")
    assert list(rank0["line_no"]) == list(range(1, 30001))
    assert list(rank0["message"]) == [f"step {i} of the long run" for i in range(1, 30001)]


def test_bad_input_is_quarantined_and_the_batch_goes_on(spark, test_config, tmp_path):
    logs = tmp_path / "logs"
    write_job(logs, "job-good", ["gpu-001"])
    write_job(logs, "job-bad", ["gpu-002"])
    node = logs / "job-bad" / "gpu-002"
    (node / "rank-7.log").write_bytes(b"fine\n\x00\x00\x01binary\x00\n\xff\xfe latin junk in a long line\n" +
                                      b"y" * (2 * 1024 * 1024) + b"\nlast\n")
    (node / "rank-8.log").write_bytes(b"")
    (node / "rank-9.log.gz").write_bytes(gzip.compress("".join(f"line {i}\n" for i in range(9999)).encode())[:2000])
    (node / "core.dump").write_bytes(b"\x7fELF")
    (logs / "job-bad" / "job.json").write_text("{broken")
    warehouse = tmp_path / "warehouse"
    summary = parse_jobs(spark, test_config, logs, progress=lambda m: None)

    assert summary.issues_by_reason == {"binary_line": 1, "empty_file": 1, "gzip_truncated": 1,
                                        "invalid_utf8": 1, "job_meta": 1, "line_too_long": 1,
                                        "outside_layout": 1}
    assert summary.set_aside_lines == 2
    quarantine = read(warehouse, "quarantine")
    assert set(quarantine["job_id"]) == {"job-bad"}
    events = read(warehouse, "events")
    rank7 = events[events["file"] == "job-bad/gpu-002/rank-7.log"].sort_values("line_no")
    assert list(rank7["line_no"]) == [1, 3, 5]
    assert list(rank7["message"])[::2] == ["fine", "last"]
    jobs = read(warehouse, "jobs").set_index("job_id")
    assert jobs.loc["job-bad", "status"] == "unknown" and "not JSON" in jobs.loc["job-bad", "meta_error"]
    good = events[events["job_id"] == "job-good"]
    assert len(good) == 2 * 21


def test_shape_path_equals_structuring_every_line(spark, tmp_path):
    """The shape path (structure each digit-folded shape once) writes exactly the rows that
    structuring every line in the JVM writes, on a simulated fleet with all formats."""
    from l4spark.config import load_config
    from l4spark.simulate import FleetOptions, simulate_fleet

    logs = tmp_path / "fleet"
    simulate_fleet(logs, FleetOptions(seed=3, jobs=6, nodes=(2, 3), ranks_per_node=2, iterations=30,
                                      failed_share=0.5))
    tables = {}
    for name, overrides in {"shapes": {}, "per_line": {"structure.max_shapes": 1}}.items():
        config = load_config(overrides={"storage.warehouse": str(tmp_path / name), "storage.format": "parquet",
                                        **overrides})
        summary = parse_jobs(spark, config, logs, progress=lambda m: None)
        tables[name] = (read(tmp_path / name, "events").sort_values(["job_id", "file", "line_no"])
                        .reset_index(drop=True))
        assert summary.lines == len(tables[name])
    shapes, per_line = tables["shapes"], tables["per_line"]
    assert len(shapes) > 1000 and shapes["ts"].notna().mean() > 0.5
    assert shapes.equals(per_line)


def test_jobs_without_lines_in_a_fresh_warehouse(spark, test_config, tmp_path):
    """A run whose jobs hold no line at all (only empty files, or no rank file) reports them and
    writes readable tables instead of failing on a table with no data files."""
    logs = tmp_path / "logs"
    (logs / "job-empty" / "n1").mkdir(parents=True)
    (logs / "job-empty" / "n1" / "rank-0.log").write_bytes(b"")
    (logs / "job-none").mkdir(parents=True)
    for job_id in ("job-empty", "job-none"):
        (logs / job_id / "job.json").write_text(json.dumps({
            "job_id": job_id, "status": "failed", "settings": {}, "start_time": "2026-11-20T01:00:00Z"}))
    summary = parse_jobs(spark, test_config, logs, progress=lambda m: None)
    assert (summary.lines, summary.events) == (0, 0)
    assert summary.issues_by_reason == {"empty_file": 1, "no_rank_files": 1}
    jobs = read(tmp_path / "warehouse", "jobs").set_index("job_id")
    assert sorted(jobs.index) == ["job-empty", "job-none"] and (jobs["n_lines"] == 0).all()
    assert len(read(tmp_path / "warehouse", "templates")) == 0


def test_lines_stamped_outside_the_job_time_are_counted_per_job(spark, test_config, tmp_path):
    """Lines more than a day outside job.json's start..end: one ts_outside_job entry per job with
    their count and the first such line (file order); kept in events with their time. A job
    with only a start time is checked on that side only."""
    logs = tmp_path / "logs"
    late = ["[2026-12-01 00:00:00] ERROR clock jumped ahead step 1", "[2026-12-02 00:00:00] ERROR still ahead step 2"]
    write_job(logs, "job-late", ["gpu-001"], extra={("gpu-001", 1): late, ("gpu-001", 0): late[:1]})
    write_job(logs, "job-early", ["gpu-002"], extra={("gpu-002", 1): ["[2026-11-01 00:00:00] INFO from the past"]})
    write_job(logs, "job-open", ["gpu-003"], extra={("gpu-003", 0): late + ["[2026-11-01 00:00:00] INFO past"]})
    meta = json.loads((logs / "job-open" / "job.json").read_text())
    del meta["end_time"]
    (logs / "job-open" / "job.json").write_text(json.dumps(meta))
    write_job(logs, "job-fine", ["gpu-004"])
    summary = parse_jobs(spark, test_config, logs, progress=lambda m: None)

    assert summary.issues_by_reason == {"ts_outside_job": 3 + 1 + 1}
    quarantine = read(tmp_path / "warehouse", "quarantine").set_index("job_id")
    assert sorted(quarantine.index) == ["job-early", "job-late", "job-open"]
    first = quarantine.loc["job-late"]
    assert (first["file"], first["line_no"], first["n_lines"]) == ("job-late/gpu-001/rank-0.log", 22, 3)
    assert first["sample"].startswith("2026-12-01 00:00:00")
    assert quarantine.loc["job-early", ["file", "line_no", "n_lines"]].tolist() == ["job-early/gpu-002/rank-1.log", 22, 1]
    assert quarantine.loc["job-open", ["line_no", "n_lines"]].tolist() == [24, 1]
    events = read(tmp_path / "warehouse", "events")
    assert len(events[events["job_id"] == "job-late"]) == 2 * 21 + 3


def test_independent_table_writes_overlap_and_jobs_is_written_last(spark, test_config, tmp_path, monkeypatch):
    """The parse writes tables that do not read each other from driver threads at once
    (``in_parallel``): ``job_event_forms`` while ``events`` is written, ``templates`` and
    ``quarantine`` while ``job_event_counts`` is, and ``jobs`` (a job's row says it is parsed) after every other
    table's write has finished. A write waits for the one it overlaps to start, so run one after
    the other they would time out."""
    import threading

    from l4spark.parse import pipeline

    original = pipeline.write_job_rows
    original_table = pipeline.write_table
    started = {name: threading.Event()
               for name in ("events", "job_event_forms", "job_event_counts", "templates", "quarantine")}
    partner = {"events": "job_event_forms", "job_event_forms": "events", "job_event_counts": "templates",
               "templates": "quarantine", "quarantine": "job_event_counts"}
    finished: list[str] = []
    waited: dict[str, bool] = {}

    def write_job_rows(rows, storage, table, *args, **kwargs):
        if table in started:
            started[table].set()
            waited[table] = started[partner[table]].wait(timeout=60)
        original(rows, storage, table, *args, **kwargs)
        finished.append(table)

    def write_table(rows, storage, table, *args, **kwargs):
        started[table].set()
        waited[table] = started[partner[table]].wait(timeout=60)
        original_table(rows, storage, table, *args, **kwargs)
        finished.append(table)

    monkeypatch.setattr(pipeline, "write_job_rows", write_job_rows)
    monkeypatch.setattr(pipeline, "write_table", write_table)
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001"])
    (logs / "job-a" / "gpu-001" / "rank-7.log").write_bytes(b"")  # an empty file: a quarantine row
    parse_jobs(spark, test_config, logs, progress=lambda m: None)
    assert waited == {name: True for name in started}
    assert finished[-1] == "jobs" and sorted(finished) == sorted([*started, "jobs"])
    assert set(read(tmp_path / "warehouse", "quarantine")["reason"]) == {"empty_file"}


def test_the_store_is_saved_while_the_second_read_is_planned_and_before_any_event_is_written(
        spark, test_config, tmp_path, monkeypatch):
    """The template store's save (on HDFS a wait for its file's close) runs in a driver thread
    while the parse plans its second read (the shape rows are checkpointed by a Spark job of
    their own), and the events write starts only once it is saved. The save waits here for the
    shape rows to be planned: one after the other, it would time out."""
    import threading

    from l4spark.parse import pipeline

    planning, order = threading.Event(), []
    original_save, original_shapes, original_write = (pipeline.save_template_store, pipeline.shapes_frame,
                                                       pipeline.write_job_rows)

    def save_template_store(*args, **kwargs):
        order.append(("save waited", planning.wait(timeout=60)))
        original_save(*args, **kwargs)
        order.append("saved")

    def shapes_frame(*args, **kwargs):
        planning.set()
        return original_shapes(*args, **kwargs)

    def write_job_rows(rows, storage, table, *args, **kwargs):
        order.append(table)
        original_write(rows, storage, table, *args, **kwargs)

    monkeypatch.setattr(pipeline, "save_template_store", save_template_store)
    monkeypatch.setattr(pipeline, "shapes_frame", shapes_frame)
    monkeypatch.setattr(pipeline, "write_job_rows", write_job_rows)
    logs = tmp_path / "logs"
    write_job(logs, "job-a", ["gpu-001"])
    parse_jobs(spark, test_config, logs, progress=lambda m: None)
    assert order[:2] == [("save waited", True), "saved"] and "events" in order[2:4]
    assert len(load_template_store(test_config.storage, test_config.drain)) == read(tmp_path / "warehouse", "templates").shape[0]


def test_in_parallel_raises_the_first_error_once_every_write_is_done():
    from l4spark.io.storage import in_parallel

    done = []

    def fails(message):
        def write():
            raise ValueError(message)
        return write

    with pytest.raises(ValueError, match="first"):
        in_parallel(fails("first"), lambda: done.append("ran"), fails("second"))
    assert done == ["ran"]
