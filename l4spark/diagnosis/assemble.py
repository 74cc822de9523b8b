"""Diagnosis (L4 step 5 and the assembly): one ranked list of failure-indicating events per job.

``diagnose_jobs`` runs the whole method over a set of jobs in one Spark application:

1. cross-job filter (``normal_pool.filter_normal_events``): candidate lines, the events not
   normal for jobs of the same settings (every line when the job has no history);
2. spatial (``spatial.rank_nodes`` over the candidate events): node ranking, suspects and the
   events that make them deviate;
3. temporal (``temporal``): stage and iteration of every line, failure stage and iteration, DTW
   scores of iterations and the events of anomalous ones;
4. fault patterns (``patterns.match_patterns``) over the job's candidate events;
5. assembly (``score_events``, pure pandas, per job): every candidate event gets evidence from
   each source and a score; the flagged ones, ranked, are ``diagnosis_events``.

Only per-(job, event) aggregates reach the driver (a job has hundreds of candidate events, not
millions of lines). A job that cannot be diagnosed (not parsed, no line, a step failing on it)
gets a ``diagnosis_jobs`` row with ``status = error`` and the reason; the other jobs go on.
See docs/diagnosis.md for the evidence and the score.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from l4spark import __version__
from l4spark.config import Config
from l4spark.crossjob.normal_pool import (
    filter_normal_events,
    read_normal_pool,
    with_message_form,
)
from l4spark.diagnosis.pattern_store import enabled_patterns
from l4spark.diagnosis.patterns import MAX_MATCH_CHARS, FaultPattern, unit_fault_patterns
from l4spark.crossjob.reasons import NO_HISTORY
from l4spark.diagnosis.config import CONFIG_ECHO_PATTERN, INDENTED_PATTERN, WARNING_LINE_PATTERN, DiagnosisConfig
from l4spark.diagnosis.scoring import (SEVERITY, job_patterns, pattern_hit_rows, rank_matches, score_events,
                                      known_fault_printers, lift_printers, sample_only_signatures, slowness_claims,
                                      slowed_jobs, unmeasured_claims, with_signature_printers,
                                      with_unborne_claims_last, with_unit_faults)
from l4spark.io.frames import computed_once, local_frame, materialize, session_settings
from l4spark.io.session import ADAPTIVE, CODEGEN_FACTORY_MODE, WHOLE_STAGE_CODEGEN
from l4spark.regexcolumns import any_rlike, rlike
from l4spark.spatial.pace import PACE_COLUMNS, timer_readings, unit_pace
from l4spark.spatial.ranking import (configured_unit_inputs, rank_unit_inputs, spatial_events, with_scored_events,
                                     write_diagnosis_nodes)
from l4spark.io.storage import in_parallel, read_table, table_exists, write_job_rows
from l4spark.io.tables import DIAGNOSIS_ATTEMPTS, DIAGNOSIS_EVENTS, DIAGNOSIS_ITERATIONS, DIAGNOSIS_JOBS, DIAGNOSIS_NODES, DIAGNOSIS_PACE, columns
from l4spark.temporal.jobs import analyse_iterations, job_failure_points, temporal_events
from l4spark.temporal.lines import next_in_file, node_clock_offsets, with_stage_and_iteration
from l4spark.temporal.lines import MARK_COLUMNS, STAGED_COLUMNS

log = logging.getLogger(__name__)

DIAGNOSIS_JOBS_COLUMNS = columns(DIAGNOSIS_JOBS.schema)
DIAGNOSIS_EVENTS_COLUMNS = columns(DIAGNOSIS_EVENTS.schema)
# One row per job that a diagnosis was attempted on: its last attempt, and how many attempts in a
# row failed on the same input (the parse it read); the nightly gives up after nightly.max_attempts.


# ---- Spark: per-(job, event) evidence ---------------------------------------------------------


def _severity(level: F.Column) -> F.Column:
    expr = F.lit(None).cast("int")
    for name, value in SEVERITY.items():
        expr = F.when(F.upper(level) == name, F.lit(value)).otherwise(expr)
    return F.coalesce(expr, F.lit(0))


def prepare_lines(staged: DataFrame, offsets: DataFrame, conf: DiagnosisConfig, tconf=None) -> DataFrame:
    """Staged events plus ``t`` (seconds on the job's reference clock: the line's own timestamp, or
    the last one before it in its file, minus the node's clock offset), ``frame`` (a stack-frame
    line, or the source line printed under a Python frame), ``t_by`` (the latest the line can have
    been written: its own timestamp or the next one below it in its file, on the same clock; null
    when none is below) and ``tail`` (no timestamp at or below
    the line in its file, and below the file's last stage or iteration marker when it has one:
    the end of a process's output, whose time ``t`` only bounds from below; a crash's untimed
    stderr lines under startup-only timestamps are the common case)."""
    in_file = Window.partitionBy("job_id", "file").orderBy("line_no")
    whole_file = in_file.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    marker = _progress_mark(staged, tconf) if tconf is not None else F.lit(False)
    last_marker = F.max(F.when(marker, F.col("line_no"))).over(whole_file)
    # the staged frame carries it (temporal.lines.with_stage_and_iteration's ts_next)
    ts_below = F.col("ts_next") if "ts_next" in staged.columns else next_in_file("ts")
    return (with_line_flags(staged, conf)
            .withColumn("ts_filled", F.last("ts", ignorenulls=True).over(
                in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
            .withColumn("tail", ts_below.isNull() & (F.col("line_no") > F.coalesce(last_marker, F.lit(-1))))
            .join(F.broadcast(offsets), on=["job_id", "node"], how="left")
            .withColumn("t", F.col("ts_filled").cast("double") - F.coalesce("offset_s", F.lit(0.0)))
            .withColumn("t_by", ts_below.cast("double") - F.coalesce("offset_s", F.lit(0.0)))
            .drop("offset_s", "ts_filled"))


def _progress_mark(lines: DataFrame, tconf) -> F.Column:
    """A stage or iteration marker line: the staged frame's ``progress_mark`` when it carries it
    (``with_stage_and_iteration(with_marks=True)``), else the markers matched here."""
    from l4spark.temporal.lines import iteration_marker, stage_marker

    if "progress_mark" in lines.columns:
        return F.col("progress_mark")
    return stage_marker(tconf).isNotNull() | iteration_marker(tconf).isNotNull()


def with_line_flags(lines: DataFrame, conf: DiagnosisConfig) -> DataFrame:
    """Events lines plus ``frame`` (a stack-frame line: ``frame_patterns``, and the C++ exception
    framing when ``native_exception_framing``; or the source line printed under a Python frame,
    ``source_after``, or under a Python warning when ``warning_source_lines``) and
    ``boilerplate`` (a frame, a line without a letter such as ``====`` or a blank, a
    teardown/advice line of ``consequence_patterns``, or a configuration echo line when
    ``config_echo_lines``):
    what the cross-job filter removes whatever the history (``normal_pool.BOILERPLATE``). Needs
    job_id, file, line_no, message (rank when the frame has it); a null message is neither."""
    in_file = Window.partitionBy("job_id", "file").orderBy("line_no")
    frame = any_rlike("message", conf.line_frame_patterns)
    previous = F.lag("message").over(in_file)
    after_frame = F.coalesce(rlike(previous, conf.source_after), F.lit(False))
    if conf.warning_source_lines:
        # the source line under a Python warning: indented, right after the warning line of the
        # same file and rank (ranks interleaved in one file: another rank's line is not it)
        same_rank = (F.lag("rank").over(in_file).eqNullSafe(F.col("rank")) if "rank" in lines.columns
                     else F.lit(True))
        after_frame = after_frame | F.coalesce(
            rlike(previous, WARNING_LINE_PATTERN) & same_rank
            & rlike("message", INDENTED_PATTERN), F.lit(False))
    consequence = any_rlike("message", conf.consequence_patterns)
    echo = (F.coalesce(rlike("message", CONFIG_ECHO_PATTERN), F.lit(False)) if conf.config_echo_lines
            else F.lit(False))
    no_letter = F.coalesce(~F.col("message").rlike(r"\p{L}"), F.lit(False))
    return (lines.withColumn("frame", frame | after_frame)
            .withColumn("boilerplate", F.col("frame") | no_letter | consequence | echo))


def job_timing(lines: DataFrame, tconf) -> DataFrame:
    """Per job over ``prepare_lines`` output: start_t, end_t, last_progress_t (the last stage or
    iteration marker: where the job stopped making progress), n_lines, n_nodes, n_ranks."""
    progress = _progress_mark(lines, tconf)
    return (lines.groupBy("job_id")
            .agg(F.min("t").alias("start_t"), F.max("t").alias("end_t"),
                 F.max(F.when(progress, F.col("t"))).alias("last_progress_t"),
                 F.count(F.lit(1)).alias("n_lines"), F.countDistinct("node").alias("n_nodes"),
                 F.countDistinct("node", "rank").alias("n_ranks")))


def event_evidence(candidates: DataFrame, exit_line_patterns: Sequence[str] = (),
                   nonfinite_rules: Sequence[str] = ()) -> DataFrame:
    """Per (job, candidate event) over candidate lines (``prepare_lines`` columns plus
    keep_reason): n_lines, n_nodes, n_ranks, first_t, last_t, severity (highest level, see
    SEVERITY), frame_share, tail (any line in its file's tail), seen_by_t (the earliest any
    of its lines can be shown to have been written by: the least ``t_by``; null when none can), the first line (sample, sample_node, sample_ts, stage, level),
    keep_reason, exit_nodes (sorted nodes of its lines that match one of ``exit_line_patterns``,
    a launcher's report of its own failed worker; empty without patterns), nodes (the sorted
    nodes that printed it: where a pattern match is, ``scoring.rank_matches``), node_lines (the
    lines of each of ``nodes``, in their order: who printed most of a known fault,
    ``scoring.known_fault_printers``) and nonfinite (a line of it prints a value as not a number
    or infinite, ``nonfinite_rules``: then the sample is the first such line, the one that shows
    why the event matters). One pass over the lines: per node first, then per event."""
    lines = (candidates.withColumn("severity", _severity(F.col("level")))
             .withColumn("exit_node", F.when(any_rlike("message", exit_line_patterns), F.col("node")))
             .withColumn("nonfinite", any_rlike("message", nonfinite_rules)))
    seen_by = F.min("t_by") if "t_by" in candidates.columns else F.lit(None).cast("double")
    first = F.struct((~F.col("nonfinite")).alias("finite"), F.coalesce("t", F.lit(float("inf"))).alias("t"),
                     "node", "rank", "line_no", "message", "ts", "stage", "level")
    per_node = (lines.groupBy("job_id", "event_id", "node")
                .agg(F.count(F.lit(1)).alias("n_lines"),
                     F.when(F.col("node").isNotNull(), F.size(F.collect_set("rank"))).alias("n_ranks"),
                     F.min("t").alias("first_t"), F.max("t").alias("last_t"), F.max("severity").alias("severity"),
                     F.sum(F.col("frame").cast("double")).alias("frame_sum"), F.count("frame").alias("frame_n"),
                     F.max(F.col("tail")).alias("tail"), seen_by.alias("seen_by_t"), F.min(first).alias("first"),
                     F.min("keep_reason").alias("keep_reason"), F.max("exit_node").alias("exit_node"),
                     F.max("nonfinite").alias("nonfinite")))
    printed = F.array_sort(F.collect_list(F.when(F.col("node").isNotNull(), F.struct("node", "n_lines"))))
    return (per_node.groupBy("job_id", "event_id")
            .agg(F.sum("n_lines").alias("n_lines"), F.count("node").alias("n_nodes"),
                 F.sum("n_ranks").alias("n_ranks"),
                 F.min("first_t").alias("first_t"), F.max("last_t").alias("last_t"), F.max("severity").alias("severity"),
                 F.try_divide(F.sum("frame_sum"), F.sum("frame_n")).alias("frame_share"),
                 F.max("tail").alias("tail"), F.min("seen_by_t").alias("seen_by_t"),
                 F.min("first").alias("first"), F.min("keep_reason").alias("keep_reason"),
                 F.array_sort(F.collect_set("exit_node")).alias("exit_nodes"),
                 printed.alias("printed"), F.max("nonfinite").alias("nonfinite"))
            .select("job_id", "event_id", "n_lines", "n_nodes", "n_ranks", "first_t", "last_t", "severity",
                    "frame_share", "tail", "seen_by_t", F.col("first.message").alias("sample"), F.col("first.node").alias("sample_node"),
                    F.col("first.ts").alias("sample_ts"), F.col("first.stage").alias("stage"),
                    F.col("first.level").alias("level"), "keep_reason", "exit_nodes",
                    F.col("printed.node").alias("nodes"), F.col("printed.n_lines").alias("node_lines"), "nonfinite"))


def matched_event_lines(candidates: DataFrame, signatures: pd.DataFrame) -> pd.DataFrame:
    """job_id, event_id, node, message (its first ``MAX_MATCH_CHARS`` characters, as matched),
    n_lines: the distinct candidate lines per node of the (job, event) pairs of ``signatures``
    (``scoring.sample_only_signatures``), for ``scoring.with_signature_printers``. One query (the
    pairs' event ids as a literal list: a handful a job), none when there is no pair."""
    columns = ["job_id", "event_id", "node", "message", "n_lines"]
    if signatures.empty:
        return pd.DataFrame(columns=columns)
    lines = (candidates.where(F.col("job_id").isin(sorted(set(signatures["job_id"])))
                              & F.col("event_id").isin(sorted(set(signatures["event_id"]))))
             .groupBy("job_id", "event_id", "node", F.substring("message", 1, MAX_MATCH_CHARS).alias("message"))
             .agg(F.count(F.lit(1)).alias("n_lines")).select(*columns).toPandas())
    wanted = signatures[["job_id", "event_id"]].drop_duplicates()
    return lines.merge(wanted, on=["job_id", "event_id"], how="inner")


def failed_event_shares(spark: SparkSession, config: Config, job_ids: Sequence[str]) -> pd.DataFrame:
    """How common each event is among the warehouse's failed jobs: event_id, n_failed (failed jobs
    holding it), plus the total as attribute ``n_failed_jobs``. From the small job_event_counts
    table; the diagnosed jobs count too (each job's own share is taken out when scoring)."""
    storage = config.storage
    if not (table_exists(storage, "jobs") and table_exists(storage, "job_event_counts")):
        frame = pd.DataFrame({"event_id": pd.Series(dtype=str), "n_failed": pd.Series(dtype="int64")})
        frame.attrs["n_failed_jobs"] = 0
        return frame
    failed = read_table(spark, storage, "jobs").where(
        (F.col("status") == "failed") | F.col("job_id").isin(list(job_ids))).select("job_id")
    counts = read_table(spark, storage, "job_event_counts").where(F.col("event_id").isNotNull())
    # one query: the per-event counts and, as the one row with a null event id, the failed jobs
    per_event = (counts.join(failed, on="job_id", how="inner").groupBy("event_id")
                 .agg(F.countDistinct("job_id").alias("n_failed")))
    total = failed.agg(F.lit(None).cast("string").alias("event_id"), F.count(F.lit(1)).alias("n_failed"))
    rows = per_event.unionByName(total).toPandas()
    is_total = rows["event_id"].isna()
    frame = rows[~is_total].reset_index(drop=True)
    frame.attrs["n_failed_jobs"] = int(rows.loc[is_total, "n_failed"].sum())
    return frame


# ---- the whole diagnosis over a set of jobs ---------------------------------------------------


@dataclass
class Diagnosis:
    """The outcome of ``diagnose_jobs``: the small result tables as pandas, plus report inputs."""

    run_id: str
    jobs: pd.DataFrame  # DIAGNOSIS_JOBS_COLUMNS, one row per requested job
    events: pd.DataFrame  # DIAGNOSIS_EVENTS_COLUMNS (flagged events only)
    nodes: pd.DataFrame  # DIAGNOSIS_NODES_COLUMNS
    iterations: pd.DataFrame  # diagnosis_iterations columns (threshold and reason when the temporal step gives them)
    scored: pd.DataFrame  # every candidate event with its evidence (``score_events``)
    patterns: dict[str, list[dict]]  # job -> matched patterns with root cause and remedy
    stages: pd.DataFrame  # job_id, node, stage, start_ts, end_ts
    first_errors: pd.DataFrame  # job_id, node, ts, event_id, message
    heat: pd.DataFrame  # job_id, event_id, node, n_lines (flagged events)
    pace: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PACE_COLUMNS))  # DIAGNOSIS_PACE rows
    extra: dict[str, dict] = field(default_factory=dict)  # job -> settings, n_nodes, n_ranks, history
    # only with keep_ranking_inputs: what the ranking ranked, to rank again offline
    # (evaluation/rerank.py): "facts" and "activity" (spatial.ranking.unit_inputs), "lifts"
    # (job_id, node, pattern_ids: the lone printers of a known fault, ``known_fault_printers``);
    # and what the event score scored, to score again offline (evaluation/rescore.py): the
    # ``score_*`` frames of ``score_inputs``
    ranking_inputs: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def diagnosed(self) -> list[str]:
        return sorted(self.jobs.loc[self.jobs["status"] == "diagnosed", "job_id"])


