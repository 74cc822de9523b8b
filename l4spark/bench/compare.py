"""Compare the tables of two warehouses row for row (issue #21: results unchanged).

    python -m l4spark.bench.compare WAREHOUSE_A WAREHOUSE_B [--tables diagnosis|parse|pool|all]

Both warehouses hold a run over the same fleet (for example one made by main's code and one by a
branch's). The diagnosis tables (``diagnosis_jobs``, ``diagnosis_events``, ``diagnosis_nodes``,
``diagnosis_iterations``, ``diagnosis_pace``; the default) and/or the parse's tables
(``events``, ``jobs``, ``quarantine``, ``job_event_counts``, ``job_event_forms``,
``templates``) and/or the normal pool's (``normal_pool``, ``normal_pool_variants``,
``normal_pool_ledger``) are read whole, the columns that name the run (``run_id``,
``processed_at``, ``version``, ``parsed_at``, ``parser_version``, ``parse_run_id``) are dropped, and the rows are sorted on every
column; the two sides must then be equal cell for cell (floats to ``FLOAT_TOLERANCE``
relative). A table missing on both sides is equal (0 rows). Exit 0 when every table is equal, 1
otherwise, with the first differing rows printed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

TABLES = ("diagnosis_jobs", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations", "diagnosis_pace")
PARSE_TABLES = ("events", "jobs", "quarantine", "job_event_counts", "job_event_forms", "templates")
POOL_TABLES = ("normal_pool", "normal_pool_variants", "normal_pool_ledger")
TABLE_SETS = {"diagnosis": TABLES, "parse": PARSE_TABLES, "pool": POOL_TABLES,
              "all": PARSE_TABLES + POOL_TABLES + TABLES}
RUN_COLUMNS = {"run_id", "processed_at", "version", "parsed_at", "parser_version", "parse_run_id"}
FLOAT_TOLERANCE = 1e-9


def table_rows(spark, warehouse: str, table: str) -> pd.DataFrame:
    """The rows of ``table`` in ``warehouse`` without the run's columns, as sortable pandas
    (arrays as tuples), sorted on every column."""
    from l4spark.config import load_config
    from l4spark.io.storage import read_table, table_exists

    storage = load_config(overrides={"storage.warehouse": warehouse}).storage
    if not table_exists(storage, table):
        return pd.DataFrame()
    frame = read_table(spark, storage, table)
    frame = frame.select(*sorted(c for c in frame.columns if c not in RUN_COLUMNS)).toPandas()
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, (list, np.ndarray))).any():
            frame[column] = frame[column].map(lambda v: tuple(v) if v is not None else None)
    key = [c for c in frame.columns]
    return frame.sort_values(key, na_position="first", kind="stable").reset_index(drop=True)


def compare_tables(left: pd.DataFrame, right: pd.DataFrame) -> str | None:
    """None when equal; else one line saying where they differ."""
    if list(left.columns) != list(right.columns):
        return f"columns differ: {list(left.columns)} against {list(right.columns)}"
    if len(left) != len(right):
        return f"{len(left)} rows against {len(right)}"
    for column in left.columns:
        a, b = left[column], right[column]
        if pd.api.types.is_float_dtype(a) and pd.api.types.is_float_dtype(b):
            same = np.isclose(a.to_numpy(), b.to_numpy(), rtol=FLOAT_TOLERANCE, atol=0.0, equal_nan=True)
        else:
            same = np.array([_same(x, y) for x, y in zip(a, b)], dtype=bool)
        if not same.all():
            row = int(np.flatnonzero(~same)[0])
            return (f"column {column}: {int((~same).sum())} rows differ; first at sorted row {row}: "
                    f"{a.iloc[row]!r} against {b.iloc[row]!r}")
    return None


def _same(x, y) -> bool:
    """Cell equality with every missing value (None, NaN, NaT) equal to every other."""
    x_missing = x is None or (not isinstance(x, (tuple, list, np.ndarray)) and bool(pd.isna(x)))
    y_missing = y is None or (not isinstance(y, (tuple, list, np.ndarray)) and bool(pd.isna(y)))
    if x_missing or y_missing:
        return x_missing and y_missing
    return bool(x == y)


def compare_warehouses(spark, left: str, right: str, tables: tuple[str, ...] = TABLES) -> dict[str, str]:
    """Per table of ``tables`` (default: the diagnosis tables): ``equal (N rows)`` or the difference."""
    out = {}
    for table in tables:
        a, b = table_rows(spark, left, table), table_rows(spark, right, table)
        difference = compare_tables(a, b)
        out[table] = f"equal ({len(a)} rows)" if difference is None else difference
    return out


def all_equal(result: dict[str, str]) -> bool:
    return all(text.startswith("equal") for text in result.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.bench.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("left")
    parser.add_argument("right")
    parser.add_argument("--tables", choices=sorted(TABLE_SETS), default="diagnosis",
                        help="which tables: the diagnosis tables (default), the parse's, the normal pool's, or all")
    args = parser.parse_args(argv)

    from l4spark.config import load_config
    from l4spark.io.session import build_session

    spark = build_session(load_config(overrides={"spark.master": "local[2]"}).spark)
    try:
        result = compare_warehouses(spark, args.left, args.right, TABLE_SETS[args.tables])
    finally:
        spark.stop()
    for table, text in result.items():
        print(f"{table:<22} {text}")
    return 0 if all_equal(result) else 1


if __name__ == "__main__":
    raise SystemExit(main())
