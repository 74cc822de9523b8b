"""Temporal analysis: DTW scoring, progress (hangs, slowdowns), stages and iterations on Spark."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import numpy as np
import pytest
from pyspark.sql import functions as F

from l4spark.temporal.config import TemporalConfig
from l4spark.temporal.jobs import analyse_iterations, failure_stages, job_failure_points
from l4spark.temporal.lines import with_stage_and_iteration
from l4spark.temporal.dtw import ENDED, LASTING, RECOVERED, SLOWER, aftermath, analyse_progress, collapse, score_iterations, similarity


def test_similarity_treats_event_ids_as_categories():
    assert similarity(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert similarity(["a", "a", "b"], ["a", "b"]) == 1.0  # warping absorbs repeats
    # E1 vs E2 and E1 vs E9 cost the same: ids are never subtracted
    assert similarity(["E1", "x"], ["E2", "x"]) == similarity(["E1", "x"], ["E9", "x"]) == 0.5
    assert similarity([], []) == 1.0 and similarity(["a"], []) == 0.0


def test_each_distinct_pair_of_iterations_takes_one_dtw(monkeypatch):
    """Scores as if every iteration were compared with each of its references by ``similarity``,
    but a pair of equal sequences takes no DTW and each other pair one (issue #21: a job's
    iterations mostly repeat the same sequence)."""
    from l4spark.temporal import dtw

    rng = np.random.default_rng(21)
    shapes = [["it", "loss"], ["it", "loss", "timer"], ["it", "eval", "loss"], ["it", "nccl_error"]]
    sequences = {i: list(shapes[rng.choice(4, p=[0.7, 0.2, 0.07, 0.03])]) for i in range(1, 301)}
    conf = TemporalConfig()
    expected = [1.0 if k == 0 or not (window := [sequences[i] for i in range(max(2, k - conf.window + 1), k + 1)])
                else float(np.mean([similarity(sequences[k + 1], ref) for ref in window]))
                for k in range(300)]
    calls = []
    distance = dtw.dtw_ndim.distance
    monkeypatch.setattr(dtw.dtw_ndim, "distance", lambda a, b, **kw: calls.append(1) or distance(a, b, **kw))
    scores = score_iterations(sequences, gate=None, conf=conf)
    assert [s.score for s in scores] == [round(e, 6) for e in expected]
    pairs = {(tuple(sequences[k + 1]), tuple(ref)) for k in range(1, 300)
             for ref in [sequences[i] for i in range(max(2, k - conf.window + 1), k + 1)]}
    assert 0 < len(calls) == sum(a != b for a, b in pairs) < 20


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
    assert scores[-1].novel == ("abort", "nccl_error")
    assert scores[0].score == 1.0
    # one threshold per job, mean - 3 sigma of its judged scores (2+ references), on every row
    judged = np.array([s.score for s in scores[3:]])
    assert len({s.threshold for s in scores}) == 1
    assert scores[0].threshold == pytest.approx(judged.mean() - 3 * judged.std(), abs=1e-6)


def test_start_of_training_is_no_reference():
    # the first iteration holds the start of training; the next ones print what it did not
    sequences = {1: ["start", "it"], 2: ["it", "loss"], 3: ["it", "loss", "timer"],
                 **{i: ["it", "loss", "timer"] for i in range(4, 31)}}
    sequences[20] = ["it", "loss", "timer", "nccl_error"]
    scores = score_iterations(sequences, gate=None, conf=TemporalConfig())
    assert [s.score for s in scores[:2]] == [1.0, 1.0]  # no reference: iteration 1 is none
    assert [s.iteration for s in scores if s.anomalous] == [20]
    # judged with a single reference, iteration 3's new timer line would be anomalous
    assert 3 in [s.iteration for s in score_iterations(sequences, None, TemporalConfig(min_reference=1))
                 if s.anomalous]


def test_aftermath_tells_a_transient_anomaly_from_a_failure():
    marks = [(i, 10.0 * i) for i in range(1, 31)]  # 10 s per iteration
    sequences = {i: ["it"] for i in range(1, 31)}
    sequences[12] = ["it", "upload_retry"]
    assert aftermath(12, ("upload_retry",), sequences, marks) == RECOVERED
    # too few intervals after it: the job stopped there
    assert aftermath(28, ("upload_retry",), sequences, marks) == ENDED
    # slower than slowdown_factor x the pace before it
    slow = [(i, 10.0 * i if i <= 12 else 120.0 + 40.0 * (i - 12)) for i in range(1, 31)]
    assert aftermath(12, ("upload_retry",), sequences, slow) == SLOWER
    # the event recurs in every interval after it (a loss turned NaN)
    nan = {i: (["it", "nan"] if i >= 12 else ["it"]) for i in range(1, 31)}
    assert aftermath(12, ("nan",), nan, marks) == LASTING
    # progress lines without timestamps (tqdm bars): intervals still count, the pace is not checked
    assert aftermath(12, ("upload_retry",), sequences, [(i, None) for i in range(1, 31)]) == RECOVERED
    # a progress line every 5 iterations: intervals are 5 iterations long
    strided = [(i, 10.0 * i) for i in range(5, 31, 5)]
    buckets = {i: ["it"] for i in range(1, 31, 5)}
    buckets[11] = ["it", "upload_retry"]
    assert aftermath(11, ("upload_retry",), buckets, strided) == RECOVERED
    assert aftermath(21, ("upload_retry",), buckets, strided) == ENDED


def test_a_checkpoint_saves_interval_after_an_anomaly_is_no_slowdown():
    # issue #18 (fresh 36097, MindSpeed loss_nan): the loss turned NaN at 2288 and stayed NaN; the
    # job saved every 100 iterations, and the interval holding the save of 2300 (108 s of saving
    # on 21 s iterations) made the change "slower", so it was never placed (2589 reported)
    marks, t = [], 0.0
    for i in range(2200, 2400, 5):  # a progress line every 5 iterations
        t += 5 * 21.0 + (108.0 if i - 5 in (2200, 2300) else 0.0)  # the saves of 2200 and 2300
        marks.append((i, t))
    sequences = {i: (["it", "nan"] if i >= 2286 else ["it"]) for i in range(2196, 2400, 5)}
    # the three intervals after the one the NaN began in (recovery_intervals) end at 2295, 2300 and
    # 2305; the last held the save of 2300
    assert aftermath(2286, ("nan",), sequences, marks) == SLOWER
    assert aftermath(2286, ("nan",), sequences, marks, saved_at=(2200, 2300)) == LASTING
    # a real slowdown is still one, saves or not
    slow = [(i, t if i <= 2290 else t + 60.0 * (i - 2290)) for i, t in marks]
    assert aftermath(2286, ("nan",), sequences, slow, saved_at=(2200, 2300)) == SLOWER


def test_progress_stall_and_refined_iteration():
    marks = [(i, 100.0 + 10 * i) for i in range(10, 101, 10)]  # every 10 iterations, 1 s each
    crash = analyse_progress(marks, last_t=1104.0, first_error_t=1104.5, conf=TemporalConfig())
    assert (crash.last_iteration, crash.stride, crash.stalled, crash.failure_iteration) == (100, 10, False, 101)
    later = analyse_progress(marks, last_t=1140.0, first_error_t=1137.0)
    assert later.failure_iteration == 104  # 37 s after iteration 100 ended at 10 s per iteration... capped
    hang = analyse_progress(marks, last_t=1100.0 + 1800, first_error_t=1100.0 + 1800)
    # stalled: the watchdog's error came long after; nothing times it: the interval's middle
    assert hang.stalled and hang.failure_iteration == 105
    assert analyse_progress(marks, last_t=1104.0, first_error_t=None).failure_iteration == 105
    # the watchdog says how long the collective had run: the hang began 23 s after iteration 100
    began = analyse_progress(marks, last_t=1100.0 + 1800, first_error_t=1100.0 + 1800, began_t=1123.0)
    assert began.stalled and began.failure_iteration == 103
    assert analyse_progress([], None, None).failure_iteration is None


def test_the_first_error_places_the_stop_only_while_the_next_progress_line_was_due():
    # issue #18, fresh 36021 (MindSpeed, progress every 5 iterations of ~90 s)
    marks = [(i, 1000.0 + 90 * i) for i in range(1700, 1786, 5)]
    last = 1000.0 + 90 * 1785
    # a hang at 1788: its peers' HCCL timeout (1800 s, no "ran for N ms") came 2034 s later; not
    # stalled by hang_factor (5 intervals), it was placed at the interval's end (1790)
    hang = analyse_progress(marks, last_t=last + 2034, first_error_t=last + 2034)
    assert not hang.stalled and hang.failure_iteration == 1790  # the default: at most the interval's end
    middle = TemporalConfig(late_error_mid_interval=True)  # measured and left off
    assert analyse_progress(marks, last_t=last + 2034, first_error_t=last + 2034, conf=middle).failure_iteration == 1788
    old = TemporalConfig(early_error_places_stall=False)
    # NaN on one rank 16 s into iteration 12866: it died at once, its peers waited in the collective
    # until HCCL's timeout, so the job stalled; its first error still places the stop
    nan = [(i, 2000.0 + 31.6 * i) for i in range(12800, 12866, 5)]
    end = 2000.0 + 31.6 * 12865
    died = analyse_progress(nan, last_t=end + 1815, first_error_t=end + 15.8)
    assert died.stalled and died.failure_iteration == 12866
    assert analyse_progress(nan, last_t=end + 1815, first_error_t=end + 15.8, conf=old).failure_iteration == 12868
    # within one iteration past the due time it still places it (jitter), at the interval's end
    assert analyse_progress(marks, last_t=last + 500, first_error_t=last + 5.5 * 90, conf=middle).failure_iteration == 1790
    # a stalled job's late error places nothing, either way: the middle
    assert analyse_progress(nan, last_t=end + 1815, first_error_t=end + 1815).failure_iteration == 12868


def test_progress_counts_untimed_progress_lines():
    progress = analyse_progress([(i, None) for i in range(5, 51, 5)], last_t=None, first_error_t=None)
    assert (progress.last_iteration, progress.stride, progress.stalled, progress.failure_iteration) == (50, 5, False, 53)
    assert progress.iteration_seconds is None


def test_slowdown_onset_walks_back_through_the_ramp():
    marks, t = [], 0.0
    for i in range(1, 61):
        t += 1.0 if i < 41 else (1.2 if i == 41 else 1.35 if i == 42 else 3.0)
        marks.append((i, t))
    assert analyse_progress(marks, last_t=t, first_error_t=None).slowdown_from == 41
    # a stricter band stops the walk back at 42; the fit searches from 41 but keeps 42 (a step
    # from 42 explains 1.35x, 3x, 3x ... better than any step and ramp from 41's 1.2x). With a
    # factor of 1.5 the detection starts at 43, so the band alone decides how far back it walks
    # (at the default 1.2, 41's 1.2x is already above the factor)
    strict = TemporalConfig(slowdown_band=1.3, slowdown_factor=1.5)
    assert analyse_progress(marks, last_t=t, first_error_t=None, conf=strict).slowdown_from == 42


def test_slowdown_onset_inside_an_interval_is_fitted_to_the_ramp():
    """A throttled node: iteration time ramps up from iteration 67 (1.15x, +2% per iteration),
    logged every 10 iterations; the first interval holding the ramp (61-70) stays under the
    band, and the interval 101-110 also saved a checkpoint (a spike to leave out)."""
    def per_iteration(i: int) -> float:
        return 10.0 if i < 67 else 10.0 * min(3.0, 1.15 + 0.02 * (i - 67))

    marks, t = [], 0.0
    for i in range(1, 201):
        t += per_iteration(i) + (150.0 if i == 105 else 0.0)
        if i % 10 == 0:
            marks.append((i, t))
    progress = analyse_progress(marks, last_t=t, first_error_t=None)
    assert progress.slowdown_from == 67 and progress.failure_iteration == 67


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
    """Rank 0 narrates (node a); rank 1 (node b, clock +skew) prints no iteration lines."""
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
        ("j", "b", 1, "b/r1", 2, _ts(10 + skew), None, "E_load", "loading checkpoint from /ckpt at iteration 0", None, None),
        ("j", "b", 1, "b/r1", 3, None, None, "E_untimed", "an untimed line", None, None),
        ("j", "b", 1, "b/r1", 4, _ts(45 + skew), "WARN", "E_warn", "a warning", None, None),
        ("j", "b", 1, "b/r1", 5, None, None, "E_tb", "Traceback (most recent call last):", None, None),
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
    # rank 1 prints no iteration lines and only a model-loading marker (true t=10)
    assert by_line[("b/r1", 2)] == ("model_loading", None)
    # its warning at true t=45 lies in iteration 3 (ends at 50): the job has moved on to training
    assert by_line[("b/r1", 4)] == ("training", 3)
    assert by_line[("b/r1", 3)] == ("training", 3)  # no timestamp: no later than the next timed line
    assert by_line[("b/r1", 5)] == ("training", 6)  # untimed after the last timed line: the job's end
    assert by_line[("x/r2", 1)] == (None, None)  # nothing to align with
    assert len(staged) == 15


def test_stage_and_iteration_edge_cases(spark):
    # two jobs in one frame, lines given out of order: "one" is a single file of counted progress
    # lines (HF Trainer's {'loss': ...}, resumed at step 12, logging every 5 steps) ending in a save
    # that names its step; in "two", rank a prints the iteration lines and an untimed save marker,
    # rank b prints no timestamp at all, rank c no marker (aligned to a's timeline by time)
    def row(job, node, file, line_no, t, message):
        return (job, node, 0, file, line_no, None if t is None else _ts(t), None, message, message, None, None)

    rows = [row("one", "n", "one/r0", *line) for line in [
        (1, 0, "  logging_steps=5,"), (2, 1, "Continuing training from global step 12"),
        (3, 2, "***** Running training *****"), (4, None, "{'loss': 1.2, 'epoch': 0.1}"),
        (5, 5, "{'loss': 1.1, 'epoch': 0.2}"), (6, None, "Saving model checkpoint to /out/checkpoint-20"),
        (7, None, "Traceback (most recent call last):")]]
    rows += [row("two", "a", "two/a", *line) for line in [
        (1, 0, "training ..."), (2, 10, " iteration        1/     100 |"), (3, 20, " iteration        2/     100 |"),
        (4, None, "saving checkpoint at iteration       2 to /ckpt"), (5, 30, " iteration        3/     100 |"),
        (6, 40, "NCCL error: remote process exited")]]
    rows += [row("two", "b", "two/b", 1, None, "building GPT model ..."), row("two", "b", "two/b", 2, None, "a line")]
    rows += [row("two", "c", "two/c", *line) for line in [(1, 25, "a line"), (2, 35, "a line"), (3, None, "Traceback")]]
    staged = with_stage_and_iteration(spark.createDataFrame(rows[::-1], SCHEMA)).collect()
    by_line = {(r.file, r.line_no): (r.stage, r.iteration) for r in staged}
    assert [by_line[("one/r0", n)] for n in range(1, 8)] == [
        (None, None), (None, None), ("training", 15),  # before the first progress line: its interval
        ("training", 15), ("training", 20),  # floor(12 / 5) * 5 + k * 5
        ("checkpoint_saving", 20), ("checkpoint_saving", 20)]
    assert [by_line[("two/a", n)] for n in range(1, 7)] == [
        ("training", 1), ("training", 1), ("training", 2), ("checkpoint_saving", 2), ("training", 3), ("training", 4)]
    # a file without timestamps keeps its own stage and has no iteration
    assert [by_line[("two/b", n)] for n in (1, 2)] == [("model_loading", None)] * 2
    # the untimed save marker is on the timeline at the time of the line above it (t=20)
    assert [by_line[("two/c", n)] for n in (1, 2, 3)] == [("checkpoint_saving", 2), ("training", 4), ("training", 4)]
    ts_next = {(r.file, r.line_no): r.ts_next for r in staged}
    assert (ts_next[("one/r0", 4)], ts_next[("two/a", 4)]) == (_ts(5), _ts(30))
    assert ts_next[("one/r0", 6)] is None and ts_next[("two/c", 3)] is None
    assert len(staged) == len(rows)


def test_clock_offsets_come_from_start_up_lines_not_from_teardown_minutes_apart(spark):
    # node b's clock is 3 s ahead. Its ranks time out on a dead peer 540 s after node a's
    # (HCCL's 120 s socket wait against a 600 s notify wait): the same teardown lines, minutes
    # apart, outnumber the start-up lines both print together
    from l4spark.temporal.lines import node_clock_offsets

    teardown = ["Traceback (most recent call last):", "RuntimeError: HCCL error", "ChildFailedError:",
                "failed (exitcode: -6) local_rank: 0"]
    rows = []
    for node, skew, broke in (("a", 0.0, 60.0), ("b", 3.0, 600.0)):
        rows += [("j", node, 0, f"{node}/r", 1, _ts(0 + skew), "INFO", "E_args", "using world size: 8", None, None),
                 ("j", node, 0, f"{node}/r", 2, _ts(1 + skew), "INFO", "E_init", "HCCL init success", None, None)]
        rows += [("j", node, 0, f"{node}/r", 3 + k, _ts(broke + skew + k / 10), "ERROR", f"E_td{k}", line, None, None)
                 for k, line in enumerate(teardown)]
    rows += [("j", "a", 0, "a/r", 10 + k, _ts(10 + 5 * k), None, "E_it", f" iteration {k:8d}/     100 |", None, None)
             for k in range(1, 8)]
    offsets = {r.node: r.offset_s for r in node_clock_offsets(spark.createDataFrame(rows, SCHEMA)).collect()}
    assert offsets == {"a": 0.0, "b": 3.0}


def test_failure_stage_and_iteration(spark):
    staged = with_stage_and_iteration(_job(spark, skew=0.0))
    assert failure_stages(staged).collect()[0].failure_stage == "training"
    iterations, progress = analyse_iterations(staged)
    point = job_failure_points(staged, progress).collect()[0]
    assert (point.failure_stage, point.failure_iteration) == ("training", 6)
    rows = {r.iteration: (r.anomalous, r.reason) for r in iterations.collect()}
    assert rows[6] == (True, "stopped") and not any(a for k, (a, _) in rows.items() if k != 6)


def test_next_in_file_is_the_first_value_at_or_below_each_line(spark):
    """The bottom-up running window gives what a frame from the line to the file's end gives."""
    from pyspark.sql import Window

    from l4spark.temporal.lines import next_in_file

    rows = [("j", "a", 1, None), ("j", "a", 2, 5), ("j", "a", 3, None), ("j", "a", 4, 7), ("j", "a", 5, None),
            ("j", "b", 1, None), ("j", "b", 2, None), ("k", "a", 1, 3), ("k", "a", 2, None)]
    lines = spark.createDataFrame(rows, "job_id string, file string, line_no long, value long")
    to_end = (Window.partitionBy("job_id", "file").orderBy("line_no")
              .rowsBetween(Window.currentRow, Window.unboundedFollowing))
    got = (lines.select("job_id", "file", "line_no", next_in_file("value").alias("running"),
                        F.first("value", ignorenulls=True).over(to_end).alias("to_end"))
           .orderBy("job_id", "file", "line_no").collect())
    assert [r.running for r in got] == [r.to_end for r in got] == [5, 5, 7, 7, None, None, None, 3, None]


