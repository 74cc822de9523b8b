"""Which jobs to parse and which to diagnose: the one place that decides it.

Reads the small registry tables (``jobs``, ``diagnosis_jobs``) and a listing of the logs root;
returns sorted job ids. The nightly, ``l4spark diagnose``, ``l4spark normal-pool``, ``l4spark
spatial`` and the evaluations all choose their jobs here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from l4spark import __version__
from l4spark.config import Config
from l4spark.parse.layout import LayoutScan
from l4spark.io.storage import read_table, table_exists
from l4spark.io.tables import DIAGNOSIS_ATTEMPTS


def parsed_files(spark: SparkSession, config: Config) -> dict[str, tuple[int, int]]:
    """Job id -> (rank files, bytes) as the ``jobs`` table recorded them at the last parse."""
    if not table_exists(config.storage, "jobs"):
        return {}
    return {r.job_id: (r.n_files, r.n_bytes) for r in
            read_table(spark, config.storage, "jobs").select("job_id", "n_files", "n_bytes").collect()}


def stale_jobs(spark: SparkSession, config: Config, scan: LayoutScan) -> list[str]:
    """Jobs of ``scan`` the jobs table lacks, or whose files changed since they were parsed."""
    files: dict[str, list] = {}
    for f in scan.files:
        files.setdefault(f.job_id, []).append(f)
    parsed = parsed_files(spark, config)
    stale = []
    for job_id in sorted(scan.jobs):
        current = (len(files.get(job_id, [])), sum(f.size for f in files.get(job_id, [])))
        if parsed.get(job_id) != current:
            stale.append(job_id)
    return stale


def missing_jobs(spark: SparkSession, config: Config, scan: LayoutScan) -> list[str]:
    """Jobs of ``scan`` that the jobs table does not list at all (changed files do not count)."""
    known = parsed_files(spark, config)
    return sorted(set(scan.jobs) - set(known))


def failed_jobs(spark: SparkSession, config: Config) -> list[str]:
    """Every job whose registry status is ``failed``."""
    if not table_exists(config.storage, "jobs"):
        return []
    return sorted(r.job_id for r in read_table(spark, config.storage, "jobs")
                  .where(F.col("status") == "failed").select("job_id").collect())


@dataclass
class DiagnosisSelection:
    """The failed jobs to diagnose now, and those the nightly gave up on (job -> last error)."""

    selected: list[str]
    given_up: dict[str, str] = field(default_factory=dict)


def jobs_to_diagnose(spark: SparkSession, config: Config, run_date: date | None,
                     rediagnose_older: bool) -> DiagnosisSelection:
    """Failed jobs (ended on or before ``run_date`` when given) without a current good diagnosis.

    Current: a ``diagnosed`` row in ``diagnosis_jobs`` made after the job's last parse (and, with
    ``rediagnose_older``, by this l4spark version). An error row is not current: the job is tried
    again, unless its last ``nightly.max_attempts`` attempts failed on the same parse
    (``diagnosis_attempts``), when it is given up until it is parsed again.
    """
    storage = config.storage
    if not table_exists(storage, "jobs"):
        return DiagnosisSelection([])
    jobs = read_table(spark, storage, "jobs").where(F.col("status") == "failed").select(
        "job_id", "end_time", "parsed_at").toPandas()
    if run_date is not None:
        ends = pd.to_datetime(jobs["end_time"], errors="coerce", utc=True).dt.date
        jobs = jobs[ends.isna() | (ends <= run_date)]
    done = {}
    if table_exists(storage, "diagnosis_jobs"):
        done = {r.job_id: (r.processed_at, r.version) for r in
                read_table(spark, storage, "diagnosis_jobs").where(F.col("status") == "diagnosed")
                .select("job_id", "processed_at", "version").collect()}
    attempts = {}
    if table_exists(storage, DIAGNOSIS_ATTEMPTS.name):
        attempts = {r.job_id: r for r in read_table(spark, storage, DIAGNOSIS_ATTEMPTS.name)
                    .select("job_id", "status", "error", "failed_attempts", "parsed_at").collect()}
    chosen, given_up = [], {}
    for row in jobs.itertuples():
        previous = done.get(row.job_id)
        current = previous is not None and previous[0] is not None and \
            pd.Timestamp(previous[0]) >= pd.Timestamp(row.parsed_at) and \
            not (rediagnose_older and previous[1] != __version__)
        if current:
            continue
        last = attempts.get(row.job_id)
        if (last is not None and last.status == "error" and last.failed_attempts >= config.nightly.max_attempts
                and last.parsed_at is not None and pd.Timestamp(last.parsed_at) == pd.Timestamp(row.parsed_at)):
            given_up[row.job_id] = f"given up after {last.failed_attempts} failed attempts: {last.error}"
            continue
        chosen.append(row.job_id)
    return DiagnosisSelection(sorted(chosen), dict(sorted(given_up.items())))
