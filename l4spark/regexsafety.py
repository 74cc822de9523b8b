"""Safety of user regexes (masks, wrapper and header rules, stage rules, fault signatures) (pure).

A regex from a conf file or the pattern library runs on every log line, in the JVM (Spark's
``regexp_replace`` / ``rlike``, java.util.regex, which has no time limit) and in Python. Both
are backtracking engines: one catastrophic pattern on one odd line stalls a whole run. So a
user regex is checked before it is used, and refused with the reason (``UnsafeRegexError``):

1. it must compile (Python ``re`` with ASCII and DOTALL, the flags that match Java);
2. static rule, on the parsed regex: an unbounded repeat (``*``, ``+``, ``{n,}``) must not be
   ambiguous. It is when its body holds another unbounded repeat whose characters can also
   start the body (``(a+)+``, ``(\\w+\\s?)+``, ``(?:.+)+``: a run of those characters splits
   into iterations in exponentially many ways), or when its body is an alternation whose
   branches can start with the same character (``(a|ab)*``, ``(\\d|\\w)+``). A separator that
   the inner repeat cannot eat keeps the split unique and is accepted (``(?:[.,:][0-9]+)*``,
   ``(?:/[a-z]+)+``). The rule is conservative: a few safe shapes are refused too;
3. trial: the regex is searched in adversarial strings (runs of its own characters, ``TRIAL_CHARS``
   long, ending in a character that breaks the match) and must finish all of them within
   ``TRIAL_SECONDS`` of CPU time. This catches what the static rule misses (polynomial blow-ups such as
   ``\\s*\\s*\\s*x``). The trial is interrupted by a CPU-time timer, which Python allows only in the
   main thread; elsewhere (or while the caller has a CPU timer of its own set) the static rule
   alone applies.

Lines themselves are bounded by ``ingest.max_line_bytes`` (longer lines are set aside), which
bounds the work of a linear or mildly super-linear regex on one line.
"""

from __future__ import annotations

import functools
import re
import signal
import string
import threading
import time

try:  # Python 3.11 names it re._parser; the public sre_parse alias is deprecated
    from re import _constants as sre_constants, _parser as sre_parse
except ImportError:  # pragma: no cover - other Python versions
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

TRIAL_CHARS = 2000
TRIAL_SECONDS = 0.5
MAX_REGEX_CHARS = 4000
FLAGS = re.ASCII | re.DOTALL

# The characters the analysis reasons about: ASCII plus a few stand-ins for everything else.
_UNIVERSE = frozenset(chr(c) for c in range(128)) | frozenset("é中\ufffd")
_UNBOUNDED = sre_constants.MAXREPEAT
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", None))
_CATEGORY = {
    sre_constants.CATEGORY_DIGIT: frozenset(string.digits),
    sre_constants.CATEGORY_SPACE: frozenset(" \t\n\r\f\v"),
    sre_constants.CATEGORY_WORD: frozenset(string.ascii_letters + string.digits + "_"),
}


class UnsafeRegexError(ValueError):
    """A regex does not compile or could backtrack catastrophically; the message says why."""


@functools.lru_cache(maxsize=4096)
def check_regex(pattern: str, trial: bool = True) -> re.Pattern[str]:
    """The compiled regex, or UnsafeRegexError saying why it is refused (rules: module doc);
    ``trial=False`` skips the timed trial (rules 1 and 2 only)."""
    if not isinstance(pattern, str):
        raise UnsafeRegexError(f"a regex must be a string, found {type(pattern).__name__}")
    if len(pattern) > MAX_REGEX_CHARS:
        raise UnsafeRegexError(f"regex longer than {MAX_REGEX_CHARS} characters")
    try:
        compiled = re.compile(pattern, FLAGS)
        tree = sre_parse.parse(pattern, FLAGS)
    except (re.error, OverflowError, RecursionError) as exc:
        raise UnsafeRegexError(f"regex does not compile: {exc} in {pattern!r}") from exc
    problem = _ambiguous_repeat(tree) or _overlapping_repeated_alternation(pattern)
    if problem:
        raise UnsafeRegexError(f"regex {pattern!r} nests unbounded quantifiers ambiguously ({problem}): it can "
                               "backtrack catastrophically; make the repeated part start with a character "
                               "the inner repeat cannot match, or bound it")
    if trial and _trial_seconds(compiled, tree) is None:
        raise UnsafeRegexError(f"regex {pattern!r} took more than {TRIAL_SECONDS}s on a {TRIAL_CHARS}-character "
                               "adversarial line (catastrophic backtracking)")
    return compiled


# ---- static rule ------------------------------------------------------------------------------