def test_marks_carried_by_the_staged_lines_are_the_markers_matched_again(spark):
    from l4spark.temporal.lines import MARK_COLUMNS, iteration_marker, named_stage_marker, stage_marker

    conf = TemporalConfig()
    events = _job(spark, skew=30.0)
    marked = with_stage_and_iteration(events, conf, with_marks=True).localCheckpoint()
    again = marked.select("file", "line_no", "named_mark", "progress_mark",
                          named_stage_marker(conf).alias("named"),
                          (stage_marker(conf).isNotNull() | iteration_marker(conf).isNotNull()).alias("progress"))
    rows = again.collect()
    # a stage marker, an iteration line that no stage rule names, and a plain line are all there
    assert any(r.named is not None for r in rows)
    assert any(r.progress and r.named is None for r in rows) and any(not r.progress for r in rows)
    assert [(r.named_mark, r.progress_mark) for r in rows] == [(r.named, r.progress) for r in rows]
    plain = with_stage_and_iteration(events, conf)
    key = ["file", "line_no"]
    assert marked.drop(*MARK_COLUMNS).orderBy(*key).collect() == plain.orderBy(*key).collect()
    # the steps reading the carried marks agree with those matching the rules themselves
    assert failure_stages(marked, conf).collect() == failure_stages(plain, conf).collect()
    iterations, progress = analyse_iterations(marked, conf=conf)
    iterations_plain, progress_plain = analyse_iterations(plain, conf=conf)
    assert iterations.orderBy("iteration").collect() == iterations_plain.orderBy("iteration").collect()
    assert (job_failure_points(marked, progress, conf).collect()
            == job_failure_points(plain, progress_plain, conf).collect())
    from l4spark.diagnosis.assemble import job_timing, prepare_lines
    from l4spark.diagnosis.config import DiagnosisConfig
    from l4spark.temporal.lines import node_clock_offsets

    offsets = node_clock_offsets(events, conf)
    lines, lines_plain = (prepare_lines(staged, offsets, DiagnosisConfig(), conf) for staged in (marked, plain))
    assert (lines.drop(*MARK_COLUMNS).orderBy(*key).collect() == lines_plain.orderBy(*key).collect())
    assert job_timing(lines, conf).collect() == job_timing(lines_plain, conf).collect()


