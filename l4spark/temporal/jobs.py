"""Per-job temporal diagnosis on Spark: failure stage, iteration scores, hangs and slowdowns.

Work is bounded per job: only training lines with an iteration enter the grouped pandas
function, from at most ``max_ranks`` ranks (every rank that prints iteration lines plus an
evenly spaced sample of the others), over the last ``max_iterations`` iterations, each
sequence collapsed and capped at ``max_sequence`` events; each iteration costs ``window`` DTWs.
Which anomalies count (three-sigma rule, recovery, lasting change, stop, slowdown) is
described in docs/temporal.md.
"""

from __future__ import annotations

import json
import logging
from typing import Sequence

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from l4spark.io.frames import materialize
from l4spark.regexcolumns import any_rlike, rlike
from l4spark.temporal.config import TemporalConfig
from l4spark.temporal.dtw import (LASTING, PROGRESS_TOKEN, RECOVERED, aftermath, analyse_progress, replaced_period,
                                  score_iterations)
from l4spark.temporal.lines import (counted_marker, iteration_marker, named_stage_marker, next_in_file, node_clock_offsets,
                                   stated_times)

log = logging.getLogger(__name__)

_RESULT_SCHEMA = ("job_id string, kind string, iteration long, score double, threshold double, anomalous boolean, "
                  "reason string, event_ids array<string>, last_iteration long, stalled boolean, slowdown_from long, "
                  "changed_from long, failure_iteration long")

# A number as progress lines print it (3, 0.5, 2.9E+00, 3e-05); what remains of a progress line
# without numbers is its shape ("iteration consumed samples ... lm loss ... nan iterations").
_NUMBER = r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"


def indicating_stand_in(events: DataFrame, conf: TemporalConfig = TemporalConfig()) -> DataFrame:
    """(job_id, event_id) of ERROR/FATAL lines and of events seen in at most ``rare_max_jobs`` jobs.

    Used when the cross-job filter's candidate events are not given.
    """
    rare = (events.groupBy("event_id").agg(F.countDistinct("job_id").alias("n_jobs"))
            .where(F.col("n_jobs") <= conf.rare_max_jobs).select("event_id"))
    errors = events.where(F.col("level").isin("ERROR", "FATAL")).select("job_id", "event_id")
    rare_in_job = events.join(rare, on="event_id", how="inner").select("job_id", "event_id")
    return errors.unionByName(rare_in_job).distinct()


def failure_stages(staged: DataFrame, conf: TemporalConfig = TemporalConfig()) -> DataFrame:
    """job_id, failure_stage, save_iteration, saved_iterations, data_failed, save_failed: the stage
    the job's narrating rank file was in when it ended, the iteration of the last checkpoint save
    the job started, the iterations of all its saves (sorted; empty when no save marker names
    one), whether any of its lines says a DataLoader worker failed (``data_failure_rules``) and
    whether a rank file printed a frame of a traceback through a checkpoint save
    (``save_failure_rules``) with no progress line after it (a save whose failure was logged and
    retried, the rank training on, does not count).

    Input: staged events (job_id, file, rank, line_no, message, stage). The narrating file is
    the one printing the most stage markers (rank 0 in every framework here; ties: lowest rank):
    it tells the job's progress, so errors of a stage the job got past (init warnings, retried
    loads) do not count, and the other ranks' stale stage at their end (they print no markers
    and are killed) does not either. A file that never printed a marker is in ``init``.
    ``save_iteration``: the highest iteration a ``checkpoint_saving`` marker of any file names
    (``StageRule.names_iteration``: ``saving checkpoint at iteration N``, ``Saving model
    checkpoint to .../checkpoint-N``, ``Checkpoint global_stepN is about to be saved``); null
    when no save marker names one. Jobs without lines are absent. A ``named_mark`` column
    (``with_stage_and_iteration(with_marks=True)``) is used instead of matching the rules again.
    """
    marked = staged.withColumn("_mark", _named_mark(staged, conf))
    # a stage marker, a numbered or a counted progress line; the first two are the carried
    # ``progress_mark`` when the staged frame has it, matched here otherwise
    marker = (F.col("progress_mark") if "progress_mark" in staged.columns
              else F.col("_mark").isNotNull() | iteration_marker(conf).isNotNull())
    progress = marker | counted_marker(conf)
    files = (marked.groupBy("job_id", "file", "rank")
             .agg(F.count("_mark.stage").alias("n_marks"),
                  F.max_by(F.coalesce("stage", F.lit("init")), "line_no").alias("end_stage"),
                  F.collect_set(F.when(F.col("_mark.stage") == "checkpoint_saving", F.col("_mark.iteration")))
                  .alias("file_saves"),
                  F.max(any_rlike("message", conf.data_failure_rules)).alias("file_data_failed"),
                  F.max(F.when(progress, F.col("line_no"))).alias("last_progress_no"),
                  F.max(F.when(any_rlike("message", conf.save_failure_rules), F.col("line_no"))).alias("last_save_frame_no"))
             # a save's traceback the file printed no progress line after: the rank did not train on
             .withColumn("file_save_failed", F.col("last_save_frame_no") > F.coalesce("last_progress_no", F.lit(-1))))
    best = Window.partitionBy("job_id").orderBy(F.desc("n_marks"), "rank", "file")
    job = Window.partitionBy("job_id")
    return (files.withColumn("pick", F.row_number().over(best))
            .withColumn("saved_iterations", F.array_sort(F.array_distinct(F.flatten(F.collect_list("file_saves").over(job)))))
            .withColumn("data_failed", F.max("file_data_failed").over(job))
            .withColumn("save_failed", F.coalesce(F.max("file_save_failed").over(job), F.lit(False)))
            .where(F.col("pick") == 1)
            .select("job_id", F.col("end_stage").alias("failure_stage"),
                    F.array_max("saved_iterations").alias("save_iteration"), "saved_iterations", "data_failed",
                    "save_failed"))