def _ambiguous_repeat(items) -> str | None:
    """A description of the first ambiguous unbounded repeat in the parsed ``items``, or None."""
    for op, av in items:
        if op in _REPEATS and op is not None:
            low, high, body = av
            if high == _UNBOUNDED:
                starts, _ = _first(body)
                for inner, chars in _unbounded_repeats(body):
                    if chars & starts and not _has_separator(body, inner, chars):
                        return "a repeated group holds a repeat that can also eat the start of the next iteration"
                branches = _single_branch(body)
                if branches is not None:
                    seen: frozenset[str] = frozenset()
                    for branch in branches:
                        first, _ = _first(branch)
                        if first & seen:
                            return "a repeated alternation whose branches can start with the same character"
                        seen |= first
            found = _ambiguous_repeat(body)
            if found:
                return found
        else:
            for child in _children(op, av):
                found = _ambiguous_repeat(child)
                if found:
                    return found
    return None


def _overlapping_repeated_alternation(pattern: str) -> str | None:
    """Python's parser merges ``(\\d|\\w)`` into one class and factors ``(a|ab)`` into
    ``a(|b)``; Java does neither, so alternations under an unbounded repeat are read from the text:
    each branch is parsed alone and the branches' first characters must not overlap."""
    for branches in _repeated_alternations(pattern):
        seen: frozenset[str] = frozenset()
        for branch in branches:
            try:
                first, _ = _first(sre_parse.parse(branch, FLAGS))
            except (re.error, OverflowError, RecursionError):
                first = _UNIVERSE  # a branch that needs the rest of the regex: assume the worst
            if first & seen:
                return "a repeated alternation whose branches can start with the same character"
            seen |= first
    return None


def _repeated_alternations(pattern: str) -> list[list[str]]:
    """The top-level branches of every group followed by ``*``, ``+`` or ``{n,}``."""
    found, stack, in_class, i = [], [], False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]" or pattern[i + 1:i + 3] == "^]":
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif char == "(":
            body_start = i + 1
            if pattern.startswith("(?", i):  # (?:  (?P<name>  (?=  (?<=  ... : skip to the body
                head = re.match(r"\(\?(?:P<[^>]*>|<[=!]|[=!:>]|[a-zA-Z-]*:|<[^>]*>)?", pattern[i:])
                body_start = i + (head.end() if head else 2)
            stack.append((body_start, []))
        elif char == "|" and stack:
            stack[-1][1].append(i)
        elif char == ")" and stack:
            start, bars = stack.pop()
            if bars and re.match(r"[*+]|\{[0-9]*,\}", pattern[i + 1:]):
                cuts = [start - 1, *bars, i]
                found.append([pattern[a + 1:b] for a, b in zip(cuts, cuts[1:])])
        i += 1
    return found


def _children(op, av) -> list:
    if op == sre_constants.SUBPATTERN:
        return [av[-1]]
    if op == sre_constants.BRANCH:
        return list(av[1])
    if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
        return [av[1]]
    if op == sre_constants.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    if op in _REPEATS and op is not None:
        return [av[2]]
    atomic = getattr(sre_constants, "ATOMIC_GROUP", None)
    if atomic is not None and op == atomic:
        return [av]
    return []


def _single_branch(body) -> list | None:
    """The alternatives when ``body`` is (a group around) one alternation, else None."""
    items = list(body)
    while len(items) == 1 and items[0][0] == sre_constants.SUBPATTERN:
        items = list(items[0][1][-1])
    if len(items) == 1 and items[0][0] == sre_constants.BRANCH:
        return list(items[0][1][1])
    return None


def _first(items) -> tuple[frozenset[str], bool]:
    """(characters that can start a match of ``items``, whether ``items`` can match empty)."""
    starts: frozenset[str] = frozenset()
    for op, av in items:
        first, nullable = _first_of(op, av)
        starts |= first
        if not nullable:
            return starts, False
    return starts, True


def _first_of(op, av) -> tuple[frozenset[str], bool]:
    if op in (sre_constants.LITERAL, sre_constants.NOT_LITERAL, sre_constants.IN, sre_constants.ANY):
        return _chars_of(op, av), False
    if op == sre_constants.SUBPATTERN:
        return _first(av[-1])
    if op == sre_constants.BRANCH:
        firsts = [_first(b) for b in av[1]]
        return frozenset().union(*(f for f, _ in firsts)), any(n for _, n in firsts)
    if op in _REPEATS and op is not None:
        first, nullable = _first(av[2])
        return first, nullable or av[0] == 0
    if op in (sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS):
        return _UNIVERSE, True
    atomic = getattr(sre_constants, "ATOMIC_GROUP", None)
    if atomic is not None and op == atomic:
        return _first(av)
    return frozenset(), True  # anchors and lookarounds match no character


def _unbounded_repeats(items) -> list[tuple[object, frozenset[str]]]:
    """(node, characters it can match) of every unbounded repeat inside ``items``."""
    found = []
    for op, av in items:
        if op in _REPEATS and op is not None and av[1] == _UNBOUNDED:
            found.append((av, _all_chars(av[2])))
        for child in _children(op, av):
            found += _unbounded_repeats(child)
    return found