def _training_job(job_id: str, n: int, *, finished: bool = False, blip: int | None = None,
                  crash: bool = False, stride: int = 1) -> list[tuple]:
    """One rank printing a progress line every ``stride`` iterations (10 s each) and a timer line
    after it; an ERROR that the job runs past at iteration ``blip``; a crash or a finish at the end."""
    rows, line = [], 0

    def add(t, level, event, message):
        nonlocal line
        line += 1
        rows.append((job_id, "a", 0, f"{job_id}/a/r0", line, _ts(t), level, event, message, None, None))

    add(0, "INFO", "E_train", "training ...")
    for i in range(1, n + 1):
        if i == blip:
            add(10 * i - 6, "ERROR", "E_retry", "upload failed (attempt 1/5), retrying")
            add(10 * i - 5, "ERROR", "E_timeout", "ReadTimeoutError: read timed out")
            add(10 * i - 4, "INFO", "E_uploaded", "upload succeeded on attempt 2")
        if i % stride == 0:
            add(10 * i, None, "E_it", f" iteration {i:8d}/ 1000 | lm loss: 1.0 |")
            add(10 * i, None, "E_timer", "forward-backward ...: (1.0, 2.0)")
    if crash:
        add(10 * n + 4, "ERROR", "E_ecc", "CUDA error: uncorrectable ECC error encountered")
        add(10 * n + 4, None, "E_frame", "frame #0: c10::Error::Error")
    if finished:
        add(10 * n + 2, None, "E_tail", "saving the final model")
        add(10 * n + 3, None, "E_done", "[after training is done] datetime: 2026-11-02")
    return rows


def test_iterations_threshold_recovered_noise_and_stop(spark):
    rows = (_training_job("crashed", 40, blip=12, crash=True)
            + _training_job("finished", 40, blip=20, finished=True))
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    # no history: every event is a candidate (the cross-job filter keeps everything)
    candidates = staged.select("job_id", "event_id").distinct()
    iterations, progress = analyse_iterations(staged, candidates, TemporalConfig())
    assert dict(iterations.dtypes)["threshold"] == "double"
    got = {(r.job_id, r.iteration): r for r in iterations.collect()}
    for job in ("crashed", "finished"):
        scores = np.array([r.score for (j, i), r in got.items() if j == job and i >= 4])
        thresholds = {r.threshold for (j, _), r in got.items() if j == job}
        assert len(thresholds) == 1
        assert thresholds.pop() == pytest.approx(min(scores.mean() - 3 * scores.std(), scores.mean() - 0.05), abs=1e-5)
    # the retried upload: the job ran on at its pace: not anomalous (though below the line)
    assert got[("crashed", 12)].score < got[("crashed", 12)].threshold
    assert not got[("crashed", 12)].anomalous and not got[("finished", 20)].anomalous
    assert (got[("crashed", 41)].anomalous, got[("crashed", 41)].reason) == (True, "stopped")
    assert sorted(got[("crashed", 41)].event_ids) == ["E_ecc", "E_frame"]
    # a finished job: its wind-down lines are no iteration, nothing is anomalous
    assert max(i for j, i in got if j == "finished") == 40
    assert not any(r.anomalous for (j, _), r in got.items() if j == "finished")
    points = {r.job_id: (r.failure_stage, r.failure_iteration) for r in job_failure_points(staged, progress).collect()}
    assert points == {"crashed": ("training", 41), "finished": ("finished", None)}


