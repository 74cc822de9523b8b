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