def _named_mark(staged: DataFrame, conf: TemporalConfig) -> Column:
    """``named_stage_marker``: the staged frame's ``named_mark`` column when it carries it."""
    return F.col("named_mark") if "named_mark" in staged.columns else named_stage_marker(conf)


def analyse_iterations(staged: DataFrame, indicating: DataFrame | None = None,
                       conf: TemporalConfig = TemporalConfig(),
                       offsets: DataFrame | None = None,
                       stated_time_patterns: Sequence[str] = ()) -> tuple[DataFrame, DataFrame]:
    """DTW scores per iteration and progress per job.

    Input: staged events (output of ``with_stage_and_iteration``; without its ``ts_next``
    column, one more sort of the lines computes it); ``indicating``: (job_id,
    event_id) of candidate / failure-indicating events (the cross-job filter's candidates), or
    None for ``indicating_stand_in``; ``offsets``: ``node_clock_offsets`` of the events when the
    caller has them (computed here otherwise); ``stated_time_patterns``: a training line without a
    timestamp whose text states one (``lines.stated_times``: Slurm's ``*** STEP ... CANCELLED AT
    <time> ***``, torchrun's failure summary ``time : <time>``) has that time here, on its node's
    clock like a header's, so that it can tell when the job broke (none: such lines are untimed).
    Output: (iterations, progress).

    iterations: job_id, iteration, score, anomalous, event_ids (the ``diagnosis_iterations``
    contract), threshold (the job's anomaly line: mean - sigma * std of its judged scores, at
    least ``min_drop`` below the mean; the same on every row of a job) and reason (why an
    anomalous iteration is: ``dtw`` three-sigma rule, ``changed`` lasting change, ``stopped``
    where progress stopped, ``slowdown`` onset; null when not anomalous). Rows are logged
    intervals: with a progress line every few iterations, the lines between two progress lines
    share the first iteration of their interval; the interval where progress stopped is labelled
    with the time-refined failure iteration, a slowdown's with its onset.

    progress: job_id, last_iteration, stalled, slowdown_from, changed_from (the first anomalous
    iteration whose new events recur in every interval after it while the job ran on),
    failure_iteration (the slowdown onset, else changed_from, else where progress stopped,
    refined by time), first_anomalous. Jobs without training iterations have no iteration rows
    and null progress fields.
    """
    if "ts_next" not in staged.columns:  # events staged elsewhere: the next timed line of the file
        staged = staged.withColumn("ts_next", next_in_file("ts"))
    gate = (indicating if indicating is not None else indicating_stand_in(staged, conf)).select(
        "job_id", "event_id", F.lit(True).alias("gated")).distinct()
    end_stages = F.broadcast(failure_stages(staged, conf).select("job_id", F.col("failure_stage").alias("end_stage"),
                                                                 F.col("saved_iterations").alias("saved_its")))
    training = stated_times(staged.where((F.col("stage") == "training") & F.col("iteration").isNotNull()),
                            stated_time_patterns)
    numbered = iteration_marker(conf)
    ranks = (training.groupBy("job_id", "rank")
             .agg(F.max(numbered.isNotNull()).alias("prints_numbered"),
                  F.max(counted_marker(conf)).alias("prints_counted"))
             .withColumn("prints_iterations", F.col("prints_numbered") | F.col("prints_counted"))
             .withColumn("n_ranks", F.count(F.lit(1)).over(Window.partitionBy("job_id")))
             .withColumn("pos", F.row_number().over(Window.partitionBy("job_id").orderBy("rank")))
             .where(F.col("prints_iterations")
                    | ((F.col("pos") - 1) % F.greatest(F.lit(1), F.ceil(F.col("n_ranks") / conf.max_ranks)) == 0))
             .select("job_id", "rank", "prints_numbered"))
    # a counted progress line (no number of its own) reports the iteration the lines step gave it
    reported = F.coalesce(numbered, F.when(counted_marker(conf) & ~F.col("prints_numbered"), F.col("iteration")))
    # progress lines enter the sequences by their shape: a tqdm bar growing a block or a learning
    # rate printed as 3e-05 is the same line; a loss turning into nan is not. Every progress line
    # does, also one that reports no iteration: HF Trainer's ``{'loss': ..., 'grad_norm': nan}``
    # on a rank whose tqdm bar numbers the steps is one event, normal or nan, and only its shape
    # shows the change
    progress_line = numbered.isNotNull() | counted_marker(conf)
    nonfinite = any_rlike("message", conf.nonfinite_rules)
    shape = F.concat(F.lit(PROGRESS_TOKEN), F.trim(F.regexp_replace(
        F.regexp_replace("message", _NUMBER, " "), r"[^A-Za-z]+", " ")))
    offsets = F.broadcast(offsets if offsets is not None else node_clock_offsets(staged, conf))
    t_job = F.col("ts").cast("double") - F.coalesce("offset_s", F.lit(0.0))
    # when it broke, over every rank (the ranks sampled below may miss the one that failed): the
    # first line of an indicating event whose first line in the job comes after the last progress
    # line; and when an operation that timed out after it began (the line's time minus the
    # duration it states; an untimed line, as PyTorch < 2.2 writes ``[E ProcessGroupNCCL.cpp:523]
    # ... ran for 1800005 milliseconds``, has the next timed line of its file, an upper bound: the
    # launcher's teardown follows it at once). One aggregation over the gated lines gives both.
    timed = training.join(offsets, on=["job_id", "node"], how="left")
    mark_t = t_job if conf.progress_on_job_clock else F.col("ts").cast("double")
    last_mark = (timed.where(numbered.isNotNull() | counted_marker(conf)).groupBy("job_id")
                 .agg(F.max(mark_t).alias("last_mark_t")))
    elapsed_s = _milliseconds(conf.elapsed_rules)
    gave_up = F.struct((F.col("ts_next").cast("double") - F.coalesce("offset_s", F.lit(0.0))).alias("t"),
                       elapsed_s.alias("elapsed_s"))
    after = F.filter("gave_up", lambda g: g["t"] > F.col("last_mark_t"))
    broke = (timed.join(gate, on=["job_id", "event_id"], how="inner").groupBy("job_id", "event_id")
             .agg(F.min(t_job).alias("first_t"),
                  F.collect_list(F.when(elapsed_s.isNotNull(), gave_up)).alias("gave_up"))
             .join(last_mark, on="job_id", how="inner")
             .groupBy("job_id")
             .agg(F.min(F.when(F.col("first_t") > F.col("last_mark_t"), F.col("first_t"))).alias("broke_any_t"),
                  F.min(F.array_min(F.transform(after, lambda g: g["t"] - g["elapsed_s"]))).alias("began_any_t")))
    timing = broke if not conf.pace_from_saves else broke.join(_save_pace(staged, offsets, conf), on="job_id", how="full")
    rows = (training.join(F.broadcast(ranks), on=["job_id", "rank"], how="inner")
            .join(gate, on=["job_id", "event_id"], how="left")
            .join(end_stages, on="job_id", how="left")
            .join(offsets, on=["job_id", "node"], how="left")
            .join(F.broadcast(timing), on="job_id", how="left")
            # the nonfinite rules matched once a line: the gate and nonfinite_progress_followed read it
            .withColumn("nonfinite_progress", F.coalesce(progress_line & nonfinite, F.lit(False)))
            .select("job_id", "rank", "line_no", "iteration", "event_id",
                    F.when(progress_line, shape).otherwise(F.col("event_id")).alias("token"),
                    F.col("ts").cast("double").alias("t"),
                    t_job.alias("t_job"),
                    reported.alias("reported"),
                    elapsed_s.alias("elapsed_s"),
                    F.when(reported.isNotNull(), _bad_count(conf)).alias("bad_count"),
                    F.when(reported.isNotNull() & F.col("ts").isNull(), _progress_clock(conf)).alias("clock_s"),
                    F.when(reported.isNotNull(), _milliseconds(conf.pace_rules)).alias("pace_s"),
                    _named_mark(staged, conf).isNotNull().alias("stage_mark"),
                    (F.coalesce("gated", F.lit(False)) | F.col("nonfinite_progress")).alias("gated"),
                    "nonfinite_progress",
                    "end_stage", "saved_its", "broke_any_t", "began_any_t",
                    *(["saved_it", "saved_t", "saved_s"] if conf.pace_from_saves else [])))

    def per_job(frame: pd.DataFrame) -> pd.DataFrame:
        return _analyse_job(frame, conf)

    result = materialize(rows.groupBy("job_id").applyInPandas(per_job, schema=_RESULT_SCHEMA))
    iterations = (result.where(F.col("kind") == "iteration")
                  .select("job_id", "iteration", "score", "anomalous", "event_ids", "threshold", "reason"))
    progress = (result.where(F.col("kind") == "job")
                .select("job_id", "last_iteration", "stalled", "slowdown_from", "changed_from", "failure_iteration",
                        F.col("iteration").alias("first_anomalous")))
    return iterations, progress


