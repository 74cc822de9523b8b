"""Housekeeping of a remote warehouse on the real servers (HDFS and S3): superseded versions of the
template store, finished lock claims and the partition folders of jobs a table no longer has are
deleted (classic Spark, ``fs.delete_paths``); the current version and a live claim of another run
are never touched."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from l4spark.io import fs
from l4spark.io.lock import LockHolder, WarehouseLockedError, _process_start, warehouse_lock
from tests.nightly_support import nightly_config

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.storage]  # make test-storage


def _warehouse(store: str, request) -> str:
    if store == "hdfs":
        return request.getfixturevalue("minidfs").uri + "/housekeeping"
    request.getfixturevalue("s3")
    return "s3a://l4spark/housekeeping"


def _stored_names(store: str, request, folder: str) -> list[str]:
    """Every file under ``folder`` as the storage itself lists it (with the names Hadoop's listing
    through Spark leaves out, such as ``_SUCCESS``)."""
    if store == "hdfs":
        from tests.storage.servers import hadoop_shell

        listing = hadoop_shell(request.getfixturevalue("minidfs").uri, "-ls", "-R", folder)
        return [line.split()[-1] for line in listing.splitlines() if line.startswith("-")]
    prefix = fs.relative(folder, "s3a://l4spark") + "/"
    listed = request.getfixturevalue("s3").client().list_objects_v2(Bucket="l4spark", Prefix=prefix)
    return [item["Key"] for item in listed.get("Contents", []) if not item["Key"].endswith("/")]


def _names(spark, folder: str) -> set[str]:
    return {fs.relative(f.path, folder).split("/")[0] for f in fs.list_files(spark, folder) or []}


@pytest.mark.parametrize("store", ["hdfs", "s3"])
def test_superseded_versions_and_finished_claims_are_deleted(spark, store, request):
    from l4spark.parse.template_store import KEEP_STORE_VERSIONS, STORE_DIR, load_template_store, save_template_store

    warehouse = _warehouse(store, request)
    config = nightly_config(warehouse)
    storage = config.storage

    # the template store: a version of the two-folder layout (masked-<n>/, state-<n>/) written
    # before is read, and four saves after it leave the newest three versions, each one folder
    # holding one file (on HDFS each file's close waits)
    store_dir = fs.child(warehouse, STORE_DIR)
    templates = load_template_store(storage, config.drain, config.structure.fold_digits, spark=spark)
    templates.add(["checkpoint saved to <PATH> before"])
    mapping = templates.masked_map()
    fs.write_once(spark.createDataFrame(list(mapping.items()), "masked string, event_id string"),
                  fs.version_folder(store_dir, "masked", 1))
    fs.write_version(spark, store_dir, "state", 1, json.dumps(templates.to_state()).encode())
    loaded = load_template_store(storage, config.drain, config.structure.fold_digits, spark=spark)
    assert loaded.masked_map() == mapping and loaded.to_state() == templates.to_state()
    for number in range(4):
        templates.add([f"checkpoint {number} saved to <PATH>"])
        save_template_store(storage, templates, spark=spark)
    kept = list(range(6 - KEEP_STORE_VERSIONS, 6))
    assert fs.listed_versions(spark, store_dir) == {"store": kept}
    # a write-once version has no _SUCCESS marker (a listing hides it, so nothing reads it, and on
    # HDFS each file's close waits): each version folder holds its one data file
    stored = _stored_names(store, request, store_dir)
    assert len(stored) == KEEP_STORE_VERSIONS and not [name for name in stored if "_SUCCESS" in name], stored
    loaded = load_template_store(storage, config.drain, config.structure.fold_digits, spark=spark)
    assert loaded.masked_map() == templates.masked_map() and loaded.to_state() == templates.to_state()

    # the lock: a live claim of another run (this process: alive) refuses us and is left alone;
    # our own claim and release go at once; a killed run's claim, a released pair and a release
    # whose claim is gone wait for the next holder, which deletes them
    folder = fs.child(warehouse, "_lock")
    gone = subprocess.Popen(["true"])
    gone.wait()
    here = socket.gethostname()
    for token, pid in (("live", os.getpid()), ("killed", gone.pid), ("done", os.getpid())):
        holder = LockHolder(token, f"the {token} run", pid, here, _process_start(pid), time.time())
        fs.write_version(spark, folder, f"claim-{token}", 0, json.dumps(holder.__dict__).encode())
    for token in ("done", "orphan"):
        fs.write_version(spark, folder, f"release-{token}", 0, b"")
    others = {"claim-live-000000", "claim-killed-000000", "claim-done-000000", "release-done-000000",
              "release-orphan-000000"}
    with pytest.raises(WarehouseLockedError, match="locked by the live run"):
        with warehouse_lock(storage, "housekeeping test", spark=spark):
            pass
    assert _names(spark, folder) == others
    fs.write_version(spark, folder, "release-live", 0, b"")  # the live run lets go
    with warehouse_lock(storage, "housekeeping test", spark=spark):
        inside = _names(spark, folder)
    assert len(inside) == 1 and inside.pop().startswith("claim-")
    assert _names(spark, folder) == set()

    # a rerun whose rows no longer hold a job: that job's partition folder is deleted, not emptied
    from l4spark.io.storage import _partition_path, read_table, write_job_rows

    rows = spark.createDataFrame([("job-a", "e1", 3, None), ("job-b", "e2", 4, None)],
                                 "job_id string, event_id string, n_lines long, first_ts timestamp")
    write_job_rows(rows, storage, "job_event_counts", ["job-a", "job-b"])
    write_job_rows(rows.where("job_id = 'job-a'"), storage, "job_event_counts", ["job-a", "job-b"], {"job-a"})
    assert fs.list_files(spark, _partition_path(storage, "job_event_counts", "job-b")) is None
    assert sorted(r.job_id for r in read_table(spark, storage, "job_event_counts").collect()) == ["job-a"]


@pytest.mark.parametrize("store", ["hdfs", "s3"])
def test_delta_upkeep_on_a_remote_warehouse_compacts_then_vacuums(spark, store, request):
    """Delta upkeep on HDFS and S3, decided by Spark (no delta-rs there): four per-job writes leave
    four data files; upkeep compacts them into one without changing a row, and VACUUM deletes
    the three the table no longer needs from the storage; a second upkeep has nothing to do."""
    import dataclasses

    from l4spark.io.maintenance import maintain_tables
    from l4spark.io.storage import read_table, table_path, write_job_rows
    from l4spark.io.tables import JOB_EVENT_COUNTS

    warehouse = _warehouse(store, request) + "-delta"
    storage = dataclasses.replace(nightly_config(warehouse, "delta").storage, optimize_min_files=3,
                                  vacuum_retain_hours=0)
    for n, jobs in enumerate((["j1", "j2", "j3"], ["j4", "j5"], ["j6"], ["j2"])):  # j2 replaced in the last
        rows = spark.createDataFrame([(j, f"E{n}", n, None) for j in jobs], JOB_EVENT_COUNTS.schema)
        write_job_rows(rows, storage, "job_event_counts", jobs)
    path = table_path(storage, "job_event_counts")

    def on_storage() -> int:  # data files (Hadoop's listing leaves _delta_log out)
        return len(fs.list_files(spark, path) or [])

    def rows() -> list[tuple[str, str]]:
        return sorted((r.job_id, r.event_id) for r in read_table(spark, storage, "job_event_counts").collect())

    before = rows()
    assert before == [("j1", "E0"), ("j2", "E3"), ("j3", "E0"), ("j4", "E1"), ("j5", "E1"), ("j6", "E2")]
    assert on_storage() == 5  # four current files and the one j2's replacement superseded

    (upkeep,) = maintain_tables(spark, storage)
    assert (upkeep.table, upkeep.files_before, upkeep.files_after, upkeep.optimized) == ("job_event_counts", 4, 1, True)
    assert upkeep.vacuumed == 5 and on_storage() == 1
    assert rows() == before
    (again,) = maintain_tables(spark, storage)
    assert (again.files_before, again.files_after, again.optimized, again.vacuumed) == (1, 1, False, 0)


@pytest.mark.parametrize("store", ["hdfs", "s3"])
def test_a_remote_parquet_table_is_read_as_parquet_and_refused_for_delta_writes(spark, store, request):
    """A remote Parquet warehouse from before ``auto`` meant Delta there: under
    ``storage.format = "delta"`` its table is found as Parquet (data files, no Delta log), read as
    such, and a Delta write is refused with a ConfigError naming the setting, instead of a Delta
    table written over it that would hide its rows."""
    from l4spark.errors import ConfigError
    from l4spark.io.storage import read_table, stored_format, write_job_rows
    from l4spark.io.tables import JOB_EVENT_COUNTS

    warehouse = _warehouse(store, request) + "-was-parquet"
    rows = spark.createDataFrame([("job-a", "e1", 3, None)], JOB_EVENT_COUNTS.schema)
    write_job_rows(rows, nightly_config(warehouse, "parquet").storage, "job_event_counts", ["job-a"])
    delta = nightly_config(warehouse, "delta").storage
    assert stored_format(delta, "job_event_counts") == "parquet"
    assert stored_format(delta, "jobs") is None
    assert [r.job_id for r in read_table(spark, delta, "job_event_counts").collect()] == ["job-a"]
    with pytest.raises(ConfigError, match='is parquet but storage.format is delta: set storage.format = "parquet"'):
        write_job_rows(rows, delta, "job_event_counts", ["job-a"])
