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


def test_yearless_header_times_take_the_year_of_the_reference(spark, default_config):
    """glog/c10/syslog headers carry no year: it comes from the job's start, with the year
    rolled over when that puts the line within half a year of it; a wrapper time wins."""
    from pyspark.sql import functions as F

    cases = [  # raw, job start, expected ts
        ("E1126 18:02:25.206309 1397 api.py:897] Sending process 4242 closing signal SIGTERM",
         "2026-11-26 17:00:00", datetime(2026, 11, 26, 18, 2, 25, 206309)),
        ("[rank3]:[W0101 00:00:04.871212720 ProcessGroupNCCL.cpp:4115] barrier",
         "2026-12-31 23:50:00", datetime(2027, 1, 1, 0, 0, 4, 871212)),
        ("I1231 23:59:58.5 77 train.cpp:1] clock behind the start", "2027-01-01 00:00:10",
         datetime(2026, 12, 31, 23, 59, 58, 500000)),
        ("Nov  1 09:12:13 gpu-017 kernel: [ 1234.567890] NVRM: Xid 79", "2026-10-31 22:00:00",
         datetime(2026, 11, 1, 9, 12, 13)),
        ("[Sat Nov 21 09:12:13 2026] mlx5_core: Cable unplugged", "2020-01-01 00:00:00",
         datetime(2026, 11, 21, 9, 12, 13)),
        ("2026-11-20T01:00:01Z stdout F [default0]:E1120 01:00:09.000000 1 a.cpp:1] wrapped", "2026-11-20 00:00:00",
         datetime(2026, 11, 20, 1, 0, 1)),
        ("[default5]:[W compiler_depend.ts:164] Warning: no time at all", "2026-11-20 00:00:00", None),
    ]
    frame = spark.createDataFrame([(i, raw, start) for i, (raw, start, _) in enumerate(cases)],
                                  "i int, raw string, start string")
    reference = F.col("start").cast("timestamp")
    rows = frame.transform(lambda df: with_structure(df, default_config.structure, reference)).orderBy("i").collect()
    assert [r.ts for r in rows] == [expected for _, _, expected in cases]
    # without a reference, the current year (or the one before/after within half a year)
    glog = spark.createDataFrame([("E0615 12:00:00.000000 1 a.cpp:1] x",)], "raw string")
    ts = glog.transform(lambda df: with_structure(df, default_config.structure)).first().ts
    assert ts is not None and abs((ts - datetime.now()).days) <= 366