def _save_pace(staged: DataFrame, offsets: DataFrame, conf: TemporalConfig) -> DataFrame:
    """job_id, saved_it, saved_t, saved_s: the step the job's last timed checkpoint save names, the
    time of that save's last timed line (over all ranks, on the reference clock) and the median
    seconds per step between consecutive timed saves, each span less the visible length of the
    save it starts with. Jobs with fewer than two timed saves that name their step are absent.

    A save of step N starts when step N is done: HF Trainer's ``_maybe_log_save_evaluate`` logs
    ``Saving model checkpoint to .../checkpoint-{global_step}`` after the step's optimizer update
    (and after its log dict). Its last timed line (``special_tokens_map.json`` saved) is a lower
    bound of its end: the optimizer, scheduler and RNG state follow without a line. A save lasts
    minutes on large models (several steps), so it is taken out of both the pace and the time
    after the last save."""
    mark = _named_mark(staged, conf)
    in_file = Window.partitionBy("job_id", "file").orderBy("line_no").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    saving = (staged.where((F.col("stage") == "checkpoint_saving") & F.col("ts").isNotNull())
              .select("job_id", "node", "file", "line_no", "ts",
                      F.when(mark["stage"] == "checkpoint_saving", mark["iteration"]).alias("named_it"))
              .withColumn("saved_it", F.last("named_it", ignorenulls=True).over(in_file))
              .where(F.col("saved_it").isNotNull())
              .join(offsets, on=["job_id", "node"], how="left")
              .withColumn("t", F.col("ts").cast("double") - F.coalesce("offset_s", F.lit(0.0)))
              .groupBy("job_id", "saved_it")
              .agg(F.min("t").alias("start_t"), F.max("t").alias("end_t")))
    previous = Window.partitionBy("job_id").orderBy("saved_it")
    span_s = ((F.col("start_t") - F.lag("end_t").over(previous))
              / (F.col("saved_it") - F.lag("saved_it").over(previous)))
    return (saving.withColumn("span_s", span_s)
            .groupBy("job_id")
            .agg(F.max("saved_it").alias("saved_it"), F.max_by("end_t", "saved_it").alias("saved_t"),
                 F.percentile_approx("span_s", 0.5).alias("saved_s"))
            .where(F.col("saved_s").isNotNull()))