def batch_settings(conf: DiagnosisConfig, n_lines: int) -> dict[str, str]:
    """The Spark session settings a batch of ``n_lines`` lines is diagnosed under: adaptive query
    execution off unless ``adaptive_execution``; code generation off (whole-stage and per
    expression: Spark's interpreter evaluates the expressions) when the batch has at most
    ``interpreted_max_lines`` lines. A batch is some fifty queries over small data, each with its
    own plan to compile (the per-line frame's windows, some 60 regular expressions, the
    aggregations of every step); on small data the compiling is most of their CPU. Results do
    not depend on either setting."""
    settings = {} if conf.adaptive_execution else {ADAPTIVE: "false"}
    if n_lines <= conf.interpreted_max_lines:
        settings |= {WHOLE_STAGE_CODEGEN: "false", CODEGEN_FACTORY_MODE: "NO_CODEGEN"}
    return settings


def new_run_id(prefix: str = "diagnose") -> str:
    return f"{prefix}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def diagnose_jobs(spark: SparkSession, config: Config, job_ids: Iterable[str], run_id: str | None = None,
                  progress: Callable[[str], None] = log.info, keep_ranking_inputs: bool = False) -> Diagnosis:
    """Diagnose ``job_ids`` (already parsed) in one pass; nothing is written (``write_diagnosis``).
    ``keep_ranking_inputs``: also return the node ranking's and the event score's inputs
    (``Diagnosis.ranking_inputs``).

    A job missing from the jobs table, or without any line, becomes an error row. When the batch
    fails on a job's data, the jobs are diagnosed one by one so that only the broken one errs.
    """
    run_id = run_id or new_run_id()
    job_ids = sorted(set(job_ids))
    # read once for every batch; a misspelt id of disabled_patterns fails the run here
    library = enabled_patterns(spark, config.storage, config.diagnosis.disabled_patterns)
    processed_at = datetime.now(timezone.utc).replace(tzinfo=None)
    errors: dict[str, str] = {}
    registry = {}
    if table_exists(config.storage, "jobs"):
        registry = {r.job_id: r for r in read_table(spark, config.storage, "jobs")
                    .where(F.col("job_id").isin(job_ids)).collect()}
    for job_id in job_ids:
        row = registry.get(job_id)
        if row is None:
            errors[job_id] = "not parsed: the job is not in the jobs table (run `l4spark parse` or pass --logs-root)"
        elif not row.n_lines:
            errors[job_id] = (f"no log line to diagnose ({row.n_files} files, {row.n_issues} input issues; "
                              "see the quarantine table)" + (f"; job.json: {row.meta_error}" if row.meta_error else ""))
    ready = [j for j in job_ids if j not in errors]
    parts = []
    if ready:
        n_lines = sum(int(registry[job_id].n_lines or 0) for job_id in ready)
        with session_settings(spark, batch_settings(config.diagnosis, n_lines)):
            _diagnose_ready(spark, config, ready, registry, progress, parts, errors, library, keep_ranking_inputs)
    merged = _merge_parts(parts)
    rows = [*merged.pop("job_rows")]
    for job_id, reason in sorted(errors.items()):
        rows.append({"job_id": job_id, "status": "error", "error": reason, "suspect_nodes": [], "matched_patterns": [],
                     "n_lines": int(registry[job_id].n_lines or 0) if job_id in registry else 0})
    jobs = pd.DataFrame(rows).reindex(columns=DIAGNOSIS_JOBS_COLUMNS)
    jobs["run_id"], jobs["processed_at"], jobs["version"] = run_id, processed_at, __version__
    jobs = jobs.sort_values("job_id").reset_index(drop=True)
    return Diagnosis(run_id=run_id, jobs=jobs, **merged)


