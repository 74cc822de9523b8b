"""Temporal analysis: DTW scoring, progress (hangs, slowdowns), stages and iterations on Spark."""

from __future__ import annotations

import datetime as dt


from l4spark.temporal import (
    TemporalConfig,
    analyse_iterations,
    failure_stages,
    job_failure_points,
    with_stage_and_iteration,
)
from l4spark.temporal.dtw import analyse_progress, collapse, score_iterations, similarity


def test_similarity_treats_event_ids_as_categories():
    assert similarity(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert similarity(["a", "a", "b"], ["a", "b"]) == 1.0  # warping absorbs repeats
    # E1 vs E2 and E1 vs E9 cost the same: ids are never subtracted
    assert similarity(["E1", "x"], ["E2", "x"]) == similarity(["E1", "x"], ["E9", "x"]) == 0.5
    assert similarity([], []) == 1.0 and similarity(["a"], []) == 0.0


def test_collapse_caps_and_merges_repeats():
    assert collapse(["a", "a", "b", "a", "c"], 3) == ["a", "b", "a"]


def test_three_sigma_flags_only_the_new_failure():
    normal = ["it", "timer"]
    sequences = {i: list(normal) for i in range(1, 41)}
    sequences[20] = normal + ["eval"]  # a benign difference not in the gate
    sequences[41] = normal + ["nccl_error", "abort"]
    scores = score_iterations(sequences, gate={"nccl_error", "abort"}, conf=TemporalConfig())
    assert [s.iteration for s in scores if s.anomalous] == [41]
    assert set(scores[-1].event_ids) == {"nccl_error", "abort"}
    assert scores[0].score == 1.0


def test_progress_stall_and_refined_iteration():
    marks = [(i, 100.0 + 10 * i) for i in range(10, 101, 10)]  # every 10 iterations, 1 s each
    crash = analyse_progress(marks, last_t=1104.0, first_error_t=1104.5, conf=TemporalConfig())
    assert (crash.last_iteration, crash.stride, crash.stalled, crash.failure_iteration) == (100, 10, False, 101)
    later = analyse_progress(marks, last_t=1140.0, first_error_t=1137.0)
    assert later.failure_iteration == 104  # 37 s after iteration 100 ended at 10 s per iteration... capped
    hang = analyse_progress(marks, last_t=1100.0 + 1800, first_error_t=1100.0 + 1800)
    assert hang.stalled and hang.failure_iteration == 101
    assert analyse_progress([], None, None).failure_iteration is None


def test_slowdown_onset():
    marks, t = [], 0.0
    for i in range(1, 61):
        t += 1.0 if i < 41 else 3.0
        marks.append((i, t))
    progress = analyse_progress(marks, last_t=t, first_error_t=None)
    assert progress.slowdown_from == 41 and progress.failure_iteration == 41


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime(2026, 11, 2, 12, 0, 0) + dt.timedelta(seconds=seconds)


SCHEMA = ("job_id string, node string, rank int, file string, line_no long, ts timestamp, level string, "
          "event_id string, message string, stage string, iteration long")


def _job(spark, skew: float):
    """Rank 0 narrates (node a); rank 1 (node b, clock +skew) prints no markers."""
    rows = [
        ("j", "a", 0, "a/r0", 1, _ts(0), "INFO", "E_args", "using world size: 2", None, None),
        ("j", "a", 0, "a/r0", 2, None, None, "E_data", "> building train, validation, and test datasets ...", None, None),
        ("j", "a", 0, "a/r0", 3, _ts(20), None, "E_train", "training ...", None, None),
    ]
    for k in range(1, 6):
        rows.append(("j", "a", 0, "a/r0", 3 + k, _ts(20 + 10 * k), None, "E_it",
                     f" iteration {k:8d}/     100 | lm loss: 1.0 |", None, None))
    rows.append(("j", "a", 0, "a/r0", 9, _ts(73), "ERROR", "E_err", "NCCL error: remote process exited", None, None))
    rows += [
        ("j", "b", 1, "b/r1", 1, _ts(0 + skew), "INFO", "E_args", "using world size: 2", None, None),
        ("j", "b", 1, "b/r1", 2, _ts(20 + skew), None, "E_train", "training ...", None, None),
        ("j", "b", 1, "b/r1", 3, _ts(45 + skew), "WARN", "E_warn", "a warning", None, None),
        ("j", "b", 1, "b/r1", 4, None, None, "E_tb", "Traceback (most recent call last):", None, None),
        ("j", "x", 2, "x/r2", 1, None, None, "E_null", "no time and no marker", None, None),
    ]
    return spark.createDataFrame(rows, SCHEMA)


def test_stage_and_iteration_with_clock_skew(spark):
    staged = with_stage_and_iteration(_job(spark, skew=30.0)).orderBy("file", "line_no").collect()
    by_line = {(r.file, r.line_no): (r.stage, r.iteration) for r in staged}
    assert by_line[("a/r0", 1)] == (None, None)
    assert by_line[("a/r0", 2)] == ("data_loading", None)
    assert by_line[("a/r0", 3)] == ("training", 1)
    assert by_line[("a/r0", 5)] == ("training", 2)  # the line of iteration 2 carries 2
    assert by_line[("a/r0", 9)] == ("training", 6)  # after iteration 5: iteration 6 was running
    # rank 1 prints no iteration lines: its warning at true t=45 lies in iteration 3 (ends at 50)
    assert by_line[("b/r1", 3)] == ("training", 3)
    assert by_line[("b/r1", 4)] == ("training", 3)  # no timestamp: the previous line's
    assert by_line[("x/r2", 1)] == (None, None)  # nothing to align with
    assert len(staged) == 14


def test_failure_stage_and_iteration(spark):
    staged = with_stage_and_iteration(_job(spark, skew=0.0))
    assert failure_stages(staged).collect()[0].failure_stage == "training"
    iterations, progress = analyse_iterations(staged)
    point = job_failure_points(staged, progress).collect()[0]
    assert (point.failure_stage, point.failure_iteration) == ("training", 6)
    rows = {r.iteration: r.anomalous for r in iterations.collect()}
    assert rows[6] is True and not any(v for k, v in rows.items() if k != 6)


def test_end_to_end_generated_fleet(spark, test_config, tmp_path):
    from l4spark.evaluation.labels import load_labels
    from l4spark.parse import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet
    from l4spark.storage import read_table

    fleet = tmp_path / "fleet"
    simulate_fleet(fleet, FleetOptions(seed=3, jobs=4, nodes=(2, 2), ranks_per_node=2, iterations=60,
                                       failed_share=0.5, fault_kinds=("driver_mismatch", "oom"),
                                       frameworks=("megatron",)))
    parse_jobs(spark, test_config, fleet)
    staged = with_stage_and_iteration(read_table(spark, test_config.storage, "events")).localCheckpoint()
    iterations, progress = analyse_iterations(staged)
    points = {r.job_id: r for r in job_failure_points(staged, progress).collect()}
    labels = load_labels(fleet)
    assert len(labels) == 2
    for job_id, point in points.items():
        label = labels.get(job_id)
        assert point.failure_stage == (label.failure_stage if label else "finished"), job_id
        if label and label.failure_iteration is not None:
            # the bar's tolerance: progress lines every few iterations bound the estimate
            assert abs(point.failure_iteration - label.failure_iteration) <= 1