def _bad_count(conf: TemporalConfig):
    """The bad iterations a progress line counts in its interval (``bad_count_rules``), or null."""
    counts = [F.when(rlike("message", rule), F.regexp_extract("message", rule, 1).try_cast("long"))
              for rule in conf.bad_count_rules]
    return F.coalesce(*counts) if counts else F.lit(None).cast("long")


def _progress_clock(conf: TemporalConfig):
    """Seconds on a progress line's own clock (``progress_clock_rules``: tqdm's elapsed), or null."""
    def part(rule: str, group: int):
        return F.regexp_extract("message", rule, group).try_cast("long")

    clocks = [F.when(rlike("message", rule),
                     F.coalesce(part(rule, 1), F.lit(0)) * 3600 + part(rule, 2) * 60 + part(rule, 3))
              for rule in conf.progress_clock_rules]
    return (F.coalesce(*clocks) if clocks else F.lit(None)).cast("double")


def _milliseconds(rules: tuple[str, ...]):
    """In seconds, the milliseconds group 1 of the first of ``rules`` that a line's message matches
    reads, or null: how long a timed-out operation had run (``elapsed_rules``), the seconds per
    iteration a progress line states for its interval (``pace_rules``: Megatron-LM's ``elapsed
    time per iteration (ms)``)."""
    readings = [F.when(rlike("message", rule), F.regexp_extract("message", rule, 1).try_cast("double") / 1000.0)
                for rule in rules]
    return (F.coalesce(*readings) if readings else F.lit(None)).cast("double")


