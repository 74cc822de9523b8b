"""Rule regexes as Spark columns, each behind a substring test of its required literal.

Most lines of a job match none of the rule regexes run on them (some 60 in the diagnosis: stage
and iteration markers, frame and teardown lines, timers, elapsed-time lines), and a Java regex
search that fails tries the pattern at every position of the line. ``rlike`` first asks whether
the line contains the literal every match must contain (``regexliteral.required_literal``), a
byte search, and runs the regex only on the lines that do; an alternation whose every branch
has a literal of its own is tested for any of them (``regexliteral.required_literals``). The
value is ``Column.rlike``'s on every line, null for a null string included: ``And`` is false
when the test is, and Spark does not evaluate its right side then.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from l4spark.regexliteral import required_literals


def _may_match(text: Column, pattern: str) -> Column | None:
    """True where ``text`` holds one of the literals every match of ``pattern`` needs one of
    (null for a null string), or None when no such literal is known: a false row cannot match."""
    literals = required_literals(pattern)
    if literals is None:
        return None
    found = text.contains(literals[0])
    for literal in literals[1:]:
        found = found | text.contains(literal)
    return found


def rlike(column: Column | str, pattern: str) -> Column:
    """``column.rlike(pattern)``: true where the string contains a match of ``pattern`` (Java
    regex), false where not, null for a null string; the regex runs only on strings that contain
    one of its required literals."""
    text = F.col(column) if isinstance(column, str) else column
    gate = _may_match(text, pattern)
    match = text.rlike(pattern)
    return match if gate is None else gate & match


def any_rlike(column: Column | str, patterns) -> Column:
    """True where the string contains a match of any of ``patterns`` (each as ``rlike``), false
    otherwise (also for a null string or no patterns)."""
    hit: Column = F.lit(False)
    for pattern in patterns:
        hit = hit | F.coalesce(rlike(column, pattern), F.lit(False))
    return hit


def extract_all(column: Column | str, pattern: str, group: int) -> Column:
    """``regexp_extract_all(column, pattern, group)``: every match's ``group`` (an empty array
    where none, null for a null string); the regex runs only on strings that contain its
    required literal."""
    text = F.col(column) if isinstance(column, str) else column
    found = F.regexp_extract_all(text, F.lit(pattern), group)
    gate = _may_match(text, pattern)
    if gate is None:
        return found
    return F.when(text.isNull() | gate, found).otherwise(F.array().cast("array<string>"))


def replace_all(column: Column | str, pattern: str, replacement: str) -> Column:
    """``regexp_replace(column, pattern, replacement)`` (null for a null string); the regex runs
    only on strings that contain its required literal, the others are returned as they are."""
    text = F.col(column) if isinstance(column, str) else column
    replaced = F.regexp_replace(text, F.lit(pattern), F.lit(replacement))
    gate = _may_match(text, pattern)
    return replaced if gate is None else F.when(gate, replaced).otherwise(text)


def extract_first(column: Column | str, pattern: str, group: int = 1) -> Column:
    """``regexp_extract(column, pattern, group)``: the first match's ``group``, "" where none
    (null for a null string); the regex runs only on strings that contain its required literal."""
    text = F.col(column) if isinstance(column, str) else column
    found = F.regexp_extract(text, pattern, group)
    gate = _may_match(text, pattern)
    return found if gate is None else F.when(text.isNull() | gate, found).otherwise(F.lit(""))
