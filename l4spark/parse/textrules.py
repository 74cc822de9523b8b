"""Line rules shared by the JVM hot path and the Python reference: wrappers, headers, masks.

Every rule is written once (in conf) in the regex syntax that Python ``re`` and Java regex
share, and compiled two ways: ``java_*`` strings for Spark's ``regexp_replace`` /
``regexp_extract`` and Python patterns for the single-process reference used by tests, the
drain3 baseline and the parsing benchmark. The two must give the same result on every line;
``tests/test_structure_parity.py`` checks that on real and generated lines.

Structuring a line (both engines):
1. peel wrappers: one anchored regex strips up to ``max_depth`` wrapper prefixes of any kind;
   the first wrapper that carries a timestamp gives ``wrapper_ts``;
2. header: rules are tried in order; the first that matches the whole peeled text builds
   ``ts``, ``level`` and ``message`` from its field templates; no match keeps the text whole.
3. ts: the header's time, else the wrapper's. A header time without a year (glog, c10, syslog
   write none) is written ``--MM-DD hh:mm:ss`` (ISO 8601's year-less form; ``--Nov-21`` with a
   month name is accepted too) and yields to a wrapper time; the year comes later, from the
   job (``structure.in_reference_year``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from l4spark.regexsafety import check_regex

# Java named groups allow letters and digits only, starting with a letter.
_GROUP_NAME = re.compile(r"\(\?P<([^>]*)>")
_JAVA_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_TEMPLATE_FIELD = re.compile(r"\{([^{}]*)\}")
# Markers of a matched header inside the JVM result string (see header_replacement_java).
HEADER_MARK = "\x02"
FIELD_SEP = "\x01"
# A ts text starting so has no year (see the module doc).
YEARLESS = "--"


DIGIT_BYTES = bytes.maketrans(b"123456789", b"000000000")


def fold_digits(text: str) -> str:
    """Every digit as 0: lines that differ only in digits (times, counters, ids, host numbers)
    get one shape (``ingest`` ships it with each line; ``structure.with_masked`` folds in the JVM)."""
    # on the UTF-8 bytes: str.translate leaves its fast path for the whole text at the first
    # non-ASCII character (a tqdm bar), 6x slower on the bench fleet; a UTF-8 sequence holds no
    # ASCII digit byte, so the bytes fold exactly the characters 1-9
    return text.encode("utf-8", "surrogatepass").translate(DIGIT_BYTES).decode("utf-8", "surrogatepass")


# Java's \s (no UNICODE_CHARACTER_CLASS): what ``normal_pool.with_message_form`` collapses
_JAVA_SPACE_RUNS = re.compile("[ \t\n\x0b\f\r]+")


def message_form(masked: str | None) -> str | None:
    """A masked message as Drain's tokens see it: runs of white space (Java's ``\\s``) as one
    space, leading and trailing spaces trimmed, as ``normal_pool.with_message_form`` does in the JVM."""
    return None if masked is None else _JAVA_SPACE_RUNS.sub(" ", masked).strip(" ")


_DIGIT_NEUTRAL = re.compile(r"\\d|0-9|\\[xu][0-9a-fA-F]+|\{[0-9,]*\}|\\[1-9]")


def is_digit_agnostic(pattern: str) -> bool:
    """True when the regex cannot tell one digit from another (no literal digit, no partial
    digit range), so that it matches a line and its ``fold_digits`` at the same places."""
    return not re.search(r"[0-9]", _DIGIT_NEUTRAL.sub("", pattern))


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a conf regex for Python with the flags that make it behave as in Java."""
    try:
        return re.compile(pattern, re.ASCII | re.DOTALL)
    except re.error as exc:
        raise ValueError(f"regex does not compile: {exc} in {pattern!r}") from exc


def java_regex(pattern: str) -> str:
    """The same regex in Java syntax: (?P<n>...) -> (?<n>...), (?P=n) -> \\k<n>, DOTALL on."""
    converted = pattern.replace("(?P<", "(?<")
    converted = re.sub(r"\(\?P=([A-Za-z][A-Za-z0-9]*)\)", r"\\k<\1>", converted)
    return "(?s)" + converted


def _without_names(pattern: str) -> str:
    """Named groups as non-capturing groups, so several rules can be joined in one regex."""
    return _GROUP_NAME.sub("(?:", pattern)


