"""Read tasks: planning (job-contiguous tasks of bounded size, every file exactly once) and
what a task yields for blocks whose lines are all set aside."""

from __future__ import annotations

from l4spark.config import IngestConfig
from l4spark.parse.ingest import FILE_READ, arrow_batches, plan_read_tasks, shape_count_batches, with_unread_files
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
