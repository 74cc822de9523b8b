"""Delta upkeep after a writing run: compaction (``OPTIMIZE``) and ``VACUUM``.

A writing run adds files: a small per-job table gets one file per write (``tables.Table.
partition_columns``), and a replaced job's rows leave the file that held them in the log's history.
After the run (still under the warehouse lock) each Delta table with at least
``storage.optimize_min_files`` data files, more than one of them in some partition, is compacted
in one ``OPTIMIZE`` commit (the rows do not change; time travel still reaches the versions
before). Files that no version younger than ``storage.vacuum_retain_hours`` needs are then removed
by ``VACUUM``; that is also how far back time travel reaches.

Deciding is cheap on a local warehouse: delta-rs (``deltalake``) reads each table's log in the
driver (milliseconds, no Spark job); Spark runs only the ``OPTIMIZE`` and ``VACUUM`` that are due.
On a remote warehouse (``hdfs://``, ``s3a://``...) the driver has no file system of its own, and
delta-rs would need the storage's credentials a second time: there Spark decides too, from the
table's snapshot (``DESCRIBE DETAIL``: its number of data files, 0.1 s) and ``VACUUM ... LITE``,
which deletes the files that the log's own records say were removed (rows replaced, files
compacted) without listing the table's folder: on the MiniDFSCluster a dry run took 2-3 s per
table LITE and 38-58 s FULL (load 11-13), so a full ``VACUUM``, which also deletes the files of a
write that crashed before its commit, is left to the platform team's own schedule
(docs/deploy.md). Parquet tables are left alone (they are one file per job partition per write
already).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from l4spark.config import StorageConfig
from l4spark.io import fs, tables
from l4spark.io.storage import stored_format, table_path

log = logging.getLogger(__name__)

# Delta refuses a VACUUM retention under 7 days unless this check is off for the command.
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


@dataclass(frozen=True)
class Upkeep:
    """What upkeep did to one table: data files before and after, whether it was compacted, how
    many unreferenced files VACUUM removed."""

    table: str
    files_before: int
    files_after: int
    optimized: bool
    vacuumed: int


def data_files(path: str) -> list[str]:
    """The data files of the Delta table's current version (from its log, through delta-rs)."""
    return DeltaTable(path).file_uris()


def needs_compaction(files: list[str], min_files: int) -> bool:
    """At least ``min_files`` files (``0``: never), and some partition folder holds more than one
    (OPTIMIZE compacts within a partition: one file per partition is already compact)."""
    folders = {str(PurePosixPath(f).parent) for f in files}
    return 0 < min_files <= len(files) and len(folders) < len(files)


def maintain_tables(spark: SparkSession, storage: StorageConfig) -> list[Upkeep]:
    """Compact and vacuum every Delta table of the warehouse as the settings say; one ``Upkeep``
    per Delta table, in the order of ``tables.TABLES`` (local or remote warehouse alike)."""
    local = fs.is_local(storage.warehouse)
    if not local and storage.format != "delta":  # a remote table is looked for in the configured format only
        return []
    done = []
    for name in tables.TABLES:
        if stored_format(storage, name) != "delta":
            continue
        path = table_path(storage, name)
        upkeep = _maintain_local(spark, storage, name, path) if local else _maintain_remote(spark, storage, name, path)
        done.append(upkeep)
        if upkeep.optimized or upkeep.vacuumed:
            log.info("%s: %d -> %d files%s", name, upkeep.files_before, upkeep.files_after,
                     f", {upkeep.vacuumed} unreferenced removed" if upkeep.vacuumed else "")
    return done


def _maintain_local(spark: SparkSession, storage: StorageConfig, name: str, path: str) -> Upkeep:
    before = data_files(path)
    optimized = needs_compaction(before, storage.optimize_min_files)
    if optimized:
        spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    vacuumed = vacuum(spark, path, storage.vacuum_retain_hours)
    after = data_files(path) if optimized else before
    return Upkeep(name, len(before), len(after), optimized, vacuumed)


def _maintain_remote(spark: SparkSession, storage: StorageConfig, name: str, path: str) -> Upkeep:
    """Upkeep of the Delta table at ``path`` on a remote file system, decided by Spark: compact
    when the snapshot has at least ``optimize_min_files`` data files in a table of one folder
    (l4spark's Delta tables are not partitioned; an older partitioned one is compacted at the
    same count, where OPTIMIZE leaves a partition of one file alone), then ``VACUUM``."""
    before = _file_count(spark, path)
    optimized = 0 < storage.optimize_min_files <= before and before > 1
    if optimized:
        spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    vacuumed = vacuum(spark, path, storage.vacuum_retain_hours, remote=True)
    after = _file_count(spark, path) if optimized else before
    return Upkeep(name, before, after, optimized, vacuumed)


def _file_count(spark: SparkSession, path: str) -> int:
    """The number of data files in the Delta table's current version (``DESCRIBE DETAIL``)."""
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("numFiles").first()[0])


def vacuum(spark: SparkSession, path: str, retain_hours: float, remote: bool = False) -> int:
    """``VACUUM`` the table when it has files older than ``retain_hours`` that no version in
    that window needs (a negative ``retain_hours``: never); the number of such files. Which
    files are due: locally, delta-rs's list checked against the disk; on a ``remote`` file
    system, Spark's ``VACUUM ... LITE ... DRY RUN`` (the log's records, no listing), and the
    vacuum is LITE there too. A LITE vacuum Delta refuses (the log no longer reaches back to the
    last vacuum) is a warning, never a failed run: a full ``VACUUM`` by hand clears it."""
    if retain_hours < 0:
        return 0
    hours = int(retain_hours)
    mode = " LITE" if remote else ""
    checked = spark.conf.get(RETENTION_CHECK, "true")
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        if remote:
            # on S3 Delta keeps no record of a vacuum in the log (vacuum logging is off where the
            # store is not safe for concurrent writes), so LITE lists the same removed files every
            # night: only those still on storage are due
            listed = [row[0] for row in spark.sql(f"VACUUM delta.`{path}`{mode} RETAIN {hours} HOURS DRY RUN").collect()]
            present = {unquote(urlparse(f.path).path) for f in fs.list_files(spark, path) or []} if listed else set()
            due = sum(1 for file in listed if unquote(urlparse(file).path) in present)
        else:
            # delta-rs lists the log's tombstones, also of files an earlier VACUUM already deleted
            listed = DeltaTable(path).vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False)
            due = sum(1 for f in listed if (Path(path) / f.removeprefix("file://")).exists())
        if due:
            spark.sql(f"VACUUM delta.`{path}`{mode} RETAIN {hours} HOURS").collect()
    except Exception as exc:  # noqa: BLE001 -- housekeeping never fails a run; the log says what to do
        if not remote:
            raise
        log.warning("VACUUM LITE of %s not done (%s): run VACUUM delta.`%s` by hand",
                    path, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__, path)
        return 0
    finally:
        spark.conf.set(RETENTION_CHECK, checked)
    return due
