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
import math
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from l4spark import __version__
from l4spark.config import Config, step_options
from l4spark.errors import ConfigError
from l4spark.normal_pool import (
    NO_HISTORY,
    filter_normal_events,
    pool_config,
    read_normal_pool,
)
from l4spark.pattern_store import pattern_library
from l4spark.patterns import FaultPattern, PatternMatch, match_patterns
from l4spark.session import materialize
from l4spark.spatial import rank_nodes, spatial_config, spatial_events
from l4spark.storage import read_table, table_exists, write_job_rows
from l4spark.temporal import (
    analyse_iterations,
    job_failure_points,
    node_clock_offsets,
    temporal_config,
    temporal_events,
    with_stage_and_iteration,
)
from l4spark.temporal.lines import STAGED_COLUMNS

log = logging.getLogger(__name__)

SOURCES = ("cross_job", "spatial", "temporal", "pattern")
SEVERITY = {"FATAL": 4, "CRITICAL": 4, "ERROR": 3, "WARN": 2, "WARNING": 2, "INFO": 1, "DEBUG": 0}

DIAGNOSIS_JOBS_SCHEMA = (
    "job_id string, status string, failure_stage string, failure_iteration long, suspect_nodes array<string>, "
    "matched_patterns array<string>, n_lines long, n_candidate_events long, error string, run_id string, "
    "processed_at timestamp, version string, history string, n_events long, n_flagged_events long, "
    "fault_class string, root_cause string, remedy string, pattern_confidence double"
)
DIAGNOSIS_JOBS_COLUMNS = [c.split()[0] for c in DIAGNOSIS_JOBS_SCHEMA.split(", ")]
DIAGNOSIS_EVENTS_SCHEMA = (
    "job_id string, event_id string, template string, rank int, score double, sources array<string>, "
    "n_lines long, n_nodes long, first_ts timestamp, stage string, sample string, sample_node string, "
    "sample_ts timestamp, level string, keep_reason string"
)
DIAGNOSIS_EVENTS_COLUMNS = [c.split()[0] for c in DIAGNOSIS_EVENTS_SCHEMA.split(", ")]
ITERATION_COLUMNS = ["job_id", "iteration", "score", "anomalous", "event_ids"]


