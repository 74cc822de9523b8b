"""The bad-input corpus as the storage tests use it: the same jobs on a local disk and on a
remote storage, plus one job whose files the storage does not hand over.

Left out of the reliability corpus (tests/reliability/corpus.py): its 4096-rank job (copying
4096 files into a test server takes minutes here), the jobs that test the reader and the
registry checks rather than the storage (``NOT_A_STORAGE_MATTER``: a 50 MB line, NUL bytes,
line ends, clocks, job.json field types...) and its one empty folder (a remote listing sees
files only: docs/deploy.md). Kept: truncated and corrupt .gz, empty files, missing and broken
job.json, undecodable bytes, names with spaces, dots and non-ASCII, stray and nested files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from tests.reliability.corpus import _body, _job, _text, write_bad_corpus

UNREADABLE_JOB = "zz-unreadable"
# listed, then refused by the storage (S3: archived to Glacier; HDFS: its block lost; locally:
# gone before the read, as root may read any file)
REFUSED = f"{UNREADABLE_JOB}/node-a/rank-1.log"
# listed, then deleted before the read (on every storage)
GONE = f"{UNREADABLE_JOB}/node-a/rank-2.log"
TABLES = ("jobs", "quarantine", "events")
META_JOB = "zz-meta-refused"  # its job.json is refused (S3: archived to Glacier; elsewhere: missing)


# Jobs of the corpus whose point is in the reader or the registry checks, which run the same
# whatever storage handed the bytes over: left out to keep the storage tests cheap.
NOT_A_STORAGE_MATTER = ("zz-4096-ranks", "zz-giant-line", "zz-nul", "zz-line-ends", "zz-traceback-only", "zz-clock",
                        "zz-one-node", "zz-meta-types", "zz-meta-status", "zz-meta-escape")


def write_storage_corpus(root: Path) -> None:
    write_bad_corpus(root)
    for job_id in NOT_A_STORAGE_MATTER:
        shutil.rmtree(root / job_id)
    (root / "zz-empty-node" / "node-c").rmdir()
    # rank-1's bytes are unlike any other file's: the HDFS test finds its block file by them
    _job(root, UNREADABLE_JOB, {f"node-a/rank-{r}.log": _text(_body(3 + r, "unreadable")) for r in range(3)})
    _job(root, META_JOB, {"node-a/rank-0.log": _text(_body(3, "refusedmeta"))})


def without_details(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``tables`` with the words blanked on the rows of the refused files (the quarantine's
    ``detail``, the jobs' ``meta_error``): a local OS error and a storage's refusal give the same
    reason in other words."""
    quarantine, jobs = tables["quarantine"].copy(), tables["jobs"].copy()
    quarantine.loc[quarantine["file"].isin([REFUSED, GONE, f"{META_JOB}/job.json"]), "detail"] = ""
    jobs.loc[jobs["job_id"] == META_JOB, "meta_error"] = ""
    return {**tables, "quarantine": _sorted(quarantine), "jobs": _sorted(jobs)}


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def expected_refusals(quarantine: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The quarantine rows (file, reason, job_id) of what the storage did not hand over."""
    rows = quarantine[quarantine["file"].isin([REFUSED, GONE, f"{META_JOB}/job.json"])]
    return sorted(zip(rows["file"], rows["reason"], rows["job_id"]))


def parse_then_snapshot(spark, logs_root: str | Path, warehouse: str | Path, between=lambda: None) -> dict[str, pd.DataFrame]:
    """List ``logs_root``, call ``between`` (it takes files away), parse what was listed into
    ``warehouse``; its jobs, quarantine and events tables."""
    from l4spark.parse.layout import scan_logs_root
    from l4spark.parse.pipeline import parse_jobs
    from tests.nightly_support import nightly_config, snapshot

    config = nightly_config(warehouse)
    scan = scan_logs_root(logs_root, config.layout.pattern, config.layout.job_file, spark=spark)
    between()
    parse_jobs(spark, config, logs_root, scan=scan)
    return snapshot(spark, warehouse, TABLES)


def parse_locally(spark, logs: Path, warehouse: Path) -> dict[str, pd.DataFrame]:
    """The corpus parsed from the local disk, its refused files taken away as locally they can
    be (the job.json before the listing, the rank files between the listing and the read)."""
    local = logs.parent / "local-twin"
    shutil.copytree(logs, local)
    (local / META_JOB / "job.json").unlink()
    return parse_then_snapshot(spark, local, warehouse,
                               between=lambda: [(local / rel).unlink() for rel in (REFUSED, GONE)])
