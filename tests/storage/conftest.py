"""Fixtures of the storage tests: a real HDFS (MiniDFSCluster) on 127.0.0.1 for the module."""

from __future__ import annotations

import pytest

from tests.storage.servers import start_minidfs


@pytest.fixture(scope="session")
def minidfs(spark, tmp_path_factory):
    dfs = start_minidfs(tmp_path_factory.mktemp("minidfs"))
    spark.conf.set("dfs.replication", "1")  # one DataNode: the session's HDFS writes keep one replica
    # a lost block (test_bad_inputs_on_hdfs...) fails its read after 3 waits of up to this many ms each
    spark.conf.set("dfs.client.retry.window.base", "50")
    yield dfs
    dfs.stop()


SECRET_KEY = "l4spark-test-SECRET-9f1c2e7a"  # grepped for in every output of the S3 tests


@pytest.fixture(scope="session")
def s3(spark):
    """moto's S3 server on 127.0.0.1, a bucket, and the shared session's s3a settings aimed at it."""
    from l4spark.io.storage_jars import s3a_jars
    from tests.storage.servers import start_s3

    if s3a_jars() is None:
        pytest.fail("hadoop-aws and the AWS SDK bundle are missing: run `make storage-jars`")
    server = start_s3("l4spark-test-access", SECRET_KEY)
    server.client().create_bucket(Bucket="l4spark")
    for key, value in server.hadoop_settings().items():
        spark.conf.set(key, value)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def storage_corpus(spark, tmp_path_factory):
    """The bad-input corpus of the storage tests (tests/storage/bad_inputs.py) and its tables
    parsed from the local disk, once for the HDFS and the S3 test: (logs folder, tables)."""
    from tests.storage.bad_inputs import parse_locally, write_storage_corpus

    base = tmp_path_factory.mktemp("storage-corpus")
    write_storage_corpus(base / "bad-logs")
    return base / "bad-logs", parse_locally(spark, base / "bad-logs", base / "warehouse")
