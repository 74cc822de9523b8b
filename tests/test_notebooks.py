"""The analysts' notebooks and their helpers (l4spark/report/analysis.py).

Unit tests read tiny tables written inline by Spark (as the warehouse writes them); the rest run
on one small warehouse built by the nightly batch from a generated fleet, plus a failed job
whose only rank file is empty (a diagnosis error row), compare the helpers with Spark reading
the same tables, and execute both notebooks in a kernel against it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from l4spark.report import analysis
from l4spark.report.analysis import AnalysisError
from l4spark.config import load_config

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EMPTY_JOB = "job-20261102-0099-emptylogs"

pytestmark = pytest.mark.spark


def write_rows(spark, warehouse: Path, table: str, rows: list[tuple], schema: str) -> None:
    """``rows`` as a Parquet table partitioned by job_id, as the diagnosis writes it."""
    spark.createDataFrame(rows, schema).write.partitionBy("job_id").parquet(str(warehouse / table))


JOBS_SCHEMA = "job_id string, status string, failure_stage string, fault_class string, suspect_nodes array<string>"


# ---- tiny inline tables ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_warehouse(spark, tmp_path_factory) -> Path:
    warehouse = tmp_path_factory.mktemp("tiny") / "warehouse"
    write_rows(spark, warehouse, "diagnosis_jobs", [
        ("j1", "diagnosed", "training", "network", ["n1", "n2"]),
        ("j2", "diagnosed", "training", None, ["n4", "n2"]),
        ("j3", "diagnosed", "init", "network", ["n3", "n1"]),
        ("j4", "error", None, None, ["n3"]),
        ("j5", "diagnosed", None, None, None),
    ], JOBS_SCHEMA)
    write_rows(spark, warehouse, "diagnosis_events", [
        ("j1", "E1", "tmpl A", 1, 2.0, ["spatial", "pattern"], 5, "a1"),
        ("j2", "E1", "tmpl A", 3, 1.0, ["cross_job"], 2, "a2"),
        ("j1", "E2", "tmpl B", 2, 1.5, ["temporal"], 10, "b1"),
        ("j3", "E3", None, 1, 0.5, None, 1, None),
    ], "job_id string, event_id string, template string, rank int, score double, sources array<string>, "
       "n_lines long, sample string")
    return warehouse


def test_failures_by_counts_diagnosed_jobs_with_null_as_unknown(tiny_warehouse):
    by_class = analysis.failures_by(tiny_warehouse, "fault_class")
    pd.testing.assert_frame_equal(by_class, pd.DataFrame(
        {"fault_class": ["network", "unknown"], "n_jobs": [2, 2], "share": [0.5, 0.5]}), check_dtype=False)
    by_stage = analysis.failures_by(tiny_warehouse, "failure_stage")
    assert by_stage.to_dict("records") == [{"failure_stage": "training", "n_jobs": 2, "share": 0.5},
                                           {"failure_stage": "init", "n_jobs": 1, "share": 0.25},
                                           {"failure_stage": "unknown", "n_jobs": 1, "share": 0.25}]


def test_failures_by_refuses_an_unknown_column(tiny_warehouse):
    with pytest.raises(AnalysisError, match="diagnosis_jobs has no column 'stage'"):
        analysis.failures_by(tiny_warehouse, "stage")


def test_recurring_suspects_counts_jobs_per_node(tiny_warehouse):
    recurring = analysis.recurring_suspects(tiny_warehouse, min_jobs=2)
    assert recurring.to_dict("records") == [
        {"node": "n1", "n_jobs": 2, "jobs": ["j1", "j3"], "best_position": 1, "fault_classes": ["network"]},
        {"node": "n2", "n_jobs": 2, "jobs": ["j1", "j2"], "best_position": 2, "fault_classes": ["network", "unknown"]},
    ]
    # n3 is named by j3 only: the error row j4 does not count.
    everyone = analysis.recurring_suspects(tiny_warehouse, min_jobs=1)
    assert everyone[["node", "n_jobs", "best_position"]].values.tolist() == [
        ["n1", 2, 1], ["n2", 2, 2], ["n3", 1, 1], ["n4", 1, 1]]


def test_top_events_groups_flagged_events_across_jobs(tiny_warehouse):
    top = analysis.top_events(tiny_warehouse, n=10)
    assert top.to_dict("records") == [
        {"event_id": "E1", "template": "tmpl A", "n_jobs": 2, "n_lines": 7, "best_rank": 1, "mean_score": 1.5,
         "sources": ["cross_job", "pattern", "spatial"], "sample": "a1"},
        {"event_id": "E2", "template": "tmpl B", "n_jobs": 1, "n_lines": 10, "best_rank": 2, "mean_score": 1.5,
         "sources": ["temporal"], "sample": "b1"},
        {"event_id": "E3", "template": None, "n_jobs": 1, "n_lines": 1, "best_rank": 1, "mean_score": 0.5,
         "sources": [], "sample": None},
    ]
    assert analysis.top_events(tiny_warehouse, n=1)["event_id"].tolist() == ["E1"]


def test_job_reads_use_the_partition_of_an_escaped_or_numeric_job_id(spark, tmp_path):
    warehouse = tmp_path / "warehouse"
    write_rows(spark, warehouse, "diagnosis_jobs", [
        ("run 7/a=b", "diagnosed", "init", None, ["n1"]),
        ("12345", "diagnosed", "training", "network", []),
    ], JOBS_SCHEMA)
    row = analysis.job_summary(warehouse, "run 7/a=b")
    assert (row["job_id"], row["failure_stage"], list(row["suspect_nodes"])) == ("run 7/a=b", "init", ["n1"])
    assert sorted(analysis.read_result_table(warehouse, "diagnosis_jobs")["job_id"]) == ["12345", "run 7/a=b"]
    absent = analysis.read_result_table(warehouse, "diagnosis_jobs", job_id="absent", columns=["job_id", "status"])
    assert absent.empty and list(absent.columns) == ["job_id", "status"]
    with pytest.raises(AnalysisError, match="job 'absent' has no diagnosis"):
        analysis.job_summary(warehouse, "absent")


def test_a_delta_table_is_read_through_its_log(spark, tmp_path):
    """A Delta table (unpartitioned, as the warehouse writes small tables) reads through delta-rs:
    only the rows its log holds (not the file an overwrite removed), one job by a filter, the
    timestamps naive UTC as from Parquet."""
    warehouse = tmp_path / "warehouse"
    path = str(warehouse / "diagnosis_jobs")
    schema = JOBS_SCHEMA + ", processed_at timestamp"
    stamp = pd.Timestamp("2026-11-24 06:00:00").to_pydatetime()
    spark.createDataFrame([("old", "diagnosed", "init", None, ["n9"], stamp)], schema).write.format("delta").save(path)
    spark.createDataFrame([("run 7/a=b", "diagnosed", "init", None, ["n1"], stamp),
                           ("12345", "error", None, None, [], stamp)], schema).write.format("delta").mode("overwrite").save(path)
    assert sorted(analysis.read_result_table(warehouse, "diagnosis_jobs")["job_id"]) == ["12345", "run 7/a=b"]
    row = analysis.job_summary(warehouse, "run 7/a=b")
    assert (row["job_id"], list(row["suspect_nodes"]), row["processed_at"]) == ("run 7/a=b", ["n1"], pd.Timestamp(stamp))
    assert analysis.read_result_table(warehouse, "diagnosis_jobs", job_id="old").empty
    assert analysis.failures_by(warehouse, "failure_stage")[["failure_stage", "n_jobs"]].values.tolist() == [["init", 1]]


def test_missing_tables_are_refused_with_the_reason(tmp_path):
    with pytest.raises(AnalysisError, match="no diagnosis_jobs table under"):
        analysis.failures_by(tmp_path, "fault_class")
    (tmp_path / "diagnosis_jobs" / "_delta_log").mkdir(parents=True)  # a Delta folder without a commit
    with pytest.raises(AnalysisError, match="no diagnosis_jobs table under"):
        analysis.failures_by(tmp_path, "fault_class")
    assert analysis.latest_runs(tmp_path).empty


# ---- a warehouse written by the nightly batch -------------------------------------------------


@pytest.fixture(scope="module")
def nightly(spark, tmp_path_factory):
    """(warehouse, storage config, the run) of one nightly batch over 6 jobs + an empty one."""
    from l4spark.nightly.batch import run_nightly
    from l4spark.simulate import FleetOptions, simulate_fleet

    root = tmp_path_factory.mktemp("notebooks")
    logs, warehouse = root / "logs", root / "warehouse"
    simulate_fleet(logs, FleetOptions(seed=21, jobs=6, nodes=(2, 2), ranks_per_node=2, iterations=30,
                                      failed_share=0.5, fault_kinds=("oom", "nccl_timeout"), frameworks=("megatron",)))
    failed = next(p for p in sorted(logs.glob("*/job.json")) if json.loads(p.read_text())["status"] == "failed")
    meta = {**json.loads(failed.read_text()), "job_id": EMPTY_JOB}
    (logs / EMPTY_JOB / "node-a").mkdir(parents=True)
    (logs / EMPTY_JOB / "job.json").write_text(json.dumps(meta))
    (logs / EMPTY_JOB / "node-a" / "rank-0.log").write_bytes(b"")
    config = load_config(overrides={"storage.warehouse": str(warehouse), "spark.master": "local[2]"})
    run = run_nightly(spark, config, logs)
    return warehouse, config.storage, run


def spark_table(spark, storage, table):
    from l4spark.io.storage import read_table

    return read_table(spark, storage, table)


def test_fleet_helpers_agree_with_spark(spark, nightly):
    from pyspark.sql import functions as F

    warehouse, storage, run = nightly
    jobs = spark_table(spark, storage, "diagnosis_jobs")
    diagnosed = jobs.where(F.col("status") == "diagnosed")
    assert diagnosed.count() == 3
    by_class = {r["c"]: r["count"] for r in diagnosed.groupBy(F.coalesce("fault_class", F.lit("unknown")).alias("c"))
                .count().collect()}
    assert dict(analysis.failures_by(warehouse, "fault_class")[["fault_class", "n_jobs"]].values.tolist()) == by_class

    suspects = (diagnosed.select("job_id", F.explode("suspect_nodes").alias("node")).groupBy("node")
                .agg(F.countDistinct("job_id").alias("n_jobs")).collect())
    recurring = analysis.recurring_suspects(warehouse, min_jobs=1)
    assert dict(recurring[["node", "n_jobs"]].values.tolist()) == {r["node"]: r["n_jobs"] for r in suspects}
    assert len(recurring) > 0

    flagged = (spark_table(spark, storage, "diagnosis_events").groupBy("event_id")
               .agg(F.countDistinct("job_id").alias("n_jobs"), F.sum("n_lines").alias("n_lines")).collect())
    top = analysis.top_events(warehouse, n=100_000)
    assert {r.event_id: (r.n_jobs, r.n_lines) for r in top.itertuples()} == {
        r["event_id"]: (r["n_jobs"], r["n_lines"]) for r in flagged}
    assert top["n_jobs"].is_monotonic_decreasing

    errors = analysis.diagnosis_errors(warehouse)
    assert errors["job_id"].tolist() == [EMPTY_JOB]
    assert errors["error"].iloc[0].startswith("no log line to diagnose")

    runs = analysis.latest_runs(warehouse)
    assert runs[["run_id", "status", "n_selected_jobs", "n_errors"]].values.tolist() == [
        [run.run_id, "partial", 4, 1]]  # one job could not be diagnosed


def test_job_helpers_give_one_jobs_diagnosis(spark, nightly):
    from pyspark.sql import functions as F

    from l4spark.diagnosis.pattern_store import pattern_library

    warehouse, storage, _ = nightly
    most_flagged = (spark_table(spark, storage, "diagnosis_jobs").orderBy(F.desc("n_flagged_events"), "job_id")
                    .first())
    job_id = analysis.default_job(warehouse)
    assert job_id == most_flagged["job_id"]

    summary = analysis.job_summary(warehouse, job_id)
    assert (summary["status"], list(summary["matched_patterns"])) == ("diagnosed", list(most_flagged["matched_patterns"]))
    library = {p.pattern_id: p for p in pattern_library(spark, storage)}
    patterns = analysis.job_patterns(warehouse, job_id, library.values())
    assert patterns["pattern_id"].tolist() == list(most_flagged["matched_patterns"]) != []
    assert patterns["remedy"].tolist() == [library[p].remedy for p in patterns["pattern_id"]]
    assert patterns["remedy"].iloc[0] == summary["remedy"]

    events = analysis.job_events(warehouse, job_id)
    assert events["rank"].tolist() == list(range(1, most_flagged["n_flagged_events"] + 1))
    nodes = analysis.job_nodes(warehouse, job_id)
    assert nodes["rank"].is_monotonic_increasing
    assert nodes.loc[nodes["suspect"], "node"].tolist() == list(summary["suspect_nodes"])
    iterations = analysis.job_iterations(warehouse, job_id)
    spark_iterations = spark_table(spark, storage, "diagnosis_iterations").where(F.col("job_id") == job_id)
    assert iterations["iteration"].tolist() == sorted(r["iteration"] for r in spark_iterations.collect())
    assert int(iterations["anomalous"].sum()) == spark_iterations.where("anomalous").count()


def test_lines_around_the_first_flagged_event(spark, nightly):
    from pyspark.sql import functions as F

    warehouse, storage, _ = nightly
    job_id = analysis.default_job(warehouse)
    first = analysis.first_flagged_event(warehouse, job_id)
    events = analysis.job_events(warehouse, job_id)
    assert first["first_ts"] == events["first_ts"].min()

    lines = analysis.lines_around(warehouse, job_id, first["event_id"], first["sample_node"], before=4, after=6)
    job_lines = spark_table(spark, storage, "events").where(F.col("job_id") == job_id)
    anchor = (job_lines.where((F.col("event_id") == first["event_id"]) & (F.col("node") == first["sample_node"]))
              .orderBy(F.asc_nulls_last("ts"), "file", "line_no").first())
    expected = (job_lines.where((F.col("file") == anchor["file"])
                                & F.col("line_no").between(anchor["line_no"] - 4, anchor["line_no"] + 6))
                .orderBy("line_no").select("line_no", "event_id", "message").collect())
    assert lines[["line_no", "event_id", "message"]].values.tolist() == [list(r) for r in expected]
    assert lines.loc[lines["anchor"], "line_no"].tolist() == [anchor["line_no"]]
    assert set(lines.loc[lines["flagged"], "event_id"]) == set(lines["event_id"]) & set(events["event_id"])
    with pytest.raises(AnalysisError, match="has no line of event 'E-none'"):
        analysis.lines_around(warehouse, job_id, "E-none")


def test_a_job_without_diagnosis_has_empty_parts(nightly):
    warehouse, _, _ = nightly
    assert analysis.job_summary(warehouse, EMPTY_JOB)["status"] == "error"
    assert analysis.job_events(warehouse, EMPTY_JOB).empty
    assert analysis.first_flagged_event(warehouse, EMPTY_JOB) is None
    assert analysis.job_patterns(warehouse, EMPTY_JOB, []).empty
    with pytest.raises(AnalysisError, match="job 'job-nope' has no diagnosis"):
        analysis.job_summary(warehouse, "job-nope")


# ---- the notebooks, executed ------------------------------------------------------------------


def execute_notebook(name: str, env: dict[str, str], monkeypatch) -> list[dict]:
    """Run every cell of notebooks/<name>.ipynb in a fresh kernel; returns the cells' outputs.
    A cell that raises fails the test (nbclient raises CellExecutionError)."""
    import nbformat
    from nbclient import NotebookClient

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), "outputs not stripped"
    NotebookClient(notebook, timeout=600, startup_timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]


def output_text(outputs: list[dict]) -> str:
    return "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)


@pytest.mark.e2e
def test_fleet_overview_notebook_runs(nightly, monkeypatch):
    warehouse, _, run = nightly
    outputs = execute_notebook("fleet_overview", {"L4SPARK_WAREHOUSE": str(warehouse)}, monkeypatch)
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 1
    text = output_text(outputs)
    assert f"warehouse: {warehouse}" in text
    assert "1 jobs with a diagnosis error" in text and EMPTY_JOB in text
    assert run.run_id in text
    fault_class = analysis.failures_by(warehouse, "fault_class")["fault_class"].iloc[0]
    assert fault_class in text


@pytest.mark.e2e
def test_job_drilldown_notebook_runs(nightly, monkeypatch):
    warehouse, _, _ = nightly
    job_id = analysis.default_job(warehouse)
    outputs = execute_notebook("job_drilldown", {"L4SPARK_WAREHOUSE": str(warehouse), "L4SPARK_JOB_ID": job_id},
                               monkeypatch)
    assert not [o for o in outputs if o.output_type == "error"]
    text = output_text(outputs)
    assert f"job: {job_id}" in text
    assert f"remedy:     {analysis.job_summary(warehouse, job_id)['remedy']}" in text
    # the catalog view recurring_suspects, read by name in Spark, agrees with the pandas helper
    suspects = set(analysis.job_nodes(warehouse, job_id).query("suspect")["node"])
    recurring = analysis.recurring_suspects(warehouse)
    recurring = recurring[recurring["node"].isin(suspects)]
    assert f"suspects of this job that were suspects of other jobs: {len(recurring)} of {len(suspects)}" in text
    for node in recurring.itertuples():
        assert f"   {node.node}: {node.n_jobs} jobs in " in text
    first = analysis.first_flagged_event(warehouse, job_id)
    anchor = analysis.lines_around(warehouse, job_id, first["event_id"], first["sample_node"], before=0, after=0)
    assert f">> {anchor['line_no'].iloc[0]:>7}" in text
    assert any("image/png" in o.get("data", {}) for o in outputs) == (not analysis.job_iterations(warehouse, job_id).empty)