def _check_names(pattern: str, where: str) -> set[str]:
    names = set(_GROUP_NAME.findall(pattern))
    bad = sorted(n for n in names if not _JAVA_NAME.match(n))
    if bad:
        raise ValueError(f"{where}: group names must be letters and digits (Java rule), found {bad}")
    return names


def _check_template(template: str, names: set[str], where: str) -> None:
    unknown = sorted(set(_TEMPLATE_FIELD.findall(template)) - names)
    if unknown:
        raise ValueError(f"{where}: template {template!r} names groups the pattern lacks: {unknown}")


def _java_template(template: str) -> str:
    parts = _TEMPLATE_FIELD.split(template)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append("${" + part + "}")
        else:
            out.append(part.replace("\\", "\\\\").replace("$", "\\$"))
    return "".join(out)


def template_parts(template: str) -> int:
    """How many literal and field parts a conf field template expands to, at most."""
    return sum(1 for piece in _TEMPLATE_FIELD.split(template) if piece)


def java_replacement(literal: str) -> str:
    """A literal replacement text in Java's replacement syntax ($ and \\ escaped)."""
    return literal.replace("\\", "\\\\").replace("$", "\\$")


def _expand(template: str, match: re.Match[str]) -> str:
    return _TEMPLATE_FIELD.sub(lambda m: match.group(m.group(1)) or "", template)


@dataclass(frozen=True)
class WrapperRule:
    """A launcher/collector prefix (e.g. ``[default3]:``), optionally carrying a timestamp."""

    name: str
    pattern: str
    ts: str = ""

    def __post_init__(self) -> None:
        check_regex(self.as_used(), trial=False)  # the timed trial: config (structure.regex_trial)
        names = _check_names(self.pattern, f"wrapper '{self.name}'")
        _check_template(self.ts, names, f"wrapper '{self.name}' ts")

    def as_used(self) -> str:
        """The regex as it runs: peeled from the start of a line."""
        return "^(?:" + self.pattern + ")"


@dataclass(frozen=True)
class HeaderRule:
    """A framework header: the fields ts, level, message built from named groups."""

    name: str
    pattern: str
    ts: str = ""
    level: str = ""
    message: str = "{msg}"

    def __post_init__(self) -> None:
        check_regex(self.as_used(), trial=False)  # the timed trial: config (structure.regex_trial)
        names = _check_names(self.pattern, f"header '{self.name}'")
        for field_name in ("ts", "level", "message"):
            _check_template(getattr(self, field_name), names, f"header '{self.name}' {field_name}")

    def anchored(self) -> str:
        return "^(?:" + self.pattern + ")$"

    def as_used(self) -> str:
        """The regex as it runs: against the whole peeled line."""
        return self.anchored()


@dataclass(frozen=True)
class MaskRule:
    """Replace every match of ``pattern`` in a message by the literal ``replacement``."""

    name: str
    pattern: str
    replacement: str

    def __post_init__(self) -> None:
        compiled = check_regex(self.as_used(), trial=False)  # the timed trial: config (structure.regex_trial)
        if compiled.match(""):
            raise ValueError(f"mask '{self.name}' matches the empty string")

    def as_used(self) -> str:
        """The regex as it runs: searched anywhere in a message."""
        return self.pattern



# ---- the JVM side: strings handed to Spark functions -------------------------------------


def wrapper_strip_java(wrappers: Iterable[WrapperRule], max_depth: int) -> str | None:
    """One anchored regex that matches up to ``max_depth`` wrapper prefixes, any kind each."""
    alternatives = [_without_names(w.pattern) for w in wrappers]
    if not alternatives or max_depth <= 0:
        return None
    joined = "|".join(f"(?:{a})" for a in alternatives)
    return java_regex(f"^(?:{joined}){{0,{max_depth}}}")


def wrapper_ts_java(wrappers: Iterable[WrapperRule], max_depth: int) -> list[tuple[str, str]]:
    """Per wrapper with a timestamp: (regex, replacement) giving its ts if it is among the first
    ``max_depth`` layers; the replacement is the ts template, the regex matches the whole line."""
    rules = list(wrappers)
    any_wrapper = "|".join(f"(?:{_without_names(w.pattern)})" for w in rules)
    out = []
    for rule in rules:
        if not rule.ts or max_depth <= 0:
            continue
        regex = f"^(?:{any_wrapper}){{0,{max_depth - 1}}}?(?:{rule.pattern}).*$"
        out.append((java_regex(regex), _java_template(rule.ts)))
    return out


