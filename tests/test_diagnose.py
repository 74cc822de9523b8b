"""The diagnosis end to end on a small generated fleet: tables, patterns, confirm, odd jobs."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pandas as pd
import pytest
from pyspark.sql import functions as F

from l4spark.config import load_config
from l4spark.diagnosis.assemble import (
    DIAGNOSIS_EVENTS_COLUMNS,
    DIAGNOSIS_JOBS_COLUMNS,
    diagnose_jobs,
    write_diagnosis,
)
from l4spark.diagnosis.config import DiagnosisConfig
from l4spark.report.diagnosed import job_report
from l4spark.diagnosis.scoring import score_events
from l4spark.errors import ConfigError
from l4spark.diagnosis.patterns import PatternError


@pytest.fixture(scope="module")
def fleet(spark, tmp_path_factory):
    """7 jobs (4 failed: two program bugs, two GPU ECC errors; 3 succeeded) plus a one-node failed
    copy, parsed, with a normal pool."""
    from l4spark.crossjob.normal_pool import update_normal_pool
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet

    root = tmp_path_factory.mktemp("diag")
    logs = root / "logs"
    simulate_fleet(logs, FleetOptions(seed=3, jobs=7, nodes=(2, 3), ranks_per_node=2, iterations=40, failed_share=0.5,
                                      fault_kinds=("program_bug", "gpu_ecc_error"), frameworks=("megatron",)))
    labels = {p.stem: json.loads(p.read_text()) for p in (logs / "_labels").glob("*.json")}
    # a one-node job: the first failed job's first node only
    source = sorted(labels)[0]
    one = logs / "one-node-job"
    node = sorted(p for p in (logs / source).iterdir() if p.is_dir())[0]
    shutil.copytree(node, one / node.name)
    meta = json.loads((logs / source / "job.json").read_text())
    meta["job_id"] = "one-node-job"
    (one / "job.json").write_text(json.dumps(meta))
    config = load_config(overrides={"storage.warehouse": str(root / "warehouse"), "spark.master": "local[2]"})
    parse_jobs(spark, config, logs)
    update_normal_pool(spark, config, config.normal_pool)
    return {"config": config, "labels": labels, "logs": logs}


@pytest.fixture(scope="module")
def diagnosis(spark, fleet):
    config = fleet["config"]
    jobs = sorted(fleet["labels"]) + ["one-node-job", "never-parsed"]
    result = diagnose_jobs(spark, config, jobs)
    write_diagnosis(spark, config, result)
    return result


def _table(spark, config, name):
    from l4spark.io.storage import read_table
    return read_table(spark, config.storage, name)


def test_tables_follow_the_contract(spark, fleet, diagnosis):
    config = fleet["config"]
    jobs = _table(spark, config, "diagnosis_jobs")
    assert set(DIAGNOSIS_JOBS_COLUMNS) <= set(jobs.columns)
    events = _table(spark, config, "diagnosis_events")
    assert set(DIAGNOSIS_EVENTS_COLUMNS) <= set(events.columns)
    assert dict(events.dtypes)["sources"] == "array<string>"
    assert {"job_id", "node", "rank", "score", "suspect", "evidence"} <= set(_table(spark, config, "diagnosis_nodes").columns)
    assert {"job_id", "iteration", "score", "anomalous", "event_ids"} <= set(
        _table(spark, config, "diagnosis_iterations").columns)
    rows = jobs.toPandas().set_index("job_id")
    assert len(rows) == len(fleet["labels"]) + 2
    for job_id in fleet["labels"]:
        assert rows.loc[job_id, "status"] == "diagnosed"
        assert rows.loc[job_id, "failure_stage"] in ("init", "data_loading", "model_loading", "training",
                                                     "checkpoint_saving", "finished")
    flagged = events.toPandas()
    for job_id, group in flagged.groupby("job_id"):
        assert sorted(group["rank"]) == list(range(1, len(group) + 1))  # ranks 1..n, no gap
        assert group.sort_values("rank")["score"].is_monotonic_decreasing
        assert all(set(s) <= {"cross_job", "spatial", "temporal", "pattern"} for s in group["sources"])
        assert group["sample"].notna().all() and group["sample_node"].notna().all()


def test_unparsed_job_is_an_error_row_and_the_others_go_on(diagnosis):
    row = diagnosis.jobs.set_index("job_id").loc["never-parsed"]
    assert row["status"] == "error" and "not parsed" in row["error"]
    assert (diagnosis.jobs["status"] == "diagnosed").sum() == len(diagnosis.jobs) - 1


def test_gpu_ecc_fault_matches_its_seed_pattern_and_flags_the_labelled_events(diagnosis, fleet):
    ecc = [j for j, label in fleet["labels"].items() if label["fault_kind"] == "gpu_ecc_error"]
    assert ecc, "the fixture fleet should hold a GPU ECC failure"
    jobs = diagnosis.jobs.set_index("job_id")
    first = diagnosis.nodes[diagnosis.nodes["rank"] == 1].set_index("job_id")["node"]
    # the class is read where the node ranking points (diagnosis.locate_matches); in the two-node
    # job ...0006 the peer that printed the IB errors has more events of its own, and the faulty
    # node is first only for printing the ECC error alone (diagnosis.known_fault_weight)
    for job_id in ecc:
        assert first[job_id] in fleet["labels"][job_id]["faulty_nodes"]
        assert "gpu-ecc-error" in list(jobs.loc[job_id, "matched_patterns"])
        assert jobs.loc[job_id, "fault_class"] == "accelerator"
        flagged = diagnosis.events[diagnosis.events["job_id"] == job_id]
        messages = [m["message"] for m in fleet["labels"][job_id]["indicating_messages"]]
        assert any(any(m in str(s) for m in messages) for s in flagged["sample"]), "no labelled event flagged"


def test_job_without_history_and_one_node_job_are_diagnosed(diagnosis):
    jobs = diagnosis.jobs.set_index("job_id")
    one = jobs.loc["one-node-job"]
    assert one["status"] == "diagnosed"
    assert diagnosis.extra["one-node-job"]["n_nodes"] == 1
    nodes = diagnosis.nodes[diagnosis.nodes["job_id"] == "one-node-job"]
    assert len(nodes) == 1 and nodes["rank"].tolist() == [1]
    # the copy's settings group has successful jobs; a job whose settings have no group has no
    # history: nothing removed, every candidate kept with reason no_history
    scored = diagnosis.scored
    no_history = diagnosis.jobs[diagnosis.jobs["history"] == "none"]["job_id"]
    for job_id in no_history:
        assert set(scored.loc[scored["job_id"] == job_id, "keep_reason"]) <= {"no_history"}
        assert not any("cross_job" in s for s in scored.loc[scored["job_id"] == job_id, "sources"])


# Spark jobs a batch of this fixture's 4 failed jobs may run without adaptive query execution
# (issue #21: on small jobs the diagnosis' cost is mostly a fixed cost per Spark job). Measured:
# 118 with the e453b88 code, 112 now with AQE (each shuffle stage is a job of its own), 64 without.
BATCH_SPARK_JOBS = 70


def test_a_batch_runs_few_spark_jobs_and_restores_the_session_settings(spark, fleet):
    """By default a small batch runs without adaptive execution and without code generation
    (``batch_settings``), and leaves the session's settings as they were."""
    from l4spark.io.session import ADAPTIVE, CODEGEN_FACTORY_MODE, WHOLE_STAGE_CODEGEN

    config = fleet["config"]
    tracker = spark.sparkContext.statusTracker()

    def last_job() -> int:
        return max(tracker.getJobIdsForGroup(None), default=-1)

    spark.conf.set(ADAPTIVE, "true")
    spark.conf.set(WHOLE_STAGE_CODEGEN, "true")
    spark.conf.unset(CODEGEN_FACTORY_MODE)
    before = last_job()
    result = diagnose_jobs(spark, config, sorted(fleet["labels"]))
    assert set(result.jobs["status"]) == {"diagnosed"}
    assert last_job() - before <= BATCH_SPARK_JOBS
    assert (spark.conf.get(ADAPTIVE), spark.conf.get(WHOLE_STAGE_CODEGEN)) == ("true", "true")
    assert spark.conf.get(CODEGEN_FACTORY_MODE) == "FALLBACK"  # Spark's default again


def test_batch_settings_follow_the_config_and_the_batch_size():
    from l4spark.diagnosis.assemble import batch_settings
    from l4spark.io.session import ADAPTIVE, CODEGEN_FACTORY_MODE, WHOLE_STAGE_CODEGEN

    small = DiagnosisConfig(interpreted_max_lines=1000)
    assert batch_settings(small, 1000) == {ADAPTIVE: "false", WHOLE_STAGE_CODEGEN: "false",
                                           CODEGEN_FACTORY_MODE: "NO_CODEGEN"}
    assert batch_settings(small, 1001) == {ADAPTIVE: "false"}
    assert batch_settings(DiagnosisConfig(adaptive_execution=True, interpreted_max_lines=0), 1) == {}
    with pytest.raises(ConfigError, match="interpreted_max_lines"):
        DiagnosisConfig(interpreted_max_lines=-1)


def test_a_compiled_batch_with_adaptive_execution_gives_the_same_diagnosis(spark, fleet, diagnosis):
    """The batch settings change how Spark runs the queries, not what they return."""
    config = load_config(overrides={"storage.warehouse": fleet["config"].storage.warehouse, "spark.master": "local[2]",
                                    "diagnosis.adaptive_execution": True, "diagnosis.interpreted_max_lines": 0})
    compiled = diagnose_jobs(spark, config, sorted(fleet["labels"]) + ["one-node-job", "never-parsed"])

    def cell(value) -> str:  # floats to 10 significant digits: sums may add up in another order
        return f"{value:.10g}" if isinstance(value, float) else repr(value)

    def rows(frame: pd.DataFrame) -> list:
        frame = frame.drop(columns=[c for c in ("run_id", "processed_at") if c in frame.columns])
        return sorted(tuple(map(cell, row)) for row in
                      frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None))

    for part in ("jobs", "events", "nodes", "iterations", "scored", "pace", "stages", "first_errors", "heat"):
        assert rows(getattr(compiled, part)) == rows(getattr(diagnosis, part)), part
    assert compiled.patterns == diagnosis.patterns


def test_no_history_when_the_pool_is_off(spark, fleet):
    config = load_config(overrides={"storage.warehouse": fleet["config"].storage.warehouse, "spark.master": "local[2]",
                                    "diagnosis.use_normal_pool": False})
    job_id = sorted(fleet["labels"])[0]
    result = diagnose_jobs(spark, config, [job_id])
    assert result.jobs.loc[0, "history"] == "none"
    assert (result.scored["keep_reason"] == "no_history").all()


def test_rerun_replaces_a_jobs_rows_and_nothing_else(spark, fleet, diagnosis):
    """Diagnosing one job alone gives what the batch gave it; the other jobs' rows stay. (Runs
    before the confirm test, which adds a pattern that changes the evidence.)"""
    config = fleet["config"]
    before = _table(spark, config, "diagnosis_events").toPandas()
    job_id = sorted(fleet["labels"])[0]
    result = diagnose_jobs(spark, config, [job_id])
    write_diagnosis(spark, config, result)
    after = _table(spark, config, "diagnosis_events").toPandas()
    key = ["job_id", "rank"]
    others = lambda frame: frame[frame["job_id"] != job_id].sort_values(key).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(others(before)[["job_id", "event_id", "rank"]], others(after)[["job_id", "event_id", "rank"]])
    mine = lambda frame: frame[frame["job_id"] == job_id].sort_values(key)["event_id"].tolist()  # noqa: E731
    assert mine(before) == mine(after)
    assert _table(spark, config, "diagnosis_jobs").where(F.col("job_id") == job_id).count() == 1


