"""Stage and iteration of every log line (Spark window functions over each rank file's line order).

Cost: one sort of all lines by (job_id, file, line_no) computes the per-file stage, the last
iteration marker and a forward-filled timestamp together (every window shares that partitioning
and ordering, so Spark plans one sort). Then one per-job sort by clock-corrected time of the
lines plus one timeline row per timed marker (an explode of the same rows, so the regexes and
file windows run once): lines of files that print no iteration marker of their own (in
Megatron, every rank but the last) take the job's stage and iteration at their time from it.
Node clock offsets come from a small aggregate: per node and event, the first timestamp,
compared (median) with the reference node that prints the iteration lines.

The input DataFrame is read up to three times (counted-progress intervals, clock offsets unless
given, lines): callers that pass a computed (not stored) DataFrame should persist it first.
"""

from __future__ import annotations

from typing import Iterable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from l4spark.regexcolumns import any_rlike, extract_first, rlike
from l4spark.temporal.config import TemporalConfig

EVENT_COLUMNS = ["job_id", "node", "rank", "file", "line_no", "ts", "level", "event_id", "message",
                 "stage", "iteration"]
# with_stage_and_iteration's output: the events columns plus ``ts_next``
STAGED_COLUMNS = [*EVENT_COLUMNS, "ts_next"]
# and, with ``with_marks``, what the line's markers say (the stage rules are some 30 regexes a
# line: later steps read these columns instead of matching them again)
MARK_COLUMNS = ["named_mark", "progress_mark"]


