"""``render_terminal``: a plain-text summary of the report, every line at most ``width`` columns.

Widths are display columns (East Asian wide characters count two, combining marks none), so a
log line in CJK does not overflow. No colours, no control characters (``clean_text``).
"""

from __future__ import annotations

import unicodedata

from l4spark.report.model import JobReport
from l4spark.report.view import (
    ReportView,
    as_list,
    build_view,
    clean_text,
    fmt_int,
    fmt_score,
    fmt_ts,
    header_facts,
    pace_sentence,
    is_missing,
    is_silent,
    silent_note,
)

MIN_WIDTH = 40
TERMINAL_EVENTS = 10
TERMINAL_NODES = 10
TERMINAL_ITERATIONS = 10
TERMINAL_ERRORS = 8


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal."""
    return sum(_char_width(ch) for ch in text)


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, with '…' when something was cut."""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = _char_width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def _split_word(word: str, room: int) -> list[str]:
    """A word wider than ``room`` columns as pieces of at most ``room`` columns."""
    pieces, piece, used = [], [], 0
    for ch in word:
        w = _char_width(ch)
        if used + w > room and piece:
            pieces.append("".join(piece))
            piece, used = [], 0
        piece.append(ch)
        used += w
    return pieces + ["".join(piece)]


def _wrap(text: str, width: int, indent: str = "", max_lines: int | None = None) -> list[str]:
    """``text`` wrapped at spaces to ``width`` display columns after ``indent`` (long words
    split); at most ``max_lines`` lines, the last ending in '…' when text was left out."""
    room = max(width - display_width(indent), 10)
    lines, line, used = [], [], 0
    for word in text.split():
        for piece in _split_word(word, room):
            w = display_width(piece)
            if line and used + 1 + w > room:
                lines.append(" ".join(line))
                line, used = [], 0
            used += w + (1 if line else 0)
            line.append(piece)
    lines.append(" ".join(line))
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [_cut(lines[max_lines - 1] + " …", room)]
    return [indent + line for line in lines]


def _rule(title: str, width: int) -> str:
    text = f"== {title} "
    return _cut(text + "=" * max(width - display_width(text), 0), width)


def _header(view: ReportView, width: int) -> list[str]:
    job = view.job
    status = (clean_text(job.get("status")) or "unknown").upper()
    lines = _wrap(f"l4spark diagnosis [{status}] job {clean_text(job.get('job_id'))}", width, max_lines=3)
    for label, value in header_facts(view):
        if label == "Status":
            continue
        lines += _wrap(f"{label}: {value}", width, max_lines=3)
    if clean_text(job.get("status")) != "diagnosed" or not is_missing(job.get("error")):
        lines += _wrap(f"Not diagnosed: {clean_text(job.get('error')) or 'no reason given'}", width,
                       max_lines=6)
    return lines


def _patterns(view: ReportView, width: int) -> list[str]:
    lines = ["", _rule("Root cause and remedy", width)]
    if not view.patterns:
        return lines + _wrap("No known fault pattern matched this job: read the ranked events.", width)
    best = view.patterns[0]
    confidence = "-" if is_missing(best.get("confidence")) else f"{float(best['confidence']):.0%}"
    lines += _wrap(f"{clean_text(best.get('name') or best.get('pattern_id'))} "
                   f"({clean_text(best.get('fault_class')) or '-'}, confidence {confidence})", width)
    lines += _wrap(f"Root cause: {clean_text(best.get('root_cause')) or '-'}", width, "  ", 6)
    lines += _wrap(f"Remedy: {clean_text(best.get('remedy')) or '-'}", width, "  ", 6)
    for pattern in view.patterns[1:]:
        value = pattern.get("confidence")
        confidence = "-" if is_missing(value) else f"{float(value):.0%}"
        lines += _wrap(f"also matched: {clean_text(pattern.get('name') or pattern.get('pattern_id'))} "
                       f"({clean_text(pattern.get('fault_class')) or '-'}, {confidence})", width, "  ", 2)
    return lines