def _analyse_job(frame: pd.DataFrame, conf: TemporalConfig) -> pd.DataFrame:
    """One job's iteration rows and progress row (``_RESULT_SCHEMA``) from its training lines.

    ``frame``: rank, line_no, iteration, event_id, token (the sequence symbol), t (own clock),
    t_job (the reference node's clock), reported, elapsed_s (how long a timed-out operation had
    run, from ``elapsed_rules``), stage_mark, gated, end_stage, saved_its (the iterations the job's
    saves name: ``failure_stages``), and optionally broke_any_t (the
    first indicating line after the last progress line over *all* ranks of the job) and
    began_any_t (when a timed-out operation began, over all ranks).
    """
    job_id = frame["job_id"].iloc[0]
    # the progress lines' times on the clock the first error's time is read on (``progress_on_job_clock``)
    clock = "t_job" if conf.progress_on_job_clock else "t"
    marks_list = [(int(i), float(t) if pd.notna(t) else None)
                  for i, t in frame.loc[frame["reported"].notna(), ["reported", clock]].itertuples(index=False)]
    origin = (_bar_clock_origin(frame, clock, conf.bar_clock_tolerance_s)
              if conf.bar_clock_from_training_start and all(t is None for _, t in marks_list) else None)
    if origin is not None:
        # untimed progress bars read on the job's clock: their own elapsed time from where training began
        marks_list = [(int(i), origin + float(c) if pd.notna(c) else None)
                      for i, c in frame.loc[frame["reported"].notna(), ["reported", "clock_s"]].itertuples(index=False)]
    frame = _by_interval(frame).sort_values(["iteration", "rank", "line_no"], kind="stable")
    last = max((i for i, _ in marks_list), default=None)
    died_training = frame["end_stage"].iloc[0] == "training"
    # lines after the last progress line belong to an iteration only when the job ended while
    # training; after a finished run or during a checkpoint save they are that stage's lines
    if last is not None and not died_training:
        frame = frame[frame["iteration"] <= last]
    lines = frame[~frame["stage_mark"]]  # stage markers (checkpoint saved, ...) are lifecycle, not behaviour
    tokens = lines["token"].astype(str)  # once, not once per iteration
    sequences = {int(it): group.tolist() for it, group in tokens.groupby(lines["iteration"], sort=True)}
    stopped = last + 1 if last is not None else None
    if died_training and stopped is not None:
        sequences.setdefault(stopped, [])  # the iteration that never completed, even if nothing was logged in it
    gate = set(lines.loc[lines["gated"], "token"].astype(str))
    scores = score_iterations(sequences, gate, conf)

    mark_ranks = set(frame.loc[frame["reported"].notna(), "rank"])
    same_clock = frame[frame["rank"].isin(mark_ranks)] if mark_ranks else frame
    last_t = same_clock[clock].max() if same_clock[clock].notna().any() else None
    last_mark_t = max((t for _, t in marks_list if t is not None), default=None)
    # when it broke: the first line after the last progress line, on any rank (clock-corrected),
    # of an indicating event the job never printed before (routine lines follow a progress
    # line at once; the failure's own lines are new)
    new_events = {e for s in scores if s.iteration == stopped for e in s.novel}
    breaking = lines.loc[(lines["iteration"] == stopped) & lines["token"].isin(new_events)
                         & (lines["t_job"] > (last_mark_t if last_mark_t is not None else float("inf"))), "t_job"]
    began = (breaking - lines.loc[breaking.index, "elapsed_s"]).dropna()
    any_rank = frame["broke_any_t"].dropna() if "broke_any_t" in frame.columns else pd.Series(dtype=float)
    began_any = frame["began_any_t"].dropna() if "began_any_t" in frame.columns else pd.Series(dtype=float)
    broke_t = min([float(t) for t in (breaking.min(), any_rank.min()) if pd.notna(t)], default=None)
    began_t = min([float(t) for t in (began.min(), began_any.min()) if pd.notna(t)], default=None)
    paced = ([(int(i), float(c)) for i, c in frame.loc[frame["reported"].notna() & frame["clock_s"].notna(),
                                                       ["reported", "clock_s"]].itertuples(index=False)]
             if "clock_s" in frame.columns else [])
    stated = ([(int(i), float(s)) for i, s in frame.loc[frame["reported"].notna() & frame["pace_s"].notna(),
                                                        ["reported", "pace_s"]].itertuples(index=False)]
              if "pace_s" in frame.columns else [])
    last_untimed = last is not None and all(t is None for i, t in marks_list if i == last)
    saves = _saves(frame) if last_mark_t is None or (conf.saves_after_timed_marks and last_untimed) else None
    if saves is not None and broke_t is None:
        # progress lines without a time: when it broke, after the last timed save, by the stop's new events
        after_save = lines.loc[(lines["iteration"] == stopped) & lines["token"].isin(new_events)
                               & (lines["t_job"] > saves[1]), ["t_job", "elapsed_s"]]
        broke_t = float(after_save["t_job"].min()) if len(after_save) else None
        gave_up = (after_save["t_job"] - after_save["elapsed_s"]).dropna()
        began_t = float(gave_up.min()) if began_t is None and len(gave_up) else began_t
    saved_its = frame["saved_its"].iloc[0]
    saved_at = tuple(int(n) for n in saved_its) if saved_its is not None else ()
    progress = analyse_progress(marks_list, None if last_t is None else float(last_t), broke_t, conf, began_t, paced,
                                open_interval=died_training, saves=saves, stated=stated, saved_at=saved_at)

    unpaced = saved_at if conf.saves_unpaced_after else ()
    # a progress line that newly prints a value as not a number is a change to follow whatever the
    # score's drop (``nonfinite_progress_followed``): one changed line among many moves an
    # interval's score less than the spread of the job's scores
    nonfinite = (set(lines.loc[lines["nonfinite_progress"], "token"].astype(str))
                 if conf.nonfinite_progress_followed and "nonfinite_progress" in lines.columns else set())
    after = {s.iteration: aftermath(s.iteration, s.novel, sequences, marks_list, conf, unpaced)
             for s in scores if s.anomalous or (s.novel and (s.below_mean or bool(nonfinite & set(s.novel))))}
    reasons = {s.iteration: "dtw" for s in scores if s.anomalous and after[s.iteration] != RECOVERED}
    # a lasting change the job ran on with (its loss turned NaN, every step skipped on overflow)
    # is where it started to fail, even when one iteration alone stays above the three-sigma line
    changed_from = min((i for i, what in after.items() if what == LASTING), default=None)
    if changed_from is not None:
        reasons.setdefault(changed_from, "changed")
    failure_iteration = progress.failure_iteration
    labels: dict[int, int] = {}
    if changed_from is not None and progress.slowdown_from is None:
        counted = _counted_onset(frame, changed_from)
        labels[changed_from] = changed_from if counted is None else counted
        novel = next(s.novel for s in scores if s.iteration == changed_from)
        period = replaced_period(changed_from, novel, sequences, conf)
        if counted is None and period is not None and period > 1:
            # a line printed every `period` intervals, after its own step's progress line (so in
            # the next interval), reports the iterations since its last print: their middle, the
            # estimate with the least expected error, as for an untimed stop
            buckets = sorted(sequences)
            start = buckets[max(buckets.index(changed_from) - period, 0)]
            labels[changed_from] = (start + changed_from - 1) // 2
        elif counted is None and conf.changed_placed_in_interval:
            labels[changed_from] = _placed_in_interval(lines, marks_list, changed_from, set(novel),
                                                       progress.iteration_seconds)
        failure_iteration = labels[changed_from]
    if progress.slowdown_from is not None:
        # the job did not break in one iteration: it slowed down from here until it was stopped
        onset = max((i for i in sequences if i <= progress.slowdown_from), default=None)
        if onset is not None:
            reasons[onset] = "slowdown"
            labels[onset] = progress.slowdown_from
    elif died_training and stopped is not None and (progress.stalled or gate & set(sequences[stopped])
                                                     or _silent_after_last_progress(frame, last)):
        # where progress stopped: anomalous when it holds an indicating event, the job stalled, or
        # the rank printing progress wrote nothing after its last progress line (killed mid-iteration)
        reasons[stopped] = "stopped"
        labels[stopped] = progress.failure_iteration
    token_events = lines.groupby(["iteration", "token"])["event_id"].agg(lambda e: sorted(set(map(str, e))))
    rows = []
    for s in scores:
        differing = sorted({e for token in s.event_ids for e in token_events.get((s.iteration, token), [])})[:50]
        rows.append({"job_id": job_id, "kind": "iteration", "iteration": labels.get(s.iteration, s.iteration),
                     "score": s.score, "threshold": s.threshold, "anomalous": s.iteration in reasons,
                     "reason": reasons.get(s.iteration), "event_ids": differing})
    anomalous = sorted(labels.get(i, i) for i in reasons)
    rows.append({"job_id": job_id, "kind": "job", "iteration": anomalous[0] if anomalous else None,
                 "last_iteration": progress.last_iteration, "stalled": progress.stalled,
                 "slowdown_from": progress.slowdown_from, "changed_from": changed_from,
                 "failure_iteration": failure_iteration,
                 "event_ids": []})
    columns = [c.split()[0] for c in _RESULT_SCHEMA.split(", ")]
    out = pd.DataFrame([[row.get(c) for c in columns] for row in rows], columns=columns, dtype=object)
    log.debug("temporal %s: %s", job_id, json.dumps({"anomalous": anomalous, "failure": failure_iteration}))
    return out