def header_replacement_java(rule: HeaderRule) -> tuple[str, str]:
    """(regex, replacement): a matched line becomes MARK ts SEP level SEP message."""
    regex = java_regex("^(?!" + HEADER_MARK + ")(?:" + rule.pattern + ")$")
    replacement = (
        HEADER_MARK + _java_template(rule.ts) + FIELD_SEP + _java_template(rule.level) + FIELD_SEP
        + _java_template(rule.message)
    )
    return regex, replacement


# ---- the Python reference ---------------------------------------------------------------


@dataclass(frozen=True)
class Structured:
    """A structured line: ``ts`` is the raw timestamp text (not yet parsed), or None."""

    ts: str | None
    level: str | None
    message: str


class LineStructurer:
    """Python reference of the JVM structuring: same rules, same result, one line at a time."""

    def __init__(self, wrappers: Iterable[WrapperRule], headers: Iterable[HeaderRule],
                 levels: dict[str, str], max_depth: int) -> None:
        wrappers = tuple(wrappers)
        joined = "|".join(f"(?:{_without_names(w.pattern)})" for w in wrappers)
        self._strip = compile_pattern(f"^(?:{joined}){{0,{max_depth}}}") if wrappers and max_depth > 0 else None
        self._wrapper_ts = [
            (compile_pattern(f"^(?:{joined}){{0,{max_depth - 1}}}?(?:{w.pattern}).*$"), w.ts)
            for w in wrappers if w.ts and max_depth > 0
        ]
        self._headers = [(compile_pattern(h.anchored()), h) for h in headers]
        self._levels = levels

    def structure(self, line: str) -> Structured:
        wrapper_ts = None
        for regex, template in self._wrapper_ts:
            match = regex.match(line)
            if match:
                wrapper_ts = _expand(template, match)
                break
        text = self._strip.sub("", line, count=1) if self._strip else line
        for regex, rule in self._headers:
            match = regex.match(text)
            if match:
                ts = preferred_ts(clean_ts(_expand(rule.ts, match)), wrapper_ts)
                level = normalize_level(_expand(rule.level, match), self._levels)
                return Structured(ts or None, level, _expand(rule.message, match))
        return Structured(wrapper_ts or None, None, text)

    def structure_parts(self, line: str) -> StructuredParts:
        """Like ``structure``, as parts of ``line``: expanding them gives the same fields."""
        wrapper_ts: tuple[Part, ...] = ()
        for regex, template in self._wrapper_ts:
            match = regex.match(line)
            if match:
                parts = _parts(template, match, 0)
                wrapper_ts = _trim_parts(parts, len(clean_ts(expand_parts(parts, line))))
                if wrapper_ts:
                    break
        offset = self._strip.match(line).end() if self._strip else 0
        text = line[offset:]
        for regex, rule in self._headers:
            match = regex.match(text)
            if match:
                ts_parts = _parts(rule.ts, match, offset)
                ts = _trim_parts(ts_parts, len(clean_ts(expand_parts(ts_parts, line))))
                if wrapper_ts and expand_parts(ts, line).startswith(YEARLESS):
                    ts = wrapper_ts
                level = normalize_level(_expand(rule.level, match), self._levels)
                return StructuredParts(ts or wrapper_ts, level, tuple(_parts(rule.message, match, offset)))
        return StructuredParts(wrapper_ts, None, ((None, offset, len(line)),) if text else ())


# A part of a field: a literal text, or the characters [start, end) of the line.
Part = tuple[str | None, int, int]


@dataclass(frozen=True)
class StructuredParts:
    """Where a line's fields come from, as parts: lets one structuring of a digit-folded line
    stand for every line of the same shape (see ``fold_digits``)."""

    ts: tuple[Part, ...]
    level: str | None
    message: tuple[Part, ...]


