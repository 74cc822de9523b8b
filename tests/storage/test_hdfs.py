"""The nightly with its logs root and warehouse on a real HDFS (MiniDFSCluster on 127.0.0.1)."""

from __future__ import annotations

import pytest

from l4spark.nightly.batch import run_nightly
from tests.nightly_support import assert_same, nightly_config, snapshot
from tests.storage.servers import hadoop_shell

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.storage]  # make test-storage


def test_bad_inputs_on_hdfs_are_quarantined_as_locally(spark, minidfs, storage_corpus):
    """The reliability corpus (truncated and corrupt .gz, missing or broken job.json, binary
    lines...) parsed from HDFS gives the same jobs, quarantine rows and events as from a local
    disk. Files HDFS cannot hand over, for real: a rank file and a job.json whose one block is
    lost (its block file deleted from the DataNode's disk: the read fails with
    BlockMissingException, which Spark's scan never skips) and a rank file deleted between the
    listing and the read; each is counted as a local unreadable file is."""
    from tests.storage.bad_inputs import (GONE, META_JOB, REFUSED, TABLES, UNREADABLE_JOB, expected_refusals,
                                          parse_then_snapshot, without_details)

    logs, local = storage_corpus
    hadoop_shell(minidfs.uri, "-put", str(logs), "/bad-logs")
    for rel in (REFUSED, f"{META_JOB}/job.json"):
        content = (logs / rel).read_bytes()
        blocks = [p for p in (minidfs.base / "data").rglob("blk_*")
                  if not p.name.endswith(".meta") and p.read_bytes() == content]
        assert len(blocks) == 1, (rel, blocks)
        blocks[0].unlink()
    remote = parse_then_snapshot(spark, minidfs.uri + "/bad-logs", minidfs.uri + "/bad-warehouse",
                                 between=lambda: hadoop_shell(minidfs.uri, "-rm", f"/bad-logs/{GONE}"))
    assert {"gzip_truncated", "gzip_corrupt", "job_meta"} <= set(local["quarantine"]["reason"])
    assert "job.json is unreadable" in remote["jobs"].set_index("job_id").loc[META_JOB, "meta_error"]
    assert expected_refusals(remote["quarantine"]) == sorted([
        (REFUSED, "unreadable_file", UNREADABLE_JOB), (GONE, "unreadable_file", UNREADABLE_JOB),
        (f"{META_JOB}/job.json", "job_meta", META_JOB)])
    assert_same(without_details(remote), without_details(local), TABLES)


@pytest.fixture(scope="module")
def hdfs_logs(minidfs, nightly_logs) -> str:
    hadoop_shell(minidfs.uri, "-put", str(nightly_logs), "/logs")
    return minidfs.uri + "/logs"


def test_the_layout_scan_reads_each_job_json_in_its_listing_job(spark, hdfs_logs, nightly_logs, default_config,
                                                                monkeypatch):
    """On HDFS the layout scan lists the logs root once and reads every job's ``job.json`` in the
    same Spark job as the files' sizes (``fs.list_root``), not in a second read
    by name (which listed the job folders again: 3 Spark jobs more, 0.8 s of the storage bench's
    1.3 s scan); its jobs and files are the local scan's. (A job.json HDFS refuses falls back to
    that read: test_bad_inputs_on_hdfs_are_quarantined_as_locally.)"""
    from l4spark.bench.parse import spark_jobs_started
    from l4spark.io import fs
    from l4spark.parse.layout import scan_logs_root

    layout = default_config.layout
    local = scan_logs_root(nightly_logs, layout.pattern, layout.job_file)
    read_again = []
    monkeypatch.setattr(fs, "read_files", lambda spark, paths: read_again.append(paths) or {})
    started = spark_jobs_started(spark)
    remote = scan_logs_root(hdfs_logs, layout.pattern, layout.job_file, spark=spark)
    assert read_again == [] and spark_jobs_started(spark) - started <= 2  # the listing's job (over 32 folders), the scan
    assert remote.jobs == local.jobs and remote.issues == local.issues
    assert [(f.rel_path, f.size) for f in remote.files] == [(f.rel_path, f.size) for f in local.files]