def _diagnose_ready(spark: SparkSession, config: Config, ready: list[str], registry: dict,
                    progress: Callable[[str], None], parts: list[dict], errors: dict[str, str],
                    library: list[FaultPattern], keep_ranking_inputs: bool = False) -> None:
    """The batch of ``ready`` jobs in one pass into ``parts``; when it fails on some job's data,
    the jobs one by one, so that only the broken one gets its reason in ``errors``. ``library``:
    the fault patterns matched (``enabled_patterns``)."""
    try:
        parts.append(_diagnose_batch(spark, config, ready, registry, progress, library, keep_ranking_inputs))
    except Exception as exc:  # a step failed on some job's data: isolate it
        if len(ready) == 1:
            errors[ready[0]] = _failed(ready[0], exc)
        else:
            progress(f"batch diagnosis failed ({type(exc).__name__}); diagnosing the {len(ready)} jobs one by one")
            for job_id in ready:
                try:
                    parts.append(_diagnose_batch(spark, config, [job_id], registry, progress, library,
                                                 keep_ranking_inputs))
                except Exception as one:  # noqa: BLE001 - reported as the job's error row
                    errors[job_id] = _failed(job_id, one)


def _failed(job_id: str, exc: Exception) -> str:
    """The error text of a job whose diagnosis raised; logged in one line (the stack trace only
    when logging is verbose: it is the job's error row that an operator reads)."""
    reason = f"diagnosis failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:500]}"
    log.error("%s: %s", job_id, reason, exc_info=log.isEnabledFor(logging.INFO))
    return reason


