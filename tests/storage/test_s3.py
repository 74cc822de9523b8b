"""The nightly with its logs root and warehouse on S3 (moto's server on 127.0.0.1, s3a://)."""

from __future__ import annotations

import re

import pytest

from l4spark.nightly.batch import run_nightly
from tests.nightly_support import assert_same, nightly_config, snapshot
from tests.storage.servers import upload_tree

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.storage]  # make test-storage


@pytest.fixture(scope="module")
def s3_logs(s3, nightly_logs) -> str:
    upload_tree(s3.client(), "l4spark", nightly_logs, "logs")
    return "s3a://l4spark/logs"


@pytest.mark.parametrize("storage_format", ["parquet", "delta"])
def test_nightly_on_s3_equals_local(spark, s3, s3_logs, nightly_clean, storage_format):
    """The nightly with logs, warehouse and reports on S3 gives the local (Parquet) run's tables,
    row for row, with the warehouse as Parquet and as Delta (each table a Delta log on S3)."""
    warehouse, reports = f"s3a://l4spark/warehouse-{storage_format}", f"reports-{storage_format}/"
    run = run_nightly(spark, nightly_config(warehouse, storage_format), s3_logs, reports_dir="s3a://l4spark/" + reports)
    _, local_run, local_tables = nightly_clean
    assert run.diagnosed == local_run.diagnosed and run.diagnosed
    assert_same(snapshot(spark, warehouse, storage_format=storage_format), local_tables)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="l4spark", Prefix=reports)["Contents"]]
    assert any(k.endswith(".html/" + k.rsplit("/", 1)[-1]) for k in keys)
    commits = s3.client().list_objects_v2(Bucket="l4spark", Prefix=f"warehouse-{storage_format}/events/_delta_log/")
    assert bool(commits.get("Contents")) == (storage_format == "delta")


@pytest.mark.storage_only  # 196-215 s; make test keeps the Connect nightly (tests/test_connect_diagnosis.py) and the S3 nightly
def test_nightly_over_spark_connect_on_s3_equals_local(spark, s3, s3_logs, nightly_clean, tmp_path):
    """`l4spark nightly` as a client of a Spark Connect server that alone holds the s3a connector
    and the credentials (as on a platform's Connect endpoint): logs, Delta warehouse, lock claims
    and reports on S3 give the local run's tables row for row, and the secret key is in no output
    of the client, no object of the bucket."""
    from l4spark.io.storage_jars import s3a_jars
    from tests.connect_server import connect_server, l4spark_over
    from tests.storage.conftest import SECRET_KEY

    warehouse, reports = "s3a://l4spark/warehouse-connect", "reports-connect/"
    settings = {f"spark.hadoop.{key}": value for key, value in s3.hadoop_settings().items()}
    with connect_server(tmp_path / "server.log", tuple(s3a_jars()), settings) as url:
        run = l4spark_over(url, "nightly", "--logs-root", s3_logs, "--warehouse", warehouse, "--format", "delta",
                           "--reports", "s3a://l4spark/" + reports)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _, local_run, local_tables = nightly_clean
    assert re.search(rf"diagnosed +{len(local_run.diagnosed)} of .*errors 0", run.stdout), run.stdout[-3000:]
    assert_same(snapshot(spark, warehouse, storage_format="delta"), local_tables)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="l4spark", Prefix=reports)["Contents"]]
    assert any(k.endswith(".html/" + k.rsplit("/", 1)[-1]) for k in keys)
    claims = s3.client().list_objects_v2(Bucket="l4spark", Prefix="warehouse-connect/_lock/")
    assert claims.get("Contents"), "the run held the warehouse through the claim protocol"
    assert SECRET_KEY not in run.stdout + run.stderr
    assert SECRET_KEY.encode() not in _all_bytes(s3.client(), "l4spark")


