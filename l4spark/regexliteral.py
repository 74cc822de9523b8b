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

``required_literals`` also reads alternations (session 56): where every branch of one has a
literal of its own, a match contains one of them, and a line holding none cannot match
(``death signal|SignalException: Process``, torchrun's ``Failures|Root Cause ...``).
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
    tree = _parsed(pattern)
    if tree is None:
        return None
    best = max(_literal_runs(tree), key=len, default="")
    return best if len(best) >= MIN_LITERAL_CHARS else None


@functools.lru_cache(maxsize=4096)
def required_literals(pattern: str) -> tuple[str, ...] | None:
    """Literals of which every match of ``pattern`` contains at least one: ``(required_literal,)``
    where the pattern has one; else, for an alternation each of whose branches has literals of
    its own (``death signal|SignalException: Process``, a group of them, branches within
    branches), the branches' literals together; None when neither is known. A line that holds
    none of them cannot match."""
    single = required_literal(pattern)
    if single is not None:
        return (single,)
    tree = _parsed(pattern)
    return None if tree is None else _best_set(tree)


def _parsed(pattern: str):
    """The regex as Python's parser reads it with Java's flags, or None when it cannot be read
    alike (Java-only syntax) or its literals are no literal text (ignoring case, verbose)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = sre_parse.parse(pattern, FLAGS)
    except (re.error, OverflowError, RecursionError, Warning):
        return None
    return None if tree.state.flags & (re.IGNORECASE | re.VERBOSE) else tree


def _best_set(items) -> tuple[str, ...] | None:
    """The most selective of the literal sets a match of the sequence ``items`` must hit: a
    single literal run first (the longest), else the set whose shortest literal is longest."""
    runs = [run for run in _literal_runs(items) if len(run) >= MIN_LITERAL_CHARS]
    if runs:
        return (max(runs, key=len),)
    sets = _branch_sets(items)
    return max(sets, key=lambda found: (min(map(len, found)), -len(found)), default=None)


def _branch_sets(items) -> list[tuple[str, ...]]:
    """The literal sets of the alternations a match of the sequence ``items`` passes through
    (in the places ``_literal_runs`` reads: the top level, plain groups, repeats of at least
    one): an alternation gives one when every branch has its own (``_best_set``)."""
    sets = []
    for op, av in items:
        if op is sre_constants.BRANCH:
            found = [_best_set(branch) for branch in av[1]]
            if all(found):
                sets.append(tuple(dict.fromkeys(literal for each in found for literal in each)))
        elif op is sre_constants.SUBPATTERN and not av[1] and not av[2]:
            sets.extend(_branch_sets(av[3]))
        elif op in _REPEATS and av[0] >= 1:
            sets.extend(_branch_sets(av[2]))
        elif _ATOMIC is not None and op is _ATOMIC:
            sets.extend(_branch_sets(av))
    return sets


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