@dataclass(frozen=True)
class DiagnosisConfig:
    """Knobs of the assembly (TOML section ``[diagnosis]``); docs/diagnosis.md explains each."""

    use_normal_pool: bool = True  # False: no cross-job filter (every job compared as if without history)
    min_score: float = 0.5  # an event is flagged when its score reaches this
    max_events: int = 200  # flagged events kept per job (best first)
    pattern_min_confidence: float = 0.5  # a pattern is reported from this share of its signature
    onset_margin_s: float = 60.0  # an event first seen this long before the failure onset still counts as late
    setup_onset_margin_s: float = 5.0  # ...before the first error line, in a job that never logged progress
    generic_share: float = 0.5  # in at least this share of the other failed jobs: failure boilerplate...
    generic_min_jobs: int = 20  # ...once the warehouse knows this many failed jobs
    # stack-frame lines (Python and C++ tracebacks) and the source line after a Python frame:
    # they say where the program was, not what went wrong
    frame_patterns: tuple = (r'^\s*File ".*", line [0-9]+', r"^\s*frame #[0-9]+:",
                             r"^\s*Trace[Bb]ack \(most recent call last\):")
    source_after: str = r'^\s*File ".*", line [0-9]+, in '
    # consequence and advice lines: the launcher tearing the other processes down after one failed,
    # and the fixed hints printed under an error; they say the job is going down or how to debug,
    # not what went wrong (lines naming the failed process and its exit code are not here)
    consequence_patterns: tuple = (
        r"closing signal SIG[A-Z]+",  # torch elastic: Sending process N closing signal SIGTERM
        r"\bdeath signal\b|SignalException: Process [0-9]+ got signal",  # agent shutting down on a signal
        r"^\s*Killing subprocess [0-9]+",  # deepspeed launcher
        r"^\s*\S+ FAILED\s*$",  # torchrun's failure summary header ("train.py FAILED")
        r"^\s*traceback\s*:\s*To enable traceback see",  # ...and its hint line
        # ...and the framing of its error summary (the host / rank / exitcode lines inside it stay)
        r"^\s*(Failures|Root Cause \(first observed failure\)):\s*$|^\s*<NO_OTHER_FAILURES>\s*$",
        r"^\s*error_file\s*:|^\s*time\s*:\s*[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{2}:[0-9]{2}:[0-9]{2}\s*$",
        r"^\s*(torch\.distributed\.elastic\.multiprocessing\.errors\.)?ChildFailedError:\s*$",
        r"CUDA kernel errors might be asynchronously reported|CUDA_LAUNCH_BLOCKING=|TORCH_USE_CUDA_DSA",
        r"To avoid data inconsistency, we are taking the entire process down",  # NCCL watchdog's closing words
        r"Some NCCL operations have failed or timed out\. Due to the asynchronous nature",
        r"^\s*Last error:\s*$",  # NCCL: the header above the last warning (which is the news)
        r"^\s*nccl(RemoteError|SystemError|InternalError|UnhandledCudaError|InvalidUsage|InvalidArgument): ",  # NCCL's text for its error code
        r"^\s*Solution: ",  # Ascend (CANN/HCCL) error codes' remedy text
        r"\*\*\* (STEP|JOB) \S+ ON \S+ CANCELLED AT|^\s*srun: Job step aborted|^\s*srun: error: .*: Killed\s*$",  # Slurm
    )
    weights: dict = field(default_factory=lambda: {
        "cross_job": 0.3, "spatial": 0.3, "temporal": 0.3, "pattern": 0.5, "late": 0.4, "error": 0.2})

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 10.0:
            raise ConfigError(f"diagnosis.min_score: expected a number in [0, 10], found {self.min_score!r}")
        if self.max_events < 1:
            raise ConfigError(f"diagnosis.max_events: expected an integer >= 1, found {self.max_events!r}")
        if not 0.0 < self.generic_share <= 1.0:
            raise ConfigError(f"diagnosis.generic_share: expected a share in (0, 1], found {self.generic_share!r}")
        for regex in (*self.frame_patterns, self.source_after):
            _check_java_regex(regex, "diagnosis.frame_patterns")
        for regex in self.consequence_patterns:
            _check_java_regex(regex, "diagnosis.consequence_patterns")
        unknown = sorted(set(self.weights) - set(SOURCES) - {"late", "error"})
        if unknown:
            raise ConfigError(f"diagnosis.weights: unknown evidence {unknown}; known: {list(SOURCES) + ['late', 'error']}")


def diagnosis_config(config: Config) -> DiagnosisConfig:
    """The ``[diagnosis]`` section of the conf as a DiagnosisConfig (unknown keys refused)."""
    options = step_options(config, "diagnosis", [f.name for f in dataclasses.fields(DiagnosisConfig)])
    for key in ("frame_patterns", "consequence_patterns"):
        if key in options:
            options[key] = tuple(options[key])
    if "weights" in options:
        options["weights"] = {**DiagnosisConfig().weights, **dict(options["weights"])}
    return DiagnosisConfig(**options)


# ---- Spark: per-(job, event) evidence ---------------------------------------------------------


def _severity(level: F.Column) -> F.Column:
    expr = F.lit(None).cast("int")
    for name, value in SEVERITY.items():
        expr = F.when(F.upper(level) == name, F.lit(value)).otherwise(expr)
    return F.coalesce(expr, F.lit(0))


