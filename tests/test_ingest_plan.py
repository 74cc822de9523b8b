"""Read-task planning: job-contiguous tasks of bounded size, every file exactly once."""

from __future__ import annotations

from l4spark.config import IngestConfig
from l4spark.ingest import plan_read_tasks
from l4spark.layout import RankFile


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
