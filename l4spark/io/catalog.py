"""Tables by name: every warehouse table registered in a catalog database, with the analysts' views.

After a writing run, ``register_tables`` makes each table of the warehouse an external table
``<catalog.database>.<table>`` at its folder (``USING delta`` or ``USING parquet``, as stored) in
the session's catalog, and (re)creates the analyst views over them. It is idempotent: a table
already registered at the same place is left alone, one registered elsewhere (a moved
warehouse) is dropped and registered again (external: dropping it never touches its files).

Which catalog: the session's. The embedded default (``build_session`` with ``metastore``) is
Spark's own Hive metastore on Derby in ``<warehouse>/_metastore`` (``catalog.metastore``), which a
new Spark process started the same way finds: ``SELECT * FROM l4spark.diagnosis_jobs``. Embedded
Derby admits one process at a time: a session holding the metastore (a running nightly) makes
another one's first catalog call fail until it stops. On a cluster the session is configured by
the cluster (Hive metastore, Glue, Unity) and the same statements register there.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from l4spark.config import CatalogConfig, StorageConfig
from l4spark.io import fs, tables
from l4spark.io.storage import read_table, stored_format, table_path

log = logging.getLogger(__name__)

# The analysts' views (docs/analysts.md), in dependency order; ``{db}`` is the database. Each is
# created when the tables it reads exist. Weeks start on Monday (date_trunc); a job's week is
# that of its end time (job.json), or of its diagnosis when the end time is missing.
VIEWS: dict[str, tuple[tuple[str, ...], str]] = {
    "latest_diagnosis": (("diagnosis_jobs", "jobs"), """
        SELECT d.job_id, d.status, d.failure_stage, d.failure_iteration, d.fault_class, d.root_cause, d.remedy,
               d.suspect_nodes, d.matched_patterns, d.pattern_confidence, d.history, d.n_flagged_events,
               d.error, d.run_id, d.processed_at, j.settings, j.start_time, j.end_time,
               coalesce(try_to_timestamp(j.end_time), d.processed_at) AS failed_at,
               CAST(date_trunc('week', coalesce(try_to_timestamp(j.end_time), d.processed_at)) AS DATE) AS week
        FROM (SELECT *, row_number() OVER (PARTITION BY job_id ORDER BY processed_at DESC, run_id DESC) AS newest
              FROM {db}.diagnosis_jobs) d
        LEFT JOIN {db}.jobs j ON j.job_id = d.job_id
        WHERE d.newest = 1"""),
    "recurring_suspects": (("diagnosis_jobs", "jobs"), """
        SELECT node, count(DISTINCT job_id) AS n_jobs, count(DISTINCT week) AS n_weeks,
               min(week) AS first_week, max(week) AS last_week, min(position) AS best_position,
               sort_array(collect_set(job_id)) AS jobs,
               sort_array(collect_set(coalesce(fault_class, 'unknown'))) AS fault_classes
        FROM (SELECT job_id, week, fault_class, suspect.pos + 1 AS position, suspect.col AS node
              FROM {db}.latest_diagnosis
              LATERAL VIEW posexplode(suspect_nodes) suspect AS pos, col
              WHERE status = 'diagnosed')
        GROUP BY node
        HAVING count(DISTINCT job_id) >= 2"""),
    "faults_per_week": (("diagnosis_jobs", "jobs"), """
        SELECT week, coalesce(failure_stage, 'unknown') AS failure_stage,
               coalesce(fault_class, 'unknown') AS fault_class, count(*) AS n_jobs,
               sort_array(collect_list(job_id)) AS jobs
        FROM {db}.latest_diagnosis
        WHERE status = 'diagnosed'
        GROUP BY week, coalesce(failure_stage, 'unknown'), coalesce(fault_class, 'unknown')"""),
    "jobs_without_pattern": (("diagnosis_jobs", "jobs", "diagnosis_events"), """
        SELECT d.job_id, d.week, d.failure_stage, d.failure_iteration, d.suspect_nodes, d.n_flagged_events,
               e.event_id AS top_event_id, e.template AS top_template, e.sample AS top_sample, d.settings
        FROM {db}.latest_diagnosis d
        LEFT JOIN (SELECT job_id, event_id, template, sample FROM {db}.diagnosis_events WHERE rank = 1) e
          ON e.job_id = d.job_id
        WHERE d.status = 'diagnosed' AND (d.matched_patterns IS NULL OR size(d.matched_patterns) = 0)"""),
}


def metastore_folder(storage: StorageConfig, catalog: CatalogConfig) -> str:
    """The embedded metastore's folder: ``catalog.metastore``, or ``<warehouse>/_metastore`` (a
    local warehouse; a remote one has no embedded metastore unless ``catalog.metastore`` names one)."""
    return str(Path(catalog.metastore or fs.local_path(storage.warehouse) / "_metastore").resolve())


def register_tables(spark: SparkSession, storage: StorageConfig, catalog: CatalogConfig) -> list[str]:
    """Register every table of the warehouse and the views whose tables exist, in
    ``catalog.database`` of the session's catalog; the names registered (tables, then views)."""
    db = catalog.database
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory":
        log.warning("the session's catalog is in memory: %s.* is gone when the session stops "
                    "(build_session(..., metastore=...) or a cluster's metastore keep it)", db)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    registered = []
    for name, declared in tables.TABLES.items():
        stored = stored_format(storage, name)
        if stored is None:
            continue
        _register_table(spark, f"{db}.{name}", stored, table_path(storage, name), declared)
        registered.append(name)
    return registered + _create_views(spark, registered, f"{db}.")