def test_strided_progress_refines_the_stopped_iteration(spark):
    # a progress line every 5 iterations; the crash lines come 24 s after iteration 40 ended
    rows = _training_job("strided", 40, stride=5)
    rows.append(("strided", "a", 0, "strided/a/r0", 999, _ts(424), "ERROR", "E_ecc", "CUDA error: ECC error", None, None))
    # a hang: the watchdog gives up 600 s after the collective started, 34 s after iteration 40 ended
    rows += _training_job("hung", 40, stride=5)
    rows.append(("hung", "a", 0, "hung/a/r0", 999, _ts(1034), None, "E_wd",
                 "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
                 "Timeout(ms)=600000) ran for 600000 milliseconds before timing out.", None, None))
    # the same hang logged by PyTorch < 2.2: the watchdog line has no time; the launcher's timed
    # teardown 2 s later bounds it (no later than 1036 s: began at 436 s at the latest)
    rows += _training_job("hung_untimed", 40, stride=5)
    rows += [("hung_untimed", "a", 0, "hung_untimed/a/r0", 999, None, None, "E_wd",
              "[E ProcessGroupNCCL.cpp:523] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL("
              "SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.",
              None, None),
             ("hung_untimed", "a", 0, "hung_untimed/a/r0", 1000, _ts(1036), "WARN", "E_td",
              "Sending process 4242 closing signal SIGTERM", None, None)]
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    iterations, progress = analyse_iterations(staged, staged.select("job_id", "event_id").distinct())
    got = {r.iteration: r for r in iterations.where("job_id = 'strided'").collect()}
    # rows are intervals 1, 6, 11, ...; the stopped one is labelled by time: 40 + 1 + 24 s / 10 s
    assert sorted(got) == [5, 6, 11, 16, 21, 26, 31, 36, 43]
    assert [i for i, r in got.items() if r.anomalous] == [43]
    failure = {r.job_id: (r.stalled, r.failure_iteration) for r in progress.collect()}
    # the hung job stalled; without the watchdog's elapsed time it would be the middle, 43
    assert failure == {"strided": (False, 43), "hung": (True, 44), "hung_untimed": (True, 44)}


def test_failure_time_comes_from_every_rank_not_only_the_sampled_ones(spark):
    from l4spark.temporal.config import TemporalConfig

    # rank 0 prints progress every 5 iterations (10 s each); ranks 1-3 print no progress, and only
    # rank 3, which the sequences' sample (max_ranks 2: ranks 0 and 2) leaves out, logs the crash
    # 14 s after iteration 40 ended: iteration 42, not the interval's middle (43)
    rows = _training_job("j", 40, stride=5)
    for rank in (1, 2, 3):
        rows += [("j", "b", rank, f"j/b/r{rank}", k + 1, _ts(5 + 100 * k), "INFO", "E_b", "step timer", None, None)
                 for k in range(4)]
    rows.append(("j", "b", 3, "j/b/r3", 9, _ts(414), "ERROR", "E_ecc", "CUDA error: ECC error", None, None))
    conf = TemporalConfig(max_ranks=2)
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA), conf)
    _, progress = analyse_iterations(staged, staged.select("job_id", "event_id").distinct(), conf)
    assert [(r.last_iteration, r.failure_iteration) for r in progress.collect()] == [(40, 42)]


def test_progress_lines_of_another_node_are_read_on_the_jobs_clock(spark):
    """Megatron-DeepSpeed: the last rank (node ``last``, the reference: most lines) prints the
    progress line without a date every 10 iterations; rank 0 (node ``zero``, clock 7 s ahead) DeepSpeed's dated
    ``step=N`` line. Iterations take 2 s; a third node logs the crash 13 s after step 30 ended:
    iteration 37. Read on rank 0's own clock, step 30 seems to end 7 s later: 34."""
    rows, lines = [], {"last": 0, "zero": 0, "c": 0}

    def add(node, t, level, event, message):
        lines[node] += 1
        rows.append(("j", node, {"last": 15, "zero": 0, "c": 8}[node], f"j/{node}", lines[node],
                     None if t is None else _ts(t + (7.0 if node == "zero" else 0.0)), level, event, message, None, None))

    for node in ("last", "zero", "c"):   # start-up lines every node prints at once: the clock offsets
        add(node, 0.0, "INFO", "E_args", "using world size: 16")
        add(node, 1.0, "INFO", "E_init", "NCCL init done")
    for i in range(1, 31):
        if i % 10 == 0:
            add("zero", 2.0 * i, "INFO", "E_step", f"[Rank 0] step={i}, skipped=0, lr=[0.0002], mom=[(0.9, 0.95)]")
            add("last", None, None, "E_it", f" iteration {i:8d}/ 1000 | lm loss: 1.0 |")
            add("last", None, None, "E_timer", "times across ranks (ms):")
    add("c", 73.0, "ERROR", "E_ecc", "CUDA error: uncorrectable ECC error encountered")
    frame = spark.createDataFrame(rows, SCHEMA)
    failure = {}
    for on_job_clock in (True, False):
        conf = TemporalConfig(progress_on_job_clock=on_job_clock)
        staged = with_stage_and_iteration(frame, conf)
        _, progress = analyse_iterations(staged, staged.select("job_id", "event_id").distinct(), conf)
        failure[on_job_clock] = [(r.last_iteration, r.failure_iteration) for r in progress.collect()]
    assert failure == {True: [(30, 37)], False: [(30, 34)]}


def test_a_time_a_line_states_dates_when_the_job_broke(spark):
    """srun without a wrapper: the crash lines have no timestamp, and the only time after the last
    progress line (iteration 40, t = 400 s; 10 s an iteration, a line every 5) is the one Slurm's
    cancel notice states, 14 s later: iteration 42. Without it, the interval's middle: 43."""
    from l4spark.spatial.config import SpatialConfig

    rows = _training_job("j", 40, stride=5)
    rows += [("j", "a", 0, "j/a/r0", 900 + k, None, None, event, message, None, None) for k, (event, message) in enumerate([
        ("E_oom", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4801018.0 cgroup."),
        ("E_cancel", "slurmstepd: error: *** STEP 4801018.0 ON gpu-h100-113 CANCELLED AT 2026-11-02T12:06:54 ***")])]
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    indicating = staged.select("job_id", "event_id").distinct()
    failure = {}
    for patterns in (SpatialConfig().stated_time_patterns, ()):
        _, progress = analyse_iterations(staged, indicating, TemporalConfig(), stated_time_patterns=patterns)
        failure[bool(patterns)] = [(r.last_iteration, r.failure_iteration) for r in progress.collect()]
    assert failure == {True: [(40, 42)], False: [(40, 43)]}


def _grad_norm_outcomes(spark, nan_at) -> dict:
    """A Megatron-DeepSpeed-like job: a progress line every 10 iterations of 10 s, each under a 40-line
    per-rank timer block, printing ``grad norm: nan`` at the iterations ``nan_at`` says, until a crash
    at iteration 101. Per ``nonfinite_progress_followed`` (on, off): the (changed_from,
    failure_iteration) rows of ``analyse_iterations``."""
    rows, line = [], 0
    for i in range(10, 101, 10):
        norm = "nan" if nan_at(i) else "0.512"
        rows.append(("j", "a", 0, "j/a/r0", line := line + 1, _ts(10 * i), None, f"E_it_{norm}",
                     f" iteration {i:8d}/ 1000 | consumed tokens: 1024 | grad norm: {norm} |", None, None))
        rows += [("j", "a", 0, "j/a/r0", line := line + 1, None, None, f"E_t{k}", f"    rank {k:2d}: 182.5", None, None)
                 for k in range(40)]
    rows.append(("j", "a", 0, "j/a/r0", line + 1, _ts(1004), "ERROR", "E_exit", "RuntimeError: NCCL communicator was aborted",
                 None, None))
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    indicating = staged.select("job_id", "event_id").distinct()
    outcomes = {}
    for followed in (True, False):
        _, progress = analyse_iterations(staged, indicating, TemporalConfig(nonfinite_progress_followed=followed))
        outcomes[followed] = [(r.changed_from, r.failure_iteration) for r in progress.collect()]
    return outcomes


def test_a_progress_line_printing_nan_for_good_is_followed_whatever_the_drop(spark):
    """Megatron-DeepSpeed leaves a NaN loss out of its progress line and prints ``grad norm: nan``:
    from iteration 61 on, every progress line prints it. One changed line among 41 moves an
    interval's score less than ``min_drop``; the nonfinite line still starts a lasting change."""
    failure = _grad_norm_outcomes(spark, lambda i: i > 60)
    assert failure[False] == [(None, 101)]
    assert failure[True][0][0] == 61 and 61 <= failure[True][0][1] <= 70


def test_a_nan_the_job_got_over_places_nothing(spark):
    """Mixed precision skips a step on a gradient overflow and the progress line of that step prints
    ``grad norm: nan`` (Megatron-LM and DeepSpeed with a dynamic loss scale; HF Trainer's
    ``'grad_norm': nan``) once in a while, and the next lines are finite again. That is no failure:
    the job that crashed at iteration 101 broke there, with the rule on or off."""
    assert _grad_norm_outcomes(spark, lambda i: i in (30, 70)) == {True: [(None, 101)], False: [(None, 101)]}


def test_counted_progress_lines_are_numbered(spark):
    """HF Trainer without tqdm: log dicts every logging_steps from the step training resumed at."""
    lines = [(1, 0, "logging_steps=10,"), (2, 1, "***** Running training *****"),
             (3, 1, "  Continuing training from global step 2000")]
    lines += [(3 + k, 1 + 10 * k, "{'loss': 1.5, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.5}")
              for k in range(1, 4)]
    lines.append((7, 35, "RuntimeError: CUDA error: an illegal memory access was encountered"))
    rows = [("hf", "a", 0, "hf/a/r0", n, _ts(t), None, f"E{n}", m, None, None) for n, t, m in lines]
    rows.append(("hf", "b", 1, "hf/b/r1", 1, _ts(25), None, "E_b", "a line of another rank", None, None))
    staged = {(r.file, r.line_no): (r.stage, r.iteration)
              for r in with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA)).collect()}
    assert [staged[("hf/a/r0", n)][1] for n in range(4, 8)] == [2010, 2020, 2030, 2031]
    assert staged[("hf/b/r1", 1)] == ("training", 2021)  # by time: after the second dict line
    # without the interval line, nothing is numbered
    no_interval = with_stage_and_iteration(spark.createDataFrame(rows[1:], SCHEMA))
    assert no_interval.where("iteration is not null").count() == 0


