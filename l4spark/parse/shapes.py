"""Line shapes: structure and mask each distinct digit-folded line once, not every line.

Training logs repeat a few thousand messages millions of times, but their lines differ (time
stamps, counters, losses, host numbers), so per-line regex work cannot be deduplicated on the
raw text. Folding every digit to 0 gives each line a *shape*; the
shapes of a run are few. When the wrapper and header rules cannot tell digits apart
(``textrules.is_digit_agnostic``), a rule matches a line and its shape at the same character
positions, so the shape's structuring, expressed as parts (literal text or a character range of
the line), rebuilds the line's own ts and message exactly. Masking works on the shape's
message: the masked text is ``mask(fold_digits(message))`` in every path.

Per line: the reading task folds digits in C over whole blocks and looks the shape's number up
in a dictionary (``ingest``); the JVM does a broadcast hash join on that number and substrings.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from l4spark.config import StructureConfig
from l4spark.io.frames import local_frame
from l4spark.parse.structure import BASE_YEAR, MONTHS, in_reference_year
from l4spark.parse.textrules import (
    YEARLESS,
    LineStructurer,
    Masker,
    MaskRule,
    Part,
    expand_parts,
    fold_digits,
    is_digit_agnostic,
    template_parts,
)

# A field is rebuilt from a fixed number of slots, each a literal then a substring of the line:
# fixed arity keeps the per-line expression a plain concat of substrings, which Spark compiles
# (a transform over an array of parts is interpreted: measured 4x slower on the demo fleet).
# Slots are byte ranges of the line's UTF-8 and literals are bytes: a substring of a Spark
# string counts characters by walking the line from its start, which was 30% of the events
# pass's JVM time on the bench fleet; a binary substring is a copy. Folding digits keeps every
# byte position, so a shape's byte ranges are its lines' byte ranges.
SLOTS = {"ts": 10, "msg": 4}


def _slot_fields(field: str) -> list[tuple[str, pa.DataType]]:
    return [item for i in range(SLOTS[field])
            for item in ((f"{field}_lit{i}", pa.binary()), (f"{field}_start{i}", pa.int32()),
                         (f"{field}_len{i}", pa.int32()))]


# The broadcast side of the per-line join: one row per shape, keyed by its number (the reading
# task looks each line's shape up and ships the number, not the text).
SHAPE_FIELDS = pa.schema([("shape_id", pa.int32()), ("event_id", pa.string()), ("level", pa.string()),
                          ("has_ts", pa.bool_()), ("ts_yearless", pa.bool_()), *_slot_fields("ts"),
                          *_slot_fields("msg")])
_MONTH_HEAD = re.compile(r"^(--|[0-9]{4}-)([A-Za-z]{3})-")


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


def original_masked(shapes: pd.DataFrame, masks: Iterable[MaskRule]) -> Iterator[tuple[str, str]]:
    """(masked, original) per row of ``shapes`` (columns shape, raw: a line of that shape,
    masked, msg_parts): the original is the line's own message masked without folding digits,
    what ``TemplateStore.observe`` needs for the display text. Driver side, one line per shape
    and job. A line that is not of its shape (never, unless the file changed between reads)
    is skipped."""
    masker = Masker(masks)
    for shape, raw, masked, parts in shapes[["shape", "raw", "masked", "msg_parts"]].itertuples(index=False):
        if isinstance(raw, str) and fold_digits(raw) == shape:
            yield masked, masker.mask(expand_parts(parts, raw))


def castable_ts_parts(shape: str, parts: Sequence[Part]) -> tuple[list[Part], bool]:
    """A shape's ts parts rewritten so that Spark's plain cast reads every line of the shape,
    and whether the time is year-less: a month name becomes its number (``2026-Nov-21`` ->
    ``2026-11-21``), a year-less time (``--11-26 ...``) is put in ``structure.BASE_YEAR``
    (moved to its job's year per line by ``structure.in_reference_year``). What is replaced
    holds no digit in the shape, so it is the same text in every line of the shape. Done once
    per shape here, so the per-line expression is a cast (``structure.with_timestamp`` does the
    same per line, for the per-line path)."""
    text = expand_parts(parts, shape)
    head = _MONTH_HEAD.match(text)
    if head and head.group(2).title() in MONTHS:
        month = f"{MONTHS.index(head.group(2).title()) + 1:02d}"
        parts = _replaced(parts, shape, head.start(2), head.end(2), month)
    yearless = expand_parts(parts, shape).startswith(YEARLESS)
    if yearless:
        parts = _replaced(parts, shape, 0, 1, str(BASE_YEAR))
    return _merged(parts), yearless


def _replaced(parts: Sequence[Part], shape: str, start: int, end: int, literal: str) -> list[Part]:
    """``parts`` with the characters [start, end) of their expansion replaced by ``literal``."""
    def piece(part: Part, i: int, j: int) -> Part:
        text, a, _ = part
        return (text[i:j], 0, 0) if text is not None else (None, a + i, a + j)

    out: list[Part] = []
    position, placed = 0, False
    for part in parts:
        size = len(part[0]) if part[0] is not None else part[2] - part[1]
        if position + size <= start or position >= end:
            out.append(part)
        else:
            if position < start:
                out.append(piece(part, 0, start - position))
            if not placed:
                out.append((literal, 0, 0))
                placed = True
            if position + size > end:
                out.append(piece(part, end - position, size))
        position += size
    return out


def _merged(parts: Sequence[Part]) -> list[Part]:
    """Adjacent literals joined, empty literals dropped."""
    out: list[Part] = []
    for part in parts:
        if part[0] == "":
            continue
        if part[0] is not None and out and out[-1][0] is not None:
            out[-1] = (out[-1][0] + part[0], 0, 0)
        else:
            out.append(part)
    return out


def _slots(field: str, parts: Sequence[Part], shape: str) -> dict:
    """Parts as slot columns: a literal slot has an empty substring, a span slot an empty
    literal; spans are byte ranges of ``shape`` (Spark's substring is 1-based); unused slots
    are empty."""
    if len(parts) > SLOTS[field]:
        raise ValueError(f"a shape's {field} has {len(parts)} parts; the shape path holds {SLOTS[field]}")
    to_byte = _byte_offsets(shape)
    row = {}
    for i in range(SLOTS[field]):
        literal, start, end = parts[i] if i < len(parts) else ("", 0, 0)
        if literal is not None:
            row.update({f"{field}_lit{i}": literal.encode("utf-8"), f"{field}_start{i}": 1, f"{field}_len{i}": 0})
        else:
            row.update({f"{field}_lit{i}": b"", f"{field}_start{i}": to_byte(start) + 1,
                        f"{field}_len{i}": to_byte(end) - to_byte(start)})
    return row


def _byte_offsets(text: str):
    """Character offset -> UTF-8 byte offset in ``text``."""
    if text.isascii():
        return lambda offset: offset
    ends = [0]
    for char in text:
        ends.append(ends[-1] + len(char.encode("utf-8")))
    return ends.__getitem__


def _rebuild(field: str) -> Column:
    """The field's text from the line's bytes (``raw_bytes``) and the shape's slots."""
    slots = [F.concat(F.col(f"{field}_lit{i}"), F.expr(f"substring(raw_bytes, {field}_start{i}, {field}_len{i})"))
             for i in range(SLOTS[field])]
    return F.concat(*slots).cast("string")


def with_shape_fields(lines: DataFrame, shapes: DataFrame, reference: Column | None = None) -> DataFrame:
    """Add ``event_id``, ``level``, ``ts``, ``message`` to lines (``raw``, ``shape_id``) from
    their shape's row (broadcast). A line whose shape is unknown (null ``shape_id``) gets nulls
    (the caller counts them).
    A year-less time takes its year from ``reference`` (``structure.in_reference_year``)."""
    slot_columns = [name for name in SHAPE_FIELDS.names if name[:3] in ("ts_", "msg")]
    # two projections: Spark keeps them apart rather than repeat the rebuild in the second
    ts = F.col("ts")
    return (
        lines.join(F.broadcast(shapes), on="shape_id", how="left")
        .withColumn("raw_bytes", F.col("raw").cast("binary"))
        .withColumn("ts", F.when(F.col("has_ts"), _rebuild("ts")).try_cast("timestamp"))
        .withColumn("ts", F.when(F.col("ts_yearless"), in_reference_year(ts, reference)).otherwise(ts))
        .withColumn("message", _rebuild("msg"))
        .drop("has_ts", "raw_bytes", *slot_columns)
    )


def shapes_frame(spark: SparkSession, table: pd.DataFrame) -> DataFrame:
    """The shape rows (with their ``event_id``) as a Spark DataFrame, through Arrow; a shape's
    ``shape_id`` is its position in ``table`` (``shape_numbers``)."""
    rows = []
    for i, r in enumerate(table.itertuples()):
        ts_parts, yearless = castable_ts_parts(r.shape, r.ts_parts)
        rows.append({"shape_id": i, "event_id": r.event_id, "level": r.level, "has_ts": bool(ts_parts),
                     "ts_yearless": yearless, **_slots("ts", ts_parts, r.shape), **_slots("msg", r.msg_parts, r.shape)})
    return local_frame(spark, pa.Table.from_pylist(rows, schema=SHAPE_FIELDS))


def shape_numbers(table: pd.DataFrame) -> dict[str, int]:
    """Each shape of ``table`` (``structure_shapes``' output) and its ``shape_id``."""
    return {shape: i for i, shape in enumerate(table["shape"])}
