"""The JVM structuring and masking give exactly what the Python reference gives."""

from __future__ import annotations

from datetime import datetime

import pytest

from l4spark.parse.structure import with_masked, with_structure
from l4spark.parse.textrules import LineStructurer, Masker, fold_digits
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
        ("E0229 12:00:00.000000 1 a.cpp:1] leap day", "2028-02-01 00:00:00", datetime(2028, 2, 29, 12, 0)),
        ("E0229 12:00:00.000000 1 a.cpp:1] no leap day in 2027", "2027-01-10 00:00:00", None),
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


def test_shape_path_times_equal_the_per_line_times(spark, default_config):
    """The shape path makes month names and year-less times castable once per shape
    (``shapes.castable_ts_parts``); every line then gets the time the per-line path gives it."""
    from pyspark.sql import functions as F

    from l4spark.parse.shapes import shape_numbers, shapes_frame, structure_shapes, with_shape_fields

    s = default_config.structure
    raws = [raw for raw, _ in CORPUS] + EXTRA + [
        "Feb 29 23:59:58 gpu-017 kernel: leap day", "Dec 31 23:59:58 gpu-017 kernel: the year before",
        "[Mon Feb 29 09:12:13 2028] mlx5_core: month name, leap day", "[Tue Mar 01 09:12:13 2027] mlx5_core: x",
        "E0101 00:00:04.871212 1 a.cpp:1] next year", "I0229 01:02:03.5 1 a.cpp:1] leap",
        "2026-11-20T01:00:01Z stdout F [default0]:E1120 01:00:09.000000 1 a.cpp:1] wrapper time wins",
        # non-ASCII before and inside the spans: slots are byte ranges of the line
        "[default0]:[2026-11-20 01:00:05,123] [INFO] [engine.py:12:init] ✓ 模型 loaded 🚀 in 3.2s",
        "[défault1]:[2026-11-20 01:00:05,123] [INFO] [x.py:1:f] [Rank 1] café ready",
        "Loading checkpoint shards: 100%|██████████| 4/4 [00:03<00:00, 1.2s/it]",
        "█ 2026-11-20 01:00:00,123 - INFO - after a block character",
        "[Mon Feb 29 09:12:13 2028] ünïcode ✗ before the message",
    ]
    starts = ["2026-12-31 23:50:00", "2028-01-15 00:00:00", "2027-06-30 00:00:00"]
    table = structure_shapes(sorted({fold_digits(raw) for raw in raws}), s, default_config.masking)
    table["event_id"] = "E"
    numbers = shape_numbers(table)
    lines = spark.createDataFrame(
        [(i * 100 + j, raw, numbers[fold_digits(raw)], start) for j, start in enumerate(starts)
         for i, raw in enumerate(raws)], "i int, raw string, shape_id int, start string")
    reference = F.col("start").cast("timestamp")
    by_shape = with_shape_fields(lines, shapes_frame(spark, table.drop(columns=["masked"])), reference)
    per_line = with_structure(lines, s, reference)
    got = {r.i: (r.ts, r.message) for r in by_shape.collect()}
    expected = {r.i: (r.ts, r.message) for r in per_line.collect()}
    assert got == expected
    # 29 February: dmesg -T's carries its year (2028: a time with every start); the year-less
    # syslog and glog lines are in 2028 only with the start in 2028, else they have no time
    leap = {(r.raw.split()[0], r.start[:4]): r.ts for r in by_shape.where(F.col("raw").contains("leap")).collect()}
    assert {key for key, ts in leap.items() if ts is not None} == {
        ("[Mon", "2026"), ("[Mon", "2028"), ("[Mon", "2027"), ("Feb", "2028"), ("I0229", "2028")}
    assert leap[("Feb", "2028")] == datetime(2028, 2, 29, 23, 59, 58)