def prepare_lines(staged: DataFrame, offsets: DataFrame, conf: DiagnosisConfig, tconf=None) -> DataFrame:
    """Staged events plus ``t`` (seconds on the job's reference clock: the line's own timestamp, or
    the last one before it in its file, minus the node's clock offset), ``frame`` (a stack-frame
    line, or the source line printed under a Python frame) and ``tail`` (no timestamp at or below
    the line in its file, and below the file's last stage or iteration marker when it has one:
    the end of a process's output, whose time ``t`` only bounds from below; a crash's untimed
    stderr lines under startup-only timestamps are the common case)."""
    from l4spark.temporal.lines import iteration_marker, stage_marker

    in_file = Window.partitionBy("job_id", "file").orderBy("line_no")
    whole_file = in_file.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    marker = (stage_marker(tconf).isNotNull() | iteration_marker(tconf).isNotNull()) if tconf is not None else F.lit(False)
    last_marker = F.max(F.when(marker, F.col("line_no"))).over(whole_file)
    # the staged frame carries it (temporal.lines.with_stage_and_iteration's ts_next)
    ts_below = (F.col("ts_next") if "ts_next" in staged.columns
                else F.first("ts", ignorenulls=True).over(in_file.rowsBetween(Window.currentRow, Window.unboundedFollowing)))
    return (with_line_flags(staged, conf)
            .withColumn("ts_filled", F.last("ts", ignorenulls=True).over(
                in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
            .withColumn("tail", ts_below.isNull() & (F.col("line_no") > F.coalesce(last_marker, F.lit(-1))))
            .join(F.broadcast(offsets), on=["job_id", "node"], how="left")
            .withColumn("t", F.col("ts_filled").cast("double") - F.coalesce("offset_s", F.lit(0.0)))
            .drop("offset_s", "ts_filled"))


def with_line_flags(lines: DataFrame, conf: DiagnosisConfig) -> DataFrame:
    """Events lines plus ``frame`` (a stack-frame line: ``frame_patterns``, or the source line
    printed under a Python frame, ``source_after``) and ``boilerplate`` (a frame, a line without
    a letter such as ``====`` or a blank, or a teardown/advice line of ``consequence_patterns``):
    what the cross-job filter removes whatever the history (``normal_pool.BOILERPLATE``). Needs
    job_id, file, line_no, message; a null message is neither."""
    in_file = Window.partitionBy("job_id", "file").orderBy("line_no")
    frame = F.lit(False)
    for regex in conf.frame_patterns:
        frame = frame | F.coalesce(F.col("message").rlike(regex), F.lit(False))
    after_frame = F.coalesce(F.lag("message").over(in_file).rlike(conf.source_after), F.lit(False))
    consequence = F.lit(False)
    for regex in conf.consequence_patterns:
        consequence = consequence | F.coalesce(F.col("message").rlike(regex), F.lit(False))
    no_letter = F.coalesce(~F.col("message").rlike(r"\p{L}"), F.lit(False))
    return (lines.withColumn("frame", frame | after_frame)
            .withColumn("boilerplate", F.col("frame") | no_letter | consequence))


def job_timing(lines: DataFrame, tconf) -> DataFrame:
    """Per job over ``prepare_lines`` output: start_t, end_t, last_progress_t (the last stage or
    iteration marker: where the job stopped making progress), n_lines, n_nodes, n_ranks."""
    from l4spark.temporal.lines import iteration_marker, stage_marker

    progress = stage_marker(tconf).isNotNull() | iteration_marker(tconf).isNotNull()
    return (lines.groupBy("job_id")
            .agg(F.min("t").alias("start_t"), F.max("t").alias("end_t"),
                 F.max(F.when(progress, F.col("t"))).alias("last_progress_t"),
                 F.count(F.lit(1)).alias("n_lines"), F.countDistinct("node").alias("n_nodes"),
                 F.countDistinct("node", "rank").alias("n_ranks")))


def event_evidence(candidates: DataFrame) -> DataFrame:
    """Per (job, candidate event) over candidate lines (``prepare_lines`` columns plus
    keep_reason): n_lines, n_nodes, n_ranks, first_t, last_t, severity (highest level, see
    SEVERITY), frame_share, tail (any line in its file's tail), the first line (sample, sample_node, sample_ts, stage, level) and
    keep_reason."""
    lines = candidates.withColumn("severity", _severity(F.col("level")))
    first = F.struct(F.coalesce("t", F.lit(float("inf"))).alias("t"), "node", "rank", "line_no", "message", "ts",
                     "stage", "level")
    return (lines.groupBy("job_id", "event_id")
            .agg(F.count(F.lit(1)).alias("n_lines"), F.countDistinct("node").alias("n_nodes"),
                 F.countDistinct("node", "rank").alias("n_ranks"),
                 F.min("t").alias("first_t"), F.max("t").alias("last_t"), F.max("severity").alias("severity"),
                 F.avg(F.col("frame").cast("double")).alias("frame_share"),
                 F.max(F.col("tail")).alias("tail"),
                 F.min(first).alias("first"), F.min("keep_reason").alias("keep_reason"))
            .select("job_id", "event_id", "n_lines", "n_nodes", "n_ranks", "first_t", "last_t", "severity",
                    "frame_share", "tail", F.col("first.message").alias("sample"), F.col("first.node").alias("sample_node"),
                    F.col("first.ts").alias("sample_ts"), F.col("first.stage").alias("stage"),
                    F.col("first.level").alias("level"), "keep_reason"))


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
    n_failed = failed.count()
    frame = (counts.join(failed, on="job_id", how="inner").groupBy("event_id")
             .agg(F.countDistinct("job_id").alias("n_failed")).toPandas())
    frame.attrs["n_failed_jobs"] = int(n_failed)
    return frame


def _check_java_regex(regex: str, key: str) -> None:
    from l4spark.regexsafety import UnsafeRegexError, check_regex
    try:
        check_regex(regex)
    except UnsafeRegexError as exc:
        raise ConfigError(f"{key}: {exc}") from exc


# ---- assembly (pure pandas, per job) -----------------------------------------------------------


def score_events(evidence: pd.DataFrame, timing: pd.DataFrame, spatial: pd.DataFrame, temporal: pd.DataFrame,
                 pattern_hits: pd.DataFrame, shares: pd.DataFrame, conf: DiagnosisConfig) -> pd.DataFrame:
    """Evidence, score and rank of every candidate event.

    Inputs (pandas): ``evidence`` (``event_evidence`` columns plus history), ``timing``
    (``job_timing``), ``spatial`` / ``temporal`` (job_id, event_id, score), ``pattern_hits``
    (job_id, event_id, confidence), ``shares`` (``failed_event_shares``). Output: the evidence
    columns plus late, error, generic, frame, consequence, cross_job, spatial, temporal, pattern (booleans),
    sources (list), score, flagged, rank (1 = most indicative among the flagged; null otherwise).
    """
    frame = evidence.merge(timing[["job_id", "start_t", "last_progress_t"]], on="job_id", how="left")
    # failure onset: where progress stopped; a job that never logged progress (it died during
    # setup) has its first error line instead, so the configuration it echoed before is not late
    first_error = frame["first_t"].where(frame["severity"].fillna(0) >= SEVERITY["ERROR"]).groupby(frame["job_id"]).transform("min")
    progress_t, start_t = (pd.to_numeric(frame[c], errors="coerce") for c in ("last_progress_t", "start_t"))
    onset = ((progress_t - conf.onset_margin_s)
             .fillna(first_error - conf.setup_onset_margin_s)
             .fillna(start_t - conf.onset_margin_s))
    tail = frame["tail"].fillna(False).astype(bool) if "tail" in frame.columns else False
    frame["late"] = (frame["first_t"] >= onset).fillna(False).astype(bool) | frame["first_t"].isna() & onset.isna() | tail
    frame["error"] = frame["severity"].fillna(0) >= SEVERITY["ERROR"]
    frame["warning"] = frame["severity"].fillna(0) == SEVERITY["WARN"]
    frame["cross_job"] = (frame["history"].fillna(NO_HISTORY) != NO_HISTORY) & ~frame["keep_reason"].isin(
        [NO_HISTORY, "no_event_id"])
    keys = list(zip(frame["job_id"], frame["event_id"]))
    for name, table in (("spatial", spatial), ("temporal_it", temporal), ("pattern", pattern_hits)):
        present = set(zip(table["job_id"], table["event_id"])) if len(table) else set()
        frame[name] = [key in present for key in keys]
    frame["temporal"] = frame["temporal_it"] | frame["late"]
    n_failed_jobs = int(shares.attrs.get("n_failed_jobs", 0))
    in_failed = frame["event_id"].map(shares.set_index("event_id")["n_failed"]).fillna(0)
    # this job's own occurrence taken out: the share of the *other* failed jobs that print it
    other_share = (in_failed - 1).clip(lower=0) / max(1, n_failed_jobs - 1)
    frame["generic"] = (n_failed_jobs >= conf.generic_min_jobs) & (other_share >= conf.generic_share) & ~frame["pattern"]
    # stack frames, and lines without a letter (blank lines, ==== / ---- separators): structure, not content
    no_words = ~frame["sample"].fillna("").astype(str).str.contains(r"[^\W\d_]", regex=True)
    frame["frame"] = ((frame["frame_share"].fillna(0) >= 0.5) | no_words) & ~frame["pattern"]
    # even when a fault pattern's keywords occur in it (advice text names the error it explains)
    frame["consequence"] = _matches_any(frame["sample"], conf.consequence_patterns)
    weights = conf.weights
    frame["score"] = (weights["cross_job"] * frame["cross_job"] + weights["spatial"] * frame["spatial"]
                      + weights["temporal"] * frame["temporal_it"] + weights["pattern"] * frame["pattern"]
                      + weights["late"] * frame["late"] + weights["error"] * (frame["error"] + 0.5 * frame["warning"]))
    frame["score"] = frame["score"].astype(float).round(4)
    frame["flagged"] = (frame["score"] >= conf.min_score) & ~frame["generic"] & ~frame["frame"] & ~frame["consequence"]
    frame["sources"] = [[s for s in SOURCES if row[s]] for row in frame[list(SOURCES)].to_dict("records")]
    frame = frame.sort_values(["job_id", "flagged", "score", "first_t", "event_id"],
                              ascending=[True, False, False, True, True], kind="stable", na_position="last")
    frame["rank"] = frame.groupby("job_id").cumcount() + 1
    frame.loc[~frame["flagged"], "rank"] = pd.NA
    frame = frame[frame["rank"].isna() | (frame["rank"] <= conf.max_events)]
    return frame.drop(columns=["temporal_it", "warning"]).reset_index(drop=True)


def _matches_any(texts: pd.Series, patterns: Sequence[str]) -> pd.Series:
    if not patterns or texts.empty:
        return pd.Series(False, index=texts.index)
    regex = re.compile("|".join(f"(?:{p})" for p in patterns))
    return texts.fillna("").astype(str).map(lambda text: regex.search(text) is not None).astype(bool)


def job_patterns(evidence: pd.DataFrame, templates: dict[str, str], library: Sequence[FaultPattern],
                 min_confidence: float) -> dict[str, list[PatternMatch]]:
    """The library's matches per job, over every candidate event (template and first line)."""
    matches = {}
    for job_id, group in evidence.groupby("job_id", sort=True):
        triples = [(r.event_id, templates.get(r.event_id, ""), r.sample or "") for r in group.itertuples()]
        matches[job_id] = match_patterns(library, triples, min_confidence)
    return matches


def rank_matches(matches: dict[str, list[PatternMatch]], scored: pd.DataFrame) -> dict[str, list[PatternMatch]]:
    """Matches of each job, best first: the most complete signature, then the one whose events
    came first (the root cause precedes what it causes on peers: an OOM'd rank is followed by its
    peers' network errors), then the pattern id. Boilerplate events do not date a match."""
    first_t = {(r.job_id, r.event_id): r.first_t for r in scored.itertuples()
               if not r.generic and r.first_t == r.first_t}
    ranked = {}
    for job_id, found in matches.items():
        def key(m: PatternMatch) -> tuple:
            times = [first_t[(job_id, e)] for e in m.matched_event_ids if (job_id, e) in first_t]
            return (-m.confidence, min(times) if times else math.inf, m.pattern_id)
        ranked[job_id] = sorted(found, key=key)
    return ranked


def pattern_hit_rows(matches: dict[str, list[PatternMatch]]) -> pd.DataFrame:
    rows = [(job_id, event_id, m.confidence) for job_id, found in matches.items() for m in found
            for event_id in m.matched_event_ids]
    return pd.DataFrame(rows, columns=["job_id", "event_id", "confidence"]).drop_duplicates(["job_id", "event_id"])


# ---- the whole diagnosis over a set of jobs ---------------------------------------------------


@dataclass
class Diagnosis:
    """The outcome of ``diagnose_jobs``: the small result tables as pandas, plus report inputs."""

    run_id: str
    jobs: pd.DataFrame  # DIAGNOSIS_JOBS_COLUMNS, one row per requested job
    events: pd.DataFrame  # DIAGNOSIS_EVENTS_COLUMNS (flagged events only)
    nodes: pd.DataFrame  # DIAGNOSIS_NODES_COLUMNS
    iterations: pd.DataFrame  # ITERATION_COLUMNS (+ threshold when the temporal step gives it)
    scored: pd.DataFrame  # every candidate event with its evidence (``score_events``)
    patterns: dict[str, list[dict]]  # job -> matched patterns with root cause and remedy
    stages: pd.DataFrame  # job_id, node, stage, start_ts, end_ts
    first_errors: pd.DataFrame  # job_id, node, ts, event_id, message
    heat: pd.DataFrame  # job_id, event_id, node, n_lines (flagged events)
    extra: dict[str, dict] = field(default_factory=dict)  # job -> settings, n_nodes, n_ranks, history

    @property
    def diagnosed(self) -> list[str]:
        return sorted(self.jobs.loc[self.jobs["status"] == "diagnosed", "job_id"])


def new_run_id(prefix: str = "diagnose") -> str:
    return f"{prefix}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def diagnose_jobs(spark: SparkSession, config: Config, job_ids: Iterable[str], run_id: str | None = None,
                  progress: Callable[[str], None] = log.info) -> Diagnosis:
    """Diagnose ``job_ids`` (already parsed) in one pass; nothing is written (``write_diagnosis``).

    A job missing from the jobs table, or without any line, becomes an error row. When the batch
    fails on a job's data, the jobs are diagnosed one by one so that only the broken one errs.
    """
    run_id = run_id or new_run_id()
    job_ids = sorted(set(job_ids))
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
        try:
            parts.append(_diagnose_batch(spark, config, ready, registry, progress))
        except Exception as exc:  # a step failed on some job's data: isolate it
            if len(ready) == 1:
                log.exception("diagnosis of %s failed", ready[0])
                errors[ready[0]] = f"diagnosis failed: {type(exc).__name__}: {str(exc).splitlines()[0][:500]}"
            else:
                progress(f"batch diagnosis failed ({type(exc).__name__}); diagnosing the {len(ready)} jobs one by one")
                for job_id in ready:
                    try:
                        parts.append(_diagnose_batch(spark, config, [job_id], registry, progress))
                    except Exception as one:  # noqa: BLE001 - reported as the job's error row
                        log.exception("diagnosis of %s failed", job_id)
                        errors[job_id] = f"diagnosis failed: {type(one).__name__}: {str(one).splitlines()[0][:500]}"
    merged = _merge_parts(parts)
    rows = [*merged.pop("job_rows")]
    for job_id, reason in sorted(errors.items()):
        rows.append({"job_id": job_id, "status": "error", "error": reason, "suspect_nodes": [], "matched_patterns": [],
                     "n_lines": int(registry[job_id].n_lines or 0) if job_id in registry else 0})
    jobs = pd.DataFrame(rows).reindex(columns=DIAGNOSIS_JOBS_COLUMNS)
    jobs["run_id"], jobs["processed_at"], jobs["version"] = run_id, processed_at, __version__
    jobs = jobs.sort_values("job_id").reset_index(drop=True)
    return Diagnosis(run_id=run_id, jobs=jobs, **merged)


def _merge_parts(parts: list[dict]) -> dict:
    keys = ["events", "nodes", "iterations", "scored", "stages", "first_errors", "heat"]
    merged: dict = {"job_rows": [r for p in parts for r in p["job_rows"]], "patterns": {}, "extra": {}}
    for key in keys:
        frames = [p[key] for p in parts if len(p[key])]
        merged[key] = pd.concat(frames, ignore_index=True) if frames else (parts[0][key] if parts else pd.DataFrame())
    for p in parts:
        merged["patterns"].update(p["patterns"])
        merged["extra"].update(p["extra"])
    return merged


def _diagnose_batch(spark: SparkSession, config: Config, job_ids: list[str], registry: dict,
                    progress: Callable[[str], None]) -> dict:
    conf = diagnosis_config(config)
    tconf = temporal_config(config)
    storage = config.storage
    progress(f"diagnosing {len(job_ids)} jobs")
    events = read_table(spark, storage, "events").where(F.col("job_id").isin(job_ids))
    jobs = read_table(spark, storage, "jobs").where(F.col("job_id").isin(job_ids)).select("job_id", "settings")
    offsets = materialize(node_clock_offsets(events, tconf))
    staged = with_stage_and_iteration(events, tconf, offsets)
    lines = prepare_lines(staged, offsets, conf, tconf).persist()
    try:
        return _diagnose_lines(spark, config, conf, tconf, job_ids, registry, events, jobs, lines, offsets,
                               progress)
    finally:
        lines.unpersist()


def _diagnose_lines(spark, config, conf, tconf, job_ids, registry, events, jobs, lines, offsets,
                    progress) -> dict:
    storage = config.storage
    # 1. cross-job filter
    pool = read_normal_pool(spark, storage)
    if not conf.use_normal_pool:
        pool = type(pool)(pool.entries.limit(0), pool.variants.limit(0))
    filtered = filter_normal_events(lines, jobs, pool, pool_config(config), masking=config.masking,
                                    fold_digits=config.structure.fold_digits)
    history = filtered.decisions.select("job_id", "history").distinct().toPandas()
    candidates = filtered.candidates
    # the spatial and temporal steps see what the pool keeps, boilerplate included (timing and
    # localisation evidence); scoring sees the candidates
    candidate_events = materialize(filtered.pool_kept_events())
    evidence = event_evidence(candidates.where(F.col("event_id").isNotNull())).toPandas()
    evidence = evidence.merge(history, on="job_id", how="left")
    timing = job_timing(lines, tconf).toPandas()
    progress(f"cross-job filter: {len(evidence)} candidate events in {evidence['job_id'].nunique()} jobs")
    # 2. spatial
    node_rows = materialize(rank_nodes(events, spatial_config(config), candidate_events))
    spatial = spatial_events(node_rows).select("job_id", "event_id", "score").toPandas()
    nodes = node_rows.toPandas()
    # 3. temporal
    iterations_df, progress_df = analyse_iterations(lines.select(*STAGED_COLUMNS), candidate_events, tconf,
                                                    offsets=offsets)
    iterations_df = materialize(iterations_df)
    temporal = temporal_events(lines, iterations_df).select("job_id", "event_id", "score").toPandas()
    points = job_failure_points(lines.select(*events.columns), progress_df).toPandas()
    iterations = iterations_df.toPandas()
    progress(f"spatial and temporal steps done ({len(nodes)} units, {len(iterations)} iterations)")
    # 4. patterns, over every candidate event
    templates = _templates(spark, config, evidence["event_id"].unique().tolist())
    library = pattern_library(spark, storage)
    matches = job_patterns(evidence, templates, library, conf.pattern_min_confidence)
    hits = pattern_hit_rows(matches)
    # 5. assembly
    shares = failed_event_shares(spark, config, job_ids)
    scored = score_events(evidence, timing, spatial, temporal, hits, shares, conf)
    matches = rank_matches(matches, scored)
    scored["template"] = scored["event_id"].map(templates)
    flagged = scored[scored["flagged"]]
    report_parts = _report_inputs(spark, lines, flagged)
    by_id = {p.pattern_id: p for p in library}
    job_rows, extra, pattern_rows = [], {}, {}
    point_by_job = points.set_index("job_id").to_dict("index") if len(points) else {}
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
            "patterns": pattern_rows, "extra": extra, **report_parts}


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


