"""Which jobs to parse and which to diagnose: the one place that decides it.

Reads the small registry tables (``jobs``, ``diagnosis_jobs``) and a listing of the logs root;
returns sorted job ids. The nightly, ``l4spark diagnose``, ``l4spark normal-pool``, ``l4spark
spatial`` and the evaluations all choose their jobs here.
"""

from __future__ import annotations

from datetime import date

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from l4spark import __version__
from l4spark.config import Config
from l4spark.parse.layout import LayoutScan
from l4spark.warehouse.storage import read_table, table_exists


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


def jobs_to_diagnose(spark: SparkSession, config: Config, run_date: date | None, rediagnose_older: bool) -> list[str]:
    """Failed jobs (ended on or before ``run_date`` when given) without a current diagnosis."""
    storage = config.storage
    if not table_exists(storage, "jobs"):
        return []
    jobs = read_table(spark, storage, "jobs").where(F.col("status") == "failed").select(
        "job_id", "end_time", "parsed_at").toPandas()
    if run_date is not None:
        ends = pd.to_datetime(jobs["end_time"], errors="coerce", utc=True).dt.date
        jobs = jobs[ends.isna() | (ends <= run_date)]
    done = {}
    if table_exists(storage, "diagnosis_jobs"):
        done = {r.job_id: (r.processed_at, r.version) for r in
                read_table(spark, storage, "diagnosis_jobs").select("job_id", "processed_at", "version").collect()}
    chosen = []
    for row in jobs.itertuples():
        previous = done.get(row.job_id)
        if previous is None or previous[0] is None or pd.Timestamp(previous[0]) < pd.Timestamp(row.parsed_at):
            chosen.append(row.job_id)
        elif rediagnose_older and previous[1] != __version__:
            chosen.append(row.job_id)
    return sorted(chosen)