def _bar_clock_origin(frame: pd.DataFrame, clock: str, tolerance_s: float) -> float | None:
    """When the clock of a rank's untimed progress bars started, on ``clock``: the time of the
    last timed stage marker the rank printed before its first bar (HF Trainer creates its tqdm
    bar in ``on_train_begin``, right after ``***** Running training *****``), or None. Only when
    every timed line the rank printed after it lies between its neighbouring bars on that clock,
    within ``tolerance_s`` (a bar that restarts every epoch, or a marker long before the bar
    began, fails it)."""
    if "clock_s" not in frame.columns or frame["clock_s"].isna().all():
        return None
    rank = frame.loc[frame["clock_s"].notna(), "rank"].value_counts().index[0]
    own = frame[frame["rank"] == rank].sort_values("line_no")
    first_bar = own.loc[own["clock_s"].notna(), "line_no"].min()
    starts = own[(own["line_no"] < first_bar) & own["stage_mark"] & own[clock].notna()]
    if starts.empty:
        return None
    origin = float(starts[clock].iloc[-1])
    before, after = own["clock_s"].ffill(), own["clock_s"].bfill()
    timed = own[(own["line_no"] > first_bar) & own[clock].notna()]
    early = timed[clock] < origin + before[timed.index] - tolerance_s
    late = after[timed.index].notna() & (timed[clock] > origin + after[timed.index] + tolerance_s)
    return None if (early | late).any() else origin


