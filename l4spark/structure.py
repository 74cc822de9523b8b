"""Structure and mask lines in the JVM: Spark column expressions built from the conf rules.

Each step is a DataFrame -> DataFrame transformation for ``df.transform``. No Python UDF: the
rules of ``textrules`` are turned into ``regexp_replace`` chains (see that module for the
marker trick that gets ts, level and message out of one regex evaluation per rule).
"""

from __future__ import annotations

from functools import reduce
from itertools import chain
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from l4spark.config import StructureConfig
from l4spark.textrules import (
    FIELD_SEP,
    HEADER_MARK,
    MaskRule,
    fuse_masks,
    header_replacement_java,
    java_regex,
    java_replacement,
    wrapper_strip_java,
    wrapper_ts_java,
)


def with_structure(lines: DataFrame, conf: StructureConfig) -> DataFrame:
    """Add ``ts`` (timestamp, UTC), ``level`` (normalised, e.g. WARN) and ``message``.

    Input column: ``raw`` (string). A line that no header rule matches keeps its peeled text
    as ``message`` with a null level; ``ts`` is the header's time, else the wrapper's, else
    null (continuation lines such as tracebacks have none). A null ``raw`` gives nulls.
    """
    raw = F.col("raw")
    wrapper_ts = _first_nonempty(
        [_marked_value(F.regexp_replace(raw, F.lit(regex), F.lit(HEADER_MARK + repl)))
         for regex, repl in wrapper_ts_java(conf.wrappers, conf.max_wrapper_depth)]
    )
    strip = wrapper_strip_java(conf.wrappers, conf.max_wrapper_depth)
    peeled = F.regexp_replace(raw, F.lit(strip), F.lit("")) if strip else raw
    headed = reduce(
        lambda text, rule: F.regexp_replace(text, F.lit(rule[0]), F.lit(rule[1])),
        [header_replacement_java(rule) for rule in conf.headers],
        F.col("_peeled"),
    )
    # Staged columns, so that each regex chain is evaluated once per line.
    parts = F.col("_parts")
    matched = F.col("_headed").startswith(HEADER_MARK)
    header_ts = F.regexp_replace(parts.getItem(0).substr(F.lit(2), F.lit(1 << 20)), r"[. ]+$", "")
    level_text = F.upper(F.trim(parts.getItem(1)))
    ts_text = F.coalesce(F.when(matched & (header_ts != ""), header_ts), F.col("_wrapper_ts"))
    return (
        lines
        .withColumn("_wrapper_ts", wrapper_ts)
        .withColumn("_peeled", peeled)
        .withColumn("_headed", headed)
        .withColumn("_parts", F.split(F.col("_headed"), FIELD_SEP, 3))
        .withColumn("ts", ts_text.try_cast("timestamp"))
        .withColumn("level", F.when(matched & (level_text != ""), _normalize_level(level_text, conf.levels)))
        .withColumn("message", F.when(matched, parts.getItem(2)).otherwise(F.col("_peeled")))
        .drop("_wrapper_ts", "_peeled", "_headed", "_parts")
    )


def with_masked(lines: DataFrame, masks: Sequence[MaskRule], fold_digits: bool = True) -> DataFrame:
    """Add ``masked``: ``message`` (digits folded to 0 when ``fold_digits``, as in
    ``textrules.fold_digits``) with the mask rules applied as ``fuse_masks`` passes (null stays
    null)."""
    message = F.regexp_replace("message", "[1-9]", "0") if fold_digits else F.col("message")
    masked = reduce(
        lambda text, rule: F.regexp_replace(text, F.lit(java_regex(rule[0])), F.lit(java_replacement(rule[1]))),
        fuse_masks(masks),
        message,
    )
    return lines.withColumn("masked", masked)


def _marked_value(replaced: Column) -> Column:
    """The text after HEADER_MARK when the regex matched (the line was replaced), else null."""
    return F.when(replaced.startswith(HEADER_MARK), F.regexp_replace(replaced.substr(F.lit(2), F.lit(1 << 20)),
                                                                     r"[. ]+$", ""))


def _first_nonempty(values: list[Column]) -> Column:
    if not values:
        return F.lit(None).cast("string")
    return F.coalesce(*[F.when(v != "", v) for v in values])


def _normalize_level(level_text: Column, levels: dict[str, str]) -> Column:
    if not levels:
        return level_text
    mapping = F.create_map(*[F.lit(x) for x in chain.from_iterable(sorted(levels.items()))])
    return F.coalesce(F.try_element_at(mapping, level_text), level_text)
