"""Delta Lake's jars for classic Spark: which ones, where they live, and fetching them with Maven.

    python -m l4spark.io.delta_jars [FOLDER]     # = make jars (part of make setup)

Classic Spark needs two jars to read and write Delta: ``delta-spark`` (built for Spark 4.2 and
Scala 2.13, as pyspark 4.2.0 is) and ``delta-storage``. They are copied once from Maven Central
into a folder (by default ``jars/`` of the checkout) with ``mvn dependency:copy``, and
``io.session.build_session`` puts the jar files of that folder on the session's classpath
(``spark.jars``) with Delta's SQL extension and catalog.

Why two files fetched by Maven rather than ``spark.jars.packages`` (Ivy at every session start):
delta-spark 4.4's Maven dependencies reach far beyond what path-based Delta tables use (the Delta
kernel and a Unity Catalog client, which bring Hadoop's client runtime, Parquet 1.16, Jackson 2.13,
log4j and more beside Spark's own, older or newer, copies); Ivy resolves that tree again at every
session start, needs the network or a warm cache then, and on a machine whose ``~/.m2`` holds a
pom without its jar it fails outright (``download failed: org.slf4j#slf4j-api;2.0.13``). The two
jars alone carry every operation l4spark uses (writes with ``replaceWhere``, time travel, history,
OPTIMIZE), and the same two files serve ``spark-submit --jars`` and a Connect server.

Why 4.4.0 and not ``delta.pip_utils.configure_spark_with_delta_pip``: that helper asks Maven for
the version of the installed Python package (4.4.1), which Maven Central does not have
(delta-spark_4.2_2.13 has only 4.4.0); the Python package holds no code l4spark uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

from l4spark.io.maven import copy_jars, fetch_command, jar_name, jars_in

DELTA_VERSION = "4.4.0"
# Maven coordinates (group:artifact:version) and the file name ``mvn dependency:copy`` gives each.
DELTA_ARTIFACTS = (f"io.delta:delta-spark_4.2_2.13:{DELTA_VERSION}", f"io.delta:delta-storage:{DELTA_VERSION}")
DELTA_SQL_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# The checkout's jars/ folder (make jars); a wheel install has none and gets Delta from its cluster.
DEFAULT_FOLDER = Path(__file__).resolve().parents[2] / "jars"


class DeltaJarsError(RuntimeError):
    """The Delta jars could not be fetched (no Maven, or Maven could not resolve them)."""


def jar_folder(folder: str | Path | None = None) -> Path:
    """``folder``, or the checkout's ``jars/`` when empty or None."""
    return Path(folder).expanduser().resolve() if folder else DEFAULT_FOLDER


def find_jars(folder: str | Path | None = None) -> list[Path] | None:
    """The Delta jar files in ``folder`` (``jar_folder``), or None unless all of them are there."""
    return jars_in(jar_folder(folder), DELTA_ARTIFACTS)


def fetch_jars(folder: str | Path | None = None) -> list[Path]:
    """Copy the Delta jars from Maven Central into ``folder`` (those not there yet) with
    ``mvn dependency:copy``; returns their paths. Raises ``DeltaJarsError`` naming what failed."""
    return copy_jars(DELTA_ARTIFACTS, jar_folder(folder), DeltaJarsError)


if __name__ == "__main__":
    sys.exit(fetch_command(fetch_jars, DeltaJarsError, sys.argv[1:]))