def _parts(template: str, match: re.Match[str], offset: int) -> list[Part]:
    pieces = _TEMPLATE_FIELD.split(template)
    parts: list[Part] = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            if piece:
                parts.append((piece, 0, 0))
        elif match.start(piece) >= 0 and match.end(piece) > match.start(piece):
            parts.append((None, match.start(piece) + offset, match.end(piece) + offset))
    return parts


def _trim_parts(parts: list[Part], length: int) -> tuple[Part, ...]:
    """The parts cut to the first ``length`` characters of their expansion."""
    out: list[Part] = []
    for literal, start, end in parts:
        size = len(literal) if literal is not None else end - start
        if length <= 0:
            break
        if size > length:
            literal, end = (literal[:length], end) if literal is not None else (None, start + length)
            size = length
        out.append((literal, start, end))
        length -= size
    return tuple(out)


def expand_parts(parts: Iterable[Part], line: str) -> str:
    return "".join(literal if literal is not None else line[start:end] for literal, start, end in parts)


def clean_ts(ts: str) -> str:
    """Drop what an absent optional group leaves behind ("12:00:00." -> "12:00:00", and a
    year-less template with no groups, "--- .", -> "")."""
    return ts.rstrip(". -")


def preferred_ts(header_ts: str, wrapper_ts: str | None) -> str | None:
    """The header's time, unless it has no year and the wrapper has a time."""
    if header_ts and not (wrapper_ts and header_ts.startswith(YEARLESS)):
        return header_ts
    return wrapper_ts or None


def normalize_level(level: str, levels: dict[str, str]) -> str | None:
    key = level.strip().upper()
    if not key:
        return None
    return levels.get(key, key)


def fuse_masks(masks: Iterable[MaskRule]) -> list[tuple[str, str]]:
    """(regex, replacement) passes: consecutive rules with the same replacement become one
    alternation, so a line is scanned once per group instead of once per rule (each pass also
    costs a UTF-8 <-> UTF-16 copy of the line in the JVM). Alternatives are tried in rule order
    at each position, leftmost match first. When every alternative starts with a plain
    character or character class, a one-character lookahead guard lets most positions fail at
    once. Named groups are dropped (the same name in two rules would clash)."""
    passes: list[tuple[list[str], str]] = []
    for mask in masks:
        if passes and passes[-1][1] == mask.replacement:
            passes[-1][0].append(_without_names(mask.pattern))
        else:
            passes.append(([_without_names(mask.pattern)], mask.replacement))
    fused = []
    for patterns, replacement in passes:
        if len(patterns) == 1:
            fused.append((patterns[0], replacement))
            continue
        alternation = "|".join(f"(?:{p})" for p in patterns)
        starts = [_first_atom(p) for p in patterns]
        if all(starts):
            alternation = f"(?=[{''.join(starts)}])(?:{alternation})"
        fused.append((alternation, replacement))
    return fused


_FIRST_ATOM = re.compile(r"^(?:\[(?P<cls>(?:\\.|[^\]\\])+)\]|(?P<lit>[A-Za-z0-9/<>_:@%=~-]))")


def _first_atom(pattern: str) -> str | None:
    """The body of a character class for the pattern's first character, when it is a plain
    class (not negated) or a plain literal followed by no quantifier that allows zero."""
    match = _FIRST_ATOM.match(pattern)
    if not match or _has_top_level_alternation(pattern):
        return None
    rest = pattern[match.end():]
    if rest[:1] in ("?", "*") or rest.startswith("{0"):
        return None
    body = match.group("cls") or re.escape(match.group("lit"))
    if body.startswith("^"):
        return None
    # bodies are concatenated into one class: a bare '-' at either end would make a range
    if body.startswith("-"):
        body = "\\" + body
    if body.endswith("-") and not body.endswith("\\-"):
        body = body[:-1] + "\\-"
    return body


def _has_top_level_alternation(pattern: str) -> bool:
    depth, in_class, escaped = 0, False, False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
    return False


class Masker:
    """Python reference of the JVM masking: the fused passes of ``fuse_masks`` in order."""

    def __init__(self, masks: Iterable[MaskRule]) -> None:
        self._rules = [(compile_pattern(p), r) for p, r in fuse_masks(masks)]

    def mask(self, message: str) -> str:
        for regex, replacement in self._rules:
            message = regex.sub(lambda _m, r=replacement: r, message)
        return message