def next_in_file(column: str) -> Column:
    """The first non-null ``column`` at or below each line in its rank file (by line_no), or null.

    The same as ``first(column, ignorenulls)`` over the rows from the current one to the file's
    end, but over a running frame read bottom up: Spark recomputes a frame that ends at
    ``unboundedFollowing`` from each row to the end, quadratic in the lines of a file (a rank file of
    10,000 lines is 50M row visits); a running frame is linear. Needs job_id, file, line_no
    (unique in a file)."""
    bottom_up = (Window.partitionBy("job_id", "file").orderBy(F.col("line_no").desc())
                 .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return F.last(column, ignorenulls=True).over(bottom_up)


def stage_marker(conf: TemporalConfig, with_iterations: bool = True) -> Column:
    """The stage a line starts (first matching rule; iteration lines start ``training`` unless
    ``with_iterations`` is False), or null."""
    message = F.col("message")
    marker: Column = (F.when(iteration_marker(conf).isNotNull(), F.lit("training")) if with_iterations
                      else F.lit(None).cast("string"))
    for rule in reversed(conf.stage_rules):
        marker = F.when(rlike(message, rule.pattern), F.lit(rule.stage)).otherwise(marker)
    return marker


def named_stage_marker(conf: TemporalConfig) -> Column:
    """struct(stage, iteration) of the first stage rule a line matches, or null: ``iteration`` is
    group 1 when the rule ``names_iteration`` (the iteration a checkpoint save writes), else null."""
    message = F.col("message")
    marker: Column = F.lit(None).cast("struct<stage:string,iteration:long>")
    for rule in reversed(conf.stage_rules):
        named = (F.regexp_extract(message, rule.pattern, 1).try_cast("long") if rule.names_iteration
                 else F.lit(None).cast("long"))
        marker = F.when(rlike(message, rule.pattern),
                        F.struct(F.lit(rule.stage).alias("stage"), named.alias("iteration"))).otherwise(marker)
    return marker


def iteration_marker(conf: TemporalConfig) -> Column:
    """The iteration number a progress line reports (first matching rule), or null."""
    numbers = [F.when(rlike("message", rule.pattern),
                      F.regexp_extract("message", rule.pattern, 1).cast("long"))
               for rule in conf.iteration_rules]
    return F.coalesce(*numbers) if numbers else F.lit(None).cast("long")


def counted_marker(conf: TemporalConfig) -> Column:
    """True on a progress line without an iteration number (a ``counted_iteration_rules`` line)."""
    return any_rlike("message", [rule.pattern for rule in conf.counted_iteration_rules])


def _counting(events: DataFrame, conf: TemporalConfig) -> DataFrame | None:
    """Per job, the interval and start of every counted rule (``count_interval_<i>``,
    ``count_start_<i>``) from the job's lines; None without counted rules."""
    if not conf.counted_iteration_rules:
        return None
    message = F.col("message")
    numbers = []
    for i, rule in enumerate(conf.counted_iteration_rules):
        numbers.append(F.max(F.when(rlike(message, rule.interval_pattern),
                                    F.regexp_extract(message, rule.interval_pattern, 1).cast("long")))
                       .alias(f"count_interval_{i}"))
        start = (F.max(F.when(rlike(message, rule.start_pattern),
                              F.regexp_extract(message, rule.start_pattern, 1).cast("long")))
                 if rule.start_pattern else F.lit(None).cast("long"))
        numbers.append(F.coalesce(start, F.lit(0)).alias(f"count_start_{i}"))
    return events.groupBy("job_id").agg(*numbers)


def _with_counted_marks(events: DataFrame, conf: TemporalConfig, in_file: Window,
                        numbered: Column | None = None) -> DataFrame:
    """``iter_mark``: the number of a numbered progress line, or of a counted one in a file
    without numbered ones (start rounded down to the interval + k * interval). ``numbered``:
    ``iteration_marker(conf)``, or a column holding it."""
    numbered = iteration_marker(conf) if numbered is None else numbered
    counting = _counting(events, conf)
    if counting is None:
        return events.withColumn("iter_mark", numbered)
    upto = in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = in_file.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    counted = []
    for i, rule in enumerate(conf.counted_iteration_rules):
        hit = F.coalesce(rlike("message", rule.pattern), F.lit(False))
        interval, start = F.col(f"count_interval_{i}"), F.col(f"count_start_{i}")
        k = F.sum(hit.cast("long")).over(upto)
        counted.append(F.when(hit & (interval > 0), F.floor(start / interval) * interval + k * interval))
    return (events.join(F.broadcast(counting), on="job_id", how="left")
            .withColumn("numbered_mark", numbered)
            .withColumn("file_numbered", F.max(F.col("numbered_mark").isNotNull()).over(whole))
            .withColumn("iter_mark", F.coalesce(
                "numbered_mark", F.when(~F.col("file_numbered"), F.coalesce(*counted).cast("long"))))
            .drop("numbered_mark", "file_numbered", *counting.columns[1:]))


def with_stage_and_iteration(events: DataFrame, conf: TemporalConfig = TemporalConfig(),
                             offsets: DataFrame | None = None, with_marks: bool = False) -> DataFrame:
    """Fill ``stage`` and ``iteration`` of the events.

    Input: the ``events`` contract (job_id, node, rank, file, line_no, ts, level, event_id,
    message, stage, iteration; stage/iteration may be null). Output: the same columns, in that
    order, and ``ts_next`` (the line's timestamp, or for an untimed line the next one below it
    in its file: an upper bound of when it was printed; null below the file's last timed line), with
    * ``stage``: in files that print iteration lines, the stage started by the last stage
      marker at or before the line; in other files (most ranks print few markers or none), the
      job's stage at the line's clock-corrected time, taken from the markers of all its files,
      unless the file's own last marker may be later; null when neither exists (no marker yet
      and no timestamp to align). A line without a timestamp has the time of the next timed
      line of its file, or, after the file's last timed line, the job's end (a rank's dying
      output seldom carries timestamps); a file without any timestamp cannot be aligned.
    * ``iteration``: for training lines, the iteration running (last completed + 1; an
      iteration line carries its own number, a counted progress line the number it counts to);
      for checkpoint lines, the iteration saved; null in other stages; training lines before
      the file's first iteration line get that line's number (the first logged interval).
      Files without iteration lines get the job's iteration at the line's corrected time (null
      without a timestamp).
    ``offsets``: ``node_clock_offsets(events, conf)`` when the caller has it already.
    ``with_marks``: also ``MARK_COLUMNS``: ``named_mark`` (``named_stage_marker``) and
    ``progress_mark`` (a stage or iteration marker line: ``stage_marker`` not null).
    """
    in_file = Window.partitionBy("job_id", "file").orderBy("line_no")
    upto = in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = in_file.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    unstaged = events.drop("stage", "iteration", "ts_next").withColumn("numbered", iteration_marker(conf))
    marked = (
        _with_counted_marks(unstaged, conf, in_file, F.col("numbered"))
        .withColumn("named_mark", named_stage_marker(conf))
        .withColumn("stage_mark", F.coalesce(F.col("named_mark.stage"),
                                             F.when(F.col("iter_mark").isNotNull(), F.lit("training"))))
        .withColumn("own_stage", F.last("stage_mark", ignorenulls=True).over(upto))
        # the iteration the file's last stage marker names (a save's), -1 when it names none
        .withColumn("own_named", F.last(F.when(F.col("stage_mark").isNotNull(),
                                               F.coalesce(F.col("named_mark.iteration"), F.lit(-1))),
                                        ignorenulls=True).over(upto))
        .withColumn("own_iter", F.last("iter_mark", ignorenulls=True).over(upto))
        .withColumn("next_iter", next_in_file("iter_mark"))
        .withColumn("ts_filled", F.last("ts", ignorenulls=True).over(upto))
        .withColumn("ts_next", next_in_file("ts"))
        .withColumn("file_has_iters", F.max(F.col("iter_mark").isNotNull()).over(whole))
    )
    if offsets is None:
        offsets = node_clock_offsets(events, conf)
    # a line without a timestamp was printed no later than the next timed line of its file; after
    # the file's last timed line, no later than the job's end. The upper bound, because a rank's
    # dying output (NCCL errors, tracebacks) seldom carries timestamps and may follow its last
    # timed line by many iterations, while the launcher's teardown after it usually does
    line_t = (F.when(F.col("ts").isNotNull() | F.col("ts_next").isNotNull(), F.col("ts_next").cast("double"))
              .when(F.col("ts_filled").isNotNull(), F.lit(float("inf"))))
    # when the file's own last stage marker was printed, at the latest
    marked = marked.withColumn("own_stage_latest", F.last(F.when(F.col("stage_mark").isNotNull(), line_t),
                                                          ignorenulls=True).over(upto))
    offset = F.coalesce("offset_s", F.lit(0.0))
    marked = (marked.join(F.broadcast(offsets), on=["job_id", "node"], how="left")
              .withColumn("t", line_t - offset)
              .withColumn("t_mark", F.col("ts_filled").cast("double") - offset)
              .withColumn("own_stage_t", F.col("own_stage_latest") - offset))

    # One pass over ``marked`` (a plan that reads it once per use recomputed its regexes and
    # file windows per use: 50 window operators, 2.4x the time on a 1x nightly's failed jobs):
    # every line is a row, and each timed marker also a timeline row (is_line 0) that files
    # without iteration lines align to, by their clock-corrected time, over the job's lines.
    is_marker = (F.col("stage_mark").isNotNull() | F.col("iter_mark").isNotNull()) & F.col("t_mark").isNotNull()
    line_row = F.struct(F.lit(1).alias("_is_line"), F.col("t").alias("_t"),
                        F.lit(None).cast("string").alias("_tl_stage"), F.lit(None).cast("long").alias("_tl_iter"))
    # markers keep their file's order: an untimed one has the time of the timed line before it
    timeline_row = F.struct(F.lit(0).alias("_is_line"), F.col("t_mark").alias("_t"),
                            F.col("stage_mark").alias("_tl_stage"),
                            F.when(F.col("file_has_iters"), F.col("iter_mark")).alias("_tl_iter"))
    rows = (marked.withColumn("_row", F.explode(F.when(is_marker, F.array(line_row, timeline_row))
                                                 .otherwise(F.array(line_row))))
            .select("*", "_row.*").drop("_row"))
    by_time = (Window.partitionBy("job_id").orderBy("_t", "_is_line", "file", "line_no")
               .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    aligned = (
        rows.withColumn("job_stage", F.last("_tl_stage", ignorenulls=True).over(by_time))
        .withColumn("job_stage_t", F.last(F.when(F.col("_tl_stage").isNotNull(), F.col("_t")), ignorenulls=True)
                    .over(by_time))
        .withColumn("job_iter", F.last("_tl_iter", ignorenulls=True).over(by_time))
        .where(F.col("_is_line") == 1)
        # the rank's own last marker, unless the job has surely moved on since (a rank that
        # printed "loading checkpoint" and no marker after is training when the job is); a save
        # of iteration N is not over because iteration N's own line comes later on a skewed clock
        .withColumn("aligned_stage", F.when(F.col("own_stage").isNull()
                                            | ((F.col("job_stage_t") > F.col("own_stage_t")) & ~_saving_past(F.col("job_iter"))),
                                            F.col("job_stage")).otherwise(F.col("own_stage")))
    )
    # files with iteration lines keep their own stage and iteration; lines of other files that
    # have no time to align keep their file's stage and no iteration
    anchored, unaligned = F.col("file_has_iters"), F.col("t").isNull()
    stage = F.when(anchored | unaligned, F.col("own_stage")).otherwise(F.col("aligned_stage"))
    iteration = (F.when(anchored, _iteration_in(F.col("own_stage"), F.coalesce(F.col("own_iter"), F.col("next_iter") - 1),
                                                 F.col("iter_mark")))
                 .when(~unaligned, _iteration_in(F.col("aligned_stage"), F.col("job_iter"), F.lit(None))))
    marks = ([F.col("named_mark"), (F.col("named_mark").isNotNull() | F.col("numbered").isNotNull()).alias("progress_mark")]
             if with_marks else [])
    return aligned.select(*EVENT_COLUMNS[:9], stage.alias("stage"), iteration.cast("long").alias("iteration"),
                          "ts_next", *marks)


def _saving_past(job_iter: Column) -> Column:
    """True while the file's last marker is a save naming an iteration the job has not passed."""
    return ((F.col("own_stage") == "checkpoint_saving") & (F.col("own_named") >= 0)
            & (F.col("own_named") >= F.coalesce(job_iter, F.lit(-1))))


def _iteration_in(stage: Column, last_completed: Column, reported: Column) -> Column:
    return (F.when(reported.isNotNull(), reported)
            .when(stage == "training", last_completed + 1)
            .when(stage == "checkpoint_saving", last_completed)
            .cast("long"))


def node_clock_offsets(events: DataFrame, conf: TemporalConfig = TemporalConfig(),
                       early_share: float = 0.5) -> DataFrame:
    """Clock offset of every node against the job's reference node, in seconds.

    Input: events (job_id, node, ts, event_id, message). Output: job_id, node, offset_s (the
    median, over events both nodes print with a timestamp, of the difference of their first
    times; 0 for the reference node, the node printing the most iteration lines, or the most
    lines when none does). Only events the reference node first prints in the first
    ``early_share`` of its log count (the rule of ``spatial.signals.clock_offsets``): start-up
    and lifecycle lines happen together on every node, so their median difference is the skew;
    the failure's own lines (watchdogs, aborts, tracebacks, teardown) do not. Peers that time out
    on a dead node minutes after its neighbours print the same teardown lines minutes apart, and
    when those outnumbered the start-up lines their gap was taken for skew (fresh seed 14011: a
    563 s "offset" that moved eight nodes' errors before a checkpoint save). Nodes sharing no
    early timed event with the reference are absent (offset 0).
    """
    firsts = (events.where(F.col("ts").isNotNull())
              .groupBy("job_id", "node", "event_id")
              .agg(F.min(F.col("ts").cast("double")).alias("first_t")))
    weight = (events.groupBy("job_id", "node")
              .agg(F.sum(F.when(iteration_marker(conf).isNotNull(), 1_000_000).otherwise(1)).alias("weight"),
                   F.min(F.col("ts").cast("double")).alias("start_t"), F.max(F.col("ts").cast("double")).alias("end_t")))
    best = Window.partitionBy("job_id").orderBy(F.desc("weight"), "node")
    reference = (weight.withColumn("pick", F.row_number().over(best)).where(F.col("pick") == 1)
                 .select("job_id", F.col("node").alias("ref_node"),
                         (F.col("start_t") + F.lit(early_share) * (F.col("end_t") - F.col("start_t"))).alias("early_t")))
    ref_firsts = (firsts.join(reference, on="job_id", how="inner")
                  .where((F.col("node") == F.col("ref_node")) & (F.col("first_t") <= F.col("early_t")))
                  .select("job_id", "event_id", F.col("first_t").alias("ref_t")))
    return (firsts.join(ref_firsts, on=["job_id", "event_id"], how="inner")
            .groupBy("job_id", "node")
            .agg(F.percentile_approx(F.col("first_t") - F.col("ref_t"), 0.5).alias("offset_s"))
            .select("job_id", "node", F.col("offset_s").cast("double").alias("offset_s")))


def stated_times(events: DataFrame, patterns: Iterable[str] = ()) -> DataFrame:
    """``events`` with ``ts`` filled on the lines without one whose message states a time
    (``patterns``: Java regexes, group 1 the time as yyyy-MM-dd, then ``_``, ``T`` or a space,
    then HH:mm:ss; ``SpatialConfig.stated_time_patterns``), read in the session's time zone as
    header times are. Unchanged without a message column or patterns."""
    patterns = list(patterns)
    if not patterns or "message" not in events.columns:
        return events
    texts = [F.nullif(extract_first(F.col("message"), pattern), F.lit("")) for pattern in patterns]
    text = F.regexp_replace(F.coalesce(*texts), r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[_T]", "$1 ")
    # coalesce evaluates its second argument only where ts is null: no regex on timed lines
    return events.withColumn("ts", F.coalesce(F.col("ts"), text.try_cast("timestamp")))