def _saves(frame: pd.DataFrame) -> tuple[int, float, float] | None:
    """(step, time, seconds per step) of the job's last timed save (``_save_pace``), or None."""
    if "saved_s" not in frame.columns or frame["saved_s"].isna().all():
        return None
    row = frame.iloc[0]
    return int(row["saved_it"]), float(row["saved_t"]), float(row["saved_s"])


def _counted_onset(frame: pd.DataFrame, first: int) -> int | None:
    """Where the lasting change of the interval starting at ``first`` began: the interval's
    closing progress line counts N bad iterations (``bad_count_rules``, 0 < N <= its length):
    closing iteration - N + 1 (``first`` itself when every iteration of the interval was bad:
    session 45, a Megatron loss that turned NaN on the first iteration of its interval was placed
    in the interval's middle); None where the log says no more."""
    if "bad_count" not in frame.columns:
        return None
    closing = frame.loc[frame["reported"].notna() & (frame["reported"] >= first), ["reported", "bad_count"]]
    if closing.empty:
        return None
    row = closing.sort_values("reported").iloc[0]
    end, count = int(row["reported"]), row["bad_count"]
    if pd.notna(count) and 0 < int(count) <= end - first + 1:
        return end - int(count) + 1
    return None


def _placed_in_interval(lines: pd.DataFrame, marks: list[tuple[int, float | None]], first: int,
                        events: set[str], seconds: float | None) -> int:
    """Where in the logged interval starting at ``first`` a lasting change began, as the stop is
    placed (``dtw.analyse_progress``): the interval's opening progress line + 1, advanced by the
    time from that line to the first line of one of ``events`` (the interval's new events) over
    the pace ``seconds``, at most to the interval's last iteration; with no such timed line, the
    interval's middle (the estimate with the least expected error). Progress lines do not time
    it: a loss turned NaN in the closing line was printed at the interval's end whenever it began.
    ``lines``: the job's training lines with ``iteration`` set to their interval's first
    iteration, ``token``, ``reported`` and ``t_job``; ``marks``: (iteration, time) of progress lines.
    """
    later = sorted(i for i, _ in marks if i >= first)
    if not later or later[0] == first:  # the first interval, or no closing line: nothing to place it in
        return first
    length = later[0] - first + 1
    opening = [t for i, t in marks if i == first - 1 and t is not None and not np.isnan(t)]
    inside = lines[(lines["iteration"] == first) & lines["reported"].isna() & lines["token"].isin(events)]
    first_t = inside["t_job"].min() if len(inside) else None
    if seconds and opening and first_t is not None and pd.notna(first_t) and first_t > opening[0]:
        return first + min(length - 1, int((float(first_t) - opening[0]) / seconds))
    return first + (length - 1) // 2