def read_by_name(spark: SparkSession, storage: StorageConfig, catalog: CatalogConfig, name: str) -> DataFrame:
    """A table or view by its name in ``catalog.database``; when the session's catalog does not
    have it (no metastore, a warehouse never registered), the same table read from its folder, or
    the same view over temporary views of the folders (``register_temp_views``)."""
    qualified = f"{catalog.database}.{name}"
    if spark.catalog.databaseExists(catalog.database) and spark.catalog.tableExists(qualified):
        return spark.table(qualified)
    if name in tables.TABLES:
        return read_table(spark, storage, name)
    register_temp_views(spark, storage)
    return spark.table(name)


def register_temp_views(spark: SparkSession, storage: StorageConfig) -> list[str]:
    """Every table of the warehouse as a temporary view of its folder, and the analyst views over
    them, for this session only (no catalog needed); the names created."""
    created = []
    for name in tables.TABLES:
        if stored_format(storage, name) is not None:
            read_table(spark, storage, name).createOrReplaceTempView(name)
            created.append(name)
    return created + _create_views(spark, created, "")


def _create_views(spark: SparkSession, tables_there: list[str], prefix: str) -> list[str]:
    """The analyst views whose tables are in ``tables_there``: in the database ``prefix``
    (``"l4spark."``) over its tables, or temporary views (``prefix`` empty) over the temporary
    views of the folders; the names created."""
    kind = "VIEW" if prefix else "TEMPORARY VIEW"
    created = []
    for view, (needs, body) in VIEWS.items():
        if set(needs) <= set(tables_there):
            spark.sql(f"CREATE OR REPLACE {kind} {prefix}{view} AS {body.replace('{db}.', prefix)}")
            created.append(view)
    return created


def open_metastore(storage: StorageConfig, catalog: CatalogConfig) -> str | None:
    """The embedded metastore's folder when a writing run made one, else None (a reader does not
    create an empty metastore)."""
    folder = metastore_folder(storage, catalog)
    return folder if (Path(folder) / "metastore_db").is_dir() else None


def _register_table(spark: SparkSession, qualified: str, stored: str, location: str, declared: tables.Table) -> None:
    if spark.catalog.tableExists(qualified):
        if _location(spark, qualified) == location:
            if stored == "parquet" and declared.key is not None:
                spark.sql(f"ALTER TABLE {qualified} RECOVER PARTITIONS")  # new job folders
            return
        spark.sql(f"DROP TABLE {qualified}")  # external: the files stay
    spark.sql(f"CREATE TABLE {qualified} USING {stored} LOCATION '{_quoted(location)}'")
    if stored == "parquet" and declared.key is not None:
        spark.sql(f"ALTER TABLE {qualified} RECOVER PARTITIONS")


def _location(spark: SparkSession, qualified: str) -> str | None:
    """The registered table's folder as a local path (``file:`` dropped), None when unknown."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect():
        if row["col_name"] == "Location":
            return str(row["data_type"]).removeprefix("file:").rstrip("/")
    return None


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
