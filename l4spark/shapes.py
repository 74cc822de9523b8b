"""Line shapes: structure and mask each distinct digit-folded line once, not every line.

Training logs repeat a few thousand messages millions of times, but their lines differ (time
stamps, counters, losses, host numbers), so per-line regex work cannot be deduplicated on the
raw text. Folding every digit to 0 gives each line a *shape*; the
shapes of a run are few. When the wrapper and header rules cannot tell digits apart
(``textrules.is_digit_agnostic``), a rule matches a line and its shape at the same character
positions, so the shape's structuring, expressed as parts (literal text or a character range of
the line), rebuilds the line's own ts and message exactly. Masking works on the shape's
message: the masked text is ``mask(fold_digits(message))`` in every path.

Per line: the reading task folds digits in C over whole blocks (``ingest``), and the JVM does a
broadcast hash join on the shape and substrings.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from l4spark.config import StructureConfig
from l4spark.structure import to_timestamp
from l4spark.textrules import LineStructurer, Masker, MaskRule, fold_digits, is_digit_agnostic, template_parts

# A field is rebuilt from a fixed number of slots, each a literal then a substring of the line:
# fixed arity keeps the per-line expression a plain concat of substrings, which Spark compiles
# (a transform over an array of parts is interpreted: measured 4x slower on the demo fleet).
SLOTS = {"ts": 10, "msg": 4}


def _slot_fields(field: str) -> list[tuple[str, pa.DataType]]:
    return [item for i in range(SLOTS[field])
            for item in ((f"{field}_lit{i}", pa.string()), (f"{field}_start{i}", pa.int32()),
                         (f"{field}_len{i}", pa.int32()))]


# The broadcast side of the per-line join: one row per shape.
SHAPE_FIELDS = pa.schema([("shape", pa.string()), ("event_id", pa.string()), ("level", pa.string()),
                          ("has_ts", pa.bool_()), *_slot_fields("ts"), *_slot_fields("msg")])


def shapes_usable(conf: StructureConfig) -> str | None:
    """None when the shape path is exact for these rules, else the reason it is not."""
    if not conf.fold_digits:
        return "structure.fold_digits is off"
    for rule in [*conf.wrappers, *conf.headers]:
        if not is_digit_agnostic(rule.pattern):
            return f"rule '{rule.name}' tells digits apart ({rule.pattern!r})"
    for rule in conf.headers:
        if template_parts(rule.ts) > SLOTS["ts"] or template_parts(rule.message) > SLOTS["msg"]:
            return f"rule '{rule.name}' builds a field from more parts than the shape path holds {SLOTS}"
    for rule in conf.wrappers:
        if template_parts(rule.ts) > SLOTS["ts"]:
            return f"wrapper '{rule.name}' builds its ts from more than {SLOTS['ts']} parts"
    return None


def structure_shapes(shapes: Iterable[str], conf: StructureConfig, masks: Iterable[MaskRule]) -> pd.DataFrame:
    """For each shape: masked message, level, and the parts that rebuild ts and message.

    Output columns: shape, masked, level, ts_parts, msg_parts. Runs on the driver over the
    distinct shapes only.
    """
    structurer = LineStructurer(conf.wrappers, conf.headers, conf.levels, conf.max_wrapper_depth)
    masker = Masker(masks)
    rows = []
    for shape in shapes:
        parts = structurer.structure_parts(shape)
        message = "".join(lit if lit is not None else shape[a:b] for lit, a, b in parts.message)
        rows.append((shape, masker.mask(fold_digits(message)), parts.level, list(parts.ts), list(parts.message)))
    return pd.DataFrame(rows, columns=["shape", "masked", "level", "ts_parts", "msg_parts"])


def _slots(field: str, parts: list[tuple[str | None, int, int]]) -> dict:
    """Parts as slot columns: a literal slot has an empty substring, a span slot an empty
    literal (Spark's substring is 1-based); unused slots are empty."""
    row = {}
    for i in range(SLOTS[field]):
        literal, start, end = parts[i] if i < len(parts) else ("", 0, 0)
        if literal is not None:
            row.update({f"{field}_lit{i}": literal, f"{field}_start{i}": 1, f"{field}_len{i}": 0})
        else:
            row.update({f"{field}_lit{i}": "", f"{field}_start{i}": start + 1, f"{field}_len{i}": end - start})
    return row


def _rebuild(field: str) -> Column:
    return F.concat(*[F.concat(F.col(f"{field}_lit{i}"), F.expr(f"substring(raw, {field}_start{i}, {field}_len{i})"))
                      for i in range(SLOTS[field])])


def with_shape_fields(lines: DataFrame, shapes: DataFrame, reference: Column | None = None) -> DataFrame:
    """Add ``event_id``, ``level``, ``ts``, ``message`` to lines (``raw``, ``shape``) from their
    shape's row (broadcast). A line whose shape is absent gets nulls (the caller counts them).
    A year-less time takes its year from ``reference`` (``structure.to_timestamp``)."""
    slot_columns = [name for name in SHAPE_FIELDS.names if name[:3] in ("ts_", "msg")]
    return (
        lines.join(F.broadcast(shapes), on="shape", how="left")
        .withColumn("ts", to_timestamp(F.when(F.col("has_ts"), _rebuild("ts")), reference))
        .withColumn("message", _rebuild("msg"))
        .drop("has_ts", *slot_columns)
    )


def shapes_frame(spark: SparkSession, table: pd.DataFrame) -> DataFrame:
    """The shape rows (with their ``event_id``) as a Spark DataFrame, through Arrow."""
    rows = [{"shape": r.shape, "event_id": r.event_id, "level": r.level, "has_ts": bool(r.ts_parts),
             **_slots("ts", r.ts_parts), **_slots("msg", r.msg_parts)} for r in table.itertuples()]
    return spark.createDataFrame(pa.Table.from_pylist(rows, schema=SHAPE_FIELDS))
