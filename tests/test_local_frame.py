"""io.frames.local_frame: large driver-side rows in slices, the same rows as createDataFrame."""

import pandas as pd
import pyarrow as pa

from l4spark.io.frames import local_frame

SCHEMA = "job_id string, n_lines long, first_ts timestamp"


def _rows(frame):
    return sorted((tuple(r) for r in frame.collect()), key=repr)


def test_local_frame_slices_give_the_same_rows(spark):
    pdf = pd.DataFrame({"job_id": [f"job-{i % 7}" if i % 11 else None for i in range(500)],
                        "n_lines": range(500),
                        "first_ts": [pd.Timestamp("2026-11-02") + pd.Timedelta(seconds=i) if i % 5 else pd.NaT
                                     for i in range(500)]})
    whole = spark.createDataFrame(pdf, SCHEMA)
    sliced = local_frame(spark, pdf, SCHEMA, chunk_bytes=2_000)
    assert sliced.schema == whole.schema
    assert _rows(sliced) == _rows(whole)
    # no local relation left in the plan: later stages read the checkpoint, not task-carried rows
    assert "LocalTableScan" not in sliced._jdf.queryExecution().executedPlan().toString()


def test_local_frame_arrow_and_tuples(spark):
    table = pa.table({"k": pa.array(range(300), pa.int64()), "v": pa.array(["x" * 50] * 299 + [None])})
    assert _rows(local_frame(spark, table, chunk_bytes=1_000)) == _rows(spark.createDataFrame(table))
    tuples = [(f"j{i}", i, None) for i in range(200)]
    assert _rows(local_frame(spark, tuples, SCHEMA, chunk_bytes=500)) == _rows(spark.createDataFrame(tuples, SCHEMA))
    # small rows: one plain local relation
    assert _rows(local_frame(spark, tuples[:3], SCHEMA)) == _rows(spark.createDataFrame(tuples[:3], SCHEMA))
    assert local_frame(spark, [], SCHEMA).count() == 0


def test_local_frame_checkpoints_in_slices_of_chunk_bytes(spark):
    table = pa.table({"k": pa.array(range(2_000), pa.int64()), "v": pa.array(["y" * 100] * 2_000)})
    slices = -(-table.nbytes // 20_000)
    before = spark.conf.get("spark.sql.leafNodeDefaultParallelism", None)
    frame = local_frame(spark, table, chunk_bytes=20_000)
    # one task per slice of about chunk_bytes, and the session setting is back as it was
    assert frame.rdd.getNumPartitions() == slices > 1
    assert spark.conf.get("spark.sql.leafNodeDefaultParallelism", None) == before
    assert _rows(frame) == _rows(spark.createDataFrame(table))