def test_slowdown_and_lasting_change_fail_in_training(spark):
    staged = with_stage_and_iteration(spark.createDataFrame(_training_job("s", 10, finished=True)
                                                            + _training_job("c", 10, finished=False), SCHEMA))
    progress = spark.createDataFrame(
        [("s", 10, False, 7, None, 7, None), ("c", 10, False, None, 5, 5, None)],
        "job_id string, last_iteration long, stalled boolean, slowdown_from long, changed_from long, "
        "failure_iteration long, first_anomalous long")
    # "s" finished: a slowdown does not make it failed; "c" ended in training anyway
    points = {r.job_id: (r.failure_stage, r.failure_iteration) for r in job_failure_points(staged, progress).collect()}
    assert points == {"s": ("finished", None), "c": ("training", 5)}
    cut = staged.drop("ts_next").where(~((F.col("job_id") == "c") & (F.col("line_no") > 15)))  # "c" ends at 7
    saving = cut.unionByName(spark.createDataFrame(
        [("c", "a", 0, "c/a/r0", 16, _ts(75), None, "E_save", "saving checkpoint at iteration 7 to /ckpt", None, None)],
        SCHEMA))
    staged = with_stage_and_iteration(saving)
    assert {r.job_id: r.failure_stage for r in failure_stages(staged).collect()}["c"] == "checkpoint_saving"
    points = {r.job_id: (r.failure_stage, r.failure_iteration) for r in job_failure_points(staged, progress).collect()}
    assert points["c"] == ("training", 5)  # the change began in training


def test_diagnosis_iterations_keep_threshold_and_reason(spark, test_config):
    from l4spark.io.storage import read_table, write_job_rows

    rows = spark.createDataFrame(
        [("j1", 1, 1.0, False, [], 0.7, None), ("j1", 2, 0.2, True, ["E1"], 0.7, "dtw"),
         ("j2", 1, None, None, None, None, None)],
        "job_id string, iteration long, score double, anomalous boolean, event_ids array<string>, "
        "threshold double, reason string")
    write_job_rows(rows, test_config.storage, "diagnosis_iterations", ["j1", "j2"])
    back = read_table(spark, test_config.storage, "diagnosis_iterations")
    assert {"threshold", "reason"} <= set(back.columns)
    assert sorted((r.job_id, r.iteration, r.threshold) for r in back.collect()) == [
        ("j1", 1, 0.7), ("j1", 2, 0.7), ("j2", 1, None)]


def test_leave_one_out_pool_never_holds_the_job_itself(spark):
    from l4spark.evaluation.temporal_eval import _leave_one_out, _untagged
    from l4spark.crossjob.normal_pool import NormalPoolConfig, build_pool

    settings = '{"model": "m", "framework": "megatron"}'
    ledger = spark.createDataFrame(
        [(job, event, event.lower(), 1, 1, settings, "run") for job, events in
         (("a", ["E_common", "E_only_a"]), ("b", ["E_common"]), ("c", ["E_common"]))
         for event in events],
        "job_id string, event_id string, masked string, n_lines long, job_nodes long, settings string, parse_run_id string")
    copies, groups = _leave_one_out(spark, ledger, NormalPoolConfig())
    pool = build_pool(copies, groups)
    for held_out, others in (("a", 2), ("b", 2)):
        mine = _untagged(pool, f"|loo:{held_out}").where("level = 0").collect()
        assert {r.group_jobs for r in mine} == {others}
        events = {r.event_id: r.n_jobs for r in mine}
        # a's own event is in no pool of a; it is in b's (a is b's history)
        assert events == ({"E_common": 2} if held_out == "a" else {"E_common": 2, "E_only_a": 1})


def test_end_to_end_generated_fleet(spark, test_config, tmp_path):
    from l4spark.evaluation.labels import load_labels
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet
    from l4spark.io.storage import read_table

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


@pytest.mark.parametrize("nan_from", [43, 41])
def test_lasting_change_is_placed_by_the_counted_bad_iterations(spark, nan_from):
    """Megatron counts NaN iterations per log interval: the loss turned NaN at iteration 43, and
    the progress line of 45 (a line every 5 iterations) says 3 of its interval were NaN. Session
    45: at 41, the interval's first, the line says 5 of 5, and 41 it is (not the middle)."""
    rows = [r for r in _training_job("nan", 40, stride=5)]
    line = len(rows)
    for i in range(45, 71, 5):
        line += 1
        n_nan = min(5, i - nan_from + 1)
        rows.append(("nan", "a", 0, "nan/a/r0", line, _ts(10 * i), None, "E_it_nan",
                     f" iteration {i:8d}/ 1000 | lm loss: nan | number of nan iterations: {n_nan:3d} |", None, None))
    rows.append(("nan", "a", 0, "nan/a/r0", line + 1, _ts(704), None, "E_exit",
                 f"Detected NaN loss for {70 - nan_from + 1} consecutive iterations at iteration 70, exiting.", None, None))
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    iterations, progress = analyse_iterations(staged, staged.select("job_id", "event_id").distinct())
    flagged = {r.iteration: r.reason for r in iterations.collect() if r.anomalous}
    assert flagged.get(nan_from) == "changed" and min(flagged) == nan_from
    assert [(r.changed_from, r.failure_iteration) for r in progress.collect()] == [(41, nan_from)]


def test_the_pace_of_earlier_timed_progress_lines_places_a_stop_after_untimed_ones():
    """Megatron-DeepSpeed: its progress line (every 10 steps) has no date, DeepSpeed's ``step=N``
    line (every 100) has. 90 s a step; the last progress line is 2480's, the last dated one 2400's;
    the GPU falls off the bus 88.5 steps after 2400: iteration 2489, not the interval's middle (2485).
    An error more than an interval after 2480's line was due places nothing (the middle)."""
    marks = [(i, None) for i in range(2010, 2481, 10)] + [(i, 1000.0 + 90.0 * (i - 2000)) for i in (2100, 2200, 2300, 2400)]
    anchor_t = 1000.0 + 90.0 * 400
    placed = analyse_progress(marks, last_t=anchor_t + 90 * 95, first_error_t=anchor_t + 88.5 * 90)
    assert (placed.last_iteration, placed.failure_iteration) == (2480, 2489)
    off = analyse_progress(marks, last_t=anchor_t + 90 * 95, first_error_t=anchor_t + 88.5 * 90,
                           conf=TemporalConfig(pace_from_earlier_marks=False))
    assert off.failure_iteration == 2485
    late = analyse_progress(marks, last_t=anchor_t + 90 * 200, first_error_t=anchor_t + 80 * 90 + 12 * 90)
    assert late.failure_iteration == 2485


