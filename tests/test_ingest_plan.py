"""Read tasks: planning (job-contiguous tasks of bounded size, every file exactly once) and
what a task yields for blocks whose lines are all set aside."""

from __future__ import annotations

from l4spark.config import IngestConfig
from l4spark.parse.ingest import (FILE_READ, _task_rows, arrow_batches, plan_read_tasks, shape_count_batches,
                                  with_unread_files)
from l4spark.parse.layout import Issue, RankFile
from l4spark.parse.reader import ReadLimits


def files(job: str, n: int, size: int) -> list[RankFile]:
    return [RankFile(job, "n1", r, f"/x/{job}/n1/rank-{r}.log", f"{job}/n1/rank-{r:03d}.log", size) for r in range(n)]


def test_tasks_split_at_job_boundaries_and_bound_their_size():
    fleet = files("big", 40, 10_000_000) + files("small-a", 2, 1000) + files("small-b", 2, 1000) + files("mid", 10, 5_000_000)
    tasks = plan_read_tasks(fleet, IngestConfig(target_task_bytes=64_000_000), min_tasks=4)
    assert sorted(f.rel_path for task in tasks for f in task) == sorted(f.rel_path for f in fleet)
    assert all(sum(f.size for f in task) <= 64_000_000 + 10_000_000 for task in tasks)
    jobs_per_task = [{f.job_id for f in task} for task in tasks]
    # tiny jobs may share a task; a big job's tasks hold nothing else
    assert all(len(jobs) == 1 or jobs <= {"small-a", "small-b", "mid", "big"} and len(jobs) <= 3 for jobs in jobs_per_task)
    assert [jobs for jobs in jobs_per_task if "big" in jobs] == [{"big"}] * 7
    assert plan_read_tasks(fleet, IngestConfig(), min_tasks=4) == plan_read_tasks(list(reversed(fleet)), IngestConfig(), min_tasks=4)


def test_without_job_boundaries_tasks_fill_to_the_target_across_jobs():
    fleet = [f for j in range(20) for f in files(f"job-{j:02d}", 4, 1_000_000)]
    by_job = plan_read_tasks(fleet, IngestConfig(target_task_bytes=16_000_000), min_tasks=2)
    filled = plan_read_tasks(fleet, IngestConfig(target_task_bytes=16_000_000), min_tasks=2, job_boundaries=False)
    # at job boundaries: a task ends after each job past an eighth of the target (one 4 MB job each)
    assert [len({f.job_id for f in task}) for task in by_job] == [1] * 20
    # filled: 16 files of 1 MB a task, every file once, in (job, path) order
    assert [len(task) for task in filled] == [16] * 5
    assert [f.rel_path for task in filled for f in task] == sorted(f.rel_path for f in fleet)


def test_a_big_task_travels_in_rows_of_bounded_size_with_its_jobs_shape_numbers():
    import json

    task = [f for j in range(6) for f in files(f"job-{j}", 50, 1000)]
    shape_ids = {f"job-{j}": {f"shape {j} {k}": 100 * j + k for k in range(40)} for j in range(6)}
    rows = _task_rows(task, shape_ids, max_bytes=2_000)
    numbers = max(len(json.dumps(ids)) for ids in shape_ids.values())
    assert len(rows) > 6
    assert all(len(specs) <= 2_000 and len(specs) + len(ids) <= 2_000 + numbers for specs, ids in rows)
    # every file once, in the task's order; each row has the shape numbers of its files' jobs only
    assert [spec[4] for specs, _ in rows for spec in json.loads(specs)] == [f.rel_path for f in task]
    for specs, ids in rows:
        jobs = {spec[0] for spec in json.loads(specs)}
        assert json.loads(ids) == {k: v for job in jobs for k, v in shape_ids[job].items()}
    # no shape numbers asked for: None in every row; a small task is one row
    assert {ids for _, ids in _task_rows(task, None, max_bytes=2_000)} == {None}
    assert len(_task_rows(task[:3], shape_ids)) == 1
    # a job whose shape numbers alone pass the bound: its files still share rows (not one row, and
    # one copy of the numbers, per file)
    big = {"job-0": {f"shape {k}": k for k in range(1_000)}}
    rows = _task_rows(task[:50], big, max_bytes=1_000)
    assert 1 < len(rows) < 10 and all(len(specs) <= 1_000 for specs, _ in rows)


def test_gz_files_weigh_their_expansion():
    plain = plan_read_tasks(files("j", 8, 8_000_000), IngestConfig(target_task_bytes=64_000_000))
    packed = [RankFile(f.job_id, f.node, f.rank, f.path + ".gz", f.rel_path + ".gz", f.size)
              for f in files("j", 8, 8_000_000)]
    assert len(plain) == 1 and len(plan_read_tasks(packed, IngestConfig(target_task_bytes=64_000_000))) == 8


def test_a_block_of_only_set_aside_lines_yields_only_its_issue(tmp_path):
    """A chunk whose every line is set aside (a binary dump written as a rank file, an overlong
    line) has no shape: pass 1 once counted an empty shape for it and failed the batch."""
    dump = tmp_path / "rank-0.log"
    dump.write_bytes(b"\x00\x01\x02core\x00\n" * 3 + b"x" * 100 + b"\n")
    mixed = tmp_path / "rank-1.log"
    mixed.write_bytes(b"\x00\x01\x02core\x00\n" + b"step 12 ok\n" * 2)
    rank_files = [RankFile("j", "n", r, str(p), f"j/n/{p.name}", p.stat().st_size) for r, p in enumerate((dump, mixed))]
    limits = ReadLimits(max_line_bytes=64, chunk_bytes=16, binary_control_share=0.3)

    counted = [row for batch in shape_count_batches(rank_files, limits) for row in batch.to_pylist()]
    shapes = {row["shape"]: row["n_lines"] for row in counted if row["issue"] is None}
    assert shapes == {"step 00 ok": 2}
    assert sorted((row["file"], row["issue"], row["n_lines"]) for row in counted if row["issue"]) == [
        ("j/n/rank-0.log", "binary_line", 3), ("j/n/rank-0.log", "line_too_long", 1), ("j/n/rank-1.log", "binary_line", 1)]

    rows = [row for batch in arrow_batches(rank_files, limits, 2, shape_ids={"step 00 ok": 5}) for row in batch.to_pylist()]
    lines = [(row["file"], row["line_no"], row["raw"], row["shape_id"]) for row in rows if row["issue"] is None]
    assert lines == [("j/n/rank-1.log", 2, "step 12 ok", 5), ("j/n/rank-1.log", 3, "step 12 ok", 5)]


def test_a_remote_file_the_read_did_not_hand_over_is_counted_unreadable():
    """A remote read marks each file it got (FILE_READ); a listed non-empty file without a mark
    was skipped by Spark's scan (refused or gone) and becomes an unreadable_file issue. Empty
    files are not read by Spark (their empty_file rows are made apart), and a local read never
    skips a file, so neither is flagged."""
    remote = [RankFile("j", "n", r, f"s3a://b/logs/j/n/rank-{r}.log", f"j/n/rank-{r}.log", size)
              for r, size in enumerate((10, 10, 0))]
    issues = [Issue("j", "j/n/rank-0.log", FILE_READ, "", 0), Issue("j", "j/n/rank-0.log", "binary_line", "x", 1)]
    settled = with_unread_files(issues, remote)
    assert [(i.file, i.reason) for i in settled] == [("j/n/rank-0.log", "binary_line"), ("j/n/rank-1.log", "unreadable_file")]
    assert with_unread_files([], files("j", 2, 10)) == []
