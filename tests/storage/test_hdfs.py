"""The nightly with its logs root and warehouse on a real HDFS (MiniDFSCluster on 127.0.0.1)."""

from __future__ import annotations

import pytest

from l4spark.nightly.batch import run_nightly
from tests.nightly_support import assert_same, nightly_config, snapshot
from tests.storage.servers import hadoop_shell

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.slow]  # make test-slow


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


def test_bad_inputs_on_hdfs_are_quarantined_as_locally(spark, minidfs, tmp_path):
    """The reliability corpus (truncated and corrupt .gz, missing or broken job.json, binary and
    giant lines...) parsed from HDFS: the same jobs and quarantine rows as from a local disk.
    Without its 4096-rank job (copying 4096 files into the MiniDFSCluster takes minutes here) and
    without its one empty folder (a remote listing sees files only: docs/deploy.md, known differences)."""
    import shutil

    from l4spark.parse.pipeline import parse_jobs
    from tests.reliability.corpus import write_bad_corpus

    logs = tmp_path / "bad-logs"
    write_bad_corpus(logs)
    shutil.rmtree(logs / "zz-4096-ranks")
    (logs / "zz-empty-node" / "node-c").rmdir()
    hadoop_shell(minidfs.uri, "-put", str(logs), "/bad-logs")
    local_warehouse, remote_warehouse = tmp_path / "warehouse", minidfs.uri + "/bad-warehouse"
    parse_jobs(spark, nightly_config(local_warehouse), logs)
    parse_jobs(spark, nightly_config(remote_warehouse), minidfs.uri + "/bad-logs")
    tables = ("jobs", "quarantine", "events")
    local, remote = snapshot(spark, local_warehouse, tables), snapshot(spark, remote_warehouse, tables)
    reasons = set(local["quarantine"]["reason"])
    assert {"gzip_truncated", "gzip_corrupt", "job_meta"} <= reasons
    assert_same(remote, local, tables)


def test_killed_nightly_on_hdfs_then_a_rerun_equal_a_clean_run(spark, minidfs, nightly_logs, nightly_clean):
    """`l4spark nightly` on HDFS killed right after writing events (no cleanup: its lock claim
    stays); the rerun takes the dead run's claim over and ends with the clean run's tables."""
    import os
    import subprocess
    import sys

    from l4spark.io.lock import warehouse_lock
    from l4spark.killpoints import ENV, KILLED_EXIT

    logs, warehouse = minidfs.uri + "/kill-logs", minidfs.uri + "/kill-warehouse"
    hadoop_shell(minidfs.uri, "-put", str(nightly_logs), "/kill-logs")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", ENV: "after_write:events",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-m", "l4spark.cli", "nightly", "--logs-root", logs,
                             "--warehouse", warehouse, "--master", "local[2]", "--no-reports"],
                            env=env, capture_output=True, text=True, timeout=900)
    assert killed.returncode == KILLED_EXIT, killed.stderr[-3000:]
    assert "claim-" in hadoop_shell(minidfs.uri, "-ls", "/kill-warehouse/_lock")
    config = nightly_config(warehouse)
    with warehouse_lock(config.storage, "rerun", spark=spark):
        rerun = run_nightly(spark, config, logs)
    assert rerun.parsed  # the killed run left the parse unfinished
    assert_same(nightly_clean[2], snapshot(spark, warehouse))