def test_bad_inputs_on_s3_are_quarantined_as_locally(spark, s3, storage_corpus):
    """The reliability corpus (truncated and corrupt .gz, missing or broken job.json...) parsed
    from S3 gives the same jobs, quarantine rows and events as from a local disk. Objects S3
    refuses for real: a rank file and a job.json archived to Glacier (their GET answers 403
    InvalidObjectState, their listing and HEAD do not fail), and a rank file deleted between the
    listing and the read; each is counted with the reason a local unreadable file gets, and the
    rest of its job is parsed."""
    from tests.storage.bad_inputs import (GONE, META_JOB, REFUSED, TABLES, UNREADABLE_JOB, expected_refusals,
                                          parse_then_snapshot, without_details)

    logs, local = storage_corpus
    client = s3.client()
    upload_tree(client, "l4spark", logs, "bad-logs")
    for rel in (REFUSED, f"{META_JOB}/job.json"):
        client.put_object(Bucket="l4spark", Key=f"bad-logs/{rel}", Body=(logs / rel).read_bytes(), StorageClass="GLACIER")
    remote = parse_then_snapshot(spark, "s3a://l4spark/bad-logs", "s3a://l4spark/bad-warehouse",
                                 between=lambda: client.delete_object(Bucket="l4spark", Key=f"bad-logs/{GONE}"))
    assert {"gzip_truncated", "gzip_corrupt", "job_meta"} <= set(local["quarantine"]["reason"])
    assert expected_refusals(remote["quarantine"]) == sorted([
        (REFUSED, "unreadable_file", UNREADABLE_JOB), (GONE, "unreadable_file", UNREADABLE_JOB),
        (f"{META_JOB}/job.json", "job_meta", META_JOB)])
    assert "job.json is unreadable" in remote["jobs"].set_index("job_id").loc[META_JOB, "meta_error"]
    assert set(remote["events"].loc[remote["events"]["job_id"] == UNREADABLE_JOB, "file"]) == {
        f"{UNREADABLE_JOB}/node-a/rank-0.log"}
    assert_same(without_details(remote), without_details(local), TABLES)


