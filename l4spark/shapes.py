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
from l4spark.textrules import LineStructurer, Masker, MaskRule, fold_digits, is_digit_agnostic

_PART = pa.struct([("lit", pa.string()), ("start", pa.int32()), ("len", pa.int32())])
# The broadcast side of the per-line join: one row per shape.
SHAPE_FIELDS = pa.schema([
    ("shape", pa.string()),
    ("event_id", pa.string()),
    ("level", pa.string()),
    ("ts_parts", pa.list_(_PART)),
    ("msg_parts", pa.list_(_PART)),
])


def shapes_usable(conf: StructureConfig) -> str | None:
    """None when the shape path is exact for these rules, else the reason it is not."""
    if not conf.fold_digits:
        return "structure.fold_digits is off"
    for rule in [*conf.wrappers, *conf.headers]:
        if not is_digit_agnostic(rule.pattern):
            return f"rule '{rule.name}' tells digits apart ({rule.pattern!r})"
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
        rows.append((shape, masker.mask(fold_digits(message)), parts.level,
                     [_part(p) for p in parts.ts], [_part(p) for p in parts.message]))
    return pd.DataFrame(rows, columns=["shape", "masked", "level", "ts_parts", "msg_parts"])


def _part(part: tuple[str | None, int, int]) -> dict:
    literal, start, end = part
    if literal is not None:
        return {"lit": literal, "start": None, "len": None}
    return {"lit": None, "start": start + 1, "len": end - start}  # Spark substring is 1-based


def with_shape_fields(lines: DataFrame, shapes: DataFrame) -> DataFrame:
    """Add ``ts``, ``level``, ``message``, ``masked`` to lines (``raw``, ``shape``) from their
    shape's row (broadcast). A line whose shape is absent gets nulls (the caller counts them)."""
    def rebuild(parts: str) -> Column:
        return F.expr(f"array_join(transform({parts}, p -> coalesce(p.lit, substring(raw, p.start, p.len))), '')")

    return (
        lines.join(F.broadcast(shapes), on="shape", how="left")
        .withColumn("ts", F.when(F.size("ts_parts") > 0, rebuild("ts_parts")).try_cast("timestamp"))
        .withColumn("message", F.when(F.col("msg_parts").isNotNull(), rebuild("msg_parts")))
        .drop("ts_parts", "msg_parts")
    )


def shapes_frame(spark: SparkSession, table: pd.DataFrame) -> DataFrame:
    """The shape rows (with their ``event_id``) as a Spark DataFrame, through Arrow."""
    arrow = pa.Table.from_pandas(table[SHAPE_FIELDS.names], schema=SHAPE_FIELDS, preserve_index=False)
    return spark.createDataFrame(arrow)