def _merge_parts(parts: list[dict]) -> dict:
    keys = ["events", "nodes", "iterations", "scored", "stages", "first_errors", "heat", "pace"]
    merged: dict = {"job_rows": [r for p in parts for r in p["job_rows"]], "patterns": {}, "extra": {}}
    for key in keys:
        frames = [p[key] for p in parts if len(p[key])]
        merged[key] = pd.concat(frames, ignore_index=True) if frames else (parts[0][key] if parts else pd.DataFrame())
    for p in parts:
        merged["patterns"].update(p["patterns"])
        merged["extra"].update(p["extra"])
    kept = [p["ranking_inputs"] for p in parts if p.get("ranking_inputs")]
    merged["ranking_inputs"] = {name: pd.concat([k[name] for k in kept], ignore_index=True)
                                for name in (kept[0] if kept else {})}
    return merged


def _diagnose_batch(spark: SparkSession, config: Config, job_ids: list[str], registry: dict,
                    progress: Callable[[str], None], library: list[FaultPattern],
                    keep_ranking_inputs: bool = False) -> dict:
    conf = config.diagnosis
    tconf = config.temporal
    storage = config.storage
    progress(f"diagnosing {len(job_ids)} jobs")
    # The batch's lines are read once: every step below reads them again (clock offsets, staging,
    # ranking, pace), and each fresh read of the table is a file listing and a scan of its own.
    events = read_table(spark, storage, "events").where(F.col("job_id").isin(job_ids)).persist()
    # the registry rows are on the driver already (diagnose_jobs); no second read of the table
    jobs = spark.createDataFrame([(job_id, registry[job_id].settings) for job_id in job_ids],
                                 "job_id string, settings string")
    lines = None
    try:
        offsets = materialize(node_clock_offsets(events, tconf))
        staged = with_stage_and_iteration(events, tconf, offsets, with_marks=True)
        # computed once, with the masked message the cross-job filter compares (its decisions
        # and its candidate lines both read it): every later step plans from the stored lines
        lines = computed_once(with_message_form(prepare_lines(staged, offsets, conf, tconf), config.masking,
                                                config.structure.fold_digits))
        return _diagnose_lines(spark, config, conf, tconf, job_ids, registry, events, jobs, lines, offsets,
                               progress, library, keep_ranking_inputs)
    finally:
        if lines is not None:
            lines.unpersist()
        events.unpersist()


