"""Warehouse I/O: where tables live, replacing a job's rows, atomic small files.

All table writes go through ``write_job_rows`` (per-job replacement) or ``write_table``
(small tables rewritten whole). Parquet: a dynamic partition overwrite replaces the partitions
of the jobs written, and partitions of those jobs that the new data no longer has are deleted,
so a rerun leaves exactly the new rows. Delta: one overwrite commit with ``replaceWhere`` on the
job ids, which drops every old row of those jobs (also of jobs the new rows no longer have) and
adds the new ones atomically; no folder is ever removed by hand, and a dynamic partition
overwrite is not used (Sail ignores it silently). Only the DataFrame API is used, so the same
writes run under classic Spark with delta-spark and over Spark Connect (see docs/delta.md).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from l4spark.config import StorageConfig
from l4spark.errors import ConfigError
from l4spark.killpoints import kill_point
from l4spark.io import fs, tables


def table_path(storage: StorageConfig, table: str) -> str:
    return fs.child(storage.warehouse, table)


def stored_format(storage: StorageConfig, table: str, spark: SparkSession | None = None) -> str | None:
    """The format ``table`` is stored in (``"delta"`` or ``"parquet"``), None when there is no
    table Spark can read.

    Delta: a committed version in ``_delta_log`` (the log holds the schema, so a table whose rows
    were all replaced away still exists; data files without a commit, as a crash during the first
    write leaves them, are not a table). Parquet: a partition folder or data file (a write of no
    rows leaves only ``_SUCCESS``, which Spark cannot read a schema from); under
    ``storage.format = "delta"`` only a completed Parquet write (``_SUCCESS``) counts, so the
    files of a crashed first Delta write are not taken for a Parquet table. A table keeps the
    format it was created in, whatever ``storage.format`` says now: every reader detects it.

    ``spark``: the session that lists a remote warehouse; default the thread's active session,
    which a thread that Python started has not (``in_parallel``): writers pass theirs.
    """
    if not fs.is_local(storage.warehouse):
        return _remote_stored_format(storage, table, spark or _active_session())
    path = Path(table_path(storage, table))
    if not path.is_dir():
        return None
    log = path / "_delta_log"
    if log.is_dir():
        return "delta" if any(p.name[:1].isdigit() for p in log.iterdir()) else None
    if storage.format == "delta" and not (path / "_SUCCESS").exists():
        return None
    has_data = any(not p.name.startswith(("_", ".")) for p in path.iterdir())
    return "parquet" if has_data else None


def table_exists(storage: StorageConfig, table: str, spark: SparkSession | None = None) -> bool:
    """True when Spark can read the table (``stored_format``)."""
    return stored_format(storage, table, spark) is not None


def read_table(spark: SparkSession, storage: StorageConfig, table: str, stored: str | None = None) -> DataFrame:
    """The whole table, in the format it is stored in; partition columns (``job_id``...) come
    back as ordinary columns. ``stored``: that format where the caller knows it (a table it has
    just written, which ``check_format`` found in ``storage.format``), so that it is not looked
    up again (on a remote warehouse a look is a listing)."""
    stored = stored or stored_format(storage, table, spark) or storage.format
    reader = spark.read.format(stored)
    if stored == "parquet":
        # A Parquet table is its folder tree: basePath keeps job_id a column when a caller's
        # filter prunes the read down to one partition folder. Delta reads its log instead.
        reader = reader.option("basePath", table_path(storage, table))
    return reader.load(table_path(storage, table))


def check_format(storage: StorageConfig, table: str, spark: SparkSession | None = None) -> str | None:
    """Refuse to write ``table`` in ``storage.format`` when it is stored in the other format;
    returns its ``stored_format`` (None: no table yet), which a writer needs anyway: on a remote
    warehouse each look is a listing."""
    stored = stored_format(storage, table, spark)
    if stored is not None and stored != storage.format:
        raise ConfigError(
            f"the table {table_path(storage, table)} is {stored} but storage.format is {storage.format}: "
            f"set storage.format = \"{stored}\" for this warehouse, or convert it (docs/delta.md#a-parquet-warehouse)")
    return stored


class StoredFormats:
    """``check_format`` of each table of ``names``, looked up once, in a driver thread, while the
    run that writes them reads its input. On a remote warehouse each look is one or two listings
    (about 0.1 s each on the storage bench's HDFS), and the parse paid them on its critical path:
    six tables, ``job_event_counts`` twice. ``formats[table]`` waits for the look-up and gives
    the table's ``stored_format`` (None: no table yet), or raises check_format's ConfigError (a
    table stored in the other format) to the first caller that asks, before it writes anything.
    While the run holds the warehouse's lock (``io.lock``) only its own writes change these
    tables, and it writes each once."""

    def __init__(self, spark: SparkSession, storage: StorageConfig, names: Iterable[str]) -> None:
        names = tuple(names)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="l4spark-formats")
        self._looked_up = pool.submit(lambda: {name: check_format(storage, name, spark) for name in names})
        pool.shutdown(wait=False)

    def __getitem__(self, table: str) -> str | None:
        return self._looked_up.result()[table]


def in_parallel(*writes: Callable[[], None]) -> None:
    """Run ``writes`` (table writes that do not read each other) at the same time, each in a
    driver thread, and wait for all of them; then raise the first error, in the order given.
    Each write commits on its own, as it would one after the other: a crash between them leaves
    states a sequential run can leave too, which a rerun replaces (the parse's ``jobs`` and the
    diagnosis' ``diagnosis_jobs``, the marks that a job is done, are written after them, alone).
    Threads of one driver, under the run's one l4spark lock: the single-writer guarantee is the
    lock's, unchanged (docs/deploy.md)."""
    if len(writes) == 1:
        writes[0]()
        return
    with ThreadPoolExecutor(max_workers=len(writes), thread_name_prefix="l4spark-write") as pool:
        futures = [pool.submit(write) for write in writes]
    for future in futures:
        future.result()


def write_job_rows(rows: DataFrame, storage: StorageConfig, table: str, job_ids: Iterable[str],
                   jobs_with_rows: Iterable[str] | None = None, formats: StoredFormats | None = None) -> None:
    """Replace the rows of ``job_ids`` (values of the table's partition key, ``tables.py``) in
    ``table`` with ``rows``.

    ``rows`` must hold only those jobs. Rows of other jobs are untouched. ``jobs_with_rows``
    (default: all) says which jobs ``rows`` has; Parquet: the others' old partitions are deleted,
    as a dynamic overwrite only replaces partitions that the new data has. Delta: one commit
    replaces the rows of all ``job_ids`` (an empty ``rows`` deletes them), so ``jobs_with_rows``
    is not needed. A table declared ``small``: the rows of many jobs in one task, sorted by job, so
    that one file writer is open at a time (a writer per job and task would hold a Parquet row-group
    buffer each). As Delta no table is partitioned (``Table.partition_columns``): a small table gets
    one file per write, ``events`` one per writing task, and the ``replaceWhere`` on the key column
    rewrites only the files that held the replaced jobs. ``formats``: the run's tables' formats,
    looked up ahead (``StoredFormats``); by default the table's is looked up here.
    """
    declared = tables.table(table)
    key, small = declared.key, declared.small
    if key is None:
        raise ValueError(f"'{table}' is not partitioned: rewrite it whole with write_table")
    job_ids = sorted(set(job_ids))
    if small:
        rows = _small_write_tasks(rows, storage, key, len(job_ids))
    elif not fs.is_local(storage.warehouse) and storage.format == "parquet":
        # A task writes a file per job it holds, and a remote read's tasks hold files of many
        # jobs (Spark packs them by size): on HDFS each file costs a wait at close (see
        # _small_write_tasks). Rebalancing by job (a shuffle that adaptive execution sizes, and
        # splits where a job is skewed) leaves about one file per job: 48 instead of about 150.
        rows = rows.hint("rebalance", key)
    path = table_path(storage, table)
    stored = formats[table] if formats is not None else check_format(storage, table, rows.sparkSession)
    if storage.format == "delta":
        writer = plain_strings(rows).write.format("delta").mode("overwrite")
        if stored is not None:
            # No partitionBy: Delta keeps the table's own partitioning (a table created partitioned
            # by an older l4spark stays so).
            writer = writer.option("replaceWhere", replace_where(key, job_ids))
        else:
            # The first write creates the table: there are no other jobs' rows to keep, and Sail
            # refuses a replaceWhere on a path without a commit (delta-spark accepts it).
            writer = writer.partitionBy(*declared.partition_columns("delta"))
            if declared.stats_columns:
                writer = writer.option("delta.dataSkippingStatsColumns", ",".join(declared.stats_columns))
        writer.save(path)
        kill_point(f"after_write:{table}")
        return
    (rows.write.mode("overwrite").option("partitionOverwriteMode", "dynamic")
     .partitionBy(key).parquet(path))
    gone = set(job_ids) - set(jobs_with_rows if jobs_with_rows is not None else job_ids)
    if fs.is_local(storage.warehouse):
        delete_job_partitions(storage, table, gone)
    else:
        _empty_remote_partitions(rows, storage, table, gone)
    kill_point(f"after_write:{table}")


def _small_write_tasks(rows: DataFrame, storage: StorageConfig, key: str, n_jobs: int) -> DataFrame:
    """The rows of a small table's write, sorted by job within their tasks: one task locally; on a
    remote warehouse as Parquet, a task per job up to ``spark.sql.shuffle.partitions``, because
    there each job is a file of its own and HDFS makes a writer wait for every file it closes (the
    client asks the NameNode to complete the file until the DataNode has reported its block, 400 ms
    at the first retry): one task writing 48 jobs' files took 9.6 s on the bench fleet. A
    repartition by number (not by column only) is one that adaptive execution does not coalesce
    back into one task."""
    if fs.is_local(storage.warehouse) or storage.format == "delta":
        return rows.coalesce(1).sortWithinPartitions(key)
    tasks = max(1, min(n_jobs, int(rows.sparkSession.conf.get("spark.sql.shuffle.partitions", "200"))))
    return rows.repartition(tasks, key).sortWithinPartitions(key)


def plain_strings(rows: DataFrame) -> DataFrame:
    """``rows`` with every column that holds strings cast to its type written out in DDL (plain
    ``string``), for a Delta write.

    Over Spark Connect (Spark 4.2), a string typed by the client (a ``mapInArrow`` output schema,
    a ``cast(StringType())``) reaches the server with the collation UTF8_BINARY named explicitly,
    and delta-spark 4.4 writes it into the table's log as the type ``string collate UTF8_BINARY``,
    which delta-rs (and DuckDB) refuse: "Unsupported Delta table type" (the Delta protocol keeps a
    collation in the field's metadata, the type stays ``string``). A cast to the DDL text ``string``
    gives the server's default string type; on classic Spark the cast is to the same type and the
    optimizer drops it. The client's schema does not show the collation, so every string column is
    cast (tests/test_connect_diagnosis.py reads every table with delta-rs)."""
    columns = [F.col(_quoted_name(f.name)).cast(_ddl(f.dataType)).alias(f.name) if _has_string(f.dataType)
               else F.col(_quoted_name(f.name)) for f in rows.schema.fields]
    return rows.select(*columns)


def _has_string(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.ArrayType):
        return _has_string(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _has_string(data_type.keyType) or _has_string(data_type.valueType)
    if isinstance(data_type, T.StructType):
        return any(_has_string(f.dataType) for f in data_type.fields)
    return isinstance(data_type, T.StringType)


def _ddl(data_type: T.DataType) -> str:
    """``data_type`` as Spark DDL with every string type written ``string``."""
    if isinstance(data_type, T.StringType):
        return "string"
    if isinstance(data_type, T.ArrayType):
        return f"array<{_ddl(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"map<{_ddl(data_type.keyType)},{_ddl(data_type.valueType)}>"
    if isinstance(data_type, T.StructType):
        return "struct<" + ",".join(f"{_quoted_name(f.name)}:{_ddl(f.dataType)}" for f in data_type.fields) + ">"
    return data_type.simpleString()


def _quoted_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def replace_where(key: str, values: Iterable[str]) -> str:
    """The Delta ``replaceWhere`` predicate selecting the rows whose ``key`` is one of ``values``.

    Values are Spark SQL string literals: backslash and quote escaped with a backslash, which
    classic Spark and Sail read alike (a doubled quote is a quote to Spark but is dropped by
    Sail). No values: ``false``, so the write replaces no row.
    """
    literals = ["'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in values]
    return f"`{key}` IN ({', '.join(literals)})" if literals else "false"


def delete_job_partitions(storage: StorageConfig, table: str, job_ids: Iterable[str]) -> None:
    """Remove every row of ``job_ids`` (values of ``key``) from a Parquet table by removing their
    partition folders. Parquet only: a Delta table's files are owned by its log, and
    ``write_job_rows`` drops a job's Delta rows in its ``replaceWhere`` commit."""
    if storage.format != "parquet":
        raise ValueError(f"delete_job_partitions removes Parquet partition folders; the table '{table}' "
                         f"is {storage.format}: replace its rows with write_job_rows instead")
    base = Path(table_path(storage, table))
    key = tables.table(table).key
    for job_id in job_ids:
        folder = base / (key + "=" + escape_partition_value(job_id))
        if folder.is_dir():
            shutil.rmtree(folder)


def escape_partition_value(value: str) -> str:
    """Spark's escaping of a partition value in a folder name (ExternalCatalogUtils)."""
    special = set('"#%\'*/:=?\\\x7f{[]^')
    out = []
    for char in value:
        if char in special or ord(char) < 0x20:
            out.append(f"%{ord(char):02X}")
        else:
            out.append(char)
    return "".join(out) if value else "__HIVE_DEFAULT_PARTITION__"


def write_table(rows: DataFrame, storage: StorageConfig, table: str, formats: StoredFormats | None = None) -> None:
    """Rewrite a small unpartitioned table whole (Delta: one overwrite commit; the schema is
    replaced too, as a Parquet overwrite replaces it). ``formats`` as in ``write_job_rows``."""
    if tables.table(table).key is not None:
        raise ValueError(f"'{table}' is partitioned by {tables.table(table).key}: replace rows with write_job_rows")
    # only the refusal of a table stored in the other format matters here
    _ = formats[table] if formats is not None else check_format(storage, table, rows.sparkSession)
    if storage.format == "delta":
        rows = plain_strings(rows)
    writer = rows.write.format(storage.format).mode("overwrite")
    if storage.format == "delta":
        writer = writer.option("overwriteSchema", "true")
    writer.save(table_path(storage, table))
    kill_point(f"after_write:{table}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: str | Path, payload: Any) -> None:
    """Write a JSON document atomically (reports, summaries)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(payload, indent=2, default=str).encode())


# ---- a remote warehouse (hdfs://, s3a://...; io/fs.py): no file system calls, Spark only -------


def _remote_stored_format(storage: StorageConfig, table: str, spark: SparkSession) -> str | None:
    """``stored_format`` on a remote warehouse, by listings through Spark (each a round trip to
    the storage): Delta, a commit file in ``_delta_log``; Parquet, a data file (Hadoop's listing
    leaves out ``_SUCCESS``). The configured format is looked for first. Under ``"delta"`` a table
    folder without ``_delta_log`` that holds data files is Parquet: a Parquet warehouse from
    before ``auto`` meant Delta on remote storage is then read as Parquet and refused for Delta
    writes (``check_format``), never overwritten by a Delta table that would hide its rows. Unlike
    locally, a completed Parquet write cannot be told by its ``_SUCCESS`` here, so the files of a
    first Delta write that crashed before its commit count as Parquet too: refused, not lost
    (docs/deploy.md says to delete such a folder). Under ``"parquet"`` a Delta table counts as
    Parquet (its data files are listed): a setting l4spark never picks for it."""
    path = table_path(storage, table)
    if storage.format == "delta":
        log = fs.list_files(spark, path + "/_delta_log")
        if any(f.path.rsplit("/", 1)[-1][:1].isdigit() for f in log or []):
            return "delta"
        return "parquet" if log is None and fs.list_files(spark, path) else None
    return "parquet" if fs.list_files(spark, path) else None


def _empty_remote_partitions(rows: DataFrame, storage: StorageConfig, table: str, job_ids: Iterable[str]) -> None:
    """``delete_job_partitions`` on a remote warehouse: the partition folders of ``job_ids`` that
    exist are deleted (classic Spark, ``fs.delete_paths``). Over Spark Connect, which cannot
    delete, each is overwritten with no rows instead (one empty Parquet file with the schema),
    which Spark reads as no rows of that job."""
    spark = rows.sparkSession
    folders = [_partition_path(storage, table, job_id) for job_id in sorted(job_ids)]
    folders = [folder for folder in folders if fs.list_files(spark, folder)]
    if not folders or fs.delete_paths(spark, folders, f"partition folders of jobs {table} no longer has"):
        return
    empty = spark.createDataFrame([], rows.drop(tables.table(table).key).schema)
    for folder in folders:
        if fs.list_files(spark, folder):  # a failed delete may have taken some
            empty.coalesce(1).write.mode("overwrite").parquet(folder)


def _partition_path(storage: StorageConfig, table: str, job_id: str) -> str:
    return table_path(storage, table) + "/" + tables.table(table).key + "=" + escape_partition_value(job_id)


def _active_session() -> SparkSession:
    session = SparkSession.getActiveSession()
    if session is None:
        raise RuntimeError("a remote warehouse is read through Spark: no active Spark session")
    return session