def write_diagnosis(spark: SparkSession, config: Config, diagnosis: Diagnosis) -> None:
    """Replace the four diagnosis tables' rows of every job in ``diagnosis.jobs``.

    The per-event, node and iteration tables are written first and ``diagnosis_jobs`` last: a
    job's row there is the mark that its diagnosis is complete (a crash in between leaves the
    previous diagnosis row, and a rerun replaces everything of the job).
    """
    from l4spark.spatial import DIAGNOSIS_NODES_SCHEMA

    storage = config.storage
    job_ids = diagnosis.jobs["job_id"].tolist()

    def frame(rows: pd.DataFrame, schema: str) -> DataFrame:
        fields = [c.split(maxsplit=1) for c in schema.split(", ")]
        columns = rows.reindex(columns=[name for name, _ in fields])
        records = [tuple(_python_value(value, kind) for value, (_, kind) in zip(record, fields))
                   for record in columns.itertuples(index=False, name=None)]
        return spark.createDataFrame(records, schema)

    def write(rows: pd.DataFrame, schema: str, table: str) -> None:
        with_rows = set(rows["job_id"]) if len(rows) else set()
        write_job_rows(frame(rows, schema).localCheckpoint(), storage, table, job_ids, with_rows, small=True)

    iteration_schema = "job_id string, iteration long, score double, anomalous boolean, event_ids array<string>"
    if "threshold" in diagnosis.iterations.columns:
        iteration_schema += ", threshold double"
    if "reason" in diagnosis.iterations.columns:
        iteration_schema += ", reason string"
    write(diagnosis.events, DIAGNOSIS_EVENTS_SCHEMA, "diagnosis_events")
    write(diagnosis.nodes, DIAGNOSIS_NODES_SCHEMA, "diagnosis_nodes")
    write(diagnosis.iterations, iteration_schema, "diagnosis_iterations")
    write(diagnosis.jobs, DIAGNOSIS_JOBS_SCHEMA, "diagnosis_jobs")


