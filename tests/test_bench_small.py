"""``make bench-small --baseline-code DIR`` refuses checkouts that would time different table formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from l4spark.bench.small import _check_same_jars
from l4spark.io.delta_jars import find_jars

REPO = Path(__file__).resolve().parents[1]


def test_a_baseline_without_delta_jars_is_refused_before_anything_runs(tmp_path):
    """A ``git archive`` of main has no ``jars`` folder (git-ignored): its nightly would write
    Parquet while this checkout's writes Delta. Refused, naming the link to make; accepted once
    the folder is linked."""
    if find_jars(REPO / "jars") is None:
        pytest.fail("Delta's jars are missing: run `make jars`")
    with pytest.raises(SystemExit, match=r"jars are missing in .*ln -s"):
        _check_same_jars({"baseline": tmp_path, "this": REPO})
    (tmp_path / "jars").symlink_to(REPO / "jars")
    _check_same_jars({"baseline": tmp_path, "this": REPO})


def test_drain3_over_raw_lines_mines_whole_lines_as_read(tmp_path):
    """The issue's drain3 reference: every line as read (a gzipped file decompressed), its
    header included (the bytes count whole lines), up to the cap."""
    import gzip

    from l4spark.bench.parse import drain3_raw_lines, drain3_single
    from l4spark.config import load_config
    from l4spark.parse.layout import RankFile

    lines = [f"[2026-11-0{day} 10:0{day}:00] INFO step {day} done" for day in range(1, 6)]
    plain, packed = tmp_path / "rank0.log", tmp_path / "rank1.log.gz"
    plain.write_text("\n".join(lines) + "\n")
    packed.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    files = [RankFile("j", "n0", 0, str(plain), "rank0.log", plain.stat().st_size),
             RankFile("j", "n0", 1, str(packed), "rank1.log.gz", packed.stat().st_size)]
    config = load_config()
    raw = drain3_raw_lines(config, files, max_lines=1_000)
    assert raw.lines == 10 and raw.bytes == 2 * sum(len(line) + 1 for line in lines)
    assert "10 whole lines from 2 files" in raw.note
    assert drain3_raw_lines(config, files, max_lines=7).lines == 7
    assert drain3_single(config, files, max_lines=1_000).lines == 10


def test_the_diagnosis_profile_names_the_lines_that_run_its_spark_actions(spark, nightly_clean):
    """``python -m l4spark.bench.profile``: every second of the diagnosis' Spark actions is put on
    the l4spark line that ran it (the per-line frame, the ranking, ...), inside the round's
    time; nothing is written; the DataFrame methods are themselves again afterwards."""
    from pyspark.sql.classic.dataframe import DataFrame

    from l4spark.bench.profile import failed_jobs, profile_diagnosis
    from tests.nightly_support import assert_same, nightly_config, snapshot

    warehouse, _, tables = nightly_clean
    config = nightly_config(warehouse)
    collect = DataFrame.collect
    jobs = failed_jobs(spark, config)
    [run] = profile_diagnosis(spark, config, jobs[:2], rounds=1)
    assert run.jobs == 2 and 0 < run.attributed <= run.seconds
    callers = " ".join(run.by_caller)
    # the per-line frame (a checkpoint in the batch) and a step's own collect (the history's)
    assert "diagnosis/assemble.py:" in callers and "_diagnose_batch" in callers and "job_history" in callers
    assert "(outside l4spark)" not in callers and "io/frames.py" not in callers
    assert DataFrame.collect is collect
    assert_same(tables, snapshot(spark, warehouse))