def test_a_read_of_listed_files_plans_from_the_roots_listing_and_opens_no_other_job(spark, minidfs, tmp_path):
    """The parse reads remote rank files from the layout scan's listing of their root
    (``fs.list_root``, ``binary_files(..., listing=)``): planning the read lists nothing again
    (without the listing, Spark lists the 33 job folders again, on HDFS a Spark job above 32
    folders), it gives exactly the files asked for, and the files of the same name in the
    root's other jobs are never opened: one whose only block is lost fails any read of it
    (BlockMissingException, which Spark's scan does not skip)."""
    from l4spark.bench.parse import spark_jobs_started
    from l4spark.io import fs

    logs = tmp_path / "listing"
    for job in [f"job-{n:02d}" for n in range(33)] + ["job-lost"]:
        (logs / job / "node-0").mkdir(parents=True)
        (logs / job / "node-0" / "rank-0.log").write_text(f"{job} rank 0 line\n")
    hadoop_shell(minidfs.uri, "-put", str(logs), "/listing")
    blocks = [p for p in (minidfs.base / "data").rglob("blk_*")
              if not p.name.endswith(".meta") and p.read_bytes() == b"job-lost rank 0 line\n"]
    assert len(blocks) == 1, blocks
    blocks[0].unlink()
    root = minidfs.uri + "/listing"
    files, listing = fs.list_root(spark, root, read_named="job.json")
    wanted = [f.path for f in files if "/job-lost/" not in f.path]
    folders = sorted({path.rsplit("/", 2)[0] for path in wanted})
    assert len(wanted) == len(folders) == 33

    started = spark_jobs_started(spark)
    listed = fs.binary_files(spark, wanted, folders=folders, listing=listing)
    planned = spark_jobs_started(spark) - started
    rows = listed.select("tag", "content").collect()
    assert planned == 0
    assert sorted((row.tag, bytes(row.content)) for row in rows) == sorted(
        (path, f"{path.rsplit('/', 3)[1]} rank 0 line\n".encode()) for path in wanted)
    started = spark_jobs_started(spark)
    fs.binary_files(spark, wanted, folders=folders)
    assert spark_jobs_started(spark) - started >= 1  # the job folders listed again


@pytest.mark.parametrize("storage_format", ["parquet", "delta"])
def test_nightly_on_hdfs_killed_midway_then_rerun_equals_local(spark, minidfs, hdfs_logs, nightly_clean, storage_format):
    """`l4spark nightly` with logs and warehouse on HDFS, killed right after writing events (its
    own process, no cleanup: its lock claim stays); the rerun takes the dead run's claim over,
    diagnoses the same jobs and writes tables equal, row for row, to the same nightly's on local
    paths (Parquet); a run after that finds nothing new and leaves them so. (One remote nightly
    for both of the issue's HDFS checks: end to end equal to local, killed midway and rerun.)
    With the warehouse as Parquet and as Delta (HDFSLogStore: a commit is a file created only if
    absent, a rename HDFS makes atomic)."""
    import os
    import subprocess
    import sys

    from l4spark.io.lock import warehouse_lock
    from l4spark.killpoints import ENV, KILLED_EXIT

    logs, warehouse = hdfs_logs, f"{minidfs.uri}/warehouse-{storage_format}"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", ENV: "after_write:events",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-m", "l4spark.cli", "nightly", "--logs-root", logs,
                             "--warehouse", warehouse, "--format", storage_format, "--master", "local[2]", "--no-reports"],
                            env=env, capture_output=True, text=True, timeout=900)
    assert killed.returncode == KILLED_EXIT, killed.stderr[-3000:]
    # a fresh warehouse's tables are not there yet: looked for without a logged stack trace
    assert "FileNotFoundException" not in killed.stderr, killed.stderr[-3000:]
    assert "claim-" in hadoop_shell(minidfs.uri, "-ls", f"/warehouse-{storage_format}/_lock")
    assert ("_delta_log" in hadoop_shell(minidfs.uri, "-ls", f"/warehouse-{storage_format}/events")) == (
        storage_format == "delta")
    config = nightly_config(warehouse, storage_format)
    _, local_run, local_tables = nightly_clean
    with warehouse_lock(config.storage, "rerun", spark=spark):
        rerun = run_nightly(spark, config, logs)
    assert rerun.parsed  # the killed run left the parse unfinished
    assert rerun.diagnosed == local_run.diagnosed and rerun.diagnosed
    assert_same(snapshot(spark, warehouse, storage_format=storage_format), local_tables)
    again = run_nightly(spark, config, logs)
    assert again.parsed == [] and again.selected == []
    assert_same(snapshot(spark, warehouse, storage_format=storage_format), local_tables)


