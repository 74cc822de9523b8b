"""Helpers of the nightly tests: the small fleet's config, table snapshots and their comparison."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from l4spark.config import load_config
from l4spark.simulate import FleetOptions
from l4spark.io.storage import read_table, table_exists

RESULT_TABLES = ("jobs", "events", "templates", "normal_pool", "diagnosis_jobs", "diagnosis_events",
                 "diagnosis_nodes", "diagnosis_iterations")
DIAGNOSIS_TABLES = ("diagnosis_jobs", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations")
VOLATILE = {"run_id", "processed_at", "parsed_at", "first_seen"}
# The nightly tests' fleet: 6 jobs (3 failed) of 2 nodes x 2 ranks, 30 iterations.
NIGHTLY_FLEET = FleetOptions(seed=21, jobs=6, nodes=(2, 2), ranks_per_node=2, iterations=30, failed_share=0.5,
                             fault_kinds=("oom", "nccl_timeout"), frameworks=("megatron", "deepspeed"))


def nightly_config(warehouse: Path, storage_format: str = "parquet"):
    return load_config(overrides={"storage.warehouse": str(warehouse), "spark.master": "local[2]",
                                  "storage.format": storage_format})


def snapshot(spark, warehouse: Path, tables=RESULT_TABLES, jobs=None, storage_format: str = "parquet") -> dict[str, pd.DataFrame]:
    """Result tables as sorted pandas frames without the columns that name a run or a time
    (only the rows of ``jobs`` when given, in the tables that have a job_id)."""
    config = nightly_config(warehouse, storage_format)
    out = {}
    for table in tables:
        if not table_exists(config.storage, table):
            out[table] = pd.DataFrame()
            continue
        frame = read_table(spark, config.storage, table).toPandas()
        if jobs is not None and "job_id" in frame.columns:  # normal_pool is per settings group, not per job
            frame = frame[frame["job_id"].isin(list(jobs))]
        frame = frame.drop(columns=[c for c in frame.columns if c in VOLATILE])
        frame = frame.map(lambda v: tuple(v) if hasattr(v, "__len__") and not isinstance(v, str) else v)
        out[table] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return out


def assert_same(a: dict, b: dict, tables=RESULT_TABLES) -> None:
    """Each table of snapshots ``a`` and ``b`` equal row for row. Columns are compared in ``b``'s
    order: Parquet puts the partition column last, Delta keeps the schema's order."""
    for table in tables:
        pd.testing.assert_frame_equal(_in_columns_of(a[table], b[table]), b[table], check_dtype=False, obj=table)


def _in_columns_of(frame: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``other``'s column order and sorted by it, when both have the same columns."""
    columns = list(other.columns)
    if list(frame.columns) == columns or set(frame.columns) != set(columns) or not columns:
        return frame
    return frame[columns].sort_values(columns).reset_index(drop=True)
