"""The parse run: rank files -> ``events``, ``templates``, ``job_event_counts``, ``jobs``, ``quarantine``.

Default path, by line shape (``shapes.py``; docs/parsing.md):
1. read the files, counting each job's distinct digit-folded line shapes in the reading tasks
   (plus the files' quarantine rows): small;
2. on the driver: structure and mask each shape once, run Drain over the masked messages the
   template store has not seen (first-occurrence order), save the store (in a driver thread,
   while step 3's read is planned, and before any event is written);
3. read the files again, join each line to its shape's fields and event id (broadcast) and
   write the events, replacing exactly the parsed jobs' partitions. Files on remote storage
   are fetched once: Spark keeps their stored bytes between the two reads
   (``ingest.kept_remote_bytes``); local files are read twice (the page cache has them).
Fallback when the rules tell digits apart or a run has too many shapes: structure every line
in the JVM, cached for the same three steps. Then the small tables, from the events written.

The stored formats of the tables written are looked up while the files are read (``StoredFormats``:
on remote storage each look is a listing). Writes that do not read each other run at the same
time, each from a driver thread (Spark runs the jobs of several threads of one session
concurrently): ``job_event_forms`` with ``events``;
then ``job_event_counts``, ``templates`` (from the same count rows plus the other jobs' stored
ones, not from the table written: ``_templates_writer``) and ``quarantine``; ``jobs`` last,
since a job's row there says it is parsed (``nightly.selection``). On HDFS most of a small
table's write is waiting (each file's close, each Delta commit's log file), so several writes
at once take about as long as the slowest (docs/deploy.md, "HDFS makes every file's writer wait").
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from l4spark import __version__
from l4spark.config import Config
from l4spark.parse.ingest import KeptBytes, kept_remote_bytes, read_rank_files, remote_scan_settings, with_unread_files
from l4spark.parse.layout import Issue, LayoutScan, RankFile, scan_logs_root
from l4spark.parse.shapes import (
    original_masked,
    shape_numbers,
    shapes_frame,
    shapes_usable,
    structure_shapes,
    with_shape_fields,
)
from l4spark.parse.structure import with_masked, with_structure
from l4spark.parse.template_store import load_template_store, save_template_store
from l4spark.parse.templates import TemplateStore
from l4spark.io import fs
from l4spark.io.frames import local_frame, session_settings
from l4spark.io.storage import StoredFormats, in_parallel, read_table, table_exists, write_job_rows, write_table
from l4spark.io.tables import EVENTS, JOB_EVENT_COUNTS, JOB_EVENT_FORMS, JOBS, QUARANTINE
from l4spark.io.tables import columns as table_columns
from l4spark.parse.textrules import Masker, message_form

log = logging.getLogger(__name__)

# Reasons whose lines are set aside (not in events); other reasons repair or only report.
SET_ASIDE = {"binary_line", "line_too_long"}
# The tables a parse writes (each once), whose stored formats it looks up ahead (``StoredFormats``)
WRITTEN = (EVENTS.name, JOB_EVENT_FORMS.name, JOB_EVENT_COUNTS.name, "templates", QUARANTINE.name, JOBS.name)


@dataclass
class ParseSummary:
    run_id: str
    jobs: list[str]
    files: int = 0
    bytes: int = 0
    lines: int = 0
    events: int = 0
    new_templates: int = 0
    set_aside_lines: int = 0
    issues_by_reason: dict[str, int] = field(default_factory=dict)
    per_job: list[dict] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())


def parse_jobs(spark: SparkSession, config: Config, logs_root: str | Path, jobs: Iterable[str] | None = None,
               progress: Callable[[str], None] = log.info, scan: LayoutScan | None = None) -> ParseSummary:
    """Parse the jobs under ``logs_root`` (all, or ``jobs``) into the warehouse tables. ``scan``:
    the caller's listing of exactly those jobs (``LayoutScan.only``), so the root is listed once."""
    clock = _Clock()
    run_id = datetime.now(timezone.utc).strftime("parse-%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:6]
    if scan is None:
        scan = scan_logs_root(logs_root, config.layout.pattern, config.layout.job_file, jobs, spark=spark)
    job_ids = sorted(scan.jobs)
    summary = ParseSummary(run_id, job_ids, files=len(scan.files), bytes=scan.total_bytes)
    summary.seconds["list"] = clock.lap()
    progress(f"listed {len(scan.files)} rank files, {scan.total_bytes / 1e6:.1f} MB, in {len(job_ids)} jobs "
             f"({scan.skipped_hidden} hidden paths skipped)")
    if not job_ids:
        progress("nothing to parse")
        return summary

    formats = StoredFormats(spark, config.storage, WRITTEN)
    store = load_template_store(config.storage, config.drain, config.structure.fold_digits, spark=spark)
    before = len(store)
    file_issues, forms = _parse_readable(spark, config, scan, store, progress, clock, summary, formats)
    summary.new_templates = len(store) - before

    counts = _event_counts(spark, config, scan, job_ids)
    summary.events = int(counts["event_id"].nunique())
    issues = scan.issues + file_issues + _unmatched_lines(counts) + _lines_outside_job_time(counts)
    _summarise_issues(summary, issues)
    summary.per_job = _per_job(scan, counts, issues)
    # the frames are made here, the writes run in threads (local_frame changes a session setting
    # while it checkpoints large rows: not from two threads at once)
    count_rows = local_frame(spark, counts[["job_id", "event_id", "n_lines", "first_ts"]], JOB_EVENT_COUNTS.schema)
    in_parallel(lambda: write_job_rows(count_rows, config.storage, "job_event_counts", job_ids, set(counts["job_id"]),
                                       formats=formats),
                _templates_writer(spark, config, store, count_rows, job_ids, formats),
                _quarantine_writer(spark, config, issues, job_ids, run_id, formats))
    _write_jobs(spark, config, scan, summary, formats)
    summary.seconds["write tables"] = clock.lap()
    return summary


def _parse_readable(spark: SparkSession, config: Config, scan: LayoutScan, store: TemplateStore,
                    progress: Callable[[str], None], clock: "_Clock", summary: ParseSummary,
                    formats: StoredFormats) -> tuple[list[Issue], pd.DataFrame]:
    """``_parse_by_shape`` (or ``_parse_per_line`` when shapes do not fit) of the files the
    storage hands over. HDFS's BlockMissingException and AccessControlException fail Spark's scan
    even where it skips other unreadable files (FileScanRDD): the parse starts again without the
    file the error names, which is then counted as unreadable (``with_unread_files``). Remote
    files are fetched from the storage once for both reads (``ingest.kept_remote_bytes``)."""
    not_by_shape = shapes_usable(config.structure)
    if not_by_shape is not None:
        progress(f"structuring every line ({not_by_shape})")
    refused: set[str] = set()
    while True:
        readable = [f for f in scan.files if f.path not in refused]
        try:
            with (session_settings(spark, remote_scan_settings(spark, readable)),
                  kept_remote_bytes(spark, readable, _cache_level(config), scan.listing) as kept):
                parsed = None
                if not_by_shape is None:
                    parsed = _parse_by_shape(spark, config, scan, readable, store, progress, clock, summary, formats,
                                             kept)
                return parsed or _parse_per_line(spark, config, scan, readable, store, progress, clock, summary,
                                                 formats, kept)
        except Exception as exc:  # noqa: BLE001 -- only a file the storage refused is retried, all else raises
            path = fs.refused_path(exc, [f.path for f in readable if not fs.is_local(f.path)])
            if path is None:
                raise
            progress(f"{path} cannot be read (lost blocks or no permission): counted as unreadable, parsing again")
            refused.add(path)


def _parse_by_shape(spark: SparkSession, config: Config, scan: LayoutScan, readable: list[RankFile],
                    store: TemplateStore, progress: Callable[[str], None], clock: "_Clock",
                    summary: ParseSummary, formats: StoredFormats,
                    kept: KeptBytes | None = None) -> tuple[list[Issue], pd.DataFrame] | None:
    """Two reads of the files, no cache of lines: (1) distinct shapes with their first occurrence, and
    the files' quarantine rows; the driver structures, masks and templates the shapes; (2) lines
    joined to their shape's fields and event id, written. Returns the files' issues and the
    message forms (``_forms``). None when the run has more than ``structure.max_shapes``
    shapes (the caller then structures every line). ``readable``: the files read (``scan.files``
    but those the storage refused: they are counted as unreadable); ``formats``: the written
    tables' formats (``StoredFormats``); ``kept``: their bytes, when remote
    (``ingest.kept_remote_bytes``)."""
    issue = F.col("issue")
    max_rows = 4 * config.structure.max_shapes + 8 * len(scan.files)
    stats = (
        read_rank_files(spark, readable, config.ingest, counts_only=True, job_boundaries=False, kept=kept)
        .groupBy("job_id", "shape", "issue", F.when(issue.isNotNull(), F.col("file")).alias("issue_file"))
        .agg(F.sum("n_lines").alias("n_lines"), F.min(F.struct("file", "line_no", "raw")).alias("first"),
             F.first("detail").alias("detail"), F.sum("n_bytes").alias("n_bytes"), F.first("raw").alias("sample"))
        .select("job_id", "shape", "issue", "issue_file", "detail", "n_lines", "n_bytes", "sample",
                F.col("first.file").alias("first_file"), F.col("first.line_no").alias("first_line"),
                F.col("first.raw").alias("first_raw"))
        .limit(max_rows + 1)
        .toPandas()
    )
    file_issues = with_unread_files([
        Issue(r.job_id, r.issue_file, r.issue, r.detail, int(r.n_lines or 0), int(r.n_bytes or 0),
              None if pd.isna(r.first_line) else int(r.first_line), r.sample)
        for r in stats[stats["issue"].notna()].itertuples()
    ], scan.files)
    per_job = stats[stats["issue"].isna()]
    shapes = per_job.sort_values(["first_file", "first_line"], kind="stable").drop_duplicates("shape")
    if len(stats) > max_rows or len(shapes) > config.structure.max_shapes:
        progress(f"more than {config.structure.max_shapes:,} line shapes: structuring every line instead")
        return None
    summary.lines = int(per_job["n_lines"].sum())
    summary.seconds["read shapes"] = clock.lap()
    progress(f"read {summary.lines:,} lines; {len(shapes):,} distinct line shapes")

    table = structure_shapes(shapes["shape"].tolist(), config.structure, config.masking)
    assignment = store.add(table["masked"].drop_duplicates().tolist())
    # every job's first line of each shape gives the event's display text its real digits
    firsts = (per_job[["shape", "first_raw"]].rename(columns={"first_raw": "raw"})
              .merge(table[["shape", "masked", "msg_parts"]], on="shape"))
    store.observe(original_masked(firsts, config.masking))
    table["event_id"] = table["masked"].map(assignment)
    summary.seconds["template"] = clock.lap()
    progress(f"templated: {table['masked'].nunique():,} masked messages, {len(store)} events in the store")

    # The store is saved (a driver thread) while the second read is planned, whose task table,
    # shape rows and year references are frames checkpointed by Spark jobs of their own, and
    # before any event is written: the events never hold an id that the saved store lacks (a
    # crash in between leaves what ``after_template_store`` describes). On HDFS the save waits
    # for its file's close; here that wait is not on the parse's critical path.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="l4spark-store") as pool:
        saved = pool.submit(save_template_store, config.storage, store, spark=spark)
        lines = (read_rank_files(spark, readable, config.ingest, raw=True, shape_ids=_job_shape_ids(per_job, table),
                                 job_boundaries=_events_partitioned(config), kept=kept)
                 .where(issue.isNull()))
        shape_rows = shapes_frame(spark, table.drop(columns=["masked"]))
        lines, reference = _with_year_reference(spark, lines, scan)
        events = with_shape_fields(lines, shape_rows, reference).select(*_event_columns())
        forms = _forms(per_job[["job_id", "shape", "n_lines"]].merge(table[["shape", "masked", "event_id"]],
                                                                      on="shape"))
    saved.result()
    in_parallel(lambda: write_job_rows(events, config.storage, "events", summary.jobs, set(per_job["job_id"]),
                                       formats=formats),
                _forms_writer(spark, config, forms, summary.jobs, summary.run_id, formats))
    summary.seconds["write events"] = clock.lap()
    return file_issues, forms


def _events_partitioned(config: Config) -> bool:
    """Whether the events table is written in a folder per job (Parquet; ``Table.partition_columns``):
    then its read tasks end at job boundaries, so that each writes few job folders."""
    return bool(EVENTS.partition_columns(config.storage.format))


def _job_shape_ids(per_job: pd.DataFrame, table: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per job, the ``shape_id`` (``shape_numbers``) of each shape pass 1 counted in it: a read
    task is sent only its own jobs' shapes."""
    numbers = shape_numbers(table)
    by_job: dict[str, dict[str, int]] = {}
    for job_id, shape in zip(per_job["job_id"], per_job["shape"]):
        by_job.setdefault(job_id, {})[shape] = numbers[shape]
    return by_job


def _parse_per_line(spark: SparkSession, config: Config, scan: LayoutScan, readable: list[RankFile],
                    store: TemplateStore, progress: Callable[[str], None], clock: "_Clock",
                    summary: ParseSummary, formats: StoredFormats,
                    kept: KeptBytes | None = None) -> tuple[list[Issue], pd.DataFrame]:
    """Structure and mask every line in the JVM; one read, kept in a cache for the three steps.
    ``readable``, ``formats`` and ``kept`` as in ``_parse_by_shape``."""
    read, reference = _with_year_reference(
        spark, read_rank_files(spark, readable, config.ingest, job_boundaries=_events_partitioned(config), kept=kept),
        scan)
    parsed = (
        read
        .transform(lambda df: with_structure(df, config.structure, reference))
        .transform(lambda df: with_masked(df, config.masking, config.structure.fold_digits))
        # keep only what later steps read: the cache is the run's biggest write
        .select("job_id", "node", "rank", "file", "line_no", "ts", "level", "message", "masked",
                "issue", "detail", "n_lines", "n_bytes",
                F.when(F.col("issue").isNotNull(), F.col("raw")).alias("sample"))
    )
    parsed = parsed.persist(_cache_level(config))
    try:
        file_issues = with_unread_files(_file_issues(parsed), scan.files)
        lines = parsed.where(F.col("issue").isNull())
        stats = (
            lines.groupBy("job_id", "masked")
            .agg(F.count(F.lit(1)).alias("n_lines"), F.min(F.struct("file", "line_no", "message")).alias("first"))
            .select("job_id", "masked", "n_lines", F.col("first.file").alias("first_file"),
                    F.col("first.line_no").alias("first_line"), F.col("first.message").alias("first_message"))
            .toPandas()
        )
        summary.seconds["read+structure"] = clock.lap()
        summary.lines = int(stats["n_lines"].sum())
        progress(f"read {summary.lines:,} lines; {stats['masked'].nunique():,} distinct masked messages")

        ordered = stats.sort_values(["first_file", "first_line"], kind="stable").drop_duplicates("masked")
        assignment = store.add(ordered["masked"].tolist())
        if config.structure.fold_digits:
            masker = Masker(config.masking)
            store.observe((masked, masker.mask(message or ""))
                          for masked, message in zip(stats["masked"], stats["first_message"]))
        save_template_store(config.storage, store, spark=spark)
        summary.seconds["template"] = clock.lap()
        progress(f"templated: {len(store)} events in the store")

        mapping = local_frame(
            spark,
            pd.DataFrame({"masked": list(assignment), "event_id": list(assignment.values())}),
            schema="masked string, event_id string")
        events = lines.join(F.broadcast(mapping), on="masked", how="left").select(*_event_columns())
        forms = _forms(stats.assign(event_id=stats["masked"].map(assignment)))
        in_parallel(lambda: write_job_rows(events, config.storage, "events", summary.jobs, set(stats["job_id"]),
                                           formats=formats),
                    _forms_writer(spark, config, forms, summary.jobs, summary.run_id, formats))
        summary.seconds["write events"] = clock.lap()
    finally:
        parsed.unpersist()
    return file_issues, forms


def _cache_level(config: Config) -> StorageLevel:
    """Where Spark keeps what a parse run reads more than once (``ingest.cache``)."""
    return StorageLevel.DISK_ONLY if config.ingest.cache == "disk" else StorageLevel.MEMORY_AND_DISK


def _forms(counts: pd.DataFrame) -> pd.DataFrame:
    """``job_event_forms`` rows from line counts per (job, masked message[, shape]): per job,
    event and message form (``textrules.message_form`` of the masked message), the lines. The
    parse has these counts anyway (per shape, or per masked message); the normal pool reads
    them instead of masking every line of every successful job again."""
    # a form per distinct masked message (hundreds), not per row (a row per job and shape)
    forms = {masked: message_form(masked) for masked in counts["masked"].dropna().unique()}
    counts = counts.assign(masked=counts["masked"].map(forms))
    return (counts.groupby(["job_id", "event_id", "masked"], dropna=False, sort=True)["n_lines"].sum()
            .reset_index()[["job_id", "event_id", "masked", "n_lines"]])




def _forms_writer(spark: SparkSession, config: Config, forms: pd.DataFrame, job_ids: list[str],
                  run_id: str, formats: StoredFormats) -> Callable[[], None]:
    """The write of the ``job_event_forms`` table (its frame made now): ``_forms`` rows, each with
    the mask signature they were masked under (``Config.mask_signature``) and the parse run.
    Counted in the first read, so a file that grew between the reads makes a job's forms disagree
    with its events: the reader (``normal_pool``) checks the totals against ``jobs.n_lines`` and
    masks that job's lines then. Written with ``events`` (``in_parallel``): neither reads the other."""
    counted = forms[["job_id", "event_id", "masked"]].assign(n_lines=forms["n_lines"].astype("int64"))
    # the signature and run id are the same on every row: added in Spark, not carried per row
    # from the driver (the signature, about 900 bytes, was 9/10 of the rows' size)
    rows = (local_frame(spark, counted, "job_id string, event_id string, masked string, n_lines long")
            .select("job_id", "event_id", "masked", "n_lines",
                    F.lit(json.dumps(config.mask_signature())).alias("masks"), F.lit(run_id).alias("run_id")))
    return lambda: write_job_rows(rows, config.storage, JOB_EVENT_FORMS.name, job_ids, set(counted["job_id"]),
                                  formats=formats)


def _with_year_reference(spark: SparkSession, lines: DataFrame, scan: LayoutScan) -> tuple[DataFrame, Column | None]:
    """``lines`` plus ``_year_reference``, the time that gives a year-less header time its year:
    its job's start (else end) in job.json, and that column; (``lines``, None) when no job has
    either (the run's time then, structure.in_reference_year). A broadcast join on job_id, not a
    literal map: a map of every job of the run is copied into the plan at each use of the
    reference (six in ``in_reference_year``), so into every task (1.1 MB at 640 jobs, "task of
    very large size"), and a map lookup scans its keys one by one."""
    pairs = [(job_id, t.isoformat(sep=" ")) for job_id, meta in sorted(scan.jobs.items())
             if (t := _utc(meta.start_time) or _utc(meta.end_time)) is not None]
    if not pairs:
        return lines, None
    references = (local_frame(spark, pd.DataFrame(pairs, columns=["job_id", "_year_reference"]),
                              "job_id string, _year_reference string")
                  .select("job_id", F.col("_year_reference").cast("timestamp").alias("_year_reference")))
    return (lines.join(F.broadcast(references), on="job_id", how="left"), F.col("_year_reference"))


def _per_job_time(times: dict[str, datetime | None]) -> Column | None:
    """Per row, its job's time in ``times`` (null for a job without one); None if no job has one.
    A literal map: the optimizer folds it to one constant, and a lookup costs no join."""
    pairs = [(job_id, t.isoformat(sep=" ")) for job_id, t in sorted(times.items()) if t is not None]
    if not pairs:
        return None
    mapping = F.create_map(*[F.lit(x) for pair in pairs for x in pair])
    return F.try_element_at(mapping, F.col("job_id")).cast("timestamp")


def _event_columns() -> list:
    """The events contract, in order; stage and iteration are filled by the temporal step."""
    return ["job_id", "node", "rank", "file", "line_no", "ts", "level", "event_id", "message",
            F.lit(None).cast("string").alias("stage"), F.lit(None).cast("long").alias("iteration")]


def _event_counts(spark: SparkSession, config: Config, scan: LayoutScan, job_ids: list[str]) -> pd.DataFrame:
    """Lines, first and last time per (job, event), read back from the events this parse has just written.
    A job whose times all lie within ``_job_time_limits`` (job.json's start and end widened by
    ``CLOCK_SLACK``) has no line stamped outside its time; only the other jobs are read again,
    for ``n_outside`` (their lines outside, per job) and the first of them (``outside_file``,
    ``outside_line``, ``outside_ts``), on each of the job's rows. Comparing every line with its
    job's limits in the main aggregation cost seconds on the bench fleet for what is, in a
    healthy batch, nothing."""
    columns = ("job_id", "event_id", "n_lines", "first_ts", "last_ts", "n_outside", "outside_file", "outside_line",
               "outside_ts")
    # the parse has just written the events in storage.format (its write refuses another), so a
    # Delta table is there and is not looked up again (on a remote warehouse, two listings); a
    # Parquet write of no rows leaves no table to read
    if config.storage.format != "delta" and not table_exists(config.storage, "events", spark):
        return pd.DataFrame({name: [] for name in columns})
    events = (read_table(spark, config.storage, "events", stored=config.storage.format)
              .where(F.col("job_id").isin(job_ids)))
    counts = (
        events.groupBy("job_id", "event_id")
        .agg(F.count(F.lit(1)).alias("n_lines"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"))
        .toPandas()
    )
    spans = counts.groupby("job_id").agg(first=("first_ts", "min"), last=("last_ts", "max"))
    suspect = [(job_id, earliest, latest) for job_id, earliest, latest in _job_time_limits(scan, job_ids)
               if job_id in spans.index
               and ((earliest is not None and spans.at[job_id, "first"] < earliest)
                    or (latest is not None and spans.at[job_id, "last"] > latest))]
    outside = pd.DataFrame({"job_id": [], "n_outside": [], "outside_file": [], "outside_line": [], "outside_ts": []})
    if suspect:
        ts, beyond = F.col("ts"), F.lit(False)
        for position, compare in ((1, ts.__lt__), (2, ts.__gt__)):
            limit = _per_job_time({row[0]: row[position] for row in suspect})
            if limit is not None:
                beyond = beyond | F.coalesce(compare(limit), F.lit(False))
        outside = (
            events.where(F.col("job_id").isin([row[0] for row in suspect]) & beyond)
            .groupBy("job_id").agg(F.count(F.lit(1)).alias("n_outside"),
                                   F.min(F.struct("file", "line_no", "ts")).alias("first"))
            .select("job_id", "n_outside", F.col("first.file").alias("outside_file"),
                    F.col("first.line_no").alias("outside_line"), F.col("first.ts").alias("outside_ts"))
            .toPandas()
        )
    counts = counts.merge(outside, on="job_id", how="left")
    counts["n_outside"] = counts["n_outside"].fillna(0).astype("int64")
    return counts[list(columns)]


def _job_time_limits(scan: LayoutScan, job_ids: list[str]) -> list[tuple]:
    """(job_id, earliest, latest) line time a job's clock may show: its job.json start and end
    widened by ``CLOCK_SLACK`` (None where job.json has no such time)."""
    limits = []
    for job_id in job_ids:
        meta = scan.jobs[job_id]
        start, end = _utc(meta.start_time), _utc(meta.end_time)
        if start is not None or end is not None:
            limits.append((job_id, start - CLOCK_SLACK if start is not None else None,
                           end + CLOCK_SLACK if end is not None else None))
    return limits


def _unmatched_lines(counts: pd.DataFrame) -> list[Issue]:
    """Lines written without an event id: their file changed between the two reads."""
    missing = counts[counts["event_id"].isna()]
    return [Issue(r.job_id, None, "changed_during_parse",
                  "lines whose shape was not seen in the first read (file still being written?)",
                  int(r.n_lines)) for r in missing.itertuples()]


CLOCK_SLACK = pd.Timedelta(days=1)  # a line this far outside its job's start..end counts as ts_outside_job


def _lines_outside_job_time(counts: pd.DataFrame) -> list[Issue]:
    """One counted issue per job with lines stamped outside its time (``_event_counts``: the
    per-job figures repeat on each of the job's rows): a skewed clock or a stale file. The
    lines are kept with their time as written (the diagnosis corrects node clock offsets)."""
    outside = counts[counts["n_outside"] > 0].drop_duplicates("job_id").sort_values("job_id")
    return [Issue(r.job_id, r.outside_file, "ts_outside_job",
                  "lines stamped more than a day before the job's start or after its end (job.json); "
                  "kept with their time as written", int(r.n_outside), 0, int(r.outside_line), str(r.outside_ts))
            for r in outside.itertuples()]


def _utc(value: str | None) -> datetime | None:
    """An ISO 8601 time as naive UTC (the session time zone), or None."""
    if not value:
        return None
    try:
        parsed = pd.Timestamp(value)
    except ValueError:
        return None
    return (parsed.tz_convert("UTC").tz_localize(None) if parsed.tzinfo else parsed).to_pydatetime()


class _Clock:
    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return round(elapsed, 3)


def _file_issues(parsed: DataFrame) -> list[Issue]:
    rows = (
        parsed.where(F.col("issue").isNotNull())
        .select("job_id", "file", "issue", "detail", "n_lines", "n_bytes", "line_no", "sample")
        .collect()
    )
    return [Issue(r.job_id, r.file, r.issue, r.detail, r.n_lines or 0, r.n_bytes or 0, r.line_no, r.sample)
            for r in rows]


def _summarise_issues(summary: ParseSummary, issues: list[Issue]) -> None:
    by_reason: Counter[str] = Counter()
    for issue in issues:
        by_reason[issue.reason] += max(issue.n_lines, 1)
        if issue.reason in SET_ASIDE:
            summary.set_aside_lines += issue.n_lines
    summary.issues_by_reason = dict(sorted(by_reason.items()))


def _per_job(scan: LayoutScan, counts: pd.DataFrame, issues: list[Issue]) -> list[dict]:
    lines = counts.groupby("job_id")["n_lines"].sum().to_dict()
    events = counts.dropna(subset=["event_id"]).groupby("job_id")["event_id"].nunique().to_dict()
    rows = []
    for job_id, meta in sorted(scan.jobs.items()):
        files = [f for f in scan.files if f.job_id == job_id]
        job_issues = [i for i in issues if i.job_id == job_id]
        rows.append({
            "job_id": job_id,
            "status": meta.status,
            "files": len(files),
            "bytes": sum(f.size for f in files),
            "lines": int(lines.get(job_id, 0)),
            "events": int(events.get(job_id, 0)),
            "set_aside_lines": sum(i.n_lines for i in job_issues if i.reason in SET_ASIDE),
            "issues": dict(Counter(i.reason for i in job_issues)),
            "meta_error": meta.error,
        })
    return rows


def _templates_writer(spark: SparkSession, config: Config, store, count_rows: DataFrame,
                      job_ids: list[str], formats: StoredFormats) -> Callable[[], None]:
    """The write of the templates table: every event of the store with its lines, jobs and first
    time over all jobs, from ``count_rows`` (this run's ``job_event_counts`` rows) and the stored
    ``job_event_counts`` rows of every other job. The ``job_event_counts`` write replaces exactly
    the rows of ``job_ids``, so these are that table's rows once it is written, and the templates
    need not read it back after its commit: both are written at the same time (one commit less on
    the parse's critical path, where on HDFS each commit waits for its files' closes; a read and
    its Spark jobs less). The stored table is looked up now, on the calling thread, before that
    write starts (a Delta read sees the snapshot of the moment; a Parquet read lists the folders
    then), and only other jobs' rows are read, which the write does not touch. The store's rows
    become a frame now too (``local_frame`` is not for two threads at once)."""
    templates = local_frame(
        spark,
        pd.DataFrame([(t.event_id, t.template) for t in store.templates()], columns=["event_id", "template"]),
        schema="event_id string, template string")
    counts = count_rows
    stored = formats[JOB_EVENT_COUNTS.name]
    if stored is not None:
        others = (read_table(spark, config.storage, JOB_EVENT_COUNTS.name, stored=stored)
                  .where(~F.col("job_id").isin(job_ids))
                  .select(F.col("job_id").cast("string").alias("job_id"), "event_id", "n_lines", "first_ts"))
        counts = others.unionByName(count_rows)
    return lambda: _write_templates(config, templates, counts, formats)


def _write_templates(config: Config, templates: DataFrame, counts: DataFrame, formats: StoredFormats) -> None:
    """``templates`` (event_id, template) with each event's totals over ``counts`` (job_event_counts rows)."""
    totals = (
        counts.groupBy("event_id")
        .agg(F.sum("n_lines").alias("n_lines"), F.countDistinct("job_id").alias("n_jobs"),
             F.min("first_ts").alias("first_seen"))
    )
    table = (
        templates.join(totals, on="event_id", how="left")
        .select("event_id", "template", "first_seen",
                F.coalesce("n_lines", F.lit(0)).cast("long").alias("n_lines"),
                F.coalesce("n_jobs", F.lit(0)).cast("long").alias("n_jobs"))
        # one file in event order; a global orderBy and a checkpoint cost three Spark jobs more
        .coalesce(1).sortWithinPartitions("event_id")
    )
    write_table(table, config.storage, "templates", formats)


def _write_jobs(spark: SparkSession, config: Config, scan: LayoutScan, summary: ParseSummary,
                formats: StoredFormats) -> None:
    parsed_at = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = []
    for job in summary.per_job:
        meta = scan.jobs[job["job_id"]]
        rows.append({
            "job_id": job["job_id"], "status": meta.status,
            "settings": json.dumps(meta.settings, sort_keys=True, default=str),
            "start_time": meta.start_time, "end_time": meta.end_time, "meta_error": meta.error,
            "n_files": job["files"], "n_bytes": job["bytes"], "n_lines": job["lines"], "n_events": job["events"],
            "n_set_aside_lines": job["set_aside_lines"], "n_issues": sum(job["issues"].values()),
            "run_id": summary.run_id, "parsed_at": parsed_at, "parser_version": __version__,
        })
    frame = local_frame(spark, pd.DataFrame(rows), JOBS.schema)
    write_job_rows(frame, config.storage, "jobs", summary.jobs, formats=formats)




def _quarantine_writer(spark: SparkSession, config: Config, issues: list[Issue], job_ids: list[str],
                       run_id: str, formats: StoredFormats) -> Callable[[], None]:
    """The write of the quarantine rows of ``issues`` (its frame made now); no write when there
    are none and no table yet."""
    rows = pd.DataFrame.from_records(
        [(i.job_id, i.file, i.reason, i.detail, i.n_lines, i.n_bytes, i.line_no, i.sample, run_id)
         for i in issues if i.job_id is not None], columns=table_columns(QUARANTINE.schema))
    # through pandas (Arrow): a local relation; a list of tuples is an RDD whose rows a Python
    # worker has to unpickle, about a second of a write of a few rows
    rows = rows.astype({name: "Int64" for name in ("n_lines", "n_bytes", "line_no")})
    if not len(rows) and formats[QUARANTINE.name] is None:
        return lambda: None
    frame = local_frame(spark, rows, QUARANTINE.schema)
    return lambda: write_job_rows(frame, config.storage, "quarantine", job_ids, set(rows["job_id"]), formats=formats)