def test_untimed_progress_bars_are_paced_by_their_own_clock():
    """HF Trainer's tqdm bars carry no timestamp but their elapsed time: a throttled node's
    slowdown from step 67 shows on that clock."""
    import re

    from l4spark.temporal.config import DEFAULT_PROGRESS_CLOCK_RULES

    rule = re.compile(DEFAULT_PROGRESS_CLOCK_RULES[0])
    assert rule.search(" 99%|█████████ | 30792/30794 [38:46:03<13:21, 400.65s/it]").groups() == ("38", "46", "03")
    assert rule.search("  3%|▎         | 100/3000 [01:40<48:20,  1.00s/it]").groups() == (None, "01", "40")
    elapsed, paced = 0.0, []
    for i in range(1, 121):
        elapsed += 10.0 if i < 67 else 25.0
        paced.append((i, elapsed))
    untimed = [(i, None) for i in range(1, 121)]
    assert analyse_progress(untimed, last_t=None, first_error_t=None).slowdown_from is None
    progress = analyse_progress(untimed, last_t=None, first_error_t=None, paced=paced)
    assert (progress.slowdown_from, progress.failure_iteration, progress.stalled) == (67, 67, False)


def test_temporal_events_are_the_events_of_anomalous_iterations_scored_by_the_lowest():
    import pandas as pd

    from l4spark.temporal.jobs import temporal_events

    iterations = pd.DataFrame({
        "job_id": ["j", "j", "j", "k"], "iteration": [3, 5, 7, 1], "score": [0.2, 0.1, np.nan, 0.5],
        "anomalous": [True, True, False, None],
        "event_ids": [np.array(["e1", "e2"]), np.array(["e1"]), np.array(["e9"]), np.array(["e4"])]})
    events = temporal_events(iterations)
    assert events.to_dict("records") == [
        {"job_id": "j", "event_id": "e1", "score": 0.9, "iteration": 3, "stage": "training"},
        {"job_id": "j", "event_id": "e2", "score": 0.8, "iteration": 3, "stage": "training"}]
    assert list(temporal_events(iterations.iloc[0:0]).columns) == ["job_id", "event_id", "score", "iteration", "stage"]


def test_a_straggler_that_slows_every_step_by_a_third_is_a_slowdown_from_its_onset():
    """A straggler GPU computing 1.4x slower (compute ~85% of a step) stretches every step of the
    job by ~1.34x from iteration 53 until the job is cancelled: no error, the job just runs
    slower. Megatron logs every 5 iterations, with a few percent of jitter. The onset is the
    failure iteration; a slowdown had to exceed 1.5x before (issue #18: most stragglers of the
    extended simulator, 1.2-1.7x, got the iteration where the job was cancelled instead)."""
    import random

    rng = random.Random(5)
    marks, t = [], 0.0
    for i in range(1, 121):
        t += (1.34 if i >= 53 else 1.0) * 30.0 * (1 + rng.uniform(-0.03, 0.03))
        if i % 5 == 0:
            marks.append((i, t))
    progress = analyse_progress(marks, last_t=t + 10.0, first_error_t=None)
    assert progress.slowdown_from is not None and abs(progress.slowdown_from - 53) <= 1
    assert progress.failure_iteration == progress.slowdown_from
    # steady jitter of +-10% is not a slowdown
    steady, t = [], 0.0
    for i in range(1, 121):
        t += 30.0 * (1 + rng.uniform(-0.1, 0.1))
        if i % 5 == 0:
            steady.append((i, t))
    assert analyse_progress(steady, last_t=t + 10.0, first_error_t=None).slowdown_from is None


def test_a_straggler_logged_every_step_to_the_second_is_a_slowdown_from_its_onset():
    """MindSpeed/Megatron printing a progress line every iteration, stamped to the second: a
    10.6 s step becomes 13.4 s from iteration 300 (a 1.26x straggler, fresh seed 14013). Step by
    step the stamps read 10-11 s, then 13-14 s: against a 1.2x factor the rounding hides it; over
    spans of 20 s and more it shows, and the onset is placed at 300. Two slow steps among normal
    ones are still no slowdown."""
    import math
    import random

    rng = random.Random(14013)

    def stamped(slow) -> list[tuple[int, float]]:
        marks, t = [], 1_700_000_000.3
        for i in range(1, 601):
            t += (13.4 if slow(i) else 10.6) * (1 + rng.uniform(-0.02, 0.02))
            marks.append((i, float(math.floor(t))))
        return marks

    marks = stamped(lambda i: i >= 300)
    progress = analyse_progress(marks, last_t=marks[-1][1] + 5.0, first_error_t=None)
    assert progress.slowdown_from is not None and abs(progress.slowdown_from - 300) <= 1
    assert progress.stride == 1  # the log interval is still one iteration
    blips = stamped(lambda i: i in (200, 201))
    assert analyse_progress(blips, last_t=blips[-1][1] + 5.0, first_error_t=None).slowdown_from is None


def _megatron_ramp(onset: int, seed: int) -> tuple[list, list, float]:
    """A Megatron job logging every 0.8 s iteration with its own ``elapsed time per iteration
    (ms)``, stamped to the second; a thermal throttle from ``onset`` makes steps 17% slower at once,
    then slower and slower (fresh 36031's ``pt-llama2-7b-...-1ad774``: 805 ms, then 942 ms at 12367,
    1.9 s 80 iterations later). Returns (marks, stated readings, the last time)."""
    import math
    import random

    rng = random.Random(seed)
    marks, stated, t = [], [], 1_794_000_000.4
    for i in range(1, 301):
        step = 0.805 * (1 + rng.uniform(-0.02, 0.02))
        if i >= onset:
            step *= 1.17 + 0.015 * (i - onset)
        t += step
        marks.append((i, float(math.floor(t))))
        stated.append((i, round(step * 1000.0, 1) / 1000.0))
    return marks, stated, t


def test_a_slowdown_is_paced_by_the_time_per_iteration_the_progress_line_states():
    """Issue #18: stamps to the second read a 0.8 s step as 0, 1 or 2 s; over 20 s spans the ramp
    shows only once it is 2.3x, 80 iterations late. The progress line states its own pace
    (Megatron-LM's ``elapsed time per iteration (ms)``): the onset is placed where it began."""
    marks, stated, t = _megatron_ramp(200, 36031)
    late = analyse_progress(marks, last_t=t + 1.0, first_error_t=None)
    assert late.slowdown_from is not None and late.slowdown_from - 200 > 5
    paced = analyse_progress(marks, last_t=t + 1.0, first_error_t=None, stated=stated)
    assert paced.slowdown_from is not None and abs(paced.slowdown_from - 200) <= 1
    assert paced.failure_iteration == paced.slowdown_from
    # the same pace without a slowdown stays none; one reading alone paces nothing
    steady, calm, t = _megatron_ramp(10_000, 36033)
    assert analyse_progress(steady, last_t=t + 1.0, first_error_t=None, stated=calm).slowdown_from is None
    assert analyse_progress(marks, last_t=t + 1.0, first_error_t=None, stated=stated[-1:]).slowdown_from == \
        late.slowdown_from


def test_the_stated_pace_is_read_from_megatrons_progress_line(spark):
    """The Spark step reads ``pace_rules`` from the progress lines themselves (both Megatron-LM
    wordings: ``941.7 |`` and a fork's ``941.7/933.2 |``) and places the ramp's onset; with
    ``pace_rules = []`` it falls back to the stamps and is late."""
    marks, stated, _ = _megatron_ramp(200, 36035)
    rows = []
    for k, ((i, t), (_, seconds)) in enumerate(zip(marks, stated)):
        shown = f"{seconds * 1000:.1f}" if i % 2 else f"{seconds * 1000:.1f}/{seconds * 1000:.1f}"
        rows.append(("mega", "a", 0, "mega/a/r0", k + 1, dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(tzinfo=None),
                     None, "E_it", f" iteration {i:8d}/     300 | consumed samples: {256 * i:12d} | "
                     f"elapsed time per iteration (ms): {shown} | learning rate: 1.5E-05 |", None, None))
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    candidates = staged.select("job_id", "event_id").distinct()
    got = {}
    for rules in (TemporalConfig().pace_rules, ()):
        _, progress = analyse_iterations(staged, candidates, TemporalConfig(pace_rules=rules))
        got[bool(rules)] = progress.collect()[0].slowdown_from
    assert got[True] is not None and abs(got[True] - 200) <= 1
    assert got[False] is None or got[False] - 200 > 5


