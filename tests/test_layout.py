"""The driver-side scan of the logs root: layout matching, job.json validation, counted issues."""

from __future__ import annotations

import json

import pytest

from l4spark.errors import InputLayoutError
from l4spark.parse.layout import scan_logs_root

PATTERN = r"^(?P<job_id>[^/]+)/(?P<node>[^/]+)/rank-(?P<rank>[0-9]+)\.log(?:\.gz)?$"
GOOD_META = {"status": "failed", "settings": {"model": "m"}, "start_time": "2026-11-20T01:00:00Z",
             "end_time": "2026-11-20T02:00:00+00:00"}


def make_job(root, job_id, meta=None, files=("n1/rank-0.log",)):
    job = root / job_id
    job.mkdir(parents=True)
    if meta is not False:
        (job / "job.json").write_text(json.dumps(meta if meta is not None else {"job_id": job_id, **GOOD_META}))
    for rel in files:
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_text("x\n")
    return job


def reasons(scan, job_id=None):
    return sorted(i.reason for i in scan.issues if job_id is None or i.job_id == job_id)


def test_scan_finds_rank_files_and_meta(tmp_path):
    make_job(tmp_path, "job-1", files=("gpu-001/rank-0.log", "gpu-001/rank-1.log.gz", "gpu-002/rank-8.log"))
    scan = scan_logs_root(tmp_path, PATTERN)
    assert [(f.job_id, f.node, f.rank, f.rel_path) for f in scan.files] == [
        ("job-1", "gpu-001", 0, "job-1/gpu-001/rank-0.log"),
        ("job-1", "gpu-001", 1, "job-1/gpu-001/rank-1.log.gz"),
        ("job-1", "gpu-002", 8, "job-1/gpu-002/rank-8.log"),
    ]
    assert scan.jobs["job-1"].status == "failed" and scan.jobs["job-1"].error is None
    assert scan.issues == []


def test_hidden_folders_are_skipped_and_counted(tmp_path):
    make_job(tmp_path, "job-1")
    (tmp_path / "_labels").mkdir()
    (tmp_path / "_labels" / "job-1.json").write_text("{}")
    (tmp_path / "job-1" / ".staging").mkdir()
    (tmp_path / "job-1" / ".staging" / "rank-0.log").write_text("x\n")
    scan = scan_logs_root(tmp_path, PATTERN)
    assert scan.skipped_hidden == 2
    assert len(scan.files) == 1 and scan.issues == []


def test_files_outside_the_layout_are_counted(tmp_path):
    make_job(tmp_path, "job-1", files=("n1/rank-0.log", "n1/stdout.txt", "rank-3.log", "n1/deep/rank-4.log"))
    (tmp_path / "stray.log").write_text("x\n")
    scan = scan_logs_root(tmp_path, PATTERN)
    assert [f.rel_path for f in scan.files] == ["job-1/n1/rank-0.log"]
    assert reasons(scan) == ["outside_layout"] * 4


@pytest.mark.parametrize("meta,problem", [
    (False, "missing"),
    ("not json at all", "not JSON"),
    ({"job_id": "job-1", "status": 3, "settings": {}, "start_time": "2026-11-20T01:00:00Z"}, "status must be"),
    ({"job_id": "job-1", "status": "failed", "settings": [1], "start_time": "2026-11-20T01:00:00Z"}, "settings must"),
    ({"job_id": "other", **GOOD_META}, "does not match its folder"),
    ({"job_id": "job-1", **{**GOOD_META, "start_time": "yesterday"}}, "ISO 8601"),
    ([1, 2], "expected a JSON object"),
])
def test_broken_job_json_gives_unknown_status_and_an_issue(tmp_path, meta, problem):
    job = make_job(tmp_path, "job-1", meta=None if meta is False else meta)
    if meta is False:
        (job / "job.json").unlink()
    elif isinstance(meta, str):
        (job / "job.json").write_text(meta)
    scan = scan_logs_root(tmp_path, PATTERN)
    assert scan.jobs["job-1"].status == "unknown"
    assert problem in scan.jobs["job-1"].error
    assert reasons(scan, "job-1") == ["job_meta"]
    assert len(scan.files) == 1  # its logs are still parsed


def test_duplicate_ranks_and_empty_job_folder(tmp_path):
    make_job(tmp_path, "job-1", files=("n1/rank-0.log", "n2/rank-0.log.gz"))
    make_job(tmp_path, "job-2", files=())
    scan = scan_logs_root(tmp_path, PATTERN)
    assert reasons(scan, "job-1") == ["duplicate_rank"]
    assert reasons(scan, "job-2") == ["no_rank_files"]


def test_job_selection(tmp_path):
    make_job(tmp_path, "job-1")
    make_job(tmp_path, "job 2 ünï")
    scan = scan_logs_root(tmp_path, PATTERN, jobs=["job 2 ünï"])
    assert list(scan.jobs) == ["job 2 ünï"]
    with pytest.raises(InputLayoutError, match="jobs not found"):
        scan_logs_root(tmp_path, PATTERN, jobs=["job-3"])
    with pytest.raises(InputLayoutError, match="not a directory"):
        scan_logs_root(tmp_path / "absent", PATTERN)
