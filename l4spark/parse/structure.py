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
from l4spark.parse.textrules import (
    FIELD_SEP,
    HEADER_MARK,
    YEARLESS,
    MaskRule,
    fuse_masks,
    header_replacement_java,
    java_regex,
    java_replacement,
    wrapper_strip_java,
    wrapper_ts_java,
)


# What an absent optional group leaves at the end of a ts text (textrules.clean_ts).
_TS_TAIL = r"[. -]+$"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# A year-less time more than this far from the job's reference time is in the year before or after.
_HALF_YEAR_DAYS = 183


def with_structure(lines: DataFrame, conf: StructureConfig, reference: Column | None = None) -> DataFrame:
    """Add ``ts`` (timestamp, UTC), ``level`` (normalised, e.g. WARN) and ``message``.

    Input column: ``raw`` (string). A line that no header rule matches keeps its peeled text
    as ``message`` with a null level; ``ts`` is the header's time, else the wrapper's, else
    null (continuation lines such as tracebacks have none). A null ``raw`` gives nulls. A
    header time without a year takes it from ``reference`` (see ``with_timestamp``).
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
    header_ts = F.regexp_replace(parts.getItem(0).substr(F.lit(2), F.lit(1 << 20)), _TS_TAIL, "")
    level_text = F.upper(F.trim(parts.getItem(1)))
    has_header_ts = matched & (header_ts != "")
    # as textrules.preferred_ts: a year-less header time yields to the wrapper's
    ts_text = F.coalesce(F.when(has_header_ts & ~header_ts.startswith(YEARLESS), header_ts), F.col("_wrapper_ts"),
                         F.when(has_header_ts, header_ts))
    return (
        lines
        .withColumn("_wrapper_ts", wrapper_ts)
        .withColumn("_peeled", peeled)
        .withColumn("_headed", headed)
        .withColumn("_parts", F.split(F.col("_headed"), FIELD_SEP, 3))
        .transform(lambda frame: with_timestamp(frame, ts_text, reference))
        .withColumn("level", F.when(matched & (level_text != ""), _normalize_level(level_text, conf.levels)))
        .withColumn("message", F.when(matched, parts.getItem(2)).otherwise(F.col("_peeled")))
        .drop("_wrapper_ts", "_peeled", "_headed", "_parts")
    )


def with_timestamp(lines: DataFrame, ts_text: Column, reference: Column | None = None,
                   name: str = "ts") -> DataFrame:
    """Add ``name``: ``ts_text`` as a timestamp (UTC session time zone), null when it is not a time.

    Besides what Spark casts, two forms that log headers write: a month name
    (``2026-Nov-21 09:12:13``, dmesg -T) and no year (``--11-26 18:02:25.2``, ``--Nov-21 ...``:
    glog, c10, syslog). A year-less time takes the year of ``reference`` (``in_reference_year``).
    Only texts the plain cast refuses take the slow path (a regex and a month lookup). Staged
    columns: each expression is evaluated once per line, and the stage's generated code stays
    small enough for the JVM to compile (``in_reference_year``).
    """
    staged = {part: f"_{name}_{part}" for part in ("text", "fast", "numeric", "slow")}
    text, fast, numeric, slow = (F.col(column) for column in staged.values())
    head = F.regexp_extract(text, r"^(--|[0-9]{4}-)[A-Za-z]{3}-", 1)
    month = F.try_element_at(F.create_map(*[F.lit(x) for i, month_name in enumerate(MONTHS)
                                            for x in (month_name, f"{i + 1:02d}")]),
                             F.initcap(text.substr(F.length(head) + 1, F.lit(3))))
    yearless = numeric.startswith(YEARLESS)
    return (
        lines
        .withColumn(staged["text"], ts_text)
        .withColumn(staged["fast"], text.try_cast("timestamp"))
        .withColumn(staged["numeric"], F.when(fast.isNull() & text.isNotNull(), F.when(
            head != "", F.concat(head, month, text.substr(F.length(head) + 4, F.lit(1 << 20)))).otherwise(text)))
        .withColumn(staged["slow"], F.when(yearless, F.concat(F.lit(str(BASE_YEAR)), numeric.substr(
            F.lit(2), F.lit(1 << 20)))).otherwise(numeric).try_cast("timestamp"))
        .withColumn(name, F.coalesce(fast, F.when(yearless, in_reference_year(slow, reference)).otherwise(slow)))
        .drop(*staged.values())
    )


# A year-less time is cast in this leap year (so that 29 February parses), then moved.
BASE_YEAR = 2000


def in_reference_year(ts: Column, reference: Column | None = None) -> Column:
    """``ts``, a year-less time cast in ``BASE_YEAR``, moved to the year of ``reference`` (a
    timestamp column: the job's start), or to the year before or after when that puts it within
    half a year of the reference (a job started on 31 December logs ``--01-01``). No reference:
    the current time, as syslog readers do. 29 February in a year that has none: null.

    Timestamp arithmetic only, so that the per-line expression stays small: Spark compiles a
    stage into one Java method, and the JVM does not JIT a method past 8000 bytes of bytecode
    (a three-way cast of the rebuilt text made the shape path's write 20 s slower on the
    bench fleet, `docs/parsing.md`).
    """
    reference = F.current_timestamp() if reference is None else F.coalesce(reference, F.current_timestamp())

    def moved(years: int) -> Column:
        return ts + F.make_ym_interval(F.year(reference) - BASE_YEAR + years, F.lit(0))

    half_year = F.expr(f"INTERVAL {_HALF_YEAR_DAYS} DAYS")
    same_year = moved(0)
    result = (F.when(same_year > reference + half_year, moved(-1))
              .when(same_year < reference - half_year, moved(1))
              .otherwise(same_year))
    # adding years to 29 February gives 28 February in a common year: that day is no time
    return F.when(F.dayofmonth(result) == F.dayofmonth(ts), result)


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
                                                                     _TS_TAIL, ""))


def _first_nonempty(values: list[Column]) -> Column:
    if not values:
        return F.lit(None).cast("string")
    return F.coalesce(*[F.when(v != "", v) for v in values])


def _normalize_level(level_text: Column, levels: dict[str, str]) -> Column:
    if not levels:
        return level_text
    mapping = F.create_map(*[F.lit(x) for x in chain.from_iterable(sorted(levels.items()))])
    return F.coalesce(F.try_element_at(mapping, level_text), level_text)