def test_the_parse_fetches_each_rank_file_from_hdfs_once(spark, minidfs, nightly_logs, nightly_clean):
    """The parse reads the files twice (line shapes, then lines) but fetches a remote file's
    bytes once: a rank file deleted from HDFS right after the shapes pass still gives every one
    of its lines in ``events``, as the same logs parsed from the local disk do. Fetched twice,
    its lines were counted as shapes and then missing from ``events``."""
    from l4spark.parse.pipeline import parse_jobs

    hadoop_shell(minidfs.uri, "-put", str(nightly_logs), "/logs-once")
    victim = sorted(p.relative_to(nightly_logs).as_posix() for p in nightly_logs.glob("*/*/rank-*.log*"))[-1]
    deleted = []

    def delete_after_shapes(message: str) -> None:
        if message.startswith("read ") and "line shapes" in message and not deleted:
            hadoop_shell(minidfs.uri, "-rm", f"/logs-once/{victim}")
            deleted.append(victim)

    warehouse = minidfs.uri + "/warehouse-once"
    parse_jobs(spark, nightly_config(warehouse), minidfs.uri + "/logs-once", progress=delete_after_shapes)
    assert deleted == [victim]
    assert victim not in hadoop_shell(minidfs.uri, "-ls", "-R", "/logs-once")
    _, _, local_tables = nightly_clean
    assert_same(snapshot(spark, warehouse, ("jobs", "events", "templates")), local_tables, ("jobs", "events", "templates"))


@pytest.mark.storage_only  # 160 s; tests/test_catalog.py covers the registration in make test
def test_tables_on_hdfs_are_found_by_name_through_a_named_metastore(spark, minidfs, hdfs_logs, nightly_clean, tmp_path):
    """A Delta nightly with its warehouse on HDFS and `catalog.metastore` naming a local folder
    (a remote warehouse has no embedded metastore of its own): the run registers every table and
    view there, and a second Spark process finds each by name, the rows those of the local run."""
    import os
    import subprocess
    import sys

    from l4spark.io.catalog import VIEWS
    from tests.test_catalog import READER, _result, _run

    warehouse, metastore = f"{minidfs.uri}/warehouse-catalog", tmp_path / "metastore"
    conf = tmp_path / "catalog.toml"
    conf.write_text(f'[catalog]\nmetastore = "{metastore}"\n')
    run = subprocess.run([sys.executable, "-m", "l4spark.cli", "nightly", "--logs-root", hdfs_logs, "--warehouse",
                          warehouse, "--format", "delta", "--master", "local[2]", "--no-reports", "--conf", str(conf)],
                         env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": os.pathsep.join(sys.path)},
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    seen = _result(_run([sys.executable, "-c", READER, warehouse, str(metastore)]))
    _, _, local_tables = nightly_clean
    tables = snapshot(spark, warehouse, storage_format="delta")
    assert_same(tables, local_tables)
    assert set(seen["before"]) >= set(tables) | set(VIEWS) and seen["after"] == seen["before"]
    for name, frame in tables.items():
        assert seen["counts"][name] == len(frame), name
