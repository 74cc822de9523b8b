"""Pace per unit: how long each unit's steps take against its peers' (LLMPrism's question, from logs).

A straggler logs no error: every rank of a synchronous job waits for it in the next collective,
so the job slows as a whole and only per-rank readings show *which* rank the others wait for.
Two readings are taken from the lines, both free of clock skew (they are durations, not times):

- ``timers``: Megatron's ``--timing-log-option all`` blocks (``times across ranks (ms):``, a
  timer name, ``rank N: <ms>`` per rank), printed by the logging rank for every rank. A rank's
  compute timers grow on a straggler while the others' gradient-sync timers absorb their wait.
- ``progress``: a rank file's own iteration lines (the temporal step's ``iteration_rules``),
  where several ranks log them: the time between two of a file's progress lines per iteration.

Each reading becomes a ratio to the median of the units of the same job, step, source and timer;
a unit's step row keeps its largest ratio over the timers (the timer it is slowest on).
``diagnosis_pace`` holds those rows; the report draws them, and ``ranking.unit_slowness`` turns
the timer readings into the ranking's slowness signal.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from l4spark.io.tables import DIAGNOSIS_PACE, columns
from l4spark.regexcolumns import rlike
from l4spark.temporal.config import TemporalConfig
from l4spark.temporal.lines import iteration_marker

PACE_COLUMNS = columns(DIAGNOSIS_PACE.schema)

# Megatron's per-rank timers (--timing-log-option all): a header, a timer name, one line per rank
TIMER_HEAD_PATTERN = r"times across ranks \(ms\):\s*$"
TIMER_NAME_PATTERN = r"^\s*([A-Za-z][\w-]*):\s*$"
TIMER_RANK_PATTERN = r"^\s*rank\s+(\d+):\s+([0-9.]+)\s*$"
MIN_PEERS = 3  # a step's median needs at least this many units reading it


def timer_readings(events: DataFrame, conf: TemporalConfig | None = None) -> DataFrame:
    """Every per-rank timer reading of Megatron's ``times across ranks (ms):`` blocks.

    Input: ``events`` (job_id, node, rank, line_no, message). Output: job_id, reporter,
    reporter_rank (the file printing the block), block (the line number of its header),
    iteration (the last iteration line of the reporter's file before the header, when ``conf``
    is given and there is one), timer, named_rank, ms. Empty without message or line_no.
    """
    schema = ("job_id string, reporter string, reporter_rank int, block long, iteration long, timer string, "
              "named_rank int, ms double")
    if "message" not in events.columns or "line_no" not in events.columns:
        return events.sparkSession.createDataFrame([], schema)
    msg = F.col("message")
    is_head, is_name, is_rank = (rlike(msg, TIMER_HEAD_PATTERN), rlike(msg, TIMER_NAME_PATTERN),
                                  rlike(msg, TIMER_RANK_PATTERN))
    iteration = iteration_marker(conf) if conf is not None else F.lit(None).cast("long")
    is_progress = iteration.isNotNull() if conf is not None else F.lit(False)
    in_file = (Window.partitionBy("job_id", "node", "rank").orderBy("line_no")
               .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (
        events.where(msg.isNotNull() & (is_head | is_name | is_rank | is_progress))
        .select("job_id", "node", "rank", "line_no",
                F.when(is_head, F.col("line_no")).alias("head"),
                F.when(is_name, F.regexp_extract(msg, TIMER_NAME_PATTERN, 1)).alias("name"),
                F.when(is_rank, F.regexp_extract(msg, TIMER_RANK_PATTERN, 1).cast("int")).alias("named_rank"),
                F.when(is_rank, F.regexp_extract(msg, TIMER_RANK_PATTERN, 2).cast("double")).alias("ms"),
                iteration.alias("progress"))
        .withColumn("block", F.last("head", ignorenulls=True).over(in_file))
        .withColumn("timer", F.last("name", ignorenulls=True).over(in_file))
        .withColumn("iteration", F.last("progress", ignorenulls=True).over(in_file))
        .where(F.col("named_rank").isNotNull() & F.col("block").isNotNull() & F.col("timer").isNotNull())
        .select("job_id", F.col("node").alias("reporter"), F.col("rank").cast("int").alias("reporter_rank"),
                F.col("block").cast("long"), F.col("iteration").cast("long"), "timer", "named_rank", "ms")
    )


def progress_readings(events: DataFrame, conf: TemporalConfig) -> DataFrame:
    """Per rank file that prints its own progress lines, the time per iteration between two of them.

    Output: job_id, node, rank, iteration, ms (seconds between the file's previous progress line
    and this one, per iteration between them, in ms). Files with fewer than two timed progress
    lines have no row.
    """
    iteration = iteration_marker(conf)
    in_file = Window.partitionBy("job_id", "node", "rank").orderBy("iteration")
    marks = (
        events.where(F.col("message").isNotNull() & F.col("ts").isNotNull())
        .select("job_id", "node", F.col("rank").cast("int").alias("rank"), iteration.alias("iteration"),
                F.col("ts").cast("double").alias("t"))
        .where(F.col("iteration").isNotNull())
        .groupBy("job_id", "node", "rank", "iteration").agg(F.min("t").alias("t"))
        .withColumn("prev_iteration", F.lag("iteration").over(in_file))
        .withColumn("prev_t", F.lag("t").over(in_file))
    )
    per_iteration = (F.col("t") - F.col("prev_t")) * 1000.0 / (F.col("iteration") - F.col("prev_iteration"))
    return (marks.where(F.col("prev_t").isNotNull() & (F.col("t") >= F.col("prev_t")))
            .select("job_id", "node", "rank", "iteration", per_iteration.alias("ms")))


def unit_pace(events: DataFrame, conf: TemporalConfig = TemporalConfig(), granularity: str = "node",
              timers: DataFrame | None = None) -> DataFrame:
    """``diagnosis_pace`` rows of every job of ``events``: per unit and step, its slowest reading
    against the median of its peers.

    Input: ``events`` (job_id, node, rank, line_no, ts, message). Output (DIAGNOSIS_PACE):
    job_id, node, process_rank (null at node granularity), source (``timers`` | ``progress``),
    step (the iteration; a timer block without an iteration line before it: its header's line
    number), timer (null for progress), ms, peer_ms (the median over the units of that job,
    source, step and timer), ratio (ms / peer_ms). A node's row is its slowest rank's. Steps
    read by fewer than MIN_PEERS units have no row. ``timers``: ``timer_readings(events, conf)``
    when the caller has them already (the diagnosis computes them once for this and the ranking).
    """
    timers = timer_readings(events, conf) if timers is None else timers
    holders = events.select("job_id", "node", F.col("rank").cast("int").alias("named_rank")).distinct()
    timed = (
        timers.join(holders, on=["job_id", "named_rank"], how="inner")
        .select("job_id", "node", F.col("named_rank").alias("rank"), F.lit("timers").alias("source"),
                F.coalesce("iteration", "block").alias("step"), "timer", "ms")
    )
    progressed = progress_readings(events, conf).select(
        "job_id", "node", "rank", F.lit("progress").alias("source"), F.col("iteration").alias("step"),
        F.lit(None).cast("string").alias("timer"), "ms")
    readings = timed.unionByName(progressed)
    process_rank = F.col("rank") if granularity == "rank" else F.lit(None).cast("int")
    per_unit = (readings.groupBy("job_id", "node", process_rank.alias("process_rank"), "source", "step", "timer")
                .agg(F.max("ms").alias("ms")))
    same_step = Window.partitionBy("job_id", "source", "step", "timer")
    with_peers = (
        per_unit.withColumn("peer_ms", F.percentile_approx("ms", 0.5).over(same_step))
        .withColumn("n_units", F.count(F.lit(1)).over(same_step))
        .where((F.col("n_units") >= MIN_PEERS) & (F.col("peer_ms") > 0))
        .withColumn("ratio", F.col("ms") / F.col("peer_ms"))
    )
    # the largest ratio; among equal ratios (the median unit reads 1.0 on many timers) the
    # greatest timer name, so that the row does not depend on the order rows arrive in
    slowest = F.max(F.struct("ratio", "timer", "ms", "peer_ms"))
    return (
        with_peers.groupBy("job_id", "node", "process_rank", "source", "step")
        .agg(slowest.alias("worst"), F.max("ratio").alias("ratio"))
        .select("job_id", "node", "process_rank", "source", F.col("step").cast("long").alias("step"),
                F.col("worst.timer").alias("timer"), F.round("worst.ms", 3).alias("ms"),
                F.round("worst.peer_ms", 3).alias("peer_ms"), F.round("ratio", 4).alias("ratio"))
        .select(*PACE_COLUMNS)
    )