def _diagnose_lines(spark, config, conf, tconf, job_ids, registry, events, jobs, lines, offsets,
                    progress, library: list[FaultPattern], keep_ranking_inputs: bool = False) -> dict:
    storage = config.storage
    # 1. cross-job filter
    pool = read_normal_pool(spark, storage)
    if not conf.use_normal_pool:
        pool = type(pool)(pool.entries.limit(0), pool.variants.limit(0))
    filtered = filter_normal_events(lines, jobs, pool, config.normal_pool, masking=config.masking,
                                    fold_digits=config.structure.fold_digits)
    history = filtered.decisions.select("job_id", "history").distinct().toPandas()
    candidates = filtered.candidates
    # the spatial and temporal steps see what the pool keeps, boilerplate included (timing and
    # localisation evidence); scoring sees the candidates
    candidate_events = materialize(filtered.pool_kept_events())
    evidence = event_evidence(candidates.where(F.col("event_id").isNotNull()),
                              conf.exit_line_patterns if conf.suspect_exit_lines else (),
                              tconf.nonfinite_rules if conf.nonfinite_lines else ()).toPandas()
    evidence = evidence.merge(history, on="job_id", how="left")
    timing = job_timing(lines, tconf).toPandas()
    progress(f"cross-job filter: {len(evidence)} candidate events in {evidence['job_id'].nunique()} jobs")
    # 2. spatial
    # the per-rank timer blocks are parsed once, for the ranking's slowness and for the pace rows
    timers = materialize(timer_readings(events, tconf))
    facts, activity = configured_unit_inputs(events, config.spatial, candidate_events, timers)
    if config.spatial.pair_scored_events and len(evidence):
        facts = with_scored_events(facts, local_frame(spark, evidence[["job_id", "event_id"]]))
    kept = {}
    if keep_ranking_inputs:
        facts, activity = materialize(facts), materialize(activity)
        kept = {"facts": facts.toPandas(), "activity": activity.toPandas()}
    nodes = rank_unit_inputs(facts, activity, config.spatial).toPandas()
    # the library's matches, over every candidate event: a known fault of a node-local class that
    # one node alone printed is a term of the ranking's score (known_fault_weight)
    templates = _templates(spark, config, evidence["event_id"].unique().tolist())
    matches = job_patterns(evidence, templates, library, conf.pattern_min_confidence)
    if conf.printers_from_matched_lines:
        signatures = sample_only_signatures(matches, evidence, templates, library)
        evidence = with_signature_printers(evidence, signatures, matched_event_lines(candidates, signatures))
    printers = known_fault_printers(matches, evidence, conf.known_fault_classes, conf.known_fault_share,
                                    conf.known_fault_per_pattern, conf.known_fault_local_patterns)
    claims = slowness_claims(library) if conf.measured_slowness_overrules else ()
    nodes = lift_printers(nodes, unmeasured_claims(nodes, printers, claims, conf.dead_unit_overrules_slowness),
                          conf.known_fault_weight, config.spatial)
    if keep_ranking_inputs:
        kept["lifts"] = pd.DataFrame([(job_id, *lift) for job_id, lift in printers.items()],
                                     columns=["job_id", "node", "pattern_ids", "share"])
    spatial = spatial_events(nodes)[["job_id", "event_id", "score"]]
    pace = unit_pace(events, tconf, config.spatial.granularity, timers).toPandas()
    # 3. temporal
    iterations_df, progress_df = analyse_iterations(
        lines.select(*STAGED_COLUMNS, *MARK_COLUMNS), candidate_events, tconf, offsets=offsets,
        stated_time_patterns=config.spatial.stated_time_patterns if tconf.stated_times_date_stops else ())
    iterations = iterations_df.toPandas()
    temporal = temporal_events(iterations)[["job_id", "event_id", "score"]]
    points = job_failure_points(lines.select(*events.columns, *MARK_COLUMNS), progress_df, tconf).toPandas()
    progress(f"spatial and temporal steps done ({len(nodes)} units, {len(iterations)} iterations)")
    # 4. patterns (matched above), their events' evidence
    hits = pattern_hit_rows(matches)
    # 5. assembly
    shares = failed_event_shares(spark, config, job_ids)
    scored = score_events(evidence, timing, spatial, temporal, hits, shares, conf, nodes=nodes,
                          peer_failure_patterns=config.spatial.remote_patterns)
    if keep_ranking_inputs:
        kept |= score_inputs(evidence, timing, spatial, temporal, hits, shares)
    matches = rank_matches(matches, scored, nodes if conf.locate_matches else None, conf.matches_by_shown_time)
    if conf.slowness_needs_measuring:
        matches = with_unborne_claims_last(matches, slowness_claims(library), slowed_jobs(iterations), nodes)
    point_by_job = points.set_index("job_id").to_dict("index") if len(points) else {}
    stages = {job_id: point["failure_stage"] for job_id, point in point_by_job.items()
              if isinstance(point["failure_stage"], str)}
    matches = with_unit_faults(matches, nodes, conf, scored, claims, stages)
    scored["template"] = scored["event_id"].map(templates)
    flagged = scored[scored["flagged"]]
    report_parts = _report_inputs(spark, lines, flagged)
    by_id = {p.pattern_id: p for p in (*library, *unit_fault_patterns())}
    job_rows, extra, pattern_rows = [], {}, {}
    history_by_job = history.set_index("job_id")["history"].to_dict() if len(history) else {}
    timing_by_job = timing.set_index("job_id").to_dict("index") if len(timing) else {}
    for job_id in job_ids:
        found = matches.get(job_id, [])
        pattern_rows[job_id] = [{**dataclasses.asdict(m), "root_cause": by_id[m.pattern_id].root_cause,
                                 "remedy": by_id[m.pattern_id].remedy} for m in found]
        job_nodes = nodes[nodes["job_id"] == job_id].sort_values("rank")
        point = point_by_job.get(job_id, {})
        iteration = point.get("failure_iteration")
        best = found[0] if found else None
        job_rows.append({
            "job_id": job_id, "status": "diagnosed", "failure_stage": point.get("failure_stage"),
            "failure_iteration": None if iteration is None or pd.isna(iteration) else int(iteration),
            "suspect_nodes": job_nodes.loc[job_nodes["suspect"], "node"].drop_duplicates().tolist(),
            "matched_patterns": [m.pattern_id for m in found],
            "n_lines": int(registry[job_id].n_lines or 0),
            "n_candidate_events": int((scored["job_id"] == job_id).sum()),
            "error": None, "history": history_by_job.get(job_id, NO_HISTORY),
            "n_events": int(registry[job_id].n_events or 0),
            "n_flagged_events": int((flagged["job_id"] == job_id).sum()),
            "fault_class": best.fault_class if best else None,
            "root_cause": by_id[best.pattern_id].root_cause if best else None,
            "remedy": by_id[best.pattern_id].remedy if best else None,
            "pattern_confidence": best.confidence if best else None,
        })
        info = timing_by_job.get(job_id, {})
        extra[job_id] = {"settings": _settings(registry[job_id].settings), "history": history_by_job.get(job_id, NO_HISTORY),
                         "n_nodes": int(info.get("n_nodes") or 0), "n_ranks": int(info.get("n_ranks") or 0)}
    events_out = _events_table(flagged)
    return {"job_rows": job_rows, "events": events_out, "nodes": nodes, "iterations": iterations, "scored": scored,
            "pace": pace, "patterns": pattern_rows, "extra": extra, "ranking_inputs": kept, **report_parts}