def _has_separator(items, inner, chars: frozenset[str]) -> bool:
    """True when every match of ``items`` needs a character that the repeat ``inner`` cannot
    match (``[\\w-]+\\.``: the dot): an iteration then ends at a fixed place and the iterations
    of the outer repeat cannot be re-split, whatever ``inner`` takes."""
    for op, av in items:
        if op in (sre_constants.LITERAL, sre_constants.NOT_LITERAL, sre_constants.IN, sre_constants.ANY):
            if _chars_of(op, av) - chars == _chars_of(op, av):
                return True
        elif op == sre_constants.SUBPATTERN:
            if _has_separator(av[-1], inner, chars):
                return True
        elif op in _REPEATS and op is not None and av is not inner and av[0] > 0:
            if _has_separator(av[2], inner, chars):
                return True
    return False


def _all_chars(items) -> frozenset[str]:
    found: frozenset[str] = frozenset()
    for op, av in items:
        if op in (sre_constants.LITERAL, sre_constants.NOT_LITERAL, sre_constants.IN, sre_constants.ANY):
            found |= _chars_of(op, av)
        elif op in (sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS):
            found |= _UNIVERSE
        if op not in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            for child in _children(op, av):
                found |= _all_chars(child)
    return found


def _chars_of(op, av) -> frozenset[str]:
    if op == sre_constants.LITERAL:
        return frozenset(chr(av)) & _UNIVERSE or frozenset("é")
    if op == sre_constants.NOT_LITERAL:
        return _UNIVERSE - {chr(av)}
    if op == sre_constants.ANY:
        return _UNIVERSE
    negate = False
    chars: set[str] = set()
    for item_op, item_av in av:
        if item_op == sre_constants.NEGATE:
            negate = True
        elif item_op == sre_constants.LITERAL:
            chars.add(chr(item_av))
        elif item_op == sre_constants.RANGE:
            low, high = item_av
            chars.update(c for c in _UNIVERSE if low <= ord(c) <= high)
        elif item_op == sre_constants.CATEGORY:
            chars.update(_category(item_av))
    result = frozenset(chars) & _UNIVERSE
    return _UNIVERSE - result if negate else result


def _category(category) -> frozenset[str]:
    name = str(category).removeprefix("CATEGORY_")
    for positive, members in _CATEGORY.items():
        if name == str(positive).removeprefix("CATEGORY_"):
            return members
        if name == "NOT_" + str(positive).removeprefix("CATEGORY_"):
            return _UNIVERSE - members
    return _UNIVERSE  # line breaks and the like: counted as any character (conservative)


# ---- trial ------------------------------------------------------------------------------------


class _TrialTimeout(Exception):
    pass


def _trial_seconds(compiled: re.Pattern[str], tree) -> float | None:
    """CPU seconds the adversarial trial took, or None when it ran over ``TRIAL_SECONDS``.

    The budget is the process's CPU time (``ITIMER_VIRTUAL``), not the wall clock: on a busy
    machine (an Airflow worker, a driver beside other jobs) a wall-clock budget refused a regex
    that passes on an idle one, and the default config then failed to load (session 34)."""
    lines = _adversarial_lines(tree)
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_VIRTUAL)[0] > 0:
        return 0.0  # no timer to interrupt with (not the main thread, or the caller's CPU timer is set)

    def expire(_signum, _frame):
        raise _TrialTimeout

    previous = signal.signal(signal.SIGVTALRM, expire)
    started = time.process_time()
    try:
        signal.setitimer(signal.ITIMER_VIRTUAL, TRIAL_SECONDS)
        try:
            for line in lines:
                compiled.search(line)
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    except _TrialTimeout:
        return None
    finally:
        signal.signal(signal.SIGVTALRM, previous)
    return time.process_time() - started


def _adversarial_lines(tree) -> list[str]:
    """Runs of each character the regex names (one per class), of the literal text in order,
    and of a word-space pair, each ending in a character it probably does not expect."""
    units: list[str] = []
    literal = "".join(chr(av) for op, av in _flatten(tree) if op == sre_constants.LITERAL)
    for op, av in _flatten(tree):
        if op in (sre_constants.LITERAL, sre_constants.IN, sre_constants.NOT_LITERAL, sre_constants.ANY):
            sample = sorted(_chars_of(op, av) & set(string.printable))
            if sample and sample[0] not in units:
                units.append(sample[0])
    units = units[:16] + [u for u in (literal, "a ", "a") if u]
    return [(unit * (TRIAL_CHARS // len(unit) + 1))[:TRIAL_CHARS] + "\x00\n!" for unit in units]


def _flatten(items):
    for op, av in items:
        yield op, av
        for child in _children(op, av):
            yield from _flatten(child)
