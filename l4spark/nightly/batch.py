"""The nightly batch: every failed job without a current diagnosis, in one Spark application.

    l4spark nightly --logs-root R --warehouse W [--date YYYY-MM-DD] [--rediagnose-older]
    spark-submit jobs/nightly.py --logs-root R --warehouse W [--date D]

Steps, each idempotent, so that a run killed at any point and started again ends with the same
tables as one clean run:

1. scan the logs root once; a job is *stale* when the jobs table does not have it or its files
   changed (count or bytes differ from what was parsed);
2. parse the stale jobs (all in one parse: one read of their files), which extends the template
   store and replaces their rows;
3. bring the normal pool up to date with the successful jobs (incremental);
4. select the failed jobs (ended on or before ``--date`` when given) without a good diagnosis
   made after their last parse (or, ``--rediagnose-older``, by this l4spark version); a job whose
   last ``nightly.max_attempts`` diagnoses failed on the same parse is given up (listed, not tried);
5. diagnose them together and write the diagnosis tables (per job replaced; ``diagnosis_jobs``
   last), rendering their reports at the same time (``runs.seconds``: one step, "write and
   reports", or "write" without reports);
6. Delta upkeep (l4spark/io/maintenance.py): compact the tables whose files passed
   ``storage.optimize_min_files``, VACUUM past ``storage.vacuum_retain_hours``;
7. record the run in the ``runs`` table (run id, date, counts, errors, seconds per step), then
   register every table and the analyst views by name (``catalog.database``, l4spark/io/catalog.py).

A job whose diagnosis fails is recorded in ``diagnosis_attempts`` and keeps its last good
diagnosis (or gets a ``diagnosis_jobs`` error row when it has none); the others finish, and the
command exits 3 (``l4spark.errors.EXIT_PARTIAL``). The run's own row is written last; a run that
died has no row, and the next run picks its work up.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable

from pyspark.sql import SparkSession

from l4spark import __version__
from l4spark.config import Config
from l4spark.crossjob.normal_pool import update_normal_pool
from l4spark.diagnosis.assemble import diagnose_jobs, new_run_id, write_diagnosis
from l4spark.diagnosis.pattern_store import enabled_patterns
from l4spark.killpoints import kill_point
from l4spark.nightly.selection import jobs_to_diagnose, missing_jobs, stale_jobs
from l4spark.parse.layout import scan_logs_root
from l4spark.parse.pipeline import parse_jobs
from l4spark.report.diagnosed import write_job_reports
from l4spark.io.catalog import register_tables
from l4spark.io.maintenance import Upkeep, maintain_tables
from l4spark.io.storage import write_job_rows
from l4spark.io.tables import RUNS

log = logging.getLogger(__name__)


@dataclass
class NightlyRun:
    run_id: str
    run_date: str
    started_at: datetime
    parsed: list[str] = field(default_factory=list)
    selected: list[str] = field(default_factory=list)
    diagnosed: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    given_up: dict[str, str] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    scanned: int = 0
    reports: dict[str, tuple] = field(default_factory=dict)
    upkeep: list[Upkeep] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)


def parse_missing(spark: SparkSession, config: Config, logs_root: str | Path,
                  progress: Callable[[str], None] = log.info) -> list[str]:
    """Parse the jobs under ``logs_root`` that the warehouse does not have yet (one listing of the
    root, handed to the parse); returns them."""
    scan = scan_logs_root(logs_root, config.layout.pattern, config.layout.job_file, spark=spark)
    missing = missing_jobs(spark, config, scan)
    if missing:
        progress(f"parsing {len(missing)} jobs not yet in the warehouse")
        parse_jobs(spark, config, logs_root, missing, progress=progress, scan=scan.only(missing))
    return missing


def catch_up(spark: SparkSession, config: Config, logs_root: str | Path,
             progress: Callable[[str], None] = log.info) -> list[str]:
    """``parse_missing``, then the normal pool brought up to date; returns the parsed jobs."""
    missing = parse_missing(spark, config, logs_root, progress)
    update_normal_pool(spark, config, config.normal_pool, progress=progress)
    return missing


def _scan_then_parse(spark: SparkSession, config: Config, logs_root: str | Path, run: NightlyRun,
                     lap: Callable[[str], None], progress: Callable[[str], None]) -> None:
    """List ``logs_root`` once and parse its new or changed jobs (``run.scanned``, ``run.parsed``).
    The listing of a remote root (its file index, in the driver's JVM) is let go when this returns,
    before the rest of the nightly."""
    scan = scan_logs_root(logs_root, config.layout.pattern, config.layout.job_file, spark=spark)
    run.scanned = len(scan.jobs)
    run.parsed = stale_jobs(spark, config, scan)
    lap("scan")
    progress(f"{run.scanned} jobs under {logs_root}; {len(run.parsed)} new or changed")
    if run.parsed:
        parse_jobs(spark, config, logs_root, run.parsed, progress=progress, scan=scan.only(run.parsed))
    lap("parse")


def run_nightly(spark: SparkSession, config: Config, logs_root: str | Path, run_date: date | None = None,
                rediagnose_older: bool = False, reports_dir: str | Path | None = None,
                progress: Callable[[str], None] = log.info) -> NightlyRun:
    run = NightlyRun(new_run_id("nightly"), (run_date or datetime.now(timezone.utc).date()).isoformat(),
                     datetime.now(timezone.utc).replace(tzinfo=None))
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        run.seconds[name] = round(now - clock, 2)
        clock = now

    if config.diagnosis.disabled_patterns:
        # an id the diagnosis would refuse fails the run now, not after the parse and the pool
        enabled_patterns(spark, config.storage, config.diagnosis.disabled_patterns)
    _scan_then_parse(spark, config, logs_root, run, lap, progress)
    kill_point("after_parse")
    update_normal_pool(spark, config, config.normal_pool, progress=progress)
    lap("normal_pool")
    kill_point("after_normal_pool")
    selection = jobs_to_diagnose(spark, config, run_date, rediagnose_older)
    run.selected, run.given_up = selection.selected, selection.given_up
    progress(f"{len(run.selected)} failed jobs to diagnose" +
             (f"; given up on {len(run.given_up)}: {', '.join(run.given_up)}" if run.given_up else ""))
    if run.selected:
        diagnosis = diagnose_jobs(spark, config, run.selected, run_id=run.run_id, progress=progress)
        lap("diagnose")
        kill_point("after_diagnose")

        def reports(kept: list[str]) -> None:
            run.reports = write_job_reports(diagnosis, reports_dir, skip=kept, spark=spark)

        # the reports are rendered on the driver while the tables are written (write_diagnosis)
        run.kept = write_diagnosis(spark, config, diagnosis, beside=reports if reports_dir is not None else None)
        run.diagnosed = diagnosis.diagnosed
        run.errors = {r.job_id: r.error for r in diagnosis.jobs.itertuples() if r.status == "error"}
        lap("write and reports" if reports_dir is not None else "write")
    run.upkeep = maintain_tables(spark, config.storage)
    lap("upkeep")
    kill_point("before_runs_row")
    record_run(spark, config, run, "partial" if run.errors else "succeeded")
    run.registered = register_by_name(spark, config, progress)
    return run


def register_by_name(spark: SparkSession, config: Config, progress: Callable[[str], None] = log.info) -> list[str]:
    """Register the warehouse's tables and views in ``catalog.database`` (``catalog.register``),
    when the session's catalog outlives it; the names registered (none with an in-memory catalog:
    the names would be gone with the session)."""
    if not config.catalog.register:
        return []
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory":
        # the embedded metastore is kept beside a local warehouse; a remote one has none unless
        # catalog.metastore names a local folder (or the cluster's session brings a metastore)
        log.info("tables not registered by name: the session's catalog is in memory (docs/deploy.md, Storage)")
        return []
    try:
        names = register_tables(spark, config.storage, config.catalog)
    except Exception as exc:  # noqa: BLE001 - the run's tables are committed; a busy or broken
        # metastore (embedded Derby held by an analyst's session) must not turn it into a failure
        progress(f"tables not registered in the catalog database {config.catalog.database}: "
                 f"{str(exc).splitlines()[0][:300]} (the next run registers them)")
        return []
    progress(f"{len(names)} tables and views registered in the catalog database {config.catalog.database}")
    return names


def record_run(spark: SparkSession, config: Config, run: NightlyRun, status: str) -> None:
    """Append the run's row to ``runs`` (partitioned by run_id: a rerun of an id replaces it)."""
    row = (run.run_id, run.run_date, run.started_at, datetime.now(timezone.utc).replace(tzinfo=None), status,
           run.scanned, len(run.parsed), len(run.selected), len(run.diagnosed), len(run.errors),
           json.dumps(run.errors, sort_keys=True), json.dumps(run.seconds), __version__)
    frame = spark.createDataFrame([row], RUNS.schema)
    write_job_rows(frame, config.storage, "runs", [run.run_id])


def summary_lines(run: NightlyRun) -> list[str]:
    return [f"nightly run {run.run_id} ({run.run_date})",
            f"  jobs scanned    {run.scanned}",
            f"  parsed          {len(run.parsed)} (new or changed)",
            f"  diagnosed       {len(run.diagnosed)} of {len(run.selected)} selected; errors {len(run.errors)}",
            *[f"    {job}: {error}" for job, error in sorted(run.errors.items())],
            *([f"  kept the last good diagnosis of {', '.join(run.kept)}"] if run.kept else []),
            f"  given up        {len(run.given_up)} (nightly.max_attempts failed attempts on the same input)",
            *[f"    {job}: {reason}" for job, reason in run.given_up.items()],
            f"  seconds         {json.dumps(run.seconds)}"]


def as_dict(run: NightlyRun) -> dict:
    out = asdict(run)
    out["started_at"] = run.started_at.isoformat()
    out["reports"] = {k: [str(p) for p in v] for k, v in run.reports.items()}
    return out