def _all_bytes(client, bucket: str) -> bytes:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    # objects archived to Glacier (the bad-input test's) cannot be read back: their keys are checked
    return b"".join(o["Key"].encode() + (b"" if o.get("StorageClass") == "GLACIER" else
                                         client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
                    for page in pages for o in page.get("Contents", []))


def test_second_nightly_on_the_same_s3_warehouse_is_refused(spark, s3, s3_logs, tmp_path, capfd):
    """While this process holds the S3 warehouse's lock, `l4spark nightly` in another process
    (its own Spark) is refused with exit 2 naming the holder; the secret key used by both is in
    no object of the bucket and in no output."""
    import os
    import subprocess
    import sys

    from l4spark.io.lock import warehouse_lock
    from l4spark.io.storage_jars import s3a_jars
    from tests.storage.conftest import SECRET_KEY

    warehouse = "s3a://l4spark/warehouse-parquet"
    conf = tmp_path / "s3.toml"
    extra = {"spark.jars": ",".join(str(j) for j in s3a_jars()),
             **{f"spark.hadoop.{k}": v for k, v in s3.hadoop_settings().items()}}
    conf.write_text("[spark]\nmaster = \"local[1]\"\n[spark.extra]\n" +
                    "".join(f'"{k}" = "{v}"\n' for k, v in extra.items()))
    config = nightly_config(warehouse)
    with warehouse_lock(config.storage, "the holding test", spark=spark):
        second = subprocess.run(
            [sys.executable, "-m", "l4spark.cli", "nightly", "--logs-root", s3_logs,
             "--warehouse", warehouse, "--conf", str(conf), "--no-reports"],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SPARK_LOCAL_IP": "127.0.0.1"})
    assert second.returncode == 2, second.stdout[-3000:] + second.stderr[-3000:]
    assert "locked by the holding test" in second.stdout + second.stderr
    # credentials: not in any object (tables, reports, lock claims, stores), not in any output
    assert SECRET_KEY.encode() not in _all_bytes(s3.client(), "l4spark")
    captured = capfd.readouterr()
    for text in (second.stdout, second.stderr, captured.out, captured.err):
        assert SECRET_KEY not in text


def test_a_read_of_many_listed_files_plans_no_literal_per_file(spark, s3, capsys):
    """``fs.binary_files`` keeps the listed files by their names at the listing and by a broadcast
    join on their paths, not by a literal list of every path in the plan that each stage's tasks
    deserialize (56 bytes of plan text per path; Spark's "large task binary" warning beyond about
    15,000 files): the plan of a read of 2,000 listed rank files of 4 jobs stays small, and the
    read gives exactly the listed files that exist, never a stray file beside them."""
    from l4spark.io import fs

    client = s3.client()
    for job in range(4):
        client.put_object(Bucket="l4spark", Key=f"many/job-{job}/node-0/rank-{job}.log", Body=f"job {job}\n".encode())
        client.put_object(Bucket="l4spark", Key=f"many/job-{job}/node-0/core.1", Body=b"stray")
    client.put_object(Bucket="l4spark", Key="many/job-0/node-0/rank-9.log", Body=b"not listed\n")
    paths = [f"s3a://l4spark/many/job-{job}/node-{node}/rank-{rank}.log"
             for job in range(4) for node in range(100) for rank in range(5)]
    files = fs.binary_files(spark, paths, folders=[f"s3a://l4spark/many/job-{job}" for job in range(4)])
    spark.conf.set("spark.sql.debug.maxToStringFields", "1000000")  # no "... more fields" in the plan text
    try:
        capsys.readouterr()
        files.explain(mode="formatted")
        plan = capsys.readouterr().out
    finally:
        spark.conf.unset("spark.sql.debug.maxToStringFields")
    assert "rank-4.log" in plan and len(plan) < 20_000, len(plan)
    rows = files.select("tag", "content").collect()
    assert sorted((row.tag, bytes(row.content)) for row in rows) == [
        (f"s3a://l4spark/many/job-{job}/node-0/rank-{job}.log", f"job {job}\n".encode()) for job in range(4)]


def test_a_remote_read_of_many_small_files_takes_the_local_reads_tasks_and_each_jobs_shape_numbers(spark, s3):
    """Under ``remote_scan_settings`` (the parse's remote reads) Spark packs remote rank files
    into about as many tasks as a local read of them (``plan_read_tasks``), by bytes, not one per
    128 MB counting each file 4 MB more than its size (240 files of a few bytes made 8 tasks, and
    as Delta each task of the events write is a file that HDFS makes wait at its close); and each
    line gets the shape number of its own job's mapping, which reaches the tasks by a join on the
    job, not in their closure."""
    from pyspark.sql import functions as F

    from l4spark.config import IngestConfig
    from l4spark.io.frames import session_settings
    from l4spark.parse.ingest import plan_read_tasks, read_rank_files, remote_scan_settings
    from l4spark.parse.layout import RankFile
    from l4spark.parse.textrules import fold_digits

    client = s3.client()
    files = []
    for job in range(4):
        for rank in range(60):
            key = f"small/job-{job}/node-0/rank-{rank}.log"
            client.put_object(Bucket="l4spark", Key=key, Body=f"step {rank % 10} of job {job}\nsaved\n".encode())
            files.append(RankFile(f"job-{job}", "node-0", rank, f"s3a://l4spark/{key}", key[len("small/"):],
                                  len(f"step {rank % 10} of job {job}\nsaved\n")))
    # the same shapes in every job, numbered apart per job: a line must get its own job's number
    shape_ids = {f"job-{job}": {fold_digits(f"step 0 of job {job}"): 10 * job + 1, "saved": 10 * job + 2}
                 for job in range(4)}
    lines = read_rank_files(spark, files, IngestConfig(), raw=True, shape_ids=shape_ids, job_boundaries=False)
    local_tasks = len(plan_read_tasks(files, IngestConfig(), min_tasks=4, job_boundaries=False))
    with session_settings(spark, remote_scan_settings(spark, files)):
        rows = (lines.where(F.col("issue").isNull())
                .select("job_id", "line_no", "shape_id", F.spark_partition_id().alias("task")).collect())
    assert len(rows) == 2 * len(files)
    assert sorted({(r.job_id, r.line_no, r.shape_id) for r in rows}) == [
        (f"job-{job}", line_no, 10 * job + line_no) for job in range(4) for line_no in (1, 2)]
    assert len({r.task for r in rows}) <= local_tasks == 4