def test_a_lasting_change_is_placed_inside_its_interval_by_the_time_of_its_first_line(spark):
    """DeepSpeed skips every step on overflow from iteration 303 (a progress line and a timer
    line every 10 iterations, 10 s each): `OVERFLOW! ... Skipping step` is printed in each
    skipped step, the first 29 s after iteration 300's line, so the change began in 301 + 2 =
    303, not at the interval's first iteration (301). Without a timed line (untimed progress
    and overflow lines), the interval's middle, 305. Session 20: fresh 20011's DeepSpeed NaN 593
    was reported as 591."""
    def overflow_job(job_id: str, timed: bool) -> list[tuple]:
        rows = _training_job(job_id, 300, stride=10)
        if not timed:
            rows = [r[:5] + (None,) + r[6:] for r in rows]
        line = len(rows)

        def add(t, event, message):
            nonlocal line
            line += 1
            rows.append((job_id, "a", 0, f"{job_id}/a/r0", line, _ts(t) if timed else None, None, event, message,
                         None, None))

        for i in range(301, 361):
            if i >= 303:
                add(10 * i - 1, "E_overflow", "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, "
                    "reducing to 1")
            if i % 10 == 0:
                add(10 * i, "E_it", f" iteration {i:8d}/ 1000 | lm loss: 1.0 |")
                add(10 * i, "E_timer", "forward-backward ...: (1.0, 2.0)")
        return rows

    staged = with_stage_and_iteration(spark.createDataFrame(overflow_job("timed", True) + overflow_job("untimed", False),
                                                            SCHEMA))
    candidates = staged.select("job_id", "event_id").distinct()
    results = {}
    for placed in (True, False):
        conf = TemporalConfig(changed_placed_in_interval=placed)
        iterations, progress = analyse_iterations(staged, candidates, conf)
        changed = {r.job_id: r.iteration for r in iterations.where("reason = 'changed'").collect()}
        results[placed] = (changed, {r.job_id: (r.changed_from, r.failure_iteration) for r in progress.collect()})
    assert results[True] == ({"timed": 303, "untimed": 305}, {"timed": (301, 303), "untimed": (301, 305)})
    assert results[False] == ({"timed": 301, "untimed": 301}, {"timed": (301, 301), "untimed": (301, 301)})


def test_a_slowdown_is_confirmed_by_the_interval_the_job_was_cancelled_in():
    """Throttled from iteration 91 (46 s -> 90 s a step), a progress line every 5 iterations:
    one slow closed interval (86-90 is normal, 91-95 slow), then the scheduler cancels the job
    7.5 min into the next interval, which would have ended at 230 s at the usual pace (fresh
    20017: label 2091, reported 2100). A job whose last line came long after (stalled: a hang),
    or that did not end while training, is not read so."""
    marks, t = [], 0.0
    for i in range(1, 96):
        t += 46.0 if i < 91 else 90.0
        if i % 5 == 0:
            marks.append((i, t))
    cancelled = analyse_progress(marks, last_t=t + 450.0, first_error_t=t + 450.0, open_interval=True)
    assert (cancelled.stalled, cancelled.slowdown_from) == (False, 91) and cancelled.failure_iteration == 91
    assert analyse_progress(marks, last_t=t + 450.0, first_error_t=t + 450.0,
                            conf=TemporalConfig(slowdown_open_interval=False), open_interval=True).slowdown_from is None
    assert analyse_progress(marks, last_t=t + 450.0, first_error_t=t + 450.0).slowdown_from is None
    hung = analyse_progress(marks, last_t=t + 1800.0, first_error_t=t + 1800.0, open_interval=True)
    assert hung.stalled and hung.slowdown_from is None
    # the open interval still within the usual pace: one slow interval is no slowdown
    assert analyse_progress(marks, last_t=t + 200.0, first_error_t=t + 200.0, open_interval=True).slowdown_from is None


def _two_rank_job(job_id: str, width: int = 16) -> tuple[list[tuple], Callable[..., None]]:
    """Rows of a job of two ranks (rank 0 on node a, rank 1 on node b) and ``add(at, message,
    rank=0)`` appending a line (``at`` in seconds, None for an untimed line; its event id from
    the message's first ``width`` characters)."""
    rows: list[tuple] = []

    def add(at, message, rank=0):
        rows.append((job_id, "ab"[rank], rank, f"{job_id}/{'ab'[rank]}/r{rank}", len(rows) + 1,
                     None if at is None else _ts(at), None, f"E_{message[:width]}", message, None, None))

    return rows, add


def _stop_with_and_without(spark, rows: list[tuple], setting: str) -> dict[bool, list[tuple]]:
    """(last_iteration, failure_iteration) of each job, with the temporal ``setting`` on and off
    (every event a candidate)."""
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    candidates = staged.select("job_id", "event_id").distinct()
    out = {}
    for on in (True, False):
        _, progress = analyse_iterations(staged, candidates, TemporalConfig(**{setting: on}))
        out[on] = [(r.last_iteration, r.failure_iteration) for r in progress.collect()]
    return out


def test_untimed_log_dicts_are_paced_by_the_timed_checkpoint_saves(spark):
    """HF Trainer without tqdm bars: `{'loss': ...}` every 10 steps carries no time, so nothing
    placed a crash inside the 10-step interval after the last dict (its middle was reported).
    `Saving model checkpoint to .../checkpoint-N` is logged, timed, when step N is done, and the
    save's last line 90 s later (saves every 100 steps, 18 s a step): from the last save's last
    line, at the pace between saves less their own length, a crash logged (by another rank) 9 s
    into step 232 is placed at 232, not 235 (the middle of 231-240); counting the save as steps
    (the pace from save to save, 18.9 s, from the save's first line) gives 235 too. Fresh 23013's
    HF program_bug (label 31731) was reported 31735."""
    lines, add = _two_rank_job("hf")
    t = 0.0

    add(0, "logging_steps=10,")
    add(0, "***** Running training *****")
    for step in range(1, 232):
        t += 18
        if step % 10 == 0 and step <= 230:
            add(None, "{'loss': 1.5, 'grad_norm': 0.3, 'learning_rate': 1e-05, 'epoch': 0.5}")
        if step % 100 == 0:
            add(t, f"Saving model checkpoint to /ckpt/checkpoint-{step}")
            add(t + 90, f"Special tokens file saved in /ckpt/checkpoint-{step}/special_tokens_map.json")
            t += 90
    add(10, "rank 1 is up", rank=1)
    add(t + 9, "RuntimeError: CUDA error: an illegal memory access was encountered", rank=1)
    assert _stop_with_and_without(spark, lines, "pace_from_saves") == {True: [(230, 232)], False: [(230, 235)]}


def test_a_save_after_the_last_timed_progress_line_is_the_later_anchor(spark):
    """Megatron-DeepSpeed: its progress line (every 10 steps, 18 s a step) has no date, DeepSpeed's
    ``step=N`` line (every 100) has, and a save follows each dated line: ``Saving model checkpoint``,
    ``[Torch] Saved`` 84 s later, ``Checkpoint global_step200 is ready now!``. A crash logged (by
    another rank) 9 s into step 234: from the dated ``step=200`` line at the pace of the dated
    lines, saves included, it was placed at 237. From the save's last line at the pace between
    saves less their length, it is 234. Fresh 36183's NIC down (label 3242) was reported 3244."""
    lines, add = _two_rank_job("md")
    t = 0.0

    add(0, "> building train, validation, and test datasets ...")
    add(0, "training ...")
    for step in range(1, 234):
        t += 18
        if step % 10 == 0 and step <= 230:
            add(None, f" iteration {step:8d}/ 1000 | elapsed time per iteration (ms): 18000.0 | lm loss: 1.5 |")
        if step % 100 == 0:
            add(t, f"[Rank 0] step={step}, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]")
            add(t + 1, f"Saving model checkpoint: /ckpt/global_step{step}/layer_00-model_00-model_states.pt")
            add(t + 85, f"[Torch] Saved /ckpt/global_step{step}/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt.")
            add(t + 90, f"[Torch] Checkpoint global_step{step} is ready now!")
            t += 90
    add(10, "rank 1 is up", rank=1)
    add(t + 9, "RuntimeError: CUDA error: an illegal memory access was encountered", rank=1)
    assert _stop_with_and_without(spark, lines, "saves_after_timed_marks") == {True: [(230, 234)], False: [(230, 237)]}