def job_report(diagnosis: Diagnosis, job_id: str):
    """The report input (``l4spark.report.JobReport``) of one job of ``diagnosis``."""
    from l4spark.report import JobReport

    def of(frame: pd.DataFrame) -> pd.DataFrame:
        if not len(frame) or "job_id" not in frame.columns:
            return frame.drop(columns=["job_id"], errors="ignore")
        return frame[frame["job_id"] == job_id].drop(columns=["job_id"]).reset_index(drop=True)

    row = diagnosis.jobs[diagnosis.jobs["job_id"] == job_id].iloc[0].to_dict()
    row = {k: (None if not isinstance(v, (list, np.ndarray)) and pd.isna(v) else v) for k, v in row.items()}
    row["processed_at"] = str(row["processed_at"])
    row.update(diagnosis.extra.get(job_id, {"settings": {}, "history": NO_HISTORY, "n_nodes": 0, "n_ranks": 0}))
    kwargs = {name: of(getattr(diagnosis, name)) for name in ("events", "nodes", "iterations", "stages",
                                                               "first_errors", "heat")}
    if "combined_score" in kwargs["nodes"].columns:  # the score the ranking uses, not the forest's alone
        kwargs["nodes"] = kwargs["nodes"].assign(score=kwargs["nodes"]["combined_score"])
    return JobReport(job=row, patterns=diagnosis.patterns.get(job_id, []), **kwargs)


def write_job_reports(diagnosis: Diagnosis, out_dir) -> dict[str, tuple]:
    """HTML and Markdown report of every job of ``diagnosis`` under ``out_dir``: job -> (html, md)."""
    from l4spark.report import write_reports

    return {job_id: write_reports(job_report(diagnosis, job_id), out_dir) for job_id in diagnosis.jobs["job_id"]}


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