def test_the_diagnosis_tables_are_written_at_once_with_the_reports_beside_and_diagnosis_jobs_last(
        spark, fleet, diagnosis, monkeypatch):
    """``write_diagnosis`` writes ``diagnosis_attempts``, ``diagnosis_events``, ``_nodes``,
    ``_iterations`` and ``_pace`` from driver threads at once, the work given ``beside`` (the
    reports) in a thread of its own meanwhile, and ``diagnosis_jobs`` (the mark that a job's
    diagnosis is complete) after the five. Each write waits for the others to start, and the
    reports for the events' write: one after the other they would time out."""
    import threading

    from l4spark.diagnosis import assemble

    config = fleet["config"]
    five = ("diagnosis_attempts", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations", "diagnosis_pace")
    started = {name: threading.Event() for name in five}
    finished: list[str] = []
    waited: dict[str, bool] = {}
    original_rows, original_nodes = assemble.write_job_rows, assemble.write_diagnosis_nodes

    def wait_for_the_others(table):
        started[table].set()
        waited[table] = all(started[other].wait(timeout=60) for other in five)

    def write_job_rows(rows, storage, table, *args, **kwargs):
        if table in started:
            wait_for_the_others(table)
        original_rows(rows, storage, table, *args, **kwargs)
        finished.append(table)

    def write_diagnosis_nodes(rows, storage, job_ids):
        wait_for_the_others("diagnosis_nodes")
        original_nodes(rows, storage, job_ids)
        finished.append("diagnosis_nodes")

    def reports(kept):
        waited["reports"] = started["diagnosis_events"].wait(timeout=60) and "diagnosis_jobs" not in finished
        finished.append(f"reports {kept}")

    monkeypatch.setattr(assemble, "write_job_rows", write_job_rows)
    monkeypatch.setattr(assemble, "write_diagnosis_nodes", write_diagnosis_nodes)
    assert assemble.write_diagnosis(spark, config, diagnosis, beside=reports) == []
    assert waited == {name: True for name in [*five, "reports"]}
    assert finished[-1] == "diagnosis_jobs" and sorted(finished) == sorted([*five, "diagnosis_jobs", "reports []"])
    jobs = _table(spark, config, "diagnosis_jobs").toPandas()
    assert sorted(jobs["job_id"]) == sorted(diagnosis.jobs["job_id"])


def test_confirmed_diagnosis_becomes_a_pattern_that_matches_the_next_similar_job(spark, fleet, diagnosis):
    from l4spark.diagnosis.pattern_store import pattern_from_diagnosis, save_pattern

    config = fleet["config"]
    bugs = sorted(j for j, label in fleet["labels"].items() if label["fault_kind"] == "program_bug")
    assert len(bugs) == 2, bugs
    first, second = bugs
    pattern = pattern_from_diagnosis(spark, config.storage, first, pattern_id="bug-in-loss", name="bug in loss",
                                     fault_class="program_bug", root_cause="a bug in the loss function",
                                     remedy="fix the code")
    assert pattern.source_job_id == first and pattern.signature
    save_pattern(spark, config.storage, pattern)
    before = diagnosis.jobs.set_index("job_id").loc[second, "matched_patterns"]
    assert "bug-in-loss" not in list(before)
    # the next job with the same bug now matches the archived pattern, with its remedy
    again = diagnose_jobs(spark, config, [second])
    assert "bug-in-loss" in list(again.jobs.loc[0, "matched_patterns"])
    report = job_report(again, second)
    assert any(p["pattern_id"] == "bug-in-loss" and p["remedy"] == "fix the code" for p in report.patterns)
    with pytest.raises(PatternError, match="no diagnosis|status"):
        pattern_from_diagnosis(spark, config.storage, "never-parsed", pattern_id="x", name="x", fault_class="x",
                               root_cause="x", remedy="x")


def test_report_of_a_diagnosed_job_renders(diagnosis, tmp_path):
    from l4spark.report import render_html, render_terminal, write_reports

    job_id = diagnosis.diagnosed[0]
    report = job_report(diagnosis, job_id)
    assert job_id in render_terminal(report)
    html = render_html(report)
    assert "<svg" in html and job_id in html
    html_path, md_path = write_reports(report, tmp_path)
    assert html_path.exists() and md_path.exists()


def test_scoring_rules_on_hand_built_evidence():
    conf = DiagnosisConfig(generic_min_jobs=3)
    evidence = pd.DataFrame([
        # late error of a job with history: flagged
        {"job_id": "j", "event_id": "late_error", "first_t": 100.0, "severity": 3, "frame_share": 0.0,
         "keep_reason": "not_in_pool", "history": "exact", "sample": "x"},
        # early info line: not flagged
        {"job_id": "j", "event_id": "early_info", "first_t": 10.0, "severity": 1, "frame_share": 0.0,
         "keep_reason": "not_in_pool", "history": "exact", "sample": "x"},
        # late traceback frame: never flagged
        {"job_id": "j", "event_id": "frame", "first_t": 100.0, "severity": 0, "frame_share": 1.0,
         "keep_reason": "not_in_pool", "history": "exact", "sample": "x"},
        # late, but a separator line: no word in it
        {"job_id": "j", "event_id": "rule", "first_t": 100.0, "severity": 0, "frame_share": 0.0,
         "keep_reason": "not_in_pool", "history": "exact", "sample": "=========="},
        # late, but printed by every failed job: boilerplate
        {"job_id": "j", "event_id": "boiler", "first_t": 100.0, "severity": 3, "frame_share": 0.0,
         "keep_reason": "not_in_pool", "history": "exact", "sample": "x"},
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": 95.0}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    shares = pd.DataFrame({"event_id": ["boiler", "late_error"], "n_failed": [10, 1]})
    shares.attrs["n_failed_jobs"] = 10
    scored = score_events(evidence, timing, empty, empty, pd.DataFrame(columns=["job_id", "event_id", "confidence"]),
                          shares, conf).set_index("event_id")
    assert scored.loc["late_error", "flagged"] and scored.loc["late_error", "rank"] == 1
    assert not scored.loc["early_info", "flagged"]
    assert not scored.loc["frame", "flagged"] and scored.loc["frame", "frame"]
    assert not scored.loc["rule", "flagged"] and scored.loc["rule", "frame"]
    assert not scored.loc["boiler", "flagged"] and scored.loc["boiler", "generic"]
    # a known pattern overrides boilerplate
    hits = pd.DataFrame([{"job_id": "j", "event_id": "boiler", "confidence": 1.0}])
    scored = score_events(evidence, timing, empty, empty, hits, shares, conf).set_index("event_id")
    assert scored.loc["boiler", "flagged"] and "pattern" in scored.loc["boiler", "sources"]


def test_output_the_fleets_healthy_jobs_write_is_no_cross_job_evidence():
    """Fresh seed 36005: a Megatron job run with NCCL_DEBUG=INFO, compared with its framework's
    quiet jobs, kept 27 NCCL start-up lines as absent from its group; untimed at the end of its
    files (late), 0.3 + 0.4 flagged each. Healthy jobs of other groups print them (filter reason
    ``not_in_group``); lines the group's own healthy jobs print now and then (``rare_in_pool``,
    pip's install report) are known output too: the late signal alone does not flag them; an
    error still counts, and so does what no healthy job wrote."""
    info = {"first_t": None, "tail": True, "severity": 1, "frame_share": 0.0, "history": "framework_version"}
    evidence = pd.DataFrame([
        {"job_id": "j", "event_id": "rings", "keep_reason": "not_in_group", "sample": "NCCL INFO Connected all rings", **info},
        {"job_id": "j", "event_id": "pip", "keep_reason": "rare_in_pool", "sample": "Successfully installed tiktoken-0.7.0", **info},
        {"job_id": "j", "event_id": "unseen", "keep_reason": "not_in_pool", "sample": "NCCL INFO comm split", **info},
        {"job_id": "j", "event_id": "form", "keep_reason": "new_variant", "sample": "NCCL INFO Using network Socket", **info},
        {**_late_error("warn", "NCCL WARN Call to connect returned Connection refused, retrying"), "keep_reason": "not_in_group",
         "tail": False},
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": None}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    shares = pd.DataFrame({"event_id": [], "n_failed": []})
    no_hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    scored = score_events(evidence, timing, empty, empty, no_hits, shares, DiagnosisConfig()).set_index("event_id")
    assert dict(scored["cross_job"]) == {"rings": False, "pip": False, "unseen": True, "form": True, "warn": False}
    assert dict(scored["flagged"]) == {"rings": False, "pip": False, "unseen": True, "form": True, "warn": True}
    assert scored.loc["rings", "late"] and scored.loc["pip", "late"]
    # sessions 36 and before: every keep reason of a job with history was evidence
    before = DiagnosisConfig(cross_job_reasons=("not_in_pool", "not_in_group", "rare_in_pool", "rate_above_normal",
                                                "new_variant"))
    scored = score_events(evidence, timing, empty, empty, no_hits, shares, before)
    assert scored["cross_job"].all() and scored["flagged"].all()
    with pytest.raises(ConfigError, match="cross_job_reasons"):
        DiagnosisConfig(cross_job_reasons=("not_in_pool", "no_history"))


def test_a_python_exception_line_without_a_level_is_an_error():
    """Fresh seed 36011: a driver mismatch and a NIC down at init; the rank's last traceback lines
    (``RuntimeError: The NVIDIA driver on your system is too old ...``, ``torch.distributed.
    DistBackendError: NCCL error in: ...``) went to stderr without a level (severity 0): absent
    from the pool (0.3), before the onset, so never flagged. They are errors (0.2)."""
    quiet = {"first_t": 5.0, "severity": 0, "frame_share": 0.0, "keep_reason": "not_in_pool", "history": "exact"}
    evidence = pd.DataFrame([
        {"job_id": "j", "event_id": "driver", "sample": "RuntimeError: The NVIDIA driver on your system is too old (found version 12020).", **quiet},
        {"job_id": "j", "event_id": "nccl", "sample": "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error", **quiet},
        {"job_id": "j", "event_id": "warn", "sample": "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old", **quiet},
        {"job_id": "j", "event_id": "prose", "sample": "Error: the config echo below is informational", **quiet},
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": 500.0}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    no_hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": [], "n_failed": []})
    scored = score_events(evidence, timing, empty, empty, no_hits, shares, DiagnosisConfig()).set_index("event_id")
    assert dict(scored["error"]) == {"driver": True, "nccl": True, "warn": False, "prose": False}
    assert dict(scored["flagged"]) == {"driver": True, "nccl": True, "warn": False, "prose": False}
    off = score_events(evidence, timing, empty, empty, no_hits, shares, DiagnosisConfig(exception_lines=False))
    assert not off["error"].any() and not off["flagged"].any()


def _late_error(event_id: str, sample: str, first_t: float = 100.0, severity: int = 3, job_id: str = "j") -> dict:
    return {"job_id": job_id, "event_id": event_id, "first_t": first_t, "severity": severity, "frame_share": 0.0,
            "keep_reason": "not_in_pool", "history": "exact", "sample": sample}


def test_teardown_and_advice_lines_are_consequences_not_news():
    conf = DiagnosisConfig()
    evidence = pd.DataFrame([
        _late_error("cause", "RuntimeError: CUDA error: an illegal memory access was encountered"),
        _late_error("exit", "failed (exitcode: 1) local_rank: 3 (pid: 811) of binary: /usr/bin/python"),
        _late_error("sigterm", "Sending process 812 closing signal SIGTERM", severity=2),
        # NCCL's proxy service thread as the node's processes go down (NVIDIA/nccl proxy.cc)
        _late_error("service", "NCCL INFO [Service thread] Connection closed by localRank 1", severity=1),
        _late_error("summary", "  pretrain_gpt.py FAILED"),
        _late_error("hint", "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"),
        _late_error("cuda_hint", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"),
        _late_error("nccl_enum", "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."),
        _late_error("advice", "        Solution: 1. Check the rank service processes with other errors or no errors (HCCL timeout)"),
        _late_error("causes", "        Possible Cause: 1. An exception occurs during the execution on some NPUs in the "
                              "cluster. As a result, collective communication operation failed."),
        _late_error("chained", "The above exception was the direct cause of the following exception:"),
        _late_error("context", "During handling of the above exception, another exception occurred:"),
        # torchrun's root-cause block restates the agent's failed line above (fresh seed 16001: 73 of
        # 106 false events were these four lines)
        _late_error("block_host", "  host      : node373"),
        _late_error("block_rank", "  rank      : 7 (local_rank: 7)"),
        _late_error("block_exit", "  exitcode  : -6 (pid: 1649207)"),
        _late_error("block_signal", "  traceback : Signal 6 (SIGABRT) received by PID 1649207"),
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": 95.0}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    # a fault pattern whose keywords occur in the advice text does not make it news
    hits = pd.DataFrame([{"job_id": "j", "event_id": "advice", "confidence": 1.0}])
    shares = pd.DataFrame({"event_id": pd.Series(dtype=str), "n_failed": pd.Series(dtype="int64")})
    scored = score_events(evidence, timing, empty, empty, hits, shares, conf).set_index("event_id")
    # the exit report yields to the cause (test_launcher_exit_reports_yield_to_a_cause)
    assert scored.loc["cause", "flagged"] and not scored.loc["exit", "flagged"]
    for event in ("sigterm", "service", "summary", "hint", "cuda_hint", "nccl_enum", "advice", "block_host", "block_rank",
                  "block_exit", "block_signal", "causes", "chained", "context"):
        assert scored.loc[event, "consequence"] and not scored.loc[event, "flagged"], event
    # the rule is configuration: without it the teardown lines are flagged like any late error
    plain = score_events(evidence, timing, empty, empty, hits, shares,
                         DiagnosisConfig(consequence_patterns=())).set_index("event_id")
    assert plain.loc["summary", "flagged"] and not plain.loc["summary", "consequence"]


def test_launcher_exit_reports_yield_to_a_cause():
    """A launcher's report that a process ended says who went down, not why: with a cause in the
    job it is not flagged; where it is all there is besides the peers' reports (a worker the
    kernel killed without a word), it stays. Both independent generators label so; on their
    fleets the reports were 105 of 110 and 139 of 144 flagged exit events (session 59)."""
    from l4spark.spatial.config import SpatialConfig

    reports = {"torchrun": "failed (exitcode: -6) local_rank: 3 (pid: 4120) of binary: /usr/bin/python3",
               "deepspeed": "['/usr/bin/python3', '-u', 'train.py', '--local_rank=7'] exits with return code = -6",
               "srun": "srun: error: node017: task 23: Exited with exit code 1",
               "srun_term": "srun: error: node018: tasks 24-31: Terminated",
               "pdsh": "pdsh@node001: node017: ssh exited with exit code 250"}
    peer = "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, remote process exited or there was a network error"
    rows = [_late_error("cause", "RuntimeError: CUDA error: uncorrectable ECC error encountered", job_id="c"),
            # srun's own word for an OOM-killed task names the cause: it is no mere exit report
            _late_error("oom", "srun: error: node017: task 23: Out Of Memory", job_id="c"),
            _late_error("peer", peer, job_id="c")]
    rows += [_late_error(name, text, job_id="c") for name, text in reports.items()]
    rows += [_late_error("exit", reports["torchrun"], job_id="k"), _late_error("peer", peer, job_id="k")]
    evidence = pd.DataFrame(rows)
    timing = pd.DataFrame([{"job_id": j, "start_t": 0.0, "last_progress_t": 95.0} for j in ("c", "k")])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": pd.Series(dtype=str), "n_failed": pd.Series(dtype="int64")})

    def flagged(conf: DiagnosisConfig) -> set:
        scored = score_events(evidence, timing, empty, empty, hits, shares, conf,
                              peer_failure_patterns=SpatialConfig().remote_patterns)
        return {(r.job_id, r.event_id) for r in scored.itertuples() if r.flagged}

    assert flagged(DiagnosisConfig()) == {("c", "cause"), ("c", "oom"), ("c", "peer"), ("k", "exit"), ("k", "peer")}
    every = {(r["job_id"], r["event_id"]) for r in rows}
    assert flagged(load_config(overrides={"diagnosis.exit_lines_yield_to_causes": False}).diagnosis) == every
    with pytest.raises(ConfigError, match="launcher_exit_patterns"):
        load_config(overrides={"diagnosis.launcher_exit_patterns": ["(a+)+$"]})


def test_a_job_that_died_during_setup_has_its_first_error_as_onset():
    conf = DiagnosisConfig()
    # no stage or iteration marker: the configuration echoed at start is not late, the error is
    evidence = pd.DataFrame([
        _late_error("config_echo", "hidden_size ..................................... 8192", first_t=3.0, severity=1),
        _late_error("error", "AssertionError: tensor_model_parallel_size (3) does not divide num_attention_heads",
                    first_t=40.0),
        _late_error("after", "world size mismatch detected on rank 5", first_t=41.0, severity=1),
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": None}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    shares = pd.DataFrame({"event_id": pd.Series(dtype=str), "n_failed": pd.Series(dtype="int64")})
    scored = score_events(evidence, timing, empty, empty, pd.DataFrame(columns=["job_id", "event_id", "confidence"]),
                          shares, conf).set_index("event_id")
    assert scored.loc["error", "late"] and scored.loc["after", "late"] and scored.loc["after", "flagged"]
    assert not scored.loc["config_echo", "late"] and not scored.loc["config_echo", "flagged"]

def test_diagnosis_config_refuses_unknown_keys_and_bad_values():
    with pytest.raises(ConfigError, match="diagnosis.nope"):
        load_config(overrides={"diagnosis.nope": 1})
    with pytest.raises(ConfigError, match="weights"):
        load_config(overrides={"diagnosis.weights": {"magic": 1.0}})
    with pytest.raises(ConfigError, match="does not compile"):
        load_config(overrides={"diagnosis.frame_patterns": ["("]})
    assert load_config(overrides={"diagnosis.min_score": 0.7}).diagnosis.min_score == 0.7


def test_a_match_lists_its_events_in_the_same_order_whatever_the_evidence_row_order():
    from l4spark.diagnosis.patterns import FaultPattern
    from l4spark.diagnosis.scoring import job_patterns

    library = [FaultPattern("nccl", "NCCL timeout", "network", "cause", "remedy", (r"NCCL", r"Watchdog"))]
    evidence = pd.DataFrame({"job_id": ["j"] * 3, "event_id": ["E3", "E1", "E2"],
                             "sample": ["NCCL error", "NCCL timeout", "Watchdog caught"]})
    orders = [job_patterns(frame, {}, library, 0.5)["j"][0].matched_event_ids
              for frame in (evidence, evidence.iloc[::-1])]
    assert orders == [("E1", "E3", "E2")] * 2


def test_matches_rank_the_pattern_whose_events_came_first():
    from l4spark.diagnosis.assemble import rank_matches
    from l4spark.diagnosis.patterns import PatternMatch

    oom = PatternMatch("cuda-oom", "OOM", "out_of_memory", 1.0, ("E_oom",))
    ib = PatternMatch("ib-completion-error", "IB", "network", 1.0, ("E_ib1", "E_ib2"))
    partial = PatternMatch("partial", "P", "x", 0.5, ("E_first",))
    scored = pd.DataFrame([
        {"job_id": "j", "event_id": "E_oom", "first_t": 100.0, "generic": False},
        {"job_id": "j", "event_id": "E_ib1", "first_t": 130.0, "generic": False},
        {"job_id": "j", "event_id": "E_ib2", "first_t": 50.0, "generic": True},  # boilerplate: does not date
        {"job_id": "j", "event_id": "E_first", "first_t": 1.0, "generic": False},
    ])
    ranked = rank_matches({"j": [ib, partial, oom]}, scored)["j"]
    assert [m.pattern_id for m in ranked] == ["cuda-oom", "ib-completion-error", "partial"]


def test_a_match_is_dated_by_when_its_lines_are_shown_to_have_been_written():
    """Session 44: NCCL's untimed IB error lines, dated by their file's timestamp a minute before,
    came "first" against the kernel's timed OOM kill they followed. By the time a line is shown
    to have been written by (the next timestamp below it, ``seen_by_t``), the kernel's line is
    first; an event with no timestamp below its lines comes after every dated one."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import rank_matches

    oom = PatternMatch("host-oom-kill", "OOM", "node", 1.0, ("E_oom",))
    ib = PatternMatch("ib-completion-error", "IB", "network", 1.0, ("E_ib",))
    scored = pd.DataFrame([
        {"job_id": "j", "event_id": "E_oom", "first_t": 160.0, "seen_by_t": 160.0, "generic": False},
        {"job_id": "j", "event_id": "E_ib", "first_t": 100.0, "seen_by_t": 175.0, "generic": False},
        {"job_id": "k", "event_id": "E_oom", "first_t": 160.0, "seen_by_t": 160.0, "generic": False},
        {"job_id": "k", "event_id": "E_ib", "first_t": 100.0, "seen_by_t": None, "generic": False},  # untimed tail
    ])
    matches = {"j": [ib, oom], "k": [ib, oom]}
    for job in ("j", "k"):
        assert [m.pattern_id for m in rank_matches(matches, scored, shown_time=True)[job]] == \
            ["host-oom-kill", "ib-completion-error"]
        assert [m.pattern_id for m in rank_matches(matches, scored)[job]] == ["ib-completion-error", "host-oom-kill"]
    assert DiagnosisConfig().matches_by_shown_time


def test_the_match_printed_on_the_blamed_node_names_the_fault_before_an_earlier_peer_report():
    """A host's GPU ECC error (untimed, as under Slurm's `N: ` prefix) and the IB completion errors
    its neighbours print naming it (dated first by their clocks): with the node ranking the
    suspect's own line names the fault; by time alone the peers' report did."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import match_locality, rank_matches

    ecc = PatternMatch("gpu-ecc-error", "ECC", "accelerator", 1.0, ("E_ecc",))
    ib = PatternMatch("ib-completion-error", "IB", "network", 1.0, ("E_ib_peer", "E_ib_flush"))
    scored = pd.DataFrame([
        {"job_id": "j", "event_id": "E_ecc", "first_t": float("nan"), "generic": False, "nodes": ["n361"]},
        {"job_id": "j", "event_id": "E_ib_peer", "first_t": 70.0, "generic": False,
         "nodes": ["n223", "n412", "n759"]},
        # the suspect's own flushed work requests, printed by it and by every peer
        {"job_id": "j", "event_id": "E_ib_flush", "first_t": 71.0, "generic": False,
         "nodes": ["n223", "n361", "n412", "n759"]},
        {"job_id": "k", "event_id": "E_ecc", "first_t": 5.0, "generic": False, "nodes": None},
    ])
    nodes = pd.DataFrame({"job_id": ["j"] * 4, "node": ["n361", "n223", "n412", "n759"], "rank": [1, 2, 3, 4]})
    assert [m.pattern_id for m in rank_matches({"j": [ib, ecc]}, scored, nodes)["j"]] == [
        "gpu-ecc-error", "ib-completion-error"]
    assert [m.pattern_id for m in rank_matches({"j": [ib, ecc]}, scored)["j"]] == [
        "ib-completion-error", "gpu-ecc-error"]
    # a job without a ranking, or an event without printers, falls back to time
    assert [m.pattern_id for m in rank_matches({"k": [ecc]}, scored, nodes)["k"]] == ["gpu-ecc-error"]
    assert match_locality([1]) == 1.0
    assert match_locality([2, 3, 4]) == round((1 / 2 + 1 / 3 + 1 / 4) / 3, 6)
    assert match_locality([1, None]) == 0.5  # a printer the ranking does not list counts 0
    assert match_locality([]) == 0.0


def test_a_merged_templates_match_is_printed_where_its_signature_is_found(spark):
    """Session 46, host OOM kills under torchrun (fresh 36045-36063): drain3 merges the elastic
    agent's `failed (exitcode: -9)` for the worker the kernel killed with the `failed (exitcode: 1)`
    of every peer that died of the lost collective after it, so every node printed the event that
    matched worker-sigkill, and the IB completion errors the killed node's neighbour printed sat
    closer to the first-ranked node. The match's printers are now the nodes whose lines the
    signature finds: the killed worker's node alone, so its fault names the job's. A signature
    found in the template keeps every printer; one found in no line (a sample cut short) too."""
    from l4spark.diagnosis.assemble import matched_event_lines
    from l4spark.diagnosis.patterns import match_patterns, seed_patterns
    from l4spark.diagnosis.scoring import rank_matches, sample_only_signatures, with_signature_printers

    assert load_config().diagnosis.printers_from_matched_lines
    exit_template = "failed (exitcode: <*>) local_rank: <*> (pid: <*>) of binary: <*>"
    killed = "failed (exitcode: -9) local_rank: 3 (pid: 48213) of binary: /usr/bin/python3"
    ib_template = "NET/IB : Got completion from peer <*> with status=<*> opcode=<*> len=<*> vendor err <*> <*>"
    ib = "NET/IB : Got completion from peer 10.4.1.11<44312> with status=12 opcode=0 len=0 vendor err 129 (Recv)"
    templates = {"E_exit": exit_template, "E_ib": ib_template}
    names = ["n1", "n2", "n3", "n4", "n5"]
    # another job's lines of the same event are not this job's
    rows = [("j", "E_exit", "n1", killed), ("j", "E_ib", "n2", ib), ("j", "E_ib", "n2", ib), ("k", "E_exit", "n9", killed)]
    rows += [("j", "E_exit", n, f"failed (exitcode: 1) local_rank: {r} (pid: {4000 + r}) of binary: /usr/bin/python3")
             for n in names[1:] for r in range(2)]
    candidates = spark.createDataFrame(rows, "job_id string, event_id string, node string, message string")
    evidence = pd.DataFrame([
        {"job_id": "j", "event_id": "E_exit", "sample": killed, "first_t": 100.0, "generic": False,
         "nodes": names, "node_lines": [1, 2, 2, 2, 2]},
        {"job_id": "j", "event_id": "E_ib", "sample": ib, "first_t": 115.0, "generic": False,
         "nodes": ["n2"], "node_lines": [2]}])
    library = seed_patterns()
    matches = {"j": match_patterns(library, [(e, templates[e], s) for e, s in zip(evidence.event_id, evidence["sample"])])}
    assert {m.pattern_id for m in matches["j"]} >= {"worker-sigkill", "ib-completion-error"}
    signatures = sample_only_signatures(matches, evidence, templates, library)
    assert signatures[["job_id", "event_id"]].drop_duplicates().values.tolist() == [["j", "E_exit"]]
    lines = matched_event_lines(candidates, signatures)
    assert len(lines) == 9 and lines["n_lines"].sum() == 9
    narrowed = with_signature_printers(evidence, signatures, lines)
    assert (narrowed.loc[0, "nodes"], narrowed.loc[0, "node_lines"]) == (["n1"], [1])
    assert narrowed.loc[1, "nodes"] == ["n2"] and evidence.loc[0, "nodes"] == names  # the input is kept
    ranking = pd.DataFrame({"job_id": "j", "node": names, "rank": range(1, 6)})
    first = {name: rank_matches(matches, frame, ranking)["j"][0].pattern_id
             for name, frame in (("narrowed", narrowed), ("merged", evidence))}
    assert first == {"narrowed": "worker-sigkill", "merged": "ib-completion-error"}
    # no line the signature finds (the sample was cut short): the printers stay
    unfound = with_signature_printers(evidence, signatures, lines[lines["node"] != "n1"])
    assert unfound.loc[0, "nodes"] == names
    assert matched_event_lines(candidates, signatures.iloc[0:0]).empty


def _ranking(job_id: str, scores: dict) -> pd.DataFrame:
    ordered = sorted(scores.items(), key=lambda kv: -kv[1])
    return pd.DataFrame({"job_id": job_id, "node": [n for n, _ in ordered], "process_rank": pd.NA,
                         "rank": range(1, len(ordered) + 1), "combined_score": [v for _, v in ordered],
                         "suspect": [v >= 0.55 for _, v in ordered], "signals": [["isolated"]] * len(ordered)})


def test_the_only_node_printing_a_node_local_known_fault_gains_in_the_ranking_score():
    """A DataLoader worker's bus error on one node (its /dev/shm) and its peers' IB errors naming
    it: the peer with more lines of its own was ranked first; the node that printed the known
    fault alone gains known_fault_weight and is first. A fault every node prints changes nothing."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    bus = PatternMatch("dataloader-shm-bus-error", "bus", "node", 1.0, ("E_bus",))
    ib = PatternMatch("ib-completion-error", "IB", "network", 1.0, ("E_ib",))
    quota = PatternMatch("checkpoint-save-failure", "save", "storage", 1.0, ("E_quota",))
    nodes = pd.concat([_ranking("one", {"n391": 0.766, "n389": 0.500, "n390": 0.40}),
                       _ranking("all", {"a1": 0.9, "a2": 0.7})], ignore_index=True)
    evidence = pd.DataFrame({"job_id": ["one", "one", "all"], "event_id": ["E_bus", "E_ib", "E_quota"],
                             "nodes": [["n389"], ["n390", "n391"], ["a1", "a2"]]})
    classes = ("accelerator", "node", "out_of_memory", "storage")
    got = with_known_fault_printers(nodes, {"one": [ib, bus], "all": [quota]}, evidence, 0.5, classes, SpatialConfig())
    one = got[got["job_id"] == "one"].sort_values("rank")
    assert one["node"].tolist() == ["n389", "n391", "n390"]
    assert one["combined_score"].tolist() == [1.0, 0.766, 0.40]
    assert one["suspect"].tolist() == [True, True, False]
    assert one["signals"].iloc[0] == ["isolated", "prints a known fault alone: dataloader-shm-bus-error"]
    assert list(got.columns) == list(nodes.columns)
    # printed by both nodes of "all": no term; weight 0: the ranking as it was
    pd.testing.assert_frame_equal(got[got["job_id"] == "all"].reset_index(drop=True),
                                  nodes[nodes["job_id"] == "all"].reset_index(drop=True))
    assert with_known_fault_printers(nodes, {"one": [ib, bus]}, evidence, 0.0, classes, SpatialConfig()) is nodes
    # a class outside known_fault_classes (network) lifts nobody
    same = with_known_fault_printers(nodes, {"one": [ib]}, evidence, 0.5, classes, SpatialConfig())
    assert same[same["job_id"] == "one"]["node"].tolist() == ["n391", "n389", "n390"]


def test_the_node_whose_hca_reports_a_port_error_is_lifted_though_its_class_is_network():
    """Issue #18, a blind generator's IB link flap (fleet 904, six nodes): every process of the
    faulty node prints NCCL's ``NET/IB : Got async event : port error`` of its own HCA, its ring
    neighbours print completion errors naming it and every node's watchdog fires. A peer with
    start-up noise of its own was ranked first. The HCA's port error is that node's own words
    (``ib-port-error``, class network, node-local by ``known_fault_local_patterns``): its printer
    gains known_fault_weight. NCCL's later wordings match as well; the completion errors its
    neighbours print lift nobody."""
    from l4spark.diagnosis.patterns import seed_patterns
    from l4spark.diagnosis.scoring import job_patterns, with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    conf = load_config().diagnosis
    assert "ib-port-error" in conf.known_fault_local_patterns and "network" not in conf.known_fault_classes
    nodes = _ranking("flap", {"gpu-38": 0.626, "gpu-40": 0.520, "gpu-41": 0.490, "gpu-39": 0.476,
                              "gpu-37": 0.393, "gpu-42": 0.393})
    port = "gpu-a100-40:71607:72518 [7] transport/net_ib.cc:121 NCCL WARN NET/IB : Got async event : port error"
    completion = ("NET/IB : Got completion from peer 10.12.1.50<43757> with status=12 opcode=0 len=0 vendor err 129 "
                  "(Recv) localGid ::ffff:10.12.1.49 remoteGids::ffff:10.12.1.50")
    evidence = pd.DataFrame({"job_id": "flap", "event_id": ["E_port", "E_completion"], "sample": [port, completion],
                             "nodes": [["gpu-40"], ["gpu-39", "gpu-40", "gpu-41"]]})
    matches = job_patterns(evidence, {}, seed_patterns(), conf.pattern_min_confidence)
    assert {m.pattern_id for m in matches["flap"]} >= {"ib-port-error", "ib-completion-error"}

    def first(local_patterns, found=matches):
        got = with_known_fault_printers(nodes, found, evidence, conf.known_fault_weight, conf.known_fault_classes,
                                        SpatialConfig(), conf.known_fault_share, per_pattern=conf.known_fault_per_pattern,
                                        local_patterns=local_patterns)
        return got.sort_values("rank")["node"].iloc[0]

    assert first(conf.known_fault_local_patterns) == "gpu-40"
    assert first(()) == "gpu-38"  # by class alone: sessions 56 and before
    # printed by every node of the link, the completion errors alone lift nobody
    alone = {"flap": [m for m in matches["flap"] if m.pattern_id != "ib-port-error"]}
    assert first(conf.known_fault_local_patterns, alone) == "gpu-38"
    # NCCL's wordings across versions (transport/net_ib.cc), and the events that are no port error
    library = [p for p in seed_patterns() if p.pattern_id == "ib-port-error"]
    for text, expected in [("NET/IB : mlx5_3:1 Got async event : port error", True),
                           ("NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)", True),
                           ("NET/IB : mlx5_0:1 async fatal event: local catastrophic error", True),
                           ("p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port error", True),
                           ("NET/IB : mlx5_0:1 Got async event : GID table change", False),
                           ("NET/IB : mlx5_0:1 Got non-fatal async event: port active(9)", False)]:
        found = job_patterns(pd.DataFrame({"job_id": ["j"], "event_id": ["E"], "sample": [text]}), {}, library,
                             conf.pattern_min_confidence)["j"]
        assert bool(found) is expected, text


def test_a_node_whose_cpus_throttle_alone_is_lifted_and_names_the_slowdown():
    """Issue #18, the slowdown kind: the kernel of one node reports its CPUs' thermal throttling
    (therm_throt.c) while the job slows to a crawl and is cancelled; every unit stops at once,
    and a node with fewer lines (its role) was ranked first. The seed pattern matches the
    kernel's words, its class (slowdown) is node-local by default, and the throttled node is first."""
    from l4spark.diagnosis.patterns import match_patterns, seed_patterns
    from l4spark.diagnosis.scoring import with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    conf = load_config().diagnosis
    assert "slowdown" in conf.known_fault_classes
    line = "mce: CPU19: Package temperature above threshold, cpu clock throttled (total events = 84)"
    found = match_patterns(seed_patterns(), [("E_hot", "mce: CPU<*>: Package temperature above threshold, cpu clock "
                                                        "throttled (total events = <*>)", line)])
    assert [(m.pattern_id, m.fault_class) for m in found] == [("cpu-thermal-throttle", "slowdown")]
    nodes = _ranking("slow", {"gpu-h100-409": 0.9, "gpu-h100-314": 0.8, "gpu-h100-421": 0.8})
    evidence = pd.DataFrame({"job_id": ["slow"], "event_id": ["E_hot"], "nodes": [["gpu-h100-314"]]})
    got = with_known_fault_printers(nodes, {"slow": found}, evidence, conf.known_fault_weight,
                                    conf.known_fault_classes, SpatialConfig())
    assert got.sort_values("rank")["node"].tolist() == ["gpu-h100-314", "gpu-h100-409", "gpu-h100-421"]
    # session 25's classes: the throttled node stays second
    before = with_known_fault_printers(nodes, {"slow": found}, evidence, conf.known_fault_weight,
                                       tuple(c for c in conf.known_fault_classes if c != "slowdown"), SpatialConfig())
    assert before.sort_values("rank")["node"].iloc[0] == "gpu-h100-409"


def test_a_brief_throttle_on_one_node_does_not_outrank_a_straggler_measured_on_another():
    """Issue #18, fresh fleet 36025: a straggler GPU on hpc-h800-0763 (no error; the ranking
    measured it as the unit everyone waits for) and, on hpc-h800-0764, the kernel's
    "Core temperature above threshold" followed 10 ms later by "temperature/speed normal", which
    healthy CPUs print under normal load. The throttle's claim of slowness lifts nobody against the
    measurement; it still lifts its printer where the printer is the measured straggler, where no
    unit was measured slow, or where the printer also printed a fault of another class."""
    from l4spark.diagnosis.patterns import PatternMatch, seed_patterns
    from l4spark.diagnosis.scoring import slowness_claims, with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    conf = load_config().diagnosis
    assert conf.measured_slowness_overrules
    claims = slowness_claims(seed_patterns())
    assert "cpu-thermal-throttle" in claims and "gpu-ecc-error" not in claims
    hot = PatternMatch("cpu-thermal-throttle", "CPU thermal throttling", "slowdown", 1.0, ("E_hot",))
    ecc = PatternMatch("gpu-ecc-error", "ECC", "accelerator", 1.0, ("E_ecc",))
    slow = "slow: the others wait for it (slowness 1.00)"
    nodes = _ranking("j", {"hpc-h800-0763": 0.922, "hpc-h800-0764": 0.729, "hpc-h800-0762": 0.45})
    nodes["signals"] = [["named by 1 peer(s)", slow], ["failed first, 72.9 s before the next unit"], []]
    evidence = pd.DataFrame({"job_id": ["j", "j"], "event_id": ["E_hot", "E_ecc"],
                             "nodes": [["hpc-h800-0764"], ["hpc-h800-0764"]]})

    def first(matches, ranking=nodes, claimed=claims):
        got = with_known_fault_printers(ranking, {"j": matches}, evidence, conf.known_fault_weight,
                                        conf.known_fault_classes, SpatialConfig(), claims=claimed)
        return got.sort_values("rank")["node"].iloc[0]

    assert first([hot]) == "hpc-h800-0763"
    assert first([hot], claimed=()) == "hpc-h800-0764"  # the setting off: sessions 40 and before
    assert first([hot, ecc]) == "hpc-h800-0764"  # an ECC error of its own is more than a claim of slowness
    unmeasured = nodes.assign(signals=[["named by 1 peer(s)"], ["failed first"], []])
    assert first([hot], unmeasured) == "hpc-h800-0764"  # nothing measured: the claim stands
    own = nodes.assign(signals=[["named by 1 peer(s)"], ["failed first", slow], []])
    assert first([hot], own) == "hpc-h800-0764"  # the printer is the measured straggler
    # session 45, 36041's DeepSpeed hang: the hung node never joined the collective the others
    # timed out in (measured), another printed the throttle pair alone: the claim lifts nobody
    hung = nodes.assign(signals=[["behind, outside NCCL: it never enqueued the collective its peers timed out in"],
                                 ["failed first"], []])
    assert first([hot], hung) == "hpc-h800-0763"
    behind_inside = nodes.assign(signals=[["behind: it stopped in an older collective than the one its peers timed "
                                           "out in"], ["failed first"], []])
    assert first([hot], behind_inside) == "hpc-h800-0764"  # stuck inside NCCL: measured no hang


def test_a_throttle_printed_alone_does_not_outrank_a_node_measured_dead():
    """Issue #18, fresh 36087 (`job-20261107-0047-mixtral8x7b`, MindSpeed, node_down): node288
    stopped logging 53,002 s before its peers; node278 had printed the kernel's CPU throttling
    alone, and the known-fault term (+0.5) put it first. A dead node is measured as a straggler
    is: the others waited for it in vain. The claim of slowness lifts nobody against it; with
    ``dead_unit_overrules_slowness`` off (sessions 47 and before) it lifts its printer."""
    from l4spark.diagnosis.patterns import PatternMatch, seed_patterns
    from l4spark.diagnosis.scoring import slowness_claims, with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    conf = load_config().diagnosis
    assert conf.dead_unit_overrules_slowness
    hot = PatternMatch("cpu-thermal-throttle", "CPU thermal throttling", "slowdown", 1.0, ("E_hot",))
    nodes = _ranking("j", {"node278": 0.709, "node288": 1.05, "node289": 0.714})
    dead = {"node278": ["named by 2 peer(s)"], "node289": [],
            "node288": ["silent: stopped 53002 s before its peers, its error lines no sign of it",
                        "failed first, 52519.2 s before the next unit"]}
    evidence = pd.DataFrame({"job_id": ["j"], "event_id": ["E_hot"], "nodes": [["node278"]]})

    def first(stopped: bool, signals=dead) -> str:
        ranking = nodes.assign(signals=nodes["node"].map(signals))
        got = with_known_fault_printers(ranking, {"j": [hot]}, evidence, conf.known_fault_weight,
                                        conf.known_fault_classes, SpatialConfig(),
                                        claims=slowness_claims(seed_patterns()), stopped=stopped)
        return got.sort_values("rank")["node"].iloc[0]

    assert first(True) == "node288"
    assert first(False) == "node278"
    # nobody measured stopped, slow or hung: the claim stands and lifts its printer
    assert first(True, {"node278": ["named by 2 peer(s)"], "node288": ["failed first"], "node289": []}) == "node278"
    # the printer itself is the one that stopped: lifted, first
    own = {"node278": ["silent: stopped 53002 s before its peers"], "node288": ["failed first"], "node289": []}
    assert first(True, own) == "node278"


def test_known_fault_settings_are_checked():
    assert load_config(overrides={"diagnosis.known_fault_weight": 0}).diagnosis.known_fault_weight == 0
    with pytest.raises(ConfigError, match="known_fault_weight"):
        load_config(overrides={"diagnosis.known_fault_weight": 7})
    with pytest.raises(ConfigError, match="known_fault_classes"):
        load_config(overrides={"diagnosis.known_fault_classes": ["node", ""]})
    with pytest.raises(ConfigError, match="known_fault_local_patterns"):
        load_config(overrides={"diagnosis.known_fault_local_patterns": [""]})


def test_a_slow_first_ranked_unit_is_the_straggler_fault_before_its_peers_timeouts():
    """A straggler prints no error; its peers' NCCL watchdog timeouts match the network pattern.
    When the ranking's first unit is the one the others wait for, the known fault is the straggler."""
    from l4spark.diagnosis.patterns import PatternMatch, slow_unit_pattern
    from l4spark.diagnosis.scoring import with_unit_fault

    timeout = PatternMatch("nccl-watchdog-timeout", "NCCL", "network", 1.0, ("E_wd",))
    nodes = pd.DataFrame({
        "job_id": ["slow", "slow", "crash", "crash", "quiet"],
        "rank": [1, 2, 1, 2, 1],
        "signals": [["named by 1 peer(s)", "slow: the others wait for it (slowness 1.00)"], [],
                    ["failed first"], ["slow: the others wait for it (slowness 0.40)"],  # a slow unit, not first
                    None],
    })
    got = with_unit_fault({"slow": [timeout], "crash": [timeout]}, nodes, slow_unit_pattern())
    assert [m.pattern_id for m in got["slow"]] == ["straggler-unit", "nccl-watchdog-timeout"]
    assert got["slow"][0].fault_class == "slowdown" and got["slow"][0].matched_event_ids == ()
    assert [m.pattern_id for m in got["crash"]] == ["nccl-watchdog-timeout"]
    assert "quiet" not in got
    # a job with no pattern match at all still gets it
    assert [m.pattern_id for m in with_unit_fault({}, nodes, slow_unit_pattern())["slow"]] == ["straggler-unit"]
    assert with_unit_fault({"crash": [timeout]}, None, slow_unit_pattern()) == {"crash": [timeout]}


def test_a_first_ranked_unit_behind_outside_nccl_is_the_hang_fault_before_its_peers_timeouts():
    """A rank that hangs outside NCCL prints no timeout; every peer's watchdog does, and those
    lines match the network pattern. When the first-ranked unit never enqueued the collective
    its peers wait in, the known fault is the hang; a unit stuck inside an older collective (a
    stalled link) keeps the network fault."""
    from l4spark.diagnosis.patterns import PatternMatch, hung_unit_pattern, unit_fault_patterns
    from l4spark.diagnosis.scoring import with_unit_fault

    timeout = PatternMatch("nccl-watchdog-timeout", "NCCL", "network", 1.0, ("E_wd",))
    nodes = pd.DataFrame({
        "job_id": ["hang", "hang", "stall"],
        "rank": [1, 2, 1],
        "signals": [["behind, outside NCCL: it never enqueued the collective its peers timed out in"], ["failed first"],
                    ["behind: it stopped in an older collective than the one its peers timed out in"]],
    })
    got = with_unit_fault({"hang": [timeout], "stall": [timeout]}, nodes, hung_unit_pattern())
    assert [m.pattern_id for m in got["hang"]] == ["hang-unit", "nccl-watchdog-timeout"]
    assert got["hang"][0].fault_class == "hang"
    assert [m.pattern_id for m in got["stall"]] == ["nccl-watchdog-timeout"]
    assert [p.pattern_id for p in unit_fault_patterns()] == ["node-down-unit", "straggler-unit", "hang-unit",
                                                             "save-outlasted-timeout-unit"]
    assert [p.pattern_id for p in unit_fault_patterns(hung=False, dead=False)] == ["straggler-unit"]
    assert [p.pattern_id for p in unit_fault_patterns(save_hang=False)][-1] == "hang-unit"


SILENT_STOP = "silent: stopped 91 s before its peers, its error lines no sign of it"


def test_a_first_ranked_unit_that_stopped_first_is_the_dead_node_unless_a_known_fault_says_why():
    """A node that dies writes nothing more; its peers' IB completion errors naming it match the
    network pattern. When the first-ranked unit stopped before any other unit's failure began,
    the known fault is the dead node (class node). A first match that says why it went quiet
    keeps its place: a GPU fallen off the bus (node-local class), or a NaN the node printed
    itself before it exited (its own words). A unit that also never enqueued its peers'
    collective is the hang."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import with_unit_faults

    ib = PatternMatch("ib-completion-error", "IB", "network", 1.0, ("E_ib",))
    bus = PatternMatch("gpu-fallen-off-bus", "GPU", "accelerator", 1.0, ("E_bus",))
    nan = PatternMatch("loss-nan", "NaN", "loss_divergence", 1.0, ("E_nan",))
    named = "named by 3 peer(s) (weight 3.00 after discounting names given by design): ip:10.3.1.38"
    nodes = pd.DataFrame({
        "job_id": ["dead", "dead", "bus", "hang", "crash", "nan", "nan_peer", "unended"],
        "node": ["n1", "n2", "n1", "n1", "n1", "n1", "n1", "n1"],
        "rank": [1, 2, 1, 1, 1, 1, 1, 1],
        "signals": [[SILENT_STOP, named], ["failed first"], [SILENT_STOP, named],
                    [SILENT_STOP, "behind, outside NCCL: it never enqueued the collective its peers timed out in"],
                    ["silent: far fewer lines than its peers", named],  # fewer lines is not a stop
                    [SILENT_STOP], [SILENT_STOP],
                    # session 44: no failure summary and no notice to stop where its peers printed theirs
                    ["silent: no end of its own (no failure summary, no notice to stop) where its peers reported "
                     "theirs", named]],
    })
    # who printed what: n1 its own NaN in "nan"; in "nan_peer" only another node printed one
    scored = pd.DataFrame({"job_id": ["dead", "nan", "nan", "nan_peer"], "event_id": ["E_ib", "E_nan", "E_ib", "E_nan"],
                           "nodes": [["n2"], ["n1"], ["n2"], ["n2"]]})
    matches = {"dead": [ib], "bus": [bus, ib], "hang": [ib], "crash": [ib], "nan": [nan, ib], "nan_peer": [nan],
               "unended": [ib]}
    got = with_unit_faults(matches, nodes, DiagnosisConfig(), scored)
    assert [m.pattern_id for m in got["dead"]] == ["node-down-unit", "ib-completion-error"]
    assert [m.pattern_id for m in got["unended"]] == ["node-down-unit", "ib-completion-error"]
    assert got["dead"][0].fault_class == "node" and got["dead"][0].matched_event_ids == ()
    assert [m.pattern_id for m in got["bus"]] == ["gpu-fallen-off-bus", "node-down-unit", "ib-completion-error"]
    assert [m.pattern_id for m in got["hang"]] == ["hang-unit", "node-down-unit", "ib-completion-error"]
    assert [m.pattern_id for m in got["crash"]] == ["ib-completion-error"]
    assert [m.pattern_id for m in got["nan"]] == ["loss-nan", "node-down-unit", "ib-completion-error"]
    # a NaN another node printed is a cause of its own (session 36, unit_faults_after_causes);
    # sessions 32-35 put the dead node first
    assert [m.pattern_id for m in got["nan_peer"]] == ["loss-nan", "node-down-unit"]
    before = load_config(overrides={"diagnosis.unit_faults_after_causes": False}).diagnosis
    assert [m.pattern_id for m in with_unit_faults(matches, nodes, before, scored)["nan_peer"]] == \
        ["node-down-unit", "loss-nan"]
    # switched off: the peers' network match, as in session 32
    off = load_config(overrides={"diagnosis.dead_unit_fault": False}).diagnosis
    assert with_unit_faults(matches, nodes, off, scored)["dead"] == [ib]


def test_a_nodes_own_throttling_says_why_it_was_slow_not_why_it_stopped_or_stayed_away():
    """Issue #18, fresh 36081 (`pt-qwen2-72b-20261102-054149`, MindSpeed, node_down): the dead node
    had printed the kernel's "Core temperature above threshold, cpu clock throttled" 42 and 32 hours
    before it went down, as had its peer. Its own throttling was taken for why it went quiet, so
    the job was named a slowdown. A throttled CPU still runs and logs: the match says why a unit
    was slow, not why it stopped logging or never joined its peers' collective. The dead node and
    the hang now come first; the straggler still yields to its node's own throttling."""
    from l4spark.diagnosis.patterns import PatternMatch, seed_patterns
    from l4spark.diagnosis.scoring import slowness_claims, with_unit_faults

    hot = PatternMatch("cpu-thermal-throttle", "CPU thermal throttling", "slowdown", 1.0, ("E_hot",))
    hccl = PatternMatch("hccl-timeout", "HCCL", "network", 1.0, ("E_to",))
    slow = "slow: the others wait for it (slowness 0.93)"
    stuck = "behind, outside NCCL: it never enqueued the collective its peers timed out in"
    nodes = pd.DataFrame({"job_id": ["dead", "hang", "slow"], "node": ["n1"] * 3, "rank": [1] * 3,
                          "signals": [[SILENT_STOP], [stuck], [slow]]})
    # n1 printed the throttling itself in every job; its peer n2 the timeouts
    scored = pd.DataFrame({"job_id": ["dead", "dead", "hang", "hang", "slow", "slow"],
                           "event_id": ["E_hot", "E_to"] * 3, "nodes": [["n1"], ["n2"]] * 3})
    matches = {job: [hot, hccl] for job in ("dead", "hang", "slow")}
    claims = slowness_claims(seed_patterns())

    def first(conf: DiagnosisConfig) -> dict:
        return {job: found[0].pattern_id for job, found in with_unit_faults(matches, nodes, conf, scored, claims).items()}

    assert DiagnosisConfig().slowness_explains_only_slowness
    assert first(DiagnosisConfig()) == {"dead": "node-down-unit", "hang": "hang-unit", "slow": "cpu-thermal-throttle"}
    # sessions 47 and before: the node's own throttling came first wherever it was the first match
    assert set(first(DiagnosisConfig(slowness_explains_only_slowness=False)).values()) == {"cpu-thermal-throttle"}


def test_a_claim_of_slowness_the_timeline_does_not_bear_out_comes_after_the_other_matches():
    """Issue #18, fresh 36077 (`job-20261105-0030-qwen272b`, MindSpeed, hccl_timeout): the faulty
    node had also printed the kernel's CPU throttling lines, alone, so that match sat where the
    ranking points and came before the HCCL timeout every node printed: class slowdown. Nothing in
    the job was slow: its iterations kept their pace and no unit was the one the others waited
    for. A claim of slowness nothing measured now comes after the job's other matches; where the
    iterations slowed (the temporal step's ``slowdown``) or a straggler was measured, it keeps
    its place."""
    from l4spark.diagnosis.patterns import PatternMatch, seed_patterns
    from l4spark.diagnosis.scoring import slowed_jobs, slowness_claims, with_unborne_claims_last

    hot = PatternMatch("cpu-thermal-throttle", "CPU thermal throttling", "slowdown", 1.0, ("E_hot",))
    hccl = PatternMatch("hccl-timeout", "HCCL", "network", 1.0, ("E_to",))
    jobs = ("quiet", "slowed", "straggler")
    matches = {job: [hot, hccl] for job in jobs}
    iterations = pd.DataFrame({"job_id": ["quiet", "slowed", "slowed"], "iteration": [10, 10, 20],
                               "reason": [None, None, "slowdown"]})
    nodes = pd.DataFrame({"job_id": list(jobs), "node": ["n1"] * 3, "rank": [1] * 3,
                          "signals": [["isolated: score 0.528"], ["failed first"],
                                      ["slow: the others wait for it (slowness 0.93)"]]})
    assert slowed_jobs(iterations) == {"slowed"}
    got = with_unborne_claims_last(matches, slowness_claims(seed_patterns()), slowed_jobs(iterations), nodes)
    assert {job: found[0].pattern_id for job, found in got.items()} == \
        {"quiet": "hccl-timeout", "slowed": "cpu-thermal-throttle", "straggler": "cpu-thermal-throttle"}
    assert [m.pattern_id for m in got["quiet"]] == ["hccl-timeout", "cpu-thermal-throttle"]  # kept, second
    assert DiagnosisConfig().slowness_needs_measuring
    # a throttled job with no other match keeps it
    alone = with_unborne_claims_last({"quiet": [hot]}, slowness_claims(seed_patterns()), set(), nodes)
    assert alone == {"quiet": [hot]}


def test_a_straggler_or_a_hang_comes_after_a_cause_and_before_what_waiting_peers_print():
    """Issue #18, fresh 35003 and 36003: a job whose loss went NaN, or whose training code raised
    a TypeError, had a first-ranked unit that looked slow or stuck (it stopped in its step while
    the others waited), and the built-in straggler or hang went first: class slowdown or hang,
    not the cause. With unit_faults_after_causes a unit fault comes after a first library match
    of a class waiting peers do not print (waiting_classes: network), and before one they do."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import with_unit_faults

    nan = PatternMatch("loss-nan", "NaN", "loss_divergence", 1.0, ("E_nan",))
    bug = PatternMatch("program-bug", "bug", "program_bug", 1.0, ("E_bug",))
    timeout = PatternMatch("nccl-timeout", "timeout", "network", 1.0, ("E_to",))
    slow = "slow: the others wait for it (slowness 0.93)"
    stuck = "behind, outside NCCL: it never enqueued the collective its peers timed out in"
    nodes = pd.DataFrame({"job_id": ["nan", "bug", "slow", "stuck"], "node": ["n3"] * 4, "rank": [1] * 4,
                          "signals": [[slow], [stuck], [slow], [stuck]]})
    scored = pd.DataFrame({"job_id": ["nan", "bug", "slow", "stuck"], "event_id": ["E_nan", "E_bug", "E_to", "E_to"],
                           "nodes": [["n0"], ["n3"], ["n1"], ["n1"]]})
    matches = {"nan": [nan, timeout], "bug": [bug, timeout], "slow": [timeout], "stuck": [timeout]}
    conf = DiagnosisConfig()
    assert conf.unit_faults_after_causes and conf.waiting_classes == ("network",)
    got = {job: [m.pattern_id for m in found] for job, found in with_unit_faults(matches, nodes, conf, scored).items()}
    assert got == {"nan": ["loss-nan", "straggler-unit", "nccl-timeout"], "bug": ["program-bug", "hang-unit", "nccl-timeout"],
                   "slow": ["straggler-unit", "nccl-timeout"], "stuck": ["hang-unit", "nccl-timeout"]}
    before = DiagnosisConfig(unit_faults_after_causes=False)
    got = {job: [m.pattern_id for m in found] for job, found in with_unit_faults(matches, nodes, before, scored).items()}
    assert got["nan"][0] == "straggler-unit" and got["bug"][0] == "hang-unit"
    with pytest.raises(ConfigError, match="waiting_classes"):
        DiagnosisConfig(waiting_classes=("network", ""))


def test_a_claim_of_slowness_another_node_printed_is_no_cause_of_a_hang():
    """Session 45, 36041's DeepSpeed hang: n3's rank never joined the collective the others timed
    out in; n1 had printed the kernel's CPU thermal-throttle pair alone, first in time. Another
    node's throttling neither stops nor slows n3: the hang goes before that claim, and so does the
    dead node (36047). A claim n3's own node printed, and any claim with the setting off (no
    claims), still went first until session 48 (``slowness_explains_only_slowness``), which puts
    the hang and the dead node before any claim of slowness."""
    from l4spark.diagnosis.patterns import PatternMatch, seed_patterns
    from l4spark.diagnosis.scoring import slowness_claims, with_unit_faults

    hot = PatternMatch("cpu-thermal-throttle", "CPU thermal throttling", "slowdown", 1.0, ("E_hot",))
    timeout = PatternMatch("nccl-watchdog-timeout", "timeout", "network", 1.0, ("E_to",))
    stuck = "behind, outside NCCL: it never enqueued the collective its peers timed out in"
    # 36047's HF Trainer node_down: the dead node stopped first, another printed the throttle pair
    dead = "silent: stopped 1601 s before its peers, its error lines no sign of it"
    jobs = ["elsewhere", "own", "dead_elsewhere", "dead_own"]
    nodes = pd.DataFrame({"job_id": jobs, "node": ["n3"] * 4, "rank": [1] * 4,
                          "signals": [[stuck], [stuck], [dead], [dead]]})
    scored = pd.DataFrame({"job_id": [j for j in jobs for _ in (0, 1)], "event_id": ["E_hot", "E_to"] * 4,
                           "nodes": [["n1"], ["n0", "n1", "n2"], ["n3"], ["n0", "n1", "n2"]] * 2})
    matches = {job: [hot, timeout] for job in jobs}
    claims = slowness_claims(seed_patterns())

    def first(claimed, conf=DiagnosisConfig(slowness_explains_only_slowness=False)):
        return {job: found[0].pattern_id for job, found in
                with_unit_faults(matches, nodes, conf, scored, claimed).items()}

    # sessions 45-47 (session 48's slowness_explains_only_slowness off)
    assert first(claims) == {"elsewhere": "hang-unit", "own": "cpu-thermal-throttle",
                             "dead_elsewhere": "node-down-unit", "dead_own": "cpu-thermal-throttle"}
    assert set(first(()).values()) == {"cpu-thermal-throttle"}
    # session 48 (default): throttling, whoever printed it, is no cause of a hang or a stop
    unit_first = {"elsewhere": "hang-unit", "own": "hang-unit", "dead_elsewhere": "node-down-unit",
                  "dead_own": "node-down-unit"}
    assert first(claims, DiagnosisConfig()) == first((), DiagnosisConfig()) == unit_first


def test_a_hang_while_saving_a_checkpoint_is_a_timeout_shorter_than_the_save():
    """Session 46, timeout_too_low (13 jobs of sixteen fleets, all classed as a hang): rank 0 was
    writing a checkpoint in torch.save while every other rank timed out in the next collective.
    In a job whose failure stage is the save, the hang's unit is the writing rank and the fault
    the process group timeout (class configuration), in the hang's place; in training the hang
    stays; a save that failed with an error of its own (a stale file handle) stays the cause;
    with the setting off, or without stages, the hang."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import with_unit_faults

    timeout = PatternMatch("nccl-watchdog-timeout", "timeout", "network", 1.0, ("E_to",))
    stale = PatternMatch("shared-fs-stale-handle", "stale", "storage", 1.0, ("E_stale",))
    stuck = "behind, outside NCCL: it never enqueued the collective its peers timed out in"
    jobs = ["saving", "training", "stale_save", "no_stage"]
    nodes = pd.DataFrame({"job_id": jobs, "node": ["n0"] * 4, "rank": [1] * 4, "signals": [[stuck]] * 4})
    matches = {"saving": [timeout], "training": [timeout], "stale_save": [stale, timeout], "no_stage": [timeout]}
    stages = {"saving": "checkpoint_saving", "training": "training", "stale_save": "checkpoint_saving"}

    def listed(conf, given):
        return {job: [m.pattern_id for m in found] for job, found in with_unit_faults(matches, nodes, conf, None, (),
                                                                                      given).items()}

    conf = load_config().diagnosis
    assert conf.save_hang_unit_fault
    got = listed(conf, stages)
    assert got == {"saving": ["save-outlasted-timeout-unit", "nccl-watchdog-timeout"],
                   "training": ["hang-unit", "nccl-watchdog-timeout"],
                   "stale_save": ["shared-fs-stale-handle", "save-outlasted-timeout-unit", "nccl-watchdog-timeout"],
                   "no_stage": ["hang-unit", "nccl-watchdog-timeout"]}
    saved = with_unit_faults(matches, nodes, conf, None, (), stages)["saving"][0]
    assert saved.fault_class == "configuration"
    off = listed(dataclasses.replace(conf, save_hang_unit_fault=False), stages)
    assert off["saving"] == ["hang-unit", "nccl-watchdog-timeout"]
    assert listed(conf, None)["saving"] == ["hang-unit", "nccl-watchdog-timeout"]


def test_rank_matches_places_a_match_by_its_unit_at_rank_granularity():
    """At rank granularity a node has several units; it counts with its best."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import rank_matches

    disk = PatternMatch("checkpoint-save-failure", "save", "storage", 1.0, ("E_io",))
    nccl = PatternMatch("nccl-watchdog-timeout", "NCCL", "network", 1.0, ("E_wd",))
    scored = pd.DataFrame([
        {"job_id": "j", "event_id": "E_io", "first_t": 200.0, "generic": False, "nodes": ["a"]},
        {"job_id": "j", "event_id": "E_wd", "first_t": 100.0, "generic": False, "nodes": ["b"]},
    ])
    units = pd.DataFrame({"job_id": ["j"] * 4, "node": ["b", "a", "a", "b"], "process_rank": [0, 5, 4, 1],
                          "rank": [3, 1, 2, 4]})
    assert [m.pattern_id for m in rank_matches({"j": [nccl, disk]}, scored, units)["j"]] == [
        "checkpoint-save-failure", "nccl-watchdog-timeout"]


def test_untimed_lines_at_the_end_of_a_file_are_its_tail(spark):
    from datetime import datetime

    from l4spark.diagnosis.assemble import prepare_lines


    start = datetime(2026, 11, 8, 2, 50, 16)
    rows = [
        # startup-only timestamps, progress, then a crash printed without timestamps (C++ stderr)
        ("j", "n1/rank-0.log", 1, "Process rank: 0, device: cuda:0", start),
        ("j", "n1/rank-0.log", 2, " iteration      100/    1000 | consumed samples: 800 | lm loss: 2.1", None),
        ("j", "n1/rank-0.log", 3, "rare warning in the middle of training", None),
        ("j", "n1/rank-0.log", 4, " iteration      200/    1000 | consumed samples: 1600 | lm loss: 2.0", None),
        ("j", "n1/rank-0.log", 5, "terminate called after throwing an instance of 'c10::DistBackendError'", None),
        ("j", "n1/rank-0.log", 6, "  what():  NCCL error: remote process exited", None),
        # a rank without progress lines: everything after its last timestamp is tail
        ("j", "n1/rank-1.log", 1, "Process rank: 1, device: cuda:1", start),
        ("j", "n1/rank-1.log", 2, "  what():  NCCL error: remote process exited", None),
        # timestamps to the end: no tail
        ("j", "n2/rank-2.log", 1, "Process rank: 2, device: cuda:2", start),
        ("j", "n2/rank-2.log", 2, "RuntimeError: CUDA error: unknown error", start),
    ]
    staged = spark.createDataFrame(rows, "job_id string, file string, line_no long, message string, ts timestamp") \
        .withColumn("node", F.split("file", "/")[0])
    offsets = spark.createDataFrame([], "job_id string, node string, offset_s double")
    lines = prepare_lines(staged, offsets, DiagnosisConfig(), load_config().temporal).toPandas()
    tail = {(r.file, r.line_no): bool(r.tail) for r in lines.itertuples()}
    assert [tail[("n1/rank-0.log", n)] for n in range(1, 7)] == [False, False, False, False, True, True]
    assert tail[("n1/rank-1.log", 1)] is False and tail[("n1/rank-1.log", 2)] is True
    assert not tail[("n2/rank-2.log", 1)] and not tail[("n2/rank-2.log", 2)]
    # the latest each line can have been written: its own timestamp or the next below it; none
    by = {(r.file, r.line_no): r.t_by for r in lines.itertuples()}
    assert by[("n2/rank-2.log", 1)] == by[("n2/rank-2.log", 2)] == start.timestamp()
    assert pd.isna(by[("n1/rank-1.log", 2)]) and pd.isna(by[("n1/rank-0.log", 3)])


def test_an_event_shown_before_the_onset_is_not_late_by_another_files_tail():
    """Fresh seed 36049: a Megatron job under torchrun whose non-zero ranks print a timestamp only
    at start-up. Their NCCL init lines are untimed to the end of those files (tail), so every init
    event was late (0.4) and, with no history to filter it, new (0.3): 19 events flagged. Rank
    0's copies have a timestamp below them from the same day, long before the onset."""
    row = {"job_id": "j", "first_t": 10.0, "tail": True, "severity": 1, "frame_share": 0.0, "keep_reason": "no_history",
           "history": "none"}
    evidence = pd.DataFrame([
        {**row, "event_id": "init", "sample": "NCCL INFO Connected all rings", "seen_by_t": 400.0},
        {**row, "event_id": "crash", "sample": "NCCL WARN NET/IB : Got completion from peer 10.0.0.2", "seen_by_t": None},
        {**row, "event_id": "after", "sample": "NCCL INFO comm 0x1 rank 0 nranks 4 - Abort COMPLETE", "seen_by_t": 1990.0},
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": 2000.0}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    no_hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": [], "n_failed": []})
    spatial = pd.DataFrame([{"job_id": "j", "event_id": e, "score": 1.0} for e in ("init", "crash", "after")])

    def late(conf: DiagnosisConfig) -> dict:
        return dict(score_events(evidence, timing, spatial, empty, no_hits, shares, conf).set_index("event_id")["late"])

    onset = 2000.0 - DiagnosisConfig().onset_margin_s
    assert 400.0 < onset < 1990.0
    assert late(DiagnosisConfig()) == {"init": False, "crash": True, "after": True}
    assert late(DiagnosisConfig(bounded_lines_not_late=False)) == {"init": True, "crash": True, "after": True}


# PyTorch's output when a NCCL watchdog aborts a rank (as in pytorch issues and Megatron-LM #935):
# the terminate handler's line, the error, the c10 backtrace header, native frames
NATIVE_CRASH = [
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: "
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, "
    "NumelOut=112, Timeout(ms)=1800000) ran for 1800011 milliseconds before timing out.",
    "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 "
    "(most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f5a9616c1b6 in libc10.so)",
]


def _line_flags(spark, messages: list[str], conf: DiagnosisConfig) -> list[tuple[bool, bool]]:
    from l4spark.diagnosis.assemble import with_line_flags

    rows = [("j", "n1/rank-3.log", n, message) for n, message in enumerate(messages, start=1)]
    lines = spark.createDataFrame(rows, "job_id string, file string, line_no long, message string")
    flags = with_line_flags(lines, conf).orderBy("line_no").select("frame", "boilerplate").collect()
    return [(r.frame, r.boilerplate) for r in flags]


def test_native_exception_framing_is_a_stack_frame_and_its_what_line_is_not(spark):
    assert _line_flags(spark, NATIVE_CRASH, DiagnosisConfig()) == [(True, True), (False, False), (True, True),
                                                                   (True, True)]
    # switched off: only the frame #N line, as in session 17
    off = load_config(overrides={"diagnosis.native_exception_framing": False}).diagnosis
    assert _line_flags(spark, NATIVE_CRASH, off) == [(False, False), (False, False), (False, False), (True, True)]


def test_nccls_back_trace_is_a_stack_frame(spark):
    """NCCLCHECK logs ``file:line -> code`` at each call the error code returns through ("Print
    the back trace", NCCL's src/include/checks.h); the WARN line or the exception says what."""
    lines = ["NCCL WARN NET/IB : Got completion from peer 10.0.0.2<58378> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
             "transport/net.cc:1302 -> 6", "proxy.cc:858 -> 6 [Proxy Thread]",
             "NCCL INFO misc/socket.cc:49 -> 2 (Connection refused)",
             # the ring's connection lines have arrows too, between ranks, not files
             "NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM"]
    assert _line_flags(spark, lines, DiagnosisConfig()) == [(False, False), (True, True), (True, True), (True, True),
                                                           (False, False)]
    off = load_config(overrides={"diagnosis.nccl_backtrace_frames": False}).diagnosis
    assert _line_flags(spark, lines, off) == [(False, False)] * len(lines)


def test_native_exception_framing_keeps_the_lines_that_carry_the_error(spark):
    carrying = [
        # an older c10::Error puts the message after the location, on the same line
        "Exception raised from createEvent at ../aten/src/ATen/cuda/CUDAEvent.h:174: CUDA error: unknown error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "remote process exited or there was a network error, NCCL version 2.18.1",
        "RuntimeError: Exception raised from a user callback: terminate called by the data loader",
        "failed (exitcode: -6) local_rank: 3 (pid: 4120) of binary: /usr/bin/python3",
        "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout",
    ]
    assert _line_flags(spark, carrying, DiagnosisConfig()) == [(False, False)] * len(carrying)
    with pytest.raises(ConfigError, match="native_exception_framing"):
        load_config(overrides={"diagnosis.native_exception_framing": "yes"})


def _ranked_line_flags(spark, rows: list[tuple[int, str]], conf: DiagnosisConfig) -> list[bool]:
    """``frame`` per line of one file whose lines carry a rank (srun --label puts ranks in one file)."""
    from l4spark.diagnosis.assemble import with_line_flags

    data = [("j", "n1/job.log", n, rank, message) for n, (rank, message) in enumerate(rows, start=1)]
    lines = spark.createDataFrame(data, "job_id string, file string, line_no long, rank int, message string")
    return [r.frame for r in with_line_flags(lines, conf).orderBy("line_no").select("frame").collect()]


# What the warnings module prints (warnings._formatwarnmsg_impl: "path:N: Category: message", then
# the warning call's source line indented by two spaces; accelerate #2724, transformers #30749), as
# messages of the events table: the structure step's python-warning header keeps "Category: msg";
# logging.captureWarnings' py.warnings logger keeps the path inside its message
WARNED = [
    (3, "UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly."),
    (3, "  warnings.warn("),
    (3, "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040)."),
    (3, "  return torch._C._cuda_getDeviceCount() > 0"),
    (3, "py.warnings: /usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py:557: UserWarning: "
        "This DataLoader will create 16 worker processes in total."),
    (3, "  warnings.warn(_create_warning_msg("),
]


def test_a_python_warnings_source_line_is_a_stack_frame_and_the_warning_is_not(spark):
    assert _ranked_line_flags(spark, WARNED, DiagnosisConfig()) == [False, True] * 3
    off = load_config(overrides={"diagnosis.warning_source_lines": False}).diagnosis
    assert _ranked_line_flags(spark, WARNED, off) == [False] * 6
    with pytest.raises(ConfigError, match="warning_source_lines"):
        load_config(overrides={"diagnosis.warning_source_lines": "yes"})


def test_warning_source_lines_keep_what_is_not_a_warnings_source_line(spark):
    kept = [
        (3, "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old"),
        (4, "  what():  CUDA error: an illegal memory access was encountered"),  # another rank's line
        (3, "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated."),
        (3, "Traceback (most recent call last):"),  # not indented: not the warning's source line
        (3, "WARNING: Megatron found an unexpected checkpoint format"),  # a logger's level, no category
        (3, "  [Rank 3] Watchdog caught collective operation timeout"),
        (3, "Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL."),
        (3, "  NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12"),
    ]
    # only the traceback header is a frame (frame_patterns); every other line stays a candidate
    assert _ranked_line_flags(spark, kept, DiagnosisConfig()) == [False, False, False, True, False, False, False,
                                                                  False]


def _boilerplate(spark, messages: list[str], conf: DiagnosisConfig) -> list[bool]:
    from l4spark.diagnosis.assemble import with_line_flags

    data = [("j", "n1/rank-0.log", n, 0, message) for n, message in enumerate(messages, start=1)]
    lines = spark.createDataFrame(data, "job_id string, file string, line_no long, rank int, message string")
    return [r.boilerplate for r in with_line_flags(lines, conf).orderBy("line_no").select("boilerplate").collect()]


def test_a_configuration_echo_line_is_boilerplate_and_an_error_about_the_setting_is_not(spark):
    echoed = [
        # Megatron-LM's _print_args ('  {} {} {}'.format(arg, '.' * (48 - len(arg)), value))
        "  tensor_model_parallel_size ...................... 8",
        "  tokenizer_type .................................. GPT2BPETokenizer",
        "  data_path ....................................... ['/data/pile_text_document']",
        # DeepSpeed's DeepSpeedConfig.print (29 - len(arg) dots)
        "  zero_optimization_stage ...... 3",
    ]
    kept = [
        "------------------------ arguments ------------------------",  # letters: not a no-letter line
        "AssertionError: world size (16) is not divisible by tensor model parallel size (3)",
        "loading checkpoint from /ckpt at iteration 5000 ... done",  # dots inside a sentence
        "  what():  CUDA error: unknown error",
        "  File \"/workspace/Megatron-LM/pretrain_gpt.py\", line 278, in <module>",  # a frame, not an echo
    ]
    conf = DiagnosisConfig()
    assert _boilerplate(spark, echoed + kept, conf) == [True] * 4 + [False, False, False, False, True]
    off = load_config(overrides={"diagnosis.config_echo_lines": False}).diagnosis
    assert _boilerplate(spark, echoed, off) == [False] * 4
    with pytest.raises(ConfigError, match="config_echo_lines"):
        load_config(overrides={"diagnosis.config_echo_lines": "yes"})


# torch elastic's agent logs its node's first failed worker (multiprocessing/api.py, _poll): the
# faulty node's line and the lines of the peers that died after it are one template
EXIT_FAULTY = "failed (exitcode: -9) local_rank: 3 (pid: 2811) of binary: /usr/bin/python3"
EXIT_PEER = "failed (exitcode: -6) local_rank: 0 (pid: 4120) of binary: /usr/bin/python3"


def _exit_evidence(job_id: str, exit_nodes: list[str]) -> dict:
    return {**_late_error("exit", EXIT_FAULTY, job_id=job_id), "exit_nodes": exit_nodes}


def test_the_first_ranked_units_exit_line_is_not_failure_boilerplate():
    # every other failed job prints the exit template: failure boilerplate by generic_share
    evidence = pd.DataFrame([
        _exit_evidence("suspect_printed", ["n1", "n2"]),  # the first-ranked n1 printed one
        _exit_evidence("peers_only", ["n2"]),  # n1 (first) was silent: only its peer's worker's exit
        {**_late_error("echo", "hidden_size ..... 8192", job_id="suspect_printed"), "exit_nodes": []},
    ])
    timing = pd.DataFrame([{"job_id": j, "start_t": 0.0, "last_progress_t": 95.0}
                           for j in ("suspect_printed", "peers_only")])
    nodes = pd.DataFrame([{"job_id": j, "node": n, "rank": r} for j in ("suspect_printed", "peers_only")
                          for n, r in (("n1", 1), ("n2", 2))])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": ["exit", "echo"], "n_failed": [30, 30]})
    shares.attrs["n_failed_jobs"] = 30

    def flags(conf: DiagnosisConfig) -> dict:
        scored = score_events(evidence, timing, empty, empty, hits, shares, conf, nodes=nodes)
        return {(r.job_id, r.event_id): (r.flagged, r.generic) for r in scored.itertuples()}

    assert flags(DiagnosisConfig()) == {("suspect_printed", "exit"): (True, False),
                                        ("peers_only", "exit"): (False, True),
                                        ("suspect_printed", "echo"): (False, True)}
    # switched off: boilerplate in both jobs, as in session 19
    off = load_config(overrides={"diagnosis.suspect_exit_lines": False}).diagnosis
    assert flags(off)[("suspect_printed", "exit")] == (False, True)
    with pytest.raises(ConfigError, match="suspect_exit_lines"):
        load_config(overrides={"diagnosis.suspect_exit_lines": "yes"})


# a communication library's report of a failed call: NCCL's NCCLCHECK (INFO, include/checks.h)
# and Ascend HCCL's CHK_RET (ERROR, hcomm pub_inc/log.h), as printed in public logs
NCCL_TRACE = "transport/net.cc:1134 -> 6"
NCCL_PROXY_TRACE = "proxy.cc:858 -> 6 [Proxy Thread]"
HCCL_TRACE = "[transport_manager.cc:1402] [18744][SetMachinePara]call trace: hcclRet -> 9"
# torch_npu's exception for a failed HCCL call (vllm-project/vllm-ascend#486)
NPU_CALL = ("RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
            "HcclAllreduce, error code is 6")
# torch_npu's failed stream synchronisation, old and new wording (vllm-project/vllm-ascend#5661, #7676)
ACL_SYNC = "RuntimeError: ACL stream synchronize failed, error code:507035"
NPU_SYNC = ("RuntimeError: synchronize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:361 NPU function error: "
            "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(stream()), error code is 507011")

# session 55: a transfer's completion with an error status: NCCL's IB completion error in both
# wordings (transport/net_ib.cc up to 2.19 and from 2.20), the Ascend RoCE driver's plog line and
# HCCL's EI0013 (CANN 8.5's HCCL guide, ERROR CQE case)
IB_ERROR = ("NCCL WARN NET/IB : Got completion from peer 10.0.0.2<58378> with error 12, opcode 0, len 0, vendor err 129 "
            "(Recv) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2")
IB_STATUS = ("NCCL WARN NET/IB : Got completion from peer 10.0.0.2<58378> with status=12 opcode=0 len=0 vendor err 129 "
             "(Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2")
ROCE_CQE = "ROCE [hns_roce_lite.c:630]hns_roce_lite_handle_error_cqe(630) : error cqe status: 0x15"
HCCL_CQE = ("An error CQE occurred during operator execution. Local information: server 127.0.0.1, device ID 0, device IP "
            "127.10.0.1. Peer information: server 127.0.0.2, device ID 1, device IP 127.10.0.2.")
# EI0002's advice names the error CQE it asks the reader to look for: no completion came back here
CQE_ADVICE = ("        Solution: 3. Check whether the completion queue element (CQE) of the error exists in the "
              "plog(grep -rn 'error cqe'). If so, check the network connection status.")


def test_a_communication_librarys_failed_call_and_its_code_is_not_failure_boilerplate():
    # every event below is printed by every other failed job: boilerplate by generic_share alone
    evidence = pd.DataFrame([
        _late_error("nccl", NCCL_TRACE, severity=1),
        _late_error("proxy", NCCL_PROXY_TRACE, severity=1),
        _late_error("hccl", HCCL_TRACE),
        _late_error("npu", NPU_CALL),
        _late_error("acl_sync", ACL_SYNC),
        _late_error("npu_sync", NPU_SYNC),
        _late_error("ib_error", IB_ERROR),
        _late_error("ib_status", IB_STATUS),
        _late_error("roce_cqe", ROCE_CQE),
        _late_error("hccl_cqe", HCCL_CQE),
        # a line naming a source file without an error code returned through it stays boilerplate
        _late_error("teardown", "ProcessGroupNCCL.cpp:1205 destroying the process group"),
        _late_error("advice", CQE_ADVICE),
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": 95.0}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": list(evidence["event_id"]), "n_failed": [30] * len(evidence)})
    shares.attrs["n_failed_jobs"] = 30

    def flags(conf: DiagnosisConfig) -> dict:
        scored = score_events(evidence, timing, empty, empty, hits, shares, conf)
        return {r.event_id: (bool(r.flagged), bool(r.generic)) for r in scored.itertuples()}

    assert flags(DiagnosisConfig()) == {"nccl": (True, False), "proxy": (True, False), "hccl": (True, False),
                                        "npu": (True, False), "acl_sync": (True, False), "npu_sync": (True, False),
                                        "ib_error": (True, False), "ib_status": (True, False), "roce_cqe": (True, False),
                                        "hccl_cqe": (True, False), "teardown": (False, True), "advice": (False, True)}
    # switched off: boilerplate wherever generic_share says so, as in session 32
    off = load_config(overrides={"diagnosis.failed_call_lines": False}).diagnosis
    assert all(generic and not flagged for flagged, generic in flags(off).values())
    with pytest.raises(ConfigError, match="failed_call_patterns"):
        load_config(overrides={"diagnosis.failed_call_patterns": ["(a+)+$"]})


def test_a_peers_report_that_the_failure_reached_it_is_not_failure_boilerplate():
    """Every multi-node failure prints its peers' reports, so in a fleet of one framework family
    (fresh 36113: Megatron-DeepSpeed only) generic_share made them boilerplate; the same lines in a
    mixed fleet were not. Real texts: PyTorch's NCCL watchdog on ncclRemoteError (torch 2.1), NCCL's
    socket (NVIDIA/nccl#1232) and HCCL's heartbeat report (mindspore-ai/docs cann_error_cases.md)."""
    remote = ("[Rank 12] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or "
              "there was a network error, NCCL version 2.18.6")
    evidence = pd.DataFrame([
        _late_error("remote", remote),
        _late_error("socket", "socketProgress: Connection closed by remote peer dgx-b08-n1<58745>", severity=2),
        _late_error("heartbeat", "serverId[192.168.1.15], deviceId[3], Heartbeat Lost Occurred, Possible Reason: "
                                 "1. Process has exited, 2. Network Disconnected"),
        # the launcher's summary of its own workers says nothing of a peer: still boilerplate
        _late_error("summary", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "),
    ])
    timing = pd.DataFrame([{"job_id": "j", "start_t": 0.0, "last_progress_t": 95.0}])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": ["remote", "socket", "heartbeat", "summary"], "n_failed": [30] * 4})
    shares.attrs["n_failed_jobs"] = 30
    patterns = load_config().spatial.remote_patterns

    def generic(conf: DiagnosisConfig) -> dict:
        scored = score_events(evidence, timing, empty, empty, hits, shares, conf, peer_failure_patterns=patterns)
        return {r.event_id: bool(r.generic) for r in scored.itertuples()}

    assert generic(DiagnosisConfig()) == {"remote": False, "socket": False, "heartbeat": False, "summary": True}
    # switched off, or without the patterns: boilerplate wherever generic_share says so (session 49)
    off = load_config(overrides={"diagnosis.peer_failure_lines": False}).diagnosis
    assert all(generic(off).values())
    scored = score_events(evidence, timing, empty, empty, hits, shares, DiagnosisConfig())
    assert scored["generic"].all()


# HF Trainer's log dict (trainer.py, Trainer.log), as printed by every HF job, and the same dict
# when the loss diverged: one template, the values tell
HF_DICT = "{'loss': 1.8421, 'grad_norm': 0.4121, 'learning_rate': 2.9e-05, 'epoch': 0.41}"
HF_DICT_NAN = "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 2.9e-05, 'epoch': 0.42}"


def test_a_log_dict_that_prints_nan_is_not_failure_boilerplate():
    # every other failed job prints the dict: boilerplate by generic_share alone
    evidence = pd.DataFrame([
        {**_late_error("dict", HF_DICT_NAN, severity=1), "nonfinite": True},
        {**_late_error("dict", HF_DICT, severity=1, job_id="healthy_values"), "nonfinite": False},
    ])
    timing = pd.DataFrame([{"job_id": j, "start_t": 0.0, "last_progress_t": 95.0} for j in ("j", "healthy_values")])
    empty = pd.DataFrame(columns=["job_id", "event_id", "score"])
    hits = pd.DataFrame(columns=["job_id", "event_id", "confidence"])
    shares = pd.DataFrame({"event_id": ["dict"], "n_failed": [30]})
    shares.attrs["n_failed_jobs"] = 30

    def flags(conf: DiagnosisConfig, frame: pd.DataFrame = evidence) -> dict:
        scored = score_events(frame, timing, empty, empty, hits, shares, conf)
        return {r.job_id: (bool(r.flagged), bool(r.generic)) for r in scored.itertuples()}

    assert flags(DiagnosisConfig()) == {"j": (True, False), "healthy_values": (False, True)}
    off = load_config(overrides={"diagnosis.nonfinite_lines": False}).diagnosis
    assert flags(off) == {"j": (False, True), "healthy_values": (False, True)}
    # evidence without the column (a caller of sessions 34 and before): as switched off
    assert flags(DiagnosisConfig(), evidence.drop(columns=["nonfinite"])) == flags(off)


def _candidate_lines(spark, rows: list[tuple], level: str, keep_reason: str):
    """Candidate lines for ``event_evidence`` from (job_id, node, rank, file, line_no, event_id,
    message) rows: timed by line number, in training, none a frame or in a file's tail."""
    return (spark.createDataFrame(rows, "job_id string, node string, rank int, file string, line_no long, "
                                        "event_id string, message string")
            .withColumn("t", F.col("line_no").cast("double")).withColumn("ts", F.lit(None).cast("timestamp"))
            .withColumn("level", F.lit(level)).withColumn("stage", F.lit("training"))
            .withColumn("frame", F.lit(False)).withColumn("tail", F.lit(False))
            .withColumn("keep_reason", F.lit(keep_reason)))


def test_event_evidence_says_which_events_print_a_nonfinite_value_and_shows_the_first(spark):
    from l4spark.config import load_config as load
    from l4spark.diagnosis.assemble import event_evidence

    rows = [("j", "n1", 0, "n1/rank-0.log", 1, "D", HF_DICT), ("j", "n1", 0, "n1/rank-0.log", 2, "D", HF_DICT_NAN),
            ("j", "n1", 0, "n1/rank-0.log", 3, "D", HF_DICT_NAN.replace("0.42", "0.43")),
            # Megatron-LM's iteration line with the loss formatted {:.6E}: Python prints a nan as NAN
            ("j", "n2", 8, "n2/rank-8.log", 1, "M", "iteration 120/ 500 | lm loss: NAN | loss scale: 1.0 |"),
            # a count of nan iterations, and a finite dict: no
            ("j", "n2", 8, "n2/rank-8.log", 2, "C", "number of skipped iterations:   0 | number of nan iterations:   0 |"),
            ("j", "n2", 8, "n2/rank-8.log", 3, "F", HF_DICT)]
    lines = _candidate_lines(spark, rows, level="INFO", keep_reason="new_variant")
    rules = load().temporal.nonfinite_rules
    got = {r.event_id: (r.nonfinite, r.sample) for r in event_evidence(lines, (), rules).collect()}
    assert got == {"D": (True, HF_DICT_NAN), "M": (True, rows[3][-1]), "C": (False, rows[4][-1]), "F": (False, HF_DICT)}
    # without rules: nothing is nonfinite and the sample is the first line
    got = {r.event_id: (r.nonfinite, r.sample) for r in event_evidence(lines).collect()}
    assert got["D"] == (False, HF_DICT)


def test_event_evidence_lists_the_nodes_of_its_exit_lines(spark):
    from l4spark.diagnosis.assemble import event_evidence

    rows = [
        ("j", "n1", 0, "n1/rank-0.log", 1, "E1", EXIT_FAULTY),
        ("j", "n2", 8, "n2/rank-8.log", 1, "E1", EXIT_PEER),
        # DeepSpeed's launcher (launch.py, sigkill_handler) on a third node
        ("j", "n3", 16, "n3/rank-16.log", 1, "E2",
         "['/usr/bin/python3', '-u', 'train.py', '--local_rank=7'] exits with return code = 1"),
        # the same template family in another line that is not a launcher's exit report
        ("j", "n2", 8, "n2/rank-8.log", 2, "E3", "  exitcode  : -6 (pid: 4120)"),
    ]
    lines = _candidate_lines(spark, rows, level="ERROR", keep_reason="not_in_pool")
    conf = DiagnosisConfig()
    got = {r.event_id: list(r.exit_nodes) for r in event_evidence(lines, conf.exit_line_patterns).collect()}
    assert got == {"E1": ["n1", "n2"], "E2": ["n3"], "E3": []}
    assert {r.event_id: list(r.exit_nodes) for r in event_evidence(lines).collect()} == {"E1": [], "E2": [], "E3": []}


def test_event_evidence_counts_each_nodes_lines_and_keeps_the_per_event_figures(spark):
    """Session 36: the evidence says how many lines of an event each node printed (node_lines, in
    the order of nodes), in the same pass as the per-event figures, which stay what one
    aggregation over the lines gives: lines, nodes, (node, rank) pairs, first and last time,
    frame share, the first line."""
    from l4spark.diagnosis.assemble import event_evidence

    hot = "mce: CPU11: Package temperature above threshold, cpu clock throttled (total events = 17)"
    rows = [("j", "n2", 4, "n2/rank-4.log", i, "H", hot) for i in range(1, 8)] + [
        ("j", "n3", 8, "n3/rank-8.log", 5, "H", hot.replace("CPU11", "CPU59")),
        ("j", "n2", 5, "n2/rank-5.log", 9, "X", "NCCL WARN x"), ("j", "n1", 0, "n1/rank-0.log", 2, "X", "NCCL WARN y"),
        ("j", "n1", 1, "n1/rank-1.log", 3, "X", "NCCL WARN z"), ("k", "n1", 0, "n1/rank-0.log", 1, "H", hot)]
    lines = _candidate_lines(spark, rows, level="WARNING", keep_reason="not_in_pool") \
        .withColumn("frame", F.col("line_no") == 3)
    got = {(r.job_id, r.event_id): r for r in event_evidence(lines).collect()}
    hot_j = got[("j", "H")]
    assert (list(hot_j.nodes), list(hot_j.node_lines)) == (["n2", "n3"], [7, 1])
    assert (hot_j.n_lines, hot_j.n_nodes, hot_j.n_ranks, hot_j.first_t, hot_j.last_t) == (8, 2, 2, 1.0, 7.0)
    assert hot_j.sample == hot and hot_j.sample_node == "n2" and hot_j.frame_share == 1 / 8
    x = got[("j", "X")]
    assert (list(x.nodes), list(x.node_lines), x.n_lines, x.n_nodes, x.n_ranks) == (["n1", "n2"], [2, 1], 3, 2, 3)
    assert x.sample == "NCCL WARN y" and x.frame_share == 1 / 3
    assert (list(got[("k", "H")].nodes), list(got[("k", "H")].node_lines)) == (["n1"], [1])


def test_the_node_that_printed_most_of_a_known_faults_lines_is_its_printer():
    """Issue #18, fresh 36001's slowdown job: the throttled node printed 1,410 thermal lines, two
    healthy peers one or two each (a CPU that touched its threshold once, as real servers do).
    No node printed it alone, so nobody was lifted and a peer that failed first by a few seconds
    was ranked first. At known_fault_share 0.8 the node with at least four in five of the lines
    is the printer; 1.0 is the only printer, as before; a fault spread over nodes lifts nobody;
    without line counts (dumps before session 36) a node must print it alone."""
    from l4spark.diagnosis.patterns import match_patterns, seed_patterns
    from l4spark.diagnosis.scoring import known_fault_printers, with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    conf = load_config().diagnosis
    assert conf.known_fault_share == 0.8
    line = "mce: CPU11: Package temperature above threshold, cpu clock throttled (total events = 17)"
    found = match_patterns(seed_patterns(), [("E_hot", "mce: CPU<*>: Package temperature above threshold, cpu clock "
                                                        "throttled (total events = <*>)", line)])
    evidence = pd.DataFrame({"job_id": ["slow", "spread"], "event_id": ["E_hot", "E_hot"],
                             "nodes": [["h-0341", "h-0342", "h-0343"], ["a", "b"]],
                             "node_lines": [[1410, 4, 2], [30, 20]]})
    matches = {"slow": found, "spread": found}
    got = known_fault_printers(matches, evidence, conf.known_fault_classes, conf.known_fault_share)
    assert got == {"slow": ("h-0341", ["cpu-thermal-throttle"], 1410 / 1416)}
    assert known_fault_printers(matches, evidence, conf.known_fault_classes, 1.0) == {}
    assert known_fault_printers(matches, evidence.drop(columns="node_lines"), conf.known_fault_classes, 0.8) == {}
    nodes = _ranking("slow", {"h-0343": 0.758, "h-0342": 0.605, "h-0341": 0.585, "h-0340": 0.355})
    ranked = with_known_fault_printers(nodes, matches, evidence, conf.known_fault_weight, conf.known_fault_classes,
                                       SpatialConfig(), conf.known_fault_share)
    first = ranked.sort_values("rank").iloc[0]
    assert first["node"] == "h-0341"
    assert first["signals"][-1] == "prints 99% of a known fault's lines: cpu-thermal-throttle"
    with pytest.raises(ConfigError, match="known_fault_share"):
        load_config(overrides={"diagnosis.known_fault_share": 0.5})


def test_each_known_fault_has_its_own_printer():
    """Session 44, a host OOM kill under Slurm (36057): three nodes touched their CPUs' thermal
    threshold, and the faulty node alone printed the kernel's OOM kill and slurmstepd's report of
    it. Pooled, the faulty node held 5 of 8 known-fault lines, under known_fault_share, and nobody
    was lifted; per fault, the OOM kill's printer is lifted and the spread thermal lines lift nobody."""
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import known_fault_printers, with_known_fault_printers
    from l4spark.spatial.config import SpatialConfig

    conf = load_config().diagnosis
    assert conf.known_fault_per_pattern
    hot = PatternMatch("cpu-thermal-throttle", "hot", "slowdown", 1.0, ("E_hot",))
    oom = PatternMatch("host-oom-kill", "oom", "node", 1.0, ("E_oom", "E_stepd"))
    evidence = pd.DataFrame({"job_id": ["j"] * 3, "event_id": ["E_hot", "E_oom", "E_stepd"],
                             "nodes": [["b24-n4", "b25-n1", "b25-n3"], ["b25-n1"], ["b25-n1"]],
                             "node_lines": [[1, 1, 1], [3], [1]]})
    matches = {"j": [hot, oom]}
    classes, share = conf.known_fault_classes, conf.known_fault_share
    assert known_fault_printers(matches, evidence, classes, share) == {}
    assert known_fault_printers(matches, evidence, classes, share, per_pattern=True) == \
        {"j": ("b25-n1", ["host-oom-kill"], 1.0)}
    assert known_fault_printers({"j": [hot]}, evidence, classes, share, per_pattern=True) == {}
    # fresh 36059: a stale handle on the faulty node's mount (one line), another node's thermal
    # lines (two): two printers say nothing about one node, and nobody is lifted, as pooled
    stale = PatternMatch("shared-fs-stale-handle", "stale", "storage", 1.0, ("E_stale",))
    two = pd.DataFrame({"job_id": ["k", "k"], "event_id": ["E_hot", "E_stale"], "nodes": [["b53-n1"], ["b29-n4"]],
                        "node_lines": [[2], [1]]})
    assert known_fault_printers({"k": [hot, stale]}, two, classes, share, per_pattern=True) == {}
    assert known_fault_printers({"k": [hot, stale]}, two, classes, share) == {}
    nodes = _ranking("j", {"b25-n3": 0.712, "b25-n1": 0.675, "b25-n2": 0.477, "b24-n4": 0.471})
    ranked = with_known_fault_printers(nodes, matches, evidence, conf.known_fault_weight, classes, SpatialConfig(),
                                       share, per_pattern=conf.known_fault_per_pattern)
    assert ranked.sort_values("rank")["node"].iloc[0] == "b25-n1"


def _study_dump(folder) -> None:
    """An ``evaluate --dump`` folder of two failed jobs: "hot", where one node's CPUs throttle and
    a peer with fewer lines was ranked first; "ib", an IB completion error on its faulty node."""
    folder.mkdir()
    hot = "mce: CPU19: Package temperature above threshold, cpu clock throttled (total events = 84)"
    ib = "NET/IB : Got completion from peer 10.0.0.2<4242> with error 12, opcode 0, len 0, vendor err 129 (Send)"
    pd.DataFrame({"job_id": ["hot", "ib"], "event_id": ["E_hot", "E_ib"], "template": [hot, ib], "sample": [hot, ib],
                  "first_t": [100.0, 200.0], "generic": [False, False],
                  "nodes": [["gpu-h100-314"], ["n2"]]}).to_parquet(folder / "scored.parquet")
    pd.concat([_ranking("hot", {"gpu-h100-409": 0.9, "gpu-h100-314": 0.8, "gpu-h100-421": 0.8}),
               _ranking("ib", {"n2": 0.9, "n1": 0.5})], ignore_index=True).to_parquet(folder / "nodes.parquet")
    pd.DataFrame({"job_id": ["hot", "ib"], "fault_kind": ["slowdown", "ib_completion_error"],
                  "has_faulty_nodes": [True, True], "faulty_nodes": [["gpu-h100-314"], ["n2"]],
                  "fault_class": ["slowdown", "network"]}).to_parquet(folder / "per_job.parquet")


def test_known_faults_study_recomputes_a_library_change_from_a_dump(tmp_path, capsys):
    from l4spark.evaluation.known_faults import main

    _study_dump(tmp_path / "d1")
    assert main(["--dump", str(tmp_path / "d1"), "--without", "cpu-thermal-throttle",
                 "--classes", "accelerator,node,out_of_memory,storage,software_incompatibility"]) == 0
    out = capsys.readouterr().out
    # the baseline (session 25's library and classes) against the defaults: the throttled node
    # first and the slowdown named; the IB job right under both
    assert "total: node top-1 1 -> 2 of 2, fault class 1 -> 2 of 2" in out
    changed = [line.split() for line in out.splitlines() if line.rstrip().endswith(("gained", "lost"))]
    assert [row[1:] for row in changed] == [["hot", "slowdown", "node_first", "gained"],
                                            ["hot", "slowdown", "class_ok", "gained"]]
    # the same settings both sides: nothing changes
    assert main(["--dump", str(tmp_path / "d1")]) == 0
    assert "total: node top-1 2 -> 2 of 2, fault class 2 -> 2 of 2" in capsys.readouterr().out
    # the dead node's unit fault against a baseline configuration without it: "ib"'s first unit
    # says it stopped first and its peer alone printed the IB error, so the network match gives
    # way to class node (labelled network: lost)
    nodes = pd.read_parquet(tmp_path / "d1" / "nodes.parquet")
    nodes["signals"] = [[SILENT_STOP] if (job, rank) == ("ib", 1) else list(s)
                        for job, rank, s in zip(nodes["job_id"], nodes["rank"], nodes["signals"])]
    nodes.to_parquet(tmp_path / "d1" / "nodes.parquet")
    scored = pd.read_parquet(tmp_path / "d1" / "scored.parquet")
    scored["nodes"] = [["n1"] if job == "ib" else list(printers) for job, printers in zip(scored["job_id"], scored["nodes"])]
    scored.to_parquet(tmp_path / "d1" / "scored.parquet")
    (tmp_path / "off.toml").write_text("[diagnosis]\ndead_unit_fault = false\n", "utf-8")
    assert main(["--dump", str(tmp_path / "d1"), "--base-conf", str(tmp_path / "off.toml")]) == 0
    out = capsys.readouterr().out
    assert "total: node top-1 2 -> 2 of 2, fault class 2 -> 1 of 2" in out
    assert [line.split()[1:] for line in out.splitlines() if line.rstrip().endswith(("gained", "lost"))] == [
        ["ib", "ib_completion_error", "class_ok", "lost"]]
    with pytest.raises(SystemExit):
        main(["--dump", str(tmp_path / "d1"), "--without", "no-such-pattern"])
    assert "no seed pattern" in capsys.readouterr().err
