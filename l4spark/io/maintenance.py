"""Delta upkeep after a writing run: compaction (``OPTIMIZE``) and ``VACUUM``.

A writing run adds files: a small per-job table gets one file per write (``tables.Table.
partition_columns``), and a replaced job's rows leave the file that held them in the log's history.
After the run (still under the warehouse lock) each Delta table with at least
``storage.optimize_min_files`` data files, more than one of them in some partition, is compacted
in one ``OPTIMIZE`` commit (the rows do not change; time travel still reaches the versions
before). Files that no version younger than ``storage.vacuum_retain_hours`` needs are then removed
by ``VACUUM``; that is also how far back time travel reaches.

Deciding is cheap: delta-rs (``deltalake``) reads each table's log in the driver (milliseconds, no
Spark job); Spark runs only the ``OPTIMIZE`` and ``VACUUM`` that are due. Parquet tables are left
alone (they are one file per job partition per write already).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

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
    per Delta table, in the order of ``tables.TABLES``. A remote warehouse is left alone (its
    tables' logs are not read with delta-rs here)."""
    done = []
    if not fs.is_local(storage.warehouse):
        log.info("upkeep skipped: delta-rs reads local warehouses only here (%s)", storage.warehouse)
        return done
    for name in tables.TABLES:
        if stored_format(storage, name) != "delta":
            continue
        path = table_path(storage, name)
        before = data_files(path)
        optimized = needs_compaction(before, storage.optimize_min_files)
        if optimized:
            spark.sql(f"OPTIMIZE delta.`{path}`").collect()
        vacuumed = vacuum(spark, path, storage.vacuum_retain_hours)
        after = data_files(path) if optimized else before
        done.append(Upkeep(name, len(before), len(after), optimized, vacuumed))
        if optimized or vacuumed:
            log.info("%s: %d -> %d files%s", name, len(before), len(after),
                     f", {vacuumed} unreferenced removed" if vacuumed else "")
    return done


def vacuum(spark: SparkSession, path: str, retain_hours: float) -> int:
    """``VACUUM`` the table when it has files older than ``retain_hours`` that no version in
    that window needs (a negative ``retain_hours``: never); the number of such files."""
    if retain_hours < 0:
        return 0
    hours = int(retain_hours)
    # delta-rs lists the log's tombstones, also of files an earlier VACUUM already deleted
    listed = DeltaTable(path).vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False)
    due = [f for f in listed if (Path(path) / f.removeprefix("file://")).exists()]
    if not due:
        return 0
    checked = spark.conf.get(RETENTION_CHECK, "true")
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS").collect()
    finally:
        spark.conf.set(RETENTION_CHECK, checked)
    return len(due)
