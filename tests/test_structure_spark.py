"""The JVM structuring and masking give exactly what the Python reference gives."""

from __future__ import annotations

from datetime import datetime

import pytest

from l4spark.structure import with_masked, with_structure
from l4spark.textrules import LineStructurer, Masker, fold_digits
from tests.lines_corpus import CORPUS

pytestmark = pytest.mark.spark

EXTRA = [
    "2026-11-20T03:14:15.926535897Z stdout F [default1]:[2026-11-20 03:14:15,926] [ERROR] [engine.py:1:f] save to /ckpt/a/b failed",
    "node043: [default5]:[rank5]:[E1120 03:14:15.926535 4242 ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught",
    "ERROR something broke at 0xdeadbeef1 with ids 3f2a9c1d0e12 and 5 retries",
    "$ cost \\ backslash ${msg} $1 literal",
    "    at org.example.Foo.bar(Foo.java:42)",
]


def test_jvm_matches_python_reference(spark, default_config):
    s = default_config.structure
    reference = LineStructurer(s.wrappers, s.headers, s.levels, s.max_wrapper_depth)
    masker = Masker(default_config.masking)
    raws = [raw for raw, _ in CORPUS] + EXTRA
    frame = spark.createDataFrame([(i, raw) for i, raw in enumerate(raws)] + [(len(raws), None)],
                                  "i int, raw string")
    rows = (
        frame.transform(lambda df: with_structure(df, s))
        .transform(lambda df: with_masked(df, default_config.masking))
        .orderBy("i").collect()
    )
    for row in rows[:-1]:
        expected = reference.structure(row.raw)
        assert (row.level, row.message) == (expected.level, expected.message), row.raw
        assert row.masked == masker.mask(fold_digits(expected.message)), row.raw
        assert (row.ts is None) == (expected.ts is None), row.raw
    null_row = rows[-1]
    assert (null_row.ts, null_row.level, null_row.message, null_row.masked) == (None, None, None, None)


def test_timestamps_parse_in_every_format(spark, default_config):
    raws = [
        "[2026-11-20 01:00:01,123] [INFO] [a.py:1:f] x",
        " [2026-11-20 01:00:03] iteration 1/ 2 |",
        "[ERROR] HCCL(1,python):2026-11-20-01:00:05.123.456 [a.cc:1]x",
        "2026-11-20T01:00:01.123456789Z stdout F no header here",
        "2026-11-20T03:00:01.5+02:00 text with an offset",
        "2026-11-20 01:00:09,555 - WARNING - y",
    ]
    frame = spark.createDataFrame([(i, r) for i, r in enumerate(raws)], "i int, raw string")
    rows = frame.transform(lambda df: with_structure(df, default_config.structure)).orderBy("i").collect()
    assert [r.ts for r in rows] == [
        datetime(2026, 11, 20, 1, 0, 1, 123000),
        datetime(2026, 11, 20, 1, 0, 3),
        datetime(2026, 11, 20, 1, 0, 5, 123456),
        datetime(2026, 11, 20, 1, 0, 1, 123456),
        datetime(2026, 11, 20, 1, 0, 1, 500000),
        datetime(2026, 11, 20, 1, 0, 9, 555000),
    ]
