"""Delta upkeep (l4spark/io/maintenance.py) and the small-file layout: a small per-job table gets
one file per write, OPTIMIZE compacts it past the threshold without changing a row, VACUUM removes
what no retained version needs; time travel still reads the version before the compaction."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pytest

from l4spark.config import StorageConfig
from l4spark.io.maintenance import maintain_tables, needs_compaction
from l4spark.io.storage import write_job_rows
from l4spark.io.tables import JOB_EVENT_COUNTS

pytestmark = pytest.mark.spark


def test_compaction_needs_enough_files_and_some_partition_with_two():
    assert not needs_compaction(["t/a.parquet", "t/b.parquet"], 3)
    assert needs_compaction(["t/a.parquet", "t/b.parquet", "t/c.parquet"], 3)
    assert not needs_compaction(["t/job_id=1/a.parquet", "t/job_id=2/b.parquet", "t/job_id=3/c.parquet"], 3)
    assert not needs_compaction(["t/a.parquet", "t/b.parquet", "t/c.parquet"], 0)


def _on_disk(path: Path) -> int:
    return sum(1 for f in path.rglob("*.parquet") if "_delta_log" not in f.parts)


def test_per_job_writes_add_one_file_each_and_upkeep_compacts_then_vacuums(spark, tmp_path):
    storage = StorageConfig(str(tmp_path / "warehouse"), "delta", optimize_min_files=3, vacuum_retain_hours=0)
    path = tmp_path / "warehouse" / "job_event_counts"
    for n, jobs in enumerate((["j1", "j2", "j3"], ["j4", "j5"], ["j6"], ["j2"])):  # j2 replaced in the last
        rows = spark.createDataFrame([(j, f"E{n}", n, None) for j in jobs], JOB_EVENT_COUNTS.schema).repartition(3)
        write_job_rows(rows, storage, "job_event_counts", jobs)
    table = deltalake.DeltaTable(str(path))
    assert table.metadata().partition_columns == []
    assert len(table.file_uris()) == 4  # one file per write; j2's replacement rewrote the first file
    before = sorted(map(tuple, table.to_pandas()[["job_id", "event_id"]].values.tolist()))
    assert before == [("j1", "E0"), ("j2", "E3"), ("j3", "E0"), ("j4", "E1"), ("j5", "E1"), ("j6", "E2")]
    version = table.version()

    (upkeep,) = maintain_tables(spark, storage)
    assert (upkeep.table, upkeep.files_before, upkeep.files_after, upkeep.optimized) == ("job_event_counts", 4, 1, True)
    assert upkeep.vacuumed > 0 and _on_disk(path) == 1
    table = deltalake.DeltaTable(str(path))
    assert sorted(map(tuple, table.to_pandas()[["job_id", "event_id"]].values.tolist())) == before
    assert [h["operation"] for h in table.history() if h["version"] == version + 1] == ["OPTIMIZE"]

    (again,) = maintain_tables(spark, storage)  # nothing left to do
    assert (again.files_before, again.files_after, again.optimized, again.vacuumed) == (1, 1, False, 0)


def test_events_as_delta_are_files_per_task_a_rerun_rewrites_only_its_jobs_files(spark, tmp_path):
    """``events`` as Delta is not partitioned (a folder per job is a file per job and task): each
    write adds a file per writing task, a rerun of one job rewrites only the files whose job_id
    range holds it, and upkeep packs the table into one file with every row unchanged."""
    storage = StorageConfig(str(tmp_path / "warehouse"), "delta", optimize_min_files=4, vacuum_retain_hours=-1)
    path = str(tmp_path / "warehouse" / "events")
    schema = "job_id string, line_no long, message string"

    def write(jobs: list[str], tag: str) -> None:
        rows = [(job, n, f"{tag} line {n}") for job in jobs for n in range(50)]
        frame = spark.createDataFrame(rows, schema).repartitionByRange(2, "job_id")
        write_job_rows(frame, storage, "events", jobs)

    write(["job-01", "job-02", "job-03", "job-04"], "first")
    write(["job-05", "job-06", "job-07", "job-08"], "first")
    table = deltalake.DeltaTable(path)
    assert table.metadata().partition_columns == []
    first_files = set(table.file_uris())
    assert len(first_files) == 4  # two tasks per write, not a file per job

    write(["job-06"], "rerun")
    table = deltalake.DeltaTable(path)
    kept = first_files & set(table.file_uris())
    assert len(kept) == 3  # only the file holding job-06 (and job-05) was rewritten
    rows = table.to_pandas()
    assert len(rows) == 8 * 50 and set(rows.loc[rows["job_id"] == "job-06", "message"].str[:5]) == {"rerun"}
    assert set(rows.loc[rows["job_id"] != "job-06", "message"].str[:5]) == {"first"}

    (upkeep,) = maintain_tables(spark, storage)
    assert (upkeep.table, upkeep.optimized, upkeep.files_after) == ("events", True, 1)
    compacted = deltalake.DeltaTable(path).to_pandas()
    assert compacted.sort_values(["job_id", "line_no"]).reset_index(drop=True).equals(
        rows.sort_values(["job_id", "line_no"]).reset_index(drop=True))
