"""The nightly batch over good jobs plus the bad-input corpus (tests/reliability/corpus.py).

For every bad input: the run finishes, the outcome is the expected per-job error row or counted
quarantine, nothing is written outside the warehouse, and the good jobs are diagnosed exactly as
in a clean run without the bad ones (the session's ``nightly_clean``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from l4spark.io.lock import warehouse_lock
from l4spark.io.storage import read_table
from tests.nightly_support import DIAGNOSIS_TABLES, assert_same, nightly_config, snapshot
from tests.reliability.corpus import write_bad_corpus

pytestmark = pytest.mark.reliability

GOOD_JOB_TABLES = ("jobs", "events", "normal_pool", *DIAGNOSIS_TABLES)


def _tree(root: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` (but ``skip``) with its size and modification time."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if skip is not None and Path(dirpath) == skip.parent:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames + filenames:
            stat = os.lstat(Path(dirpath, name))
            out[str(Path(dirpath, name).relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def _good_jobs(batch) -> list[str]:
    return sorted(p.name for p in Path(batch["good_logs"]).iterdir() if not p.name.startswith("_"))


@pytest.fixture(scope="module")
def batch(spark, nightly_logs, tmp_path_factory):
    """Good jobs + the corpus in one logs root, one nightly run with reports."""
    from l4spark.nightly.batch import run_nightly

    base = tmp_path_factory.mktemp("bad-batch")
    logs = base / "logs"
    shutil.copytree(nightly_logs, logs)
    expected = write_bad_corpus(logs)
    warehouse = base / "warehouse"
    before = (_tree(base), sorted(os.listdir(Path.cwd())))
    config = nightly_config(warehouse)
    with warehouse_lock(config.storage, "bad-input test"):
        run = run_nightly(spark, config, logs, reports_dir=warehouse / "_reports")
    after = (_tree(base, skip=warehouse), sorted(os.listdir(Path.cwd())))
    return {"logs": logs, "good_logs": nightly_logs, "warehouse": warehouse, "run": run, "expected": expected, "before": before,
            "after": after, "config": config}


def test_good_jobs_are_diagnosed_exactly_as_without_the_bad_ones(spark, batch, nightly_clean):
    clean_warehouse, clean_run, _ = nightly_clean
    good = _good_jobs(batch)
    assert len(good) == clean_run.scanned
    assert set(clean_run.diagnosed) <= set(batch["run"].diagnosed)
    clean = snapshot(spark, clean_warehouse, GOOD_JOB_TABLES, jobs=good)
    assert sorted(clean["diagnosis_jobs"]["job_id"]) == clean_run.diagnosed and len(clean["diagnosis_events"])
    assert_same(clean, snapshot(spark, batch["warehouse"], GOOD_JOB_TABLES, jobs=good), GOOD_JOB_TABLES)


def test_every_bad_input_gives_its_expected_outcome(spark, batch):
    storage = batch["config"].storage
    expected = batch["expected"]
    jobs = {r.job_id: r for r in read_table(spark, storage, "jobs").collect()}
    quarantine = read_table(spark, storage, "quarantine").toPandas()
    lines = {r.job_id: r["count"] for r in read_table(spark, storage, "events").groupBy("job_id").count().collect()}
    diagnosis = {r.job_id: r for r in read_table(spark, storage, "diagnosis_jobs").collect()}
    run = batch["run"]
    problems = []
    for job_id, want in expected.items():
        got = quarantine[quarantine["job_id"] == job_id].groupby("reason")["n_lines"].sum().to_dict()
        outcome = {
            "status": jobs[job_id].status if job_id in jobs else None,
            "reasons": sorted(got),
            "counted": {k: got.get(k) for k, v in want.issues.items() if v},
            "lines": lines.get(job_id, 0) if want.lines is not None else None,
            "diagnosis": diagnosis[job_id].status if job_id in diagnosis else None,
        }
        wanted = {"status": want.status, "reasons": sorted(want.issues),
                  "counted": {k: v for k, v in want.issues.items() if v}, "lines": want.lines,
                  "diagnosis": want.diagnosis}
        if outcome != wanted:
            problems.append((job_id, want.what, outcome, wanted))
        if want.error and want.error not in (diagnosis[job_id].error or ""):
            problems.append((job_id, "error", diagnosis[job_id].error, want.error))
    assert not problems, "\n".join(map(str, problems))
    errors = dict(run.errors)
    assert errors == {j: diagnosis[j].error for j, w in expected.items() if w.diagnosis == "error"}
    runs = read_table(spark, storage, "runs").toPandas()
    assert runs.loc[0, "status"] == ("partial" if errors else "succeeded") and json.loads(runs.loc[0, "errors"]) == errors


def test_set_aside_lines_keep_exact_line_numbers_and_texts(spark, batch):
    events = read_table(spark, batch["config"].storage, "events")

    def numbers(job_id: str, file: str | None = None) -> list[int]:
        rows = events.where(F.col("job_id") == job_id)
        if file:
            rows = rows.where(F.col("file") == file)
        return sorted(r.line_no for r in rows.select("line_no").collect())

    assert numbers("zz-giant-line") == [1, 2, 4, 5]  # line 3 was the 50 MB line
    assert numbers("zz-nul") == [1, 2, 4, 6, 7, 8]  # lines 3 and 5 held NUL bytes
    assert numbers("zz-line-ends", "zz-line-ends/node-a/rank-1.log") == list(range(1, 8))
    messages = [r.message for r in events.where(F.col("job_id") == "zz-line-ends").select("message").collect()]
    assert messages and not any("\r" in m or "\n" in m for m in messages)
    gz = {r.file: r["count"] for r in events.where(F.col("job_id") == "zz-gzip").groupBy("file").count().collect()}
    # the truncated file keeps the 26 lines before the cut; the corrupt one is damaged inside its
    # first 1 KB of compressed data, which is lost whole (zlib gives no output with an error)
    assert gz == {"zz-gzip/node-a/rank-0.log.gz": 26, "zz-gzip/node-a/rank-2.log.gz": 41}
    latin1 = events.where((F.col("job_id") == "zz-encoding") & F.col("message").contains("caf")).collect()
    assert len(latin1) == 3 and all("caf\ufffd" in r.message for r in latin1)  # repaired, kept, counted


def test_hidden_and_escaping_names_stay_inside(spark, batch):
    jobs = {r.job_id for r in read_table(spark, batch["config"].storage, "jobs").select("job_id").collect()}
    assert "..zz-hidden" not in jobs and "../../../etc/escape" not in jobs
    assert batch["run"].scanned == len(jobs) == len(batch["expected"]) + len(_good_jobs(batch))
    reports = sorted(p.name for p in (batch["warehouse"] / "_reports").iterdir())
    diagnosed = [j for j, w in batch["expected"].items() if w.diagnosis]
    assert len([r for r in reports if r.endswith(".html")]) >= len(diagnosed)
    assert all("/" not in r and not r.startswith(".") for r in reports)


def test_nothing_is_written_outside_the_warehouse(batch):
    before_tree, before_cwd = batch["before"]
    after_tree, after_cwd = batch["after"]
    assert after_tree == before_tree  # the logs root and the warehouse's parent: untouched
    assert after_cwd == before_cwd