def _events(view: ReportView, width: int) -> list[str]:
    total = len(view.events)
    lines = ["", _rule(f"Top events ({min(total, TERMINAL_EVENTS)} of {total})", width)]
    if view.events.empty:
        return lines + _wrap("No event was flagged as failure-indicating.", width)
    for event in view.events.head(TERMINAL_EVENTS).to_dict("records"):
        sources = ",".join(clean_text(s) for s in as_list(event["sources"])) or "-"
        head = (f"#{fmt_int(event['rank'])} {clean_text(event['event_id'])}  score {fmt_score(event['score'])}"
                f"  {sources}  lines {fmt_int(event['n_lines'])}  nodes {fmt_int(event['n_nodes'])}"
                f"  stage {clean_text(event['stage']) or '-'}")
        lines += _wrap(head, width, max_lines=2)
        lines += _wrap(clean_text(event["template"]) or "-", width, "    ", 2)
        where = f"[{clean_text(event['sample_node']) or '-'} {fmt_ts(event['sample_ts'])}] "
        lines += _wrap(where + (clean_text(event["sample"]) or "-"), width, "    > ", 2)
    return lines


def _nodes(view: ReportView, width: int) -> list[str]:
    lines = ["", _rule("Nodes", width)]
    if view.nodes.empty:
        return lines + _wrap("No node scores for this job.", width)
    lines += _wrap(f"Suspect: {', '.join(clean_text(n) for n in view.suspects) or 'none'}", width,
                   max_lines=3)
    shown = view.nodes.head(TERMINAL_NODES)
    name_width = min(max(display_width(clean_text(n)) for n in shown["node"]), max(width // 3, 10))
    for node in shown.to_dict("records"):
        flags = " ".join(f for f in ("suspect" if str(node["node"]) in view.suspects else "",
                                     silent_note(node) if is_silent(node) else "") if f)
        name = _cut(clean_text(node["node"]), name_width)
        name += " " * (name_width - display_width(name))
        lines.append(_cut(f"  {fmt_int(node['rank']):>4}  {name}  {fmt_score(node['score'])}  {flags}".rstrip(),
                          width))
    if len(view.nodes) > len(shown):
        lines.append(f"  ... {len(view.nodes) - len(shown):,} more nodes")
    return lines


def _iterations(view: ReportView, width: int) -> list[str]:
    lines = ["", _rule("Iterations", width)]
    if len(view.iterations) < 2:
        return lines + _wrap("No iteration was logged." if view.iterations.empty
                             else "Only one iteration was logged.", width)
    threshold = "-" if view.threshold is None else f"{view.threshold:.3f}"
    first = view.anomalous.head(TERMINAL_ITERATIONS)
    listed = ", ".join(f"{int(i)} ({s:.3f})" for i, s in zip(first["iteration"], first["score"]))
    left_out = len(view.anomalous) - len(first)
    more = f" and {left_out:,} more" if left_out else ""
    lines += _wrap(f"{len(view.iterations):,} iterations, threshold {threshold}; anomalous: "
                   f"{listed or 'none'}{more}", width, max_lines=4)
    return lines


def _pace(view: ReportView, width: int) -> list[str]:
    sentence = pace_sentence(view)
    return [] if sentence is None else ["", _rule("Pace", width)] + _wrap(sentence, width, max_lines=3)


def _first_errors(view: ReportView, width: int) -> list[str]:
    lines = ["", _rule("First error per node", width)]
    if view.first_errors.empty:
        return lines + _wrap("No node logged an ERROR/FATAL line.", width)
    for error in view.first_errors.head(TERMINAL_ERRORS).to_dict("records"):
        lines.append(_cut(f"  {fmt_ts(error['ts'])}  {clean_text(error['node'])}  "
                          f"{clean_text(error['event_id']) or '-'}  {clean_text(error['message'])}", width))
    if len(view.first_errors) > TERMINAL_ERRORS:
        lines.append(f"  ... {len(view.first_errors) - TERMINAL_ERRORS:,} more nodes with an error")
    return lines


def render_terminal(report: JobReport, width: int = 100) -> str:
    """A plain-text summary: header, root cause and remedy, top events with samples, nodes,
    anomalous iterations, the slowest unit (with per-rank readings), first errors. Every line has at most ``width`` display columns.

    Raises ``ValueError`` when ``width`` < 40, ``ReportInputError`` like ``render_html``.
    """
    if width < MIN_WIDTH:
        raise ValueError(f"render_terminal needs width >= {MIN_WIDTH}; got {width}")
    view = build_view(report)
    lines = (_header(view, width) + _patterns(view, width) + _events(view, width)
             + _nodes(view, width) + _iterations(view, width) + _pace(view, width) + _first_errors(view, width))
    return "\n".join(line.rstrip() for line in lines) + "\n"
