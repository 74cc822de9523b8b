"""The SparkSession factory: local by default, bound to loopback, UTC, few shuffle partitions.

A Spark Connect server is used instead when one is configured (``spark.remote`` under
``[spark.extra]``, or the ``SPARK_REMOTE`` environment variable, e.g. ``sc://127.0.0.1:15002``):
the library uses only the DataFrame API, so its jobs run over Connect unchanged.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession

from l4spark.config import SparkConfig
from l4spark.io.delta_jars import DELTA_SQL_SETTINGS, find_jars


def build_session(conf: SparkConfig, metastore: str | None = None) -> SparkSession:
    """A SparkSession for ``conf``. Python workers run this interpreter (``PYSPARK_PYTHON``) so
    that executors import the same l4spark and libraries; every socket binds to 127.0.0.1
    unless ``SPARK_LOCAL_IP`` says otherwise (a cluster's spark-submit sets its own).
    With a Connect URL (``remote_url``) the session is a Spark Connect client instead.
    ``metastore``: a folder for Spark's persistent catalog (``metastore_settings``), so that tables
    registered by name outlive the session; a submitted or Connect session keeps its own."""
    url = remote_url(conf)
    if url is not None:
        return _connect_session(conf, url)
    # Under spark-submit the JVM is already up with the submitter's master, memory, Python and
    # --conf settings: those win over l4spark's conf, which only fills in what they leave unset.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = conf.master.startswith("local") and not submitted
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    given = _submitted_conf() if submitted else set()
    settings = {"spark.sql.session.timeZone": "UTC", "spark.sql.shuffle.partitions": str(conf.shuffle_partitions),
                "spark.log.level": conf.log_level, **({} if submitted else delta_settings(conf)), **conf.extra}
    if metastore is not None and not submitted:
        settings.update(metastore_settings(metastore, settings.get("spark.driver.extraJavaOptions", "")))
    if "spark.jars" in conf.extra and not submitted and "spark.jars" in delta_settings(conf):
        settings["spark.jars"] = delta_settings(conf)["spark.jars"] + "," + conf.extra["spark.jars"]
    builder = SparkSession.builder.appName(conf.app_name)
    if not submitted:
        builder = builder.master(conf.master).config("spark.driver.memory", conf.driver_memory)
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in settings.items():
        if key not in given:
            builder = builder.config(key, value)
    return builder.getOrCreate()


def delta_settings(conf: SparkConfig) -> dict[str, str]:
    """The settings that give a classic session Delta Lake: the jar files of ``conf.delta_jars``
    (``delta_jars.find_jars``) on the classpath, Delta's SQL extension and catalog, and Delta's
    log-replay partitions as few as the shuffle's (its default, 50 tasks per table snapshot,
    dominates small writes on a 2-core machine). Empty when the jars are not there.

    A spark-submit or Spark Connect session gets Delta from its submitter or server instead
    (docs/delta.md)."""
    jars = find_jars(conf.delta_jars)
    if jars is None:
        return {}
    return {"spark.jars": ",".join(str(jar) for jar in jars), **DELTA_SQL_SETTINGS,
            "spark.databricks.delta.snapshotPartitions": str(conf.shuffle_partitions)}


def metastore_settings(folder: str, java_options: str = "") -> dict[str, str]:
    """Spark's persistent catalog in ``folder``: the Hive metastore (pyspark ships Hive 2.3 and
    Derby) on an embedded Derby database ``folder/metastore_db``, managed tables and databases
    under ``folder/spark-warehouse``, Derby's log in ``folder``. Another process with the same
    settings sees the same tables (one process at a time: embedded Derby locks the database)."""
    return {"spark.sql.catalogImplementation": "hive",
            "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
            "spark.sql.warehouse.dir": f"{folder}/spark-warehouse",
            "spark.driver.extraJavaOptions": f"{java_options} -Dderby.system.home={folder}".strip()}


def _submitted_conf() -> set[str]:
    """The keys spark-submit was given (``--conf``, ``--properties-file``, spark-defaults)."""
    from pyspark import SparkConf

    return {key for key, _ in SparkConf().getAll()}


def remote_url(conf: SparkConfig) -> str | None:
    """The Spark Connect URL to use: ``spark.remote`` in ``conf.extra``, else ``SPARK_REMOTE``,
    else None (classic Spark)."""
    return conf.extra.get("spark.remote") or os.environ.get("SPARK_REMOTE") or None


def _connect_session(conf: SparkConfig, url: str) -> SparkSession:
    """A Spark Connect session to ``url`` with the session settings of ``conf``. Master, driver
    memory and log level belong to the server, which was started with its own."""
    builder = (
        SparkSession.builder.remote(url).appName(conf.app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(conf.shuffle_partitions))
    )
    for key, value in conf.extra.items():
        if key != "spark.remote":
            builder = builder.config(key, value)
    return builder.getOrCreate()


ADAPTIVE = "spark.sql.adaptive.enabled"


@contextmanager
def without_adaptive_execution(spark: SparkSession) -> Iterator[None]:
    """Adaptive query execution off for the block, then back as it was.

    For many small queries over deep plans (the diagnosis of a batch): AQE runs every shuffle
    stage as a Spark job of its own and re-plans the query after each, a fixed cost per stage
    that small data never earns back (6 failed jobs: 130 Spark jobs with it, 69 without). A
    session setting, so it works over Spark Connect too; results do not depend on it.
    """
    before = spark.conf.get(ADAPTIVE, "true")
    spark.conf.set(ADAPTIVE, "false")
    try:
        yield
    finally:
        spark.conf.set(ADAPTIVE, before)


def materialize(frame: DataFrame) -> DataFrame:
    """``frame`` computed once and its lineage cut (``localCheckpoint``), for the small tables a
    step reuses (filter decisions, node rankings, iteration rows).

    Over Spark Connect, the PySpark client copies the plan into its checkpoint command with
    Python protobuf, which refuses a plan nested more than 100 levels deep (``DecodeError:
    Exceeded upb_DecodeOptions_MaxDepth``) before the server sees it; the diagnosis' per-line
    steps build such plans. Such a frame is collected and sent back as a local relation instead,
    which is why this is only for small tables. Classic Spark never takes that path.
    """
    from google.protobuf.message import DecodeError

    try:
        return frame.localCheckpoint()
    except DecodeError:
        return frame.sparkSession.createDataFrame(frame.toPandas(), schema=frame.schema)


def computed_once(frame: DataFrame) -> DataFrame:
    """``frame`` computed now and kept on the executors (memory, then disk), for a large frame
    that several later actions read (the diagnosis' per-line frame). Classic Spark cuts its
    lineage too (``localCheckpoint``): every later query plans from the stored rows, not from the
    deep plan that made them (each analysis of that plan cost about a second). Over Spark Connect
    a plan nested more than 100 levels cannot be checkpointed (``materialize``); the frame is
    persisted instead (computed at its first action, never collected): call ``unpersist`` when done.
    A local checkpoint lives on the executors that computed it: an executor lost before the
    last read (preemption, dynamic allocation giving it back) fails that read instead of
    recomputing it, and the nightly then diagnoses the batch's jobs one by one (``diagnose_jobs``).
    """
    from google.protobuf.message import DecodeError

    try:
        return frame.localCheckpoint()
    except DecodeError:
        return frame.persist()


# Driver-side rows become a LocalRelation, which Spark parallelizes into at most
# ``spark.sql.leafNodeDefaultParallelism`` (default: ``spark.default.parallelism``) slices carried
# inside the tasks; and a stage that also runs Python (mapInArrow, pandas UDFs) serializes the whole
# relation into every one of its tasks. Above this size the rows are checkpointed once, in tasks
# that each carry at most about this many bytes.
LOCAL_CHUNK_BYTES = 256 * 1024
LEAF_PARALLELISM = "spark.sql.leafNodeDefaultParallelism"


def local_frame(spark: SparkSession, rows, schema=None, chunk_bytes: int = LOCAL_CHUNK_BYTES) -> DataFrame:
    """``spark.createDataFrame(rows, schema)`` for driver-side rows (a pandas DataFrame, a
    pyarrow Table or a list of tuples) that may be large: one local relation, checkpointed
    (``materialize``) by a job whose tasks each carry a slice of about ``chunk_bytes``
    (``spark.sql.leafNodeDefaultParallelism`` for that job), so that later stages read the rows
    from the block manager instead of carrying them in their tasks ("task of very large size").
    Small rows (one slice) are a plain local relation.

    One ``createDataFrame`` call, not one per slice: each call costs a round trip to the JVM and
    each union of the slices another analysis of the growing plan (about 7 s for the 78 slices
    of a 50,000-shape table). A list of tuples becomes a pandas frame first, since classic
    Spark makes a list an RDD of ``spark.default.parallelism`` slices, not a local relation."""
    import pandas as pd
    import pyarrow as pa

    if isinstance(rows, pa.Table):
        size, n_rows = rows.nbytes, rows.num_rows
    elif isinstance(rows, pd.DataFrame):
        size, n_rows = int(rows.memory_usage(index=False, deep=True).sum()), len(rows)
    else:
        rows = list(rows)
        size, n_rows = sum(len(repr(r)) for r in rows), len(rows)
    slices = min(max(1, -(-size // chunk_bytes)), max(n_rows, 1))
    if slices == 1:
        return spark.createDataFrame(rows, schema) if schema is not None else spark.createDataFrame(rows)
    if isinstance(rows, list):
        names = spark.createDataFrame([], schema).columns if schema is not None else None
        rows = pd.DataFrame.from_records(rows, columns=names)
    frame = spark.createDataFrame(rows, schema) if schema is not None else spark.createDataFrame(rows)
    with _session_setting(spark, LEAF_PARALLELISM, str(slices)):
        return materialize(frame)


@contextmanager
def _session_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` in the session for the block, then back as it was (unset if it
    was unset)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