@pytest.mark.parametrize("restart", [False, True])
def test_untimed_bars_are_put_on_the_job_clock_from_where_training_began(spark, restart):
    """HF Trainer's tqdm bars (every 10 steps, 3 s a step) carry no timestamp but their elapsed
    time, from the bar's creation right after the timed ``***** Running training *****``. A rank
    of node b fails (timed) 2 s after bar 100: on the job's clock that is step 101, not the
    interval's middle (105). A bar whose clock restarts (a new bar each epoch) contradicts the
    timed line printed after it, and nothing is put on the job's clock."""
    lines, add = _two_rank_job("hf")

    add(0, "logging_steps=10,")
    add(40, "***** Running training *****")
    for step in range(10, 101, 10):
        elapsed = 3 * (step - 50 if restart and step > 50 else step)
        add(None, f" {step}%|#         | {step}/1000 [{elapsed // 60:02d}:{elapsed % 60:02d}<45:00,  3.00s/it]")
        if step == 60:
            add(40 + 3 * step + 1, "[WARNING|trainer.py:2040] gradient overflow, skipping step")
    add(10, "rank 1 is up", rank=1)
    add(40 + 300 + 2, "RuntimeError: CUDA error: an illegal memory access was encountered", rank=1)
    assert _stop_with_and_without(spark, lines, "bar_clock_from_training_start") == {
        True: [(100, 105 if restart else 101)], False: [(100, 105)]}


def test_a_log_dict_turning_nan_beside_numbered_bars_is_the_change(spark):
    """HF Trainer with tqdm bars: each step's bar numbers the iteration and the log dict after it
    is one event, normal or nan (the parser's template takes ``nan`` as a value), and printed by
    every HF job, so no cross-job gate calls it indicating. The dict's shape, not its event id,
    enters the sequences, and a progress line printing a metric as nan is indicating
    (``nonfinite_rules``), so the step where ``grad_norm`` first turns nan is the change; the job
    then ran on, printing nan, until it was killed. Lines after bar N are staged in N + 1, so the
    dict of step 40 (printed after its bar) reports 41: within the evaluation's one iteration.
    Fresh 34007's HF loss_nan (label 30565) was reported 30913, where the job stopped."""
    lines, line = [], 0

    def add(at, message, event_id, rank=0):
        nonlocal line
        line += 1
        lines.append(("hf", "ab"[rank], rank, f"hf/{'ab'[rank]}/r{rank}", line, _ts(at), None, event_id, message,
                      None, None))

    add(0, "***** Running training *****", "E_run")
    add(5, "rank 1 is up", "E_up", rank=1)
    for step in range(1, 61):
        at = 90.0 * step + (step * 7 % 5)
        add(at, f" {step * 100 // 60:2d}%|███       | {step}/60 [00:{step:02d}<00:10,  90.{step % 9}s/it]", "E_bar")
        norm = "nan" if step >= 40 else f"0.{200 + step * 13 % 50}"
        loss = "0.0" if step >= 40 else f"1.{6900 - step * 7}"
        add(at, f"{{'loss': {loss}, 'grad_norm': {norm}, 'learning_rate': 3.0{step}e-05, 'epoch': 0.9}}", "E_dict")
    add(90.0 * 60 + 30, "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1045935 got signal: 15",
        "E_sig")
    staged = with_stage_and_iteration(spark.createDataFrame(lines, SCHEMA))
    gate = staged.where(F.col("event_id") == "E_sig").select("job_id", "event_id").distinct()
    got = {}
    for rules in ((), TemporalConfig().nonfinite_rules):
        _, progress = analyse_iterations(staged, gate, TemporalConfig(nonfinite_rules=rules))
        got[bool(rules)] = [(r.last_iteration, r.changed_from, r.failure_iteration) for r in progress.collect()]
    assert got == {True: [(60, 41, 41)], False: [(60, None, 61)]}


def test_a_log_dict_every_few_steps_that_stays_nan_is_a_lasting_change(spark):
    """HF Trainer logging every 5 steps beside its per-step tqdm bars: the nan dict is in every
    fifth interval only, so "the new events recur in each of the next intervals" judged the change
    recovered and the stop was reported (fresh 35001: 13003 for 12797, 2484 for 2204). The normal
    dict never comes back while the nan one keeps coming: a lasting change, placed in the middle of
    the five steps the first nan dict reports. One nan dict followed by normal ones (an fp16
    overflow step) is not."""
    def job(job_id, nan_steps):
        lines, line = [], 0

        def add(at, message, event_id, rank=0):
            nonlocal line
            line += 1
            lines.append((job_id, "ab"[rank], rank, f"{job_id}/{'ab'[rank]}/r{rank}", line, _ts(at), None, event_id,
                          message, None, None))

        add(0, "***** Running training *****", "E_run")
        add(5, "rank 1 is up", "E_up", rank=1)
        for step in range(1, 121):
            at = 20.0 * step + (step * 7 % 5) / 10
            add(at, f" {step * 100 // 120:2d}%|███       | {step}/120 [00:{step % 60:02d}<00:10,  20.{step % 9}s/it]",
                "E_bar")
            if step % 5 == 0:
                norm = "nan" if step in nan_steps else f"0.{200 + step * 13 % 50}"
                add(at, f"{{'loss': {'0.0' if step in nan_steps else '1.5'}, 'grad_norm': {norm}, "
                        f"'learning_rate': 3.0{step}e-05, 'epoch': 0.9}}", "E_dict")
        add(20.0 * 120 + 30, "RuntimeError: Loss is NaN at step 120; stopping training (grad_norm=nan)", "E_stop")
        return lines

    rows = job("stays", range(70, 121)) + job("once", [70])
    staged = with_stage_and_iteration(spark.createDataFrame(rows, SCHEMA))
    gate = staged.where(F.col("event_id") == "E_stop").select("job_id", "event_id").distinct()
    _, progress = analyse_iterations(staged, gate, TemporalConfig())
    got = {r.job_id: (r.changed_from, r.failure_iteration) for r in progress.collect()}
    # the first nan dict follows bar 70 (staged 71) and reports steps 66-70: their middle is 68
    assert got["stays"] == (71, 68)
    assert got["once"][0] is None


def test_a_checkpoint_save_after_the_last_progress_line_is_not_training_time(spark):
    """Megatron-LM and MindSpeed-LLM log a timed progress line every 10 iterations (36 s each) and
    save every 100 (``saving checkpoint at iteration N``, untimed; ``save-checkpoint`` took 134 s:
    Megatron stops its iteration timer around the save, so the interval holding a save is 134 s
    longer). Iteration 1700's save is the last thing before the host's OOM killer takes a rank
    7.4 iterations' time after the save ended. Counting the save as training put the stop at the
    interval's end, 1710 (fresh 36073's MindSpeed host_oom_kill, label 1708); the excess of the
    earlier intervals that held a save, taken out, gives 1708. A job without a save in its last
    interval, and the setting off, are read as before."""
    def job(job_id: str, saved_last: bool) -> list[tuple]:
        rows, line, t = [], 0, 0.0

        def add(at, message, rank=0):
            nonlocal line
            line += 1
            rows.append((job_id, "ab"[rank], rank, f"{job_id}/{'ab'[rank]}/r{rank}", line,
                         None if at is None else _ts(at), None, f"E_{message[:18]}", message, None, None))

        add(0, "training ...")
        add(1, "rank 1 is up", rank=1)
        for it in range(1500, 1701, 10):
            add(t, f" iteration {it:8d}/    3246 | consumed samples: {it * 256:12d} | elapsed time per iteration "
                   f"(ms): 36000.0 | lm loss: 1.7E+00 |")
            if it % 100 == 0 and (it < 1700 or saved_last):
                add(None, f"saving checkpoint at iteration {it:7d} to /mnt/ckpt/g000 in torch_dist format")
                add(None, f"  successfully saved checkpoint from iteration {it:7d} to /mnt/ckpt/g000")
                add(None, "    save-checkpoint ................................: (132576.70, 133915.85)")
                t += 134.0
            t += 360.0
        broke = t - 360.0 + 7.4 * 36.0  # 7.4 iterations after the last progress line and its save
        add(broke, "RuntimeError: InnerRunOpApi: OPS function error: HcclAllreduce, error code is 6", rank=1)
        return rows

    staged = with_stage_and_iteration(spark.createDataFrame(job("saved", True) + job("unsaved", False), SCHEMA))
    candidates = staged.select("job_id", "event_id").distinct()
    failure = {}
    for out_of_pace in (True, False):
        _, progress = analyse_iterations(staged, candidates, TemporalConfig(save_out_of_pace=out_of_pace))
        failure[out_of_pace] = {r.job_id: (r.last_iteration, r.failure_iteration) for r in progress.collect()}
    assert failure == {True: {"saved": (1700, 1708), "unsaved": (1700, 1708)},
                       False: {"saved": (1700, 1710), "unsaved": (1700, 1708)}}
