"""The table registry (l4spark/io/tables.py) is the one declaration of the warehouse's tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from l4spark.config import StorageConfig
from l4spark.io import tables
from l4spark.io.storage import write_job_rows, write_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_lists_exactly_the_declared_tables():
    section = README.read_text("utf-8").split("## Output tables", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
    assert sorted(listed) == sorted(tables.TABLES)


def test_every_declared_schema_parses_and_names_its_key(spark):
    from pyspark.sql.types import StructType

    for table in tables.TABLES.values():
        if table.schema is None:
            continue
        parsed = StructType.fromDDL(table.schema)
        assert [f.name for f in parsed.fields] == tables.columns(table.schema)
        assert table.key is None or table.key in tables.columns(table.schema), table.name


def test_writers_refuse_an_undeclared_table_or_the_wrong_kind(spark, tmp_path):
    storage = StorageConfig(str(tmp_path / "warehouse"))
    rows = spark.createDataFrame([("j1", 1)], "job_id string, n long")
    with pytest.raises(KeyError, match="'evnets' is not a warehouse table"):
        write_job_rows(rows, storage, "evnets", ["j1"])
    with pytest.raises(ValueError, match="not partitioned"):
        write_job_rows(rows, storage, "templates", ["j1"])
    with pytest.raises(ValueError, match="partitioned by job_id"):
        write_table(rows, storage, "diagnosis_jobs")
    assert not (tmp_path / "warehouse").exists()


def test_the_key_of_every_per_job_table_is_its_first_column():
    """Delta keeps min and max statistics of a table's first columns only (32 by default): with the
    key first, a ``replaceWhere`` or a one-job read skips the files whose key range misses the job
    (Delta tables are not partitioned, ``Table.partition_columns``)."""
    for table in tables.TABLES.values():
        if table.key is not None and table.schema is not None:
            assert tables.columns(table.schema)[0] == table.key, table.name
    from l4spark.parse.pipeline import _event_columns
    assert _event_columns()[0] == tables.EVENTS.key
