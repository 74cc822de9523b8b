"""The SparkSession factory: local by default, bound to loopback, UTC, few shuffle partitions.

A Spark Connect server is used instead when one is configured (``spark.remote`` under
``[spark.extra]``, or the ``SPARK_REMOTE`` environment variable, e.g. ``sc://127.0.0.1:15002``):
the library uses only the DataFrame API, so its jobs run over Connect unchanged.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

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
    log-replay partitions few: one on a local master, else as many as the shuffle's. Its default,
    50 tasks per table snapshot, dominated small writes on a 2-core machine; 8 still cost a
    small replaceWhere commit 0.94 s against 0.58 s with one (session 52, docs/delta.md): a
    nightly's tables keep their logs short (a checkpoint every 10 commits), and one task replays
    them faster than eight can be scheduled. Empty when the jars are not there.

    A spark-submit or Spark Connect session gets Delta from its submitter or server instead
    (docs/delta.md)."""
    jars = find_jars(conf.delta_jars)
    if jars is None:
        return {}
    return {"spark.jars": ",".join(str(jar) for jar in jars), **DELTA_SQL_SETTINGS,
            "spark.databricks.delta.snapshotPartitions": "1" if conf.master.startswith("local")
            else str(conf.shuffle_partitions)}


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
# Spark's code generation: whole-stage (a stage compiled into one Java class) and per expression
# (projections, predicates, orderings; ``NO_CODEGEN``: evaluated by the interpreter instead)
WHOLE_STAGE_CODEGEN = "spark.sql.codegen.wholeStage"
CODEGEN_FACTORY_MODE = "spark.sql.codegen.factoryMode"
