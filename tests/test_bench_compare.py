"""bench.compare: the row-for-row check of two warehouses' diagnosis tables (pure pandas part)."""

import numpy as np
import pandas as pd

from l4spark.bench.compare import compare_tables


def _table(**overrides):
    frame = pd.DataFrame({"job_id": ["a", "b", None], "score": [0.5, np.nan, 1.0],
                          "ts": [pd.Timestamp("2026-11-02"), pd.NaT, pd.NaT],
                          "suspects": [("n1",), (), None]})
    for column, value in overrides.items():
        frame[column] = value
    return frame


def test_equal_tables_with_missing_values_compare_equal():
    assert compare_tables(_table(), _table()) is None


def test_a_changed_cell_is_named():
    changed = _table(score=[0.5, np.nan, 1.0 + 1e-6])
    assert compare_tables(_table(), changed).startswith("column score: 1 rows differ; first at sorted row 2")
    assert "column suspects" in compare_tables(_table(), _table(suspects=[("n1",), ("n2",), None]))
    assert "column ts" in compare_tables(_table(), _table(ts=[pd.Timestamp("2026-11-02"), pd.NaT,
                                                             pd.Timestamp("2026-11-03")]))


def test_row_count_and_columns_differ():
    assert compare_tables(_table(), _table().iloc[:2]) == "3 rows against 2"
    assert compare_tables(_table(), _table().drop(columns=["ts"])).startswith("columns differ")