def _by_interval(frame: pd.DataFrame) -> pd.DataFrame:
    """Progress lines moved into the interval they end: with a progress line every few
    iterations, the lines after line m are numbered m + 1 and line m + stride carries its own
    number; both belong to the interval from m + 1 (the first progress line: to its own)."""
    reported = frame["reported"].dropna().astype("int64")
    if reported.empty:
        return frame
    marks = np.unique(reported.to_numpy())
    position = np.searchsorted(marks, reported.to_numpy(), side="left")
    start = np.where(position > 0, marks[np.maximum(position - 1, 0)] + 1, reported.to_numpy())
    frame = frame.copy()
    frame.loc[reported.index, "iteration"] = start
    return frame


def _silent_after_last_progress(frame: pd.DataFrame, last: int) -> bool:
    """True when the rank that printed the last progress line has no training line after it."""
    last_marks = frame[frame["reported"] == last]
    rank, line_no = last_marks.iloc[-1][["rank", "line_no"]]
    return not ((frame["rank"] == rank) & (frame["line_no"] > line_no)).any()


def job_failure_points(staged: DataFrame, progress: DataFrame, conf: TemporalConfig = TemporalConfig()) -> DataFrame:
    """job_id, failure_stage, failure_iteration.

    A job that slowed down until it was stopped (``slowdown_from``), or whose iterations changed
    for good while it ran on (``changed_from``: a loss turned NaN), failed in training there,
    whatever it was doing when it was ended; a job that finished keeps ``finished``. The
    iteration: in ``training``, the progress's ``failure_iteration``; in ``checkpoint_saving``,
    the iteration the failed save names (``failure_stages``' ``save_iteration``; else the
    last completed iteration, the progress's ``last_iteration``); null in other stages.

    Session 57: a job that completed no iteration (no ``last_iteration``), ended before
    ``checkpoint_saving`` and printed a line of ``data_failure_rules`` (a DataLoader's worker
    killed by a bus error, or an exception it raised) failed reading its first batches:
    ``data_loading``, whatever its last marker says (HF Trainer prints ``***** Running training
    *****`` and Megatron-LM ``training ...`` before the first batch is read).

    Session 58: a job that ended in ``training`` and printed a traceback frame of a checkpoint
    save (``save_failure_rules``), and no progress line after it in that rank's file, failed in
    ``checkpoint_saving``: a progress line of the step
    being saved may follow the save's first line, and torchtitan's save names no step. Its
    iteration is that of the save, or the last completed one when later (a save naming no step).
    """
    slowed = ((F.col("slowdown_from").isNotNull() | F.col("changed_from").isNotNull())
              & (F.col("end_stage") != "finished"))
    stage = F.col("failure_stage")
    first_batches = (F.col("last_iteration").isNull() & F.col("data_failed")
                     & F.col("end_stage").isin("init", "data_loading", "model_loading", "training"))
    in_save = F.col("save_failed") & (F.col("end_stage") == "training")
    return (failure_stages(staged, conf).withColumnRenamed("failure_stage", "end_stage")
            .join(progress, on="job_id", how="left")
            .withColumn("failure_stage", F.when(slowed, F.lit("training"))
                        .when(first_batches, F.lit("data_loading"))
                        .when(in_save, F.lit("checkpoint_saving")).otherwise(F.col("end_stage")))
            .select("job_id", "failure_stage",
                    F.when(stage == "training", F.col("failure_iteration"))
                    .when(stage == "checkpoint_saving",
                          F.when(in_save, F.greatest("save_iteration", "last_iteration"))
                          .otherwise(F.coalesce("save_iteration", "last_iteration")))
                    .cast("long").alias("failure_iteration")))


def temporal_events(iterations: pd.DataFrame) -> pd.DataFrame:
    """Temporally indicating events: job_id, event_id, score (1 - the lowest score of an
    anomalous iteration introducing it), iteration (first such), stage ('training').

    Input: ``analyse_iterations``' iterations as pandas (the diagnosis collects them anyway)."""
    columns = ["job_id", "event_id", "score", "iteration", "stage"]
    anomalous = iterations[iterations["anomalous"].fillna(False).astype(bool)] if len(iterations) else iterations
    flagged = pd.DataFrame(
        [(job_id, event_id, 1 - score, iteration)
         for job_id, iteration, score, events in zip(anomalous.get("job_id", []), anomalous.get("iteration", []),
                                                     anomalous.get("score", []), anomalous.get("event_ids", []))
         for event_id in ([] if events is None else list(events))],
        columns=["job_id", "event_id", "score", "iteration"])
    if flagged.empty:
        return pd.DataFrame(columns=columns)
    return (flagged.groupby(["job_id", "event_id"], sort=True, dropna=False)
            .agg(score=("score", "max"), iteration=("iteration", "min"))
            .reset_index().assign(stage="training")[columns])
