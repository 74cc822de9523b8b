"""Per-job temporal diagnosis on Spark: failure stage, iteration scores, hangs and slowdowns.

Work is bounded per job: only training lines with an iteration enter the grouped pandas
function, from at most ``max_ranks`` ranks (every rank that prints iteration lines plus an
evenly spaced sample of the others), over the last ``max_iterations`` iterations, each
sequence collapsed and capped at ``max_sequence`` events; each iteration costs ``window`` DTWs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from l4spark.temporal.config import TemporalConfig
from l4spark.temporal.dtw import analyse_progress, score_iterations
from l4spark.temporal.lines import iteration_marker, stage_marker

log = logging.getLogger(__name__)

_RESULT_SCHEMA = ("job_id string, kind string, iteration long, score double, anomalous boolean, "
                  "event_ids array<string>, last_iteration long, stalled boolean, slowdown_from long, "
                  "failure_iteration long")


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
    """job_id, failure_stage: the stage the job's narrating rank file was in when it ended.

    Input: staged events (job_id, file, rank, line_no, message, stage). The narrating file is
    the one printing the most stage markers (rank 0 in every framework here; ties: lowest rank):
    it tells the job's progress, so errors of a stage the job got past (init warnings, retried
    loads) do not count, and the other ranks' stale stage at their end (they print no markers
    and are killed) does not either. A file that never printed a marker is in ``init``. Jobs
    without lines are absent.
    """
    marks = stage_marker(conf, with_iterations=False)
    files = (staged.groupBy("job_id", "file", "rank")
             .agg(F.count(marks).alias("n_marks"),
                  F.max_by(F.coalesce("stage", F.lit("init")), "line_no").alias("end_stage")))
    best = Window.partitionBy("job_id").orderBy(F.desc("n_marks"), "rank", "file")
    return (files.withColumn("pick", F.row_number().over(best)).where(F.col("pick") == 1)
            .select("job_id", F.col("end_stage").alias("failure_stage")))


def analyse_iterations(staged: DataFrame, indicating: DataFrame | None = None,
                       conf: TemporalConfig = TemporalConfig()) -> tuple[DataFrame, DataFrame]:
    """DTW scores per iteration and progress per job.

    Input: staged events (output of ``with_stage_and_iteration``); ``indicating``: (job_id,
    event_id) of candidate / failure-indicating events, or None for ``indicating_stand_in``.
    Output: (iterations: job_id, iteration, score, anomalous, event_ids — the
    ``diagnosis_iterations`` contract; progress: job_id, last_iteration, stalled,
    slowdown_from, failure_iteration, first_anomalous). Jobs without training iterations have
    no iteration rows and null progress fields.
    """
    gate = (indicating if indicating is not None else indicating_stand_in(staged, conf)).select(
        "job_id", "event_id", F.lit(True).alias("gated")).distinct()
    training = staged.where((F.col("stage") == "training") & F.col("iteration").isNotNull())
    ranks = (training.groupBy("job_id", "rank")
             .agg(F.max(iteration_marker(conf).isNotNull()).alias("prints_iterations"))
             .withColumn("n_ranks", F.count(F.lit(1)).over(Window.partitionBy("job_id")))
             .withColumn("pos", F.row_number().over(Window.partitionBy("job_id").orderBy("rank")))
             .where(F.col("prints_iterations")
                    | ((F.col("pos") - 1) % F.greatest(F.lit(1), F.ceil(F.col("n_ranks") / conf.max_ranks)) == 0))
             .select("job_id", "rank"))
    rows = (training.join(F.broadcast(ranks), on=["job_id", "rank"], how="inner")
            .join(gate, on=["job_id", "event_id"], how="left")
            .select("job_id", "rank", "line_no", "iteration", "event_id",
                    F.col("ts").cast("double").alias("t"),
                    iteration_marker(conf).alias("reported"),
                    F.coalesce("gated", F.lit(False)).alias("gated")))

    def per_job(frame: pd.DataFrame) -> pd.DataFrame:
        return _analyse_job(frame, conf)

    result = rows.groupBy("job_id").applyInPandas(per_job, schema=_RESULT_SCHEMA).localCheckpoint()
    iterations = (result.where(F.col("kind") == "iteration")
                  .select("job_id", "iteration", "score", "anomalous", "event_ids"))
    progress = (result.where(F.col("kind") == "job")
                .select("job_id", "last_iteration", "stalled", "slowdown_from", "failure_iteration",
                        F.col("iteration").alias("first_anomalous")))
    return iterations, progress


def _analyse_job(frame: pd.DataFrame, conf: TemporalConfig) -> pd.DataFrame:
    job_id = frame["job_id"].iloc[0]
    frame = frame.sort_values(["iteration", "rank", "line_no"], kind="stable")
    sequences = {int(it): group["event_id"].astype(str).tolist() for it, group in frame.groupby("iteration", sort=True)}
    gate = set(frame.loc[frame["gated"], "event_id"].astype(str))
    scores = score_iterations(sequences, gate, conf)
    marks = frame.loc[frame["reported"].notna(), ["reported", "t"]]
    mark_rank = frame.loc[frame["reported"].notna(), "rank"]
    same_clock = frame[frame["rank"].isin(set(mark_rank))] if len(mark_rank) else frame
    last_t = same_clock["t"].max() if same_clock["t"].notna().any() else None
    marks_list = [(int(i), float(t)) for i, t in marks.itertuples(index=False) if pd.notna(t)]
    last_mark_t = max((t for _, t in marks_list), default=None)
    errors_after = same_clock.loc[same_clock["gated"] & (same_clock["t"] > (last_mark_t or float("inf"))), "t"]
    progress = analyse_progress(marks_list, None if last_t is None else float(last_t),
                                float(errors_after.min()) if len(errors_after) else None, conf)
    anomalous = [s.iteration for s in scores if s.anomalous]
    failure_iteration = progress.failure_iteration
    # where progress stopped: the iteration after the last progress line, when it holds an
    # indicating event or the job stalled there, is anomalous whatever its DTW score
    stopped = progress.last_iteration + 1 if progress.last_iteration is not None else None
    if stopped in sequences and (progress.stalled or gate & set(sequences[stopped])):
        scores = [replace(s, anomalous=True) if s.iteration == stopped else s for s in scores]
    anomalous = [s.iteration for s in scores if s.anomalous]
    rows = [{"job_id": job_id, "kind": "iteration", "iteration": s.iteration, "score": s.score,
             "anomalous": s.anomalous, "event_ids": list(s.event_ids)} for s in scores]
    rows.append({"job_id": job_id, "kind": "job", "iteration": anomalous[0] if anomalous else None,
                 "last_iteration": progress.last_iteration, "stalled": progress.stalled,
                 "slowdown_from": progress.slowdown_from, "failure_iteration": failure_iteration, "event_ids": []})
    columns = [c.split()[0] for c in _RESULT_SCHEMA.split(", ")]
    out = pd.DataFrame([[row.get(c) for c in columns] for row in rows], columns=columns, dtype=object)
    log.debug("temporal %s: %s", job_id, json.dumps({"anomalous": anomalous, "failure": failure_iteration}))
    return out


def job_failure_points(staged: DataFrame, progress: DataFrame) -> DataFrame:
    """job_id, failure_stage, failure_iteration (the iteration only when the stage is training)."""
    return (failure_stages(staged).join(progress, on="job_id", how="left")
            .select("job_id", "failure_stage",
                    F.when(F.col("failure_stage") == "training", F.col("failure_iteration"))
                    .cast("long").alias("failure_iteration")))


def temporal_events(staged: DataFrame, iterations: DataFrame) -> DataFrame:
    """Temporally indicating events: job_id, event_id, score (1 - the lowest score of an
    anomalous iteration introducing it), iteration (first such), stage ('training')."""
    flagged = (iterations.where(F.col("anomalous"))
               .select("job_id", "iteration", "score", F.explode("event_ids").alias("event_id")))
    return (flagged.groupBy("job_id", "event_id")
            .agg(F.max(1 - F.col("score")).alias("score"), F.min("iteration").alias("iteration"))
            .select("job_id", "event_id", "score", "iteration", F.lit("training").alias("stage")))