def score_inputs(evidence: pd.DataFrame, timing: pd.DataFrame, spatial: pd.DataFrame, temporal: pd.DataFrame,
                 hits: pd.DataFrame, shares: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``score_events``' inputs as frames to keep (``Diagnosis.ranking_inputs``, names ``score_*``):
    the failed jobs' total of ``shares`` (its attribute) as the one row with a null event id,
    as ``failed_event_shares`` queries it."""
    total = pd.DataFrame({"event_id": [None], "n_failed": [int(shares.attrs.get("n_failed_jobs", 0))]})
    shares_rows = pd.concat([shares[["event_id", "n_failed"]], total], ignore_index=True)
    return {"score_evidence": evidence, "score_timing": timing, "score_spatial": spatial,
            "score_temporal": temporal, "score_hits": hits, "score_shares": shares_rows}


def kept_shares(rows: pd.DataFrame) -> pd.DataFrame:
    """``failed_event_shares``' frame from ``score_inputs``' rows (several batches' rows: each
    event once, the largest total)."""
    is_total = rows["event_id"].isna()
    frame = rows[~is_total].drop_duplicates("event_id").reset_index(drop=True)
    frame.attrs["n_failed_jobs"] = int(rows.loc[is_total, "n_failed"].max()) if is_total.any() else 0
    return frame


def _settings(raw: str | None) -> dict:
    import json
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _templates(spark: SparkSession, config: Config, event_ids: list[str]) -> dict[str, str]:
    if not event_ids or not table_exists(config.storage, "templates"):
        return {}
    rows = (read_table(spark, config.storage, "templates").where(F.col("event_id").isin(event_ids))
            .select("event_id", "template").collect())
    return {r.event_id: r.template for r in rows}


def _to_ts(seconds: pd.Series) -> pd.Series:
    return pd.to_datetime(pd.to_numeric(seconds, errors="coerce"), unit="s")


def _events_table(flagged: pd.DataFrame) -> pd.DataFrame:
    out = flagged.assign(first_ts=_to_ts(flagged["first_t"]), rank=flagged["rank"].astype("int64"))
    return out.reindex(columns=DIAGNOSIS_EVENTS_COLUMNS).reset_index(drop=True)


def _report_inputs(spark: SparkSession, lines: DataFrame, flagged: pd.DataFrame) -> dict:
    """Small per-node aggregates for the reports: stage spans, first error line, flagged event counts."""
    stages = (lines.where(F.col("stage").isNotNull() & F.col("t").isNotNull())
              .groupBy("job_id", "node", "stage").agg(F.min("t").alias("start_t"), F.max("t").alias("end_t"))
              .toPandas())
    first_line = F.struct(F.col("t"), F.col("event_id"), F.col("message"))
    first_errors = (lines.where(_severity(F.col("level")) >= SEVERITY["ERROR"])
                    .where(F.col("t").isNotNull())
                    .groupBy("job_id", "node").agg(F.min(first_line).alias("first"))
                    .select("job_id", "node", F.col("first.t").alias("t"), F.col("first.event_id").alias("event_id"),
                            F.col("first.message").alias("message")).toPandas())
    if len(flagged):
        keys = spark.createDataFrame(flagged[["job_id", "event_id"]].astype(str))
        heat = (lines.join(F.broadcast(keys), on=["job_id", "event_id"], how="inner")
                .groupBy("job_id", "event_id", "node").agg(F.count(F.lit(1)).alias("n_lines")).toPandas())
    else:
        heat = pd.DataFrame(columns=["job_id", "event_id", "node", "n_lines"])
    stages = stages.assign(start_ts=_to_ts(stages["start_t"]), end_ts=_to_ts(stages["end_t"])).drop(
        columns=["start_t", "end_t"])
    first_errors = first_errors.assign(ts=_to_ts(first_errors["t"])).drop(columns=["t"])
    return {"stages": stages, "first_errors": first_errors, "heat": heat}


# ---- writing and reports ----------------------------------------------------------------------


def write_diagnosis(spark: SparkSession, config: Config, diagnosis: Diagnosis,
                    beside: Callable[[list[str]], None] | None = None) -> list[str]:
    """Record every job of ``diagnosis.jobs`` in ``diagnosis_attempts`` and replace the five
    diagnosis tables' rows of its jobs, except that a job whose diagnosis failed keeps the last
    good diagnosis it has (its failure is in ``diagnosis_attempts``); returns those kept jobs.

    ``diagnosis_attempts`` and the per-event, node, iteration and pace tables are written at the
    same time (``in_parallel``: none reads another) and ``diagnosis_jobs`` last, alone: a job's row
    there is the mark that its diagnosis is complete (a crash in between leaves the previous
    diagnosis row, and a rerun replaces everything of the job). A failed job without an earlier
    good diagnosis gets an error row, so that analysts see it.

    ``beside`` (the reports: Python on the driver, while the writes mostly wait on Spark and the
    storage) runs in a thread of its own during the writes, given the kept jobs; its error is
    raised once the writes are done, after theirs.
    """
    storage = config.storage
    failed = set(diagnosis.jobs.loc[diagnosis.jobs["status"] == "error", "job_id"])
    kept = sorted(failed & _diagnosed_before(spark, config, failed))
    job_ids = [j for j in diagnosis.jobs["job_id"] if j not in kept]

    def frame(rows: pd.DataFrame, schema: str) -> DataFrame:
        fields = [c.split(maxsplit=1) for c in schema.split(", ")]
        ordered = rows.reindex(columns=[name for name, _ in fields])
        records = [tuple(_python_value(value, kind) for value, (_, kind) in zip(record, fields))
                   for record in ordered.itertuples(index=False, name=None)]
        return spark.createDataFrame(records, schema)

    def write(rows: pd.DataFrame, schema: str, table: str) -> Callable[[], None]:
        with_rows = set(rows["job_id"]) if len(rows) else set()
        return lambda: write_job_rows(frame(rows, schema).localCheckpoint(), storage, table, job_ids, with_rows)

    def of_written(rows: pd.DataFrame) -> pd.DataFrame:
        return rows[rows["job_id"].isin(job_ids)] if len(rows) else rows

    optional = {"threshold", "reason"} - set(diagnosis.iterations.columns)
    iteration_schema = ", ".join(c for c in DIAGNOSIS_ITERATIONS.schema.split(", ") if c.split()[0] not in optional)
    attempts = attempt_rows(diagnosis.jobs, _parsed_at(spark, config, diagnosis.jobs["job_id"]),
                            _attempts(spark, config, diagnosis.jobs["job_id"]))
    nodes = of_written(diagnosis.nodes)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="l4spark-beside") as pool:
        alongside = pool.submit(beside, kept) if beside is not None else None
        in_parallel(
            lambda: write_job_rows(frame(attempts, DIAGNOSIS_ATTEMPTS.schema).localCheckpoint(), storage,
                                   DIAGNOSIS_ATTEMPTS.name, attempts["job_id"].tolist()),
            write(of_written(diagnosis.events), DIAGNOSIS_EVENTS.schema, "diagnosis_events"),
            lambda: write_diagnosis_nodes(frame(nodes, DIAGNOSIS_NODES.schema).localCheckpoint(), storage, job_ids),
            write(of_written(diagnosis.iterations), iteration_schema, "diagnosis_iterations"),
            write(of_written(diagnosis.pace), DIAGNOSIS_PACE.schema, DIAGNOSIS_PACE.name))
        write(of_written(diagnosis.jobs), DIAGNOSIS_JOBS.schema, "diagnosis_jobs")()
    if alongside is not None:
        alongside.result()
    return kept


def attempt_rows(jobs: pd.DataFrame, parsed_at: dict, previous: pd.DataFrame) -> pd.DataFrame:
    """``diagnosis_attempts`` rows of a batch (``jobs``: ``diagnosis_jobs`` columns). A failed
    job's ``failed_attempts`` counts on from its previous attempt when that failed too on the same
    parse (``parsed_at``); a new parse of the job, or a success, starts it again."""
    before = previous.set_index("job_id") if len(previous) else pd.DataFrame()
    rows = []
    for job in jobs.itertuples():
        parsed = parsed_at.get(job.job_id)
        count = 0
        if job.status == "error":
            count = 1
            if job.job_id in before.index:
                last = before.loc[job.job_id]
                same_input = last["parsed_at"] is not None and parsed is not None and \
                    pd.Timestamp(last["parsed_at"]) == pd.Timestamp(parsed)
                if last["status"] == "error" and same_input:
                    count += int(last["failed_attempts"])
        rows.append({"job_id": job.job_id, "run_id": job.run_id, "attempted_at": job.processed_at,
                     "status": job.status, "error": job.error, "failed_attempts": count, "parsed_at": parsed,
                     "version": job.version})
    return pd.DataFrame(rows, columns=[c.split()[0] for c in DIAGNOSIS_ATTEMPTS.schema.split(", ")])


def _diagnosed_before(spark: SparkSession, config: Config, job_ids) -> set[str]:
    """Jobs of ``job_ids`` that have a good (``diagnosed``) row in ``diagnosis_jobs``."""
    if not job_ids or not table_exists(config.storage, "diagnosis_jobs"):
        return set()
    return {r.job_id for r in read_table(spark, config.storage, "diagnosis_jobs")
            .where(F.col("job_id").isin(sorted(job_ids)) & (F.col("status") == "diagnosed"))
            .select("job_id").collect()}


def _parsed_at(spark: SparkSession, config: Config, job_ids) -> dict:
    if not table_exists(config.storage, "jobs"):
        return {}
    return {r.job_id: r.parsed_at for r in read_table(spark, config.storage, "jobs")
            .where(F.col("job_id").isin(list(job_ids))).select("job_id", "parsed_at").collect()}


def _attempts(spark: SparkSession, config: Config, job_ids) -> pd.DataFrame:
    if not table_exists(config.storage, DIAGNOSIS_ATTEMPTS.name):
        return pd.DataFrame()
    return (read_table(spark, config.storage, DIAGNOSIS_ATTEMPTS.name).where(F.col("job_id").isin(list(job_ids)))
            .select("job_id", "status", "failed_attempts", "parsed_at").toPandas())


def _python_value(value, kind: str):
    """A pandas cell as the plain Python value Spark's schema check accepts (None for missing)."""
    if kind.startswith("array<"):
        if value is None or (np.isscalar(value) and pd.isna(value)):
            return []
        return [_python_value(x, kind[len("array<"):-1]) for x in value]
    if value is None or (np.isscalar(value) and pd.isna(value)) or value is pd.NaT:
        return None
    if kind == "timestamp":
        return pd.Timestamp(value).to_pydatetime(warn=False)
    if kind in ("long", "int"):
        return int(value)
    if kind == "double":
        return float(value)
    if kind == "boolean":
        return bool(value)
    return str(value)
