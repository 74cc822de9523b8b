"""Hadoop's jars for storage beyond local disks: which ones, where they live, fetching them with Maven.

    python -m l4spark.io.storage_jars [FOLDER]     # = make storage-jars (part of make setup)

pyspark 4.2.0 ships Hadoop's shaded client 3.5.0 (``hadoop-client-api``/``-runtime``), which holds
the HDFS client: ``hdfs://`` needs nothing more. The others come from Maven Central, at the same
Hadoop version, into ``jars-storage/`` of the checkout (gitignored):

- ``org.apache.hadoop:hadoop-aws:3.5.0``: the ``s3a://`` connector, with the AWS SDK v2 it is built
  against, ``software.amazon.awssdk:bundle:2.35.4`` (``aws-java-sdk-v2.version`` in
  ``hadoop-project-3.5.0.pom``; one shaded jar of 686 MB) and its compile dependency
  ``software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1`` (without it S3A fails
  at its first use: ``NoClassDefFoundError: software/amazon/s3/analyticsaccelerator/...``);
- ``org.apache.hadoop:hadoop-client-minicluster:3.5.0``: for the tests only, a real NameNode and
  DataNode in one JVM (``org.apache.hadoop.test.MiniDFSClusterManager``).

On a cluster these come from the cluster's own Hadoop (or ``spark-submit --packages``), not from here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from l4spark.io.maven import copy_jars, fetch_command, jar_name, jars_in

HADOOP_VERSION = "3.5.0"
AWS_SDK_VERSION = "2.35.4"
S3A_ARTIFACTS = (f"org.apache.hadoop:hadoop-aws:{HADOOP_VERSION}", f"software.amazon.awssdk:bundle:{AWS_SDK_VERSION}",
                 "software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1")
TEST_ARTIFACTS = (f"org.apache.hadoop:hadoop-client-minicluster:{HADOOP_VERSION}",)
ARTIFACTS = S3A_ARTIFACTS + TEST_ARTIFACTS
DEFAULT_FOLDER = Path(__file__).resolve().parents[2] / "jars-storage"


class StorageJarsError(RuntimeError):
    """A storage jar is missing, or Maven could not fetch it."""


def s3a_jars(folder: str | Path | None = None) -> list[Path] | None:
    """hadoop-aws, the AWS SDK bundle and the analytics accelerator in ``folder`` (default
    ``jars-storage/``), or None unless all are there."""
    return jars_in(Path(folder) if folder else DEFAULT_FOLDER, S3A_ARTIFACTS)


def find_storage_jar(artifact_name: str, folder: str | Path | None = None) -> Path:
    """The jar of ``artifact_name`` (e.g. ``hadoop-client-minicluster``) in ``folder``."""
    base = Path(folder) if folder else DEFAULT_FOLDER
    for artifact in ARTIFACTS:
        if artifact.split(":")[1] == artifact_name and (base / jar_name(artifact)).is_file():
            return base / jar_name(artifact)
    raise StorageJarsError(f"{artifact_name} is not in {base}: run `make storage-jars`")


def fetch_jars(folder: str | Path | None = None) -> list[Path]:
    """Copy the storage jars from Maven Central into ``folder`` (those not there yet)."""
    return copy_jars(ARTIFACTS, Path(folder) if folder else DEFAULT_FOLDER, StorageJarsError)


if __name__ == "__main__":
    sys.exit(fetch_command(fetch_jars, StorageJarsError, sys.argv[1:]))
