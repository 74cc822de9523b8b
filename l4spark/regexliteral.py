"""The literal text every match of a regex contains (pure).

A rule regex (stage markers, iteration lines, frame and teardown lines, timers) runs on every
line of a job, and nearly every line matches none: a Java regex search then tries the pattern at
each position of the line. A required literal lets a caller skip that search with a plain
substring test (``regexcolumns.rlike``), which is exact: a line without the literal cannot match.

``required_literal`` reads the regex as Python parses it (ASCII and DOTALL, the flags that match
Java: ``regexsafety.FLAGS``) and keeps only what both engines read alike: printable literal
characters in sequence, at the top level or inside a plain group or a repeat of at least one.
Anything else (a class, an alternation, an anchor, an optional part, a group with flags) ends a
run. A regex Python cannot parse (Java-only syntax such as ``\\p{L}`` or ``\\Q...\\E``), or one
that ignores case or white space, has no required literal: its callers run it as it is.
"""

from __future__ import annotations

import functools
import re
import warnings

from l4spark.regexsafety import FLAGS, sre_constants, sre_parse

# a shorter literal filters too little to pay for its own test
MIN_LITERAL_CHARS = 3
_REPEATS = tuple(op for op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT,
                               getattr(sre_constants, "POSSESSIVE_REPEAT", None)) if op is not None)
_ATOMIC = getattr(sre_constants, "ATOMIC_GROUP", None)


@functools.lru_cache(maxsize=4096)
def required_literal(pattern: str) -> str | None:
    """The longest literal every match of ``pattern`` contains (at least ``MIN_LITERAL_CHARS``
    characters), or None when no such literal is known."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = sre_parse.parse(pattern, FLAGS)
    except (re.error, OverflowError, RecursionError, Warning):
        return None
    if tree.state.flags & (re.IGNORECASE | re.VERBOSE):
        return None
    best = max(_literal_runs(tree), key=len, default="")
    return best if len(best) >= MIN_LITERAL_CHARS else None


def _literal_runs(items) -> list[str]:
    """Every run of literal text that a match of the sequence ``items`` contains."""
    runs, current = [], []
    for op, av in items:
        if op is sre_constants.LITERAL and 0x20 <= av != 0x7F:
            current.append(chr(av))
            continue
        runs.append("".join(current))
        current = []
        if op is sre_constants.SUBPATTERN and not av[1] and not av[2]:
            runs.extend(_literal_runs(av[3]))          # a plain group: its own runs
        elif op in _REPEATS and av[0] >= 1:
            runs.extend(_literal_runs(av[2]))          # repeated at least once: its body's runs
        elif _ATOMIC is not None and op is _ATOMIC:
            runs.extend(_literal_runs(av))
    runs.append("".join(current))
    return runs
