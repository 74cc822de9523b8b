"""The nightly with its logs root and warehouse on a real HDFS (MiniDFSCluster on 127.0.0.1)."""

from __future__ import annotations

import pytest

from l4spark.nightly.batch import run_nightly
from tests.nightly_support import assert_same, nightly_config, snapshot
from tests.storage.servers import hadoop_shell

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def test_nightly_on_hdfs_equals_local(spark, minidfs, nightly_logs, nightly_clean):
    hadoop_shell(minidfs.uri, "-put", str(nightly_logs), "/logs")
    warehouse = minidfs.uri + "/warehouse"
    run = run_nightly(spark, nightly_config(warehouse), minidfs.uri + "/logs")
    _, local_run, local_tables = nightly_clean
    assert run.diagnosed == local_run.diagnosed and run.diagnosed
    assert_same(snapshot(spark, warehouse), local_tables)
    # a second run finds nothing new and writes the same tables
    again = run_nightly(spark, nightly_config(warehouse), minidfs.uri + "/logs")
    assert again.parsed == [] and again.selected == []
    assert_same(snapshot(spark, warehouse), local_tables)
