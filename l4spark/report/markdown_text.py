"""``render_markdown``: the report as Markdown for tickets; pictures become compact text.

Log text (templates, samples, messages, event ids, node names) goes into code spans: nothing in
them is markup, a backtick run inside is fenced by a longer run, and in table cells ``|`` is
written ``\\|`` (GFM splits cells before it reads code spans). Prose (pattern names, root cause,
remedy) is escaped with backslashes instead, so a log line shows as written and never breaks a
table or turns into HTML.
"""

from __future__ import annotations

import re

import pandas as pd

from l4spark.report.model import JobReport
from l4spark.report.view import (
    TABLE_EVENTS,
    ReportView,
    as_list,
    build_view,
    clean_text,
    fmt_int,
    fmt_score,
    fmt_ts,
    header_facts,
    pace_rows,
    pace_sentence,
    is_missing,
    is_silent,
    provenance_facts,
    silent_note,
)

SAMPLE_CHARS = 300
TEMPLATE_CHARS = 200
MD_NODES = 20            # rows of the node table
MD_FIRST_ERRORS = 20     # rows of the first-error table
MD_HEAT_EVENTS = 10      # events listed with their nodes
MD_HEAT_NODES = 5        # nodes named per event

_SPECIAL = re.compile(r"([\\`|<>*_\[\]~])")


def md(value, limit: int | None = None) -> str:
    """Input text escaped for a Markdown paragraph or table cell ('-' when empty)."""
    text = clean_text(value, limit)
    return _SPECIAL.sub(r"\\\1", text) if text else "-"


def code(value, limit: int | None = None, cell: bool = True) -> str:
    """Input text as a code span ('-' when empty); ``cell``: escape ``|`` for a GFM table."""
    text = clean_text(value, limit)
    if not text:
        return "-"
    if cell:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    return f"{fence}{text}{fence}"


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _confidence(value) -> str:
    return "-" if is_missing(value) else f"{min(max(float(value), 0.0), 1.0):.0%}"


def _header(view: ReportView) -> list[str]:
    job = view.job
    out = [f"# l4spark diagnosis: job {code(job.get('job_id'), cell=False)}", ""]
    out.append(_table(["Field", "Value"], [[k, md(v)] for k, v in header_facts(view)]))
    status = clean_text(job.get("status"))
    if status != "diagnosed" or not is_missing(job.get("error")):
        out += ["", f"> **The job could not be diagnosed:** {md(job.get('error') or 'no reason given')}"]
    return out


def _root_cause(view: ReportView) -> list[str]:
    out = ["", "## Root cause and remedy", ""]
    if not view.patterns:
        return out + ["No known fault pattern matched this job: read the ranked events below."]
    best = view.patterns[0]
    out += [f"**{md(best.get('name') or best.get('pattern_id'))}** ({md(best.get('fault_class'))}, "
            f"confidence {_confidence(best.get('confidence'))})", "",
            f"- **Root cause:** {md(best.get('root_cause'))}",
            f"- **Remedy:** {md(best.get('remedy'))}", "",
            f"### Matched fault patterns ({len(view.patterns)}), best first", ""]
    rows = [[md(p.get("name")), md(p.get("pattern_id")), md(p.get("fault_class")),
             _confidence(p.get("confidence")), md(p.get("root_cause")), md(p.get("remedy")),
             code(", ".join(str(e) for e in as_list(p.get("matched_event_ids"))))]
            for p in view.patterns]
    out.append(_table(["Pattern", "Id", "Fault class", "Confidence", "Root cause", "Remedy",
                       "Matched events"], rows, numeric={3}))
    return out


def _events(view: ReportView) -> list[str]:
    out = ["", "## Failure-indicating events", ""]
    if view.events.empty:
        return out + ["No event was flagged as failure-indicating."]
    rows = []
    for event in view.events.head(TABLE_EVENTS).to_dict("records"):
        rows.append([fmt_int(event["rank"]), fmt_score(event["score"]),
                     md(", ".join(str(s) for s in as_list(event["sources"]))),
                     code(event["event_id"]), code(event["template"], TEMPLATE_CHARS),
                     code(event["sample"], SAMPLE_CHARS), code(event["sample_node"]),
                     fmt_ts(event["sample_ts"]), fmt_int(event["n_lines"]),
                     fmt_int(event["n_nodes"]), md(event["stage"])])
    out.append(_table(["Rank", "Score", "Sources", "Event", "Template", "Sample line", "Node",
                       "Time", "Lines", "Nodes", "Stage"], rows, numeric={0, 1, 8, 9}))
    if len(view.events) > TABLE_EVENTS:
        out += ["", f"The {TABLE_EVENTS} best of {len(view.events):,} flagged events."]
    return out


def _nodes(view: ReportView) -> list[str]:
    out = ["", "## Node anomaly scores", ""]
    if view.nodes.empty:
        return out + ["No node scores for this job."]
    if len(view.nodes) == 1:
        return out + [f"The job ran on one node ({code(view.nodes['node'].iloc[0], cell=False)}): there is no peer "
                      "to compare it with."]
    suspects = set(view.suspects)
    shown = view.nodes.head(MD_NODES)
    rows = [[fmt_int(n["rank"]), code(n["node"]), fmt_score(n["score"]),
             "yes" if str(n["node"]) in suspects else "",
             silent_note(n) if is_silent(n) else "", fmt_int(n["n_lines"]),
             code(", ".join(str(e) for e in as_list(n["evidence"])[:6]))]
            for n in shown.to_dict("records")]
    out.append(_table(["Rank", "Node", "Score", "Suspect", "Silent", "Lines", "Evidence events"],
                      rows, numeric={0, 2, 5}))
    if len(view.nodes) > len(shown):
        out += ["", f"Top {len(shown)} of {len(view.nodes):,} nodes by rank."]
    return out


def _iterations(view: ReportView) -> list[str]:
    out = ["", "## Iteration similarity", ""]
    if len(view.iterations) < 2:
        return out + ["No iteration was logged: no iteration curve." if view.iterations.empty
                      else "Only one iteration was logged: no iteration curve."]
    first, last = int(view.iterations["iteration"].iloc[0]), int(view.iterations["iteration"].iloc[-1])
    threshold = "-" if view.threshold is None else f"{view.threshold:.3f}"
    out.append(f"{len(view.iterations):,} iterations ({first} to {last}), score threshold {threshold}.")
    if view.anomalous.empty:
        return out + ["", "No anomalous iteration."]
    rows = [[str(int(r["iteration"])), fmt_score(r["score"]),
             code(", ".join(str(e) for e in as_list(r["event_ids"])[:8]))]
            for r in view.anomalous.head(MD_NODES).to_dict("records")]
    out += ["", _table(["Anomalous iteration", "Score", "Events"], rows, numeric={0, 1})]
    if len(view.anomalous) > MD_NODES:
        out += ["", f"The first {MD_NODES} of {len(view.anomalous):,} anomalous iterations."]
    return out


def _pace(view: ReportView) -> list[str]:
    sentence = pace_sentence(view)
    if sentence is None:
        return []
    out = ["", "## Pace per unit", "", md(sentence)]
    rows = [[md(unit), *rest] for unit, *rest in pace_rows(view)]
    return out + ["", _table(["Unit", "Median ratio", "Largest", "Slow from step", "Steps"], rows,
                             numeric={1, 2, 3, 4})]


def _first_errors(view: ReportView) -> list[str]:
    out = ["", "## First error per node", ""]
    if view.first_errors.empty:
        return out + ["No node logged an ERROR/FATAL line."]
    rows = [[code(e["node"]), fmt_ts(e["ts"]), code(e["event_id"]), code(e["message"], SAMPLE_CHARS)]
            for e in view.first_errors.head(MD_FIRST_ERRORS).to_dict("records")]
    out.append(_table(["Node", "First ERROR/FATAL", "Event", "Message"], rows))
    if len(view.first_errors) > MD_FIRST_ERRORS:
        out += ["", f"The {MD_FIRST_ERRORS} earliest of {len(view.first_errors):,} nodes with an error."]
    return out


def _heat(view: ReportView) -> list[str]:
    out = ["", "## Flagged events by node", ""]
    if view.heat_matrix.empty:
        return out + ["No flagged event has lines per node."]
    heat = view.report.heat
    heat = heat.assign(event_id=heat["event_id"].astype(str), node=heat["node"].astype(str),
                       n_lines=pd.to_numeric(heat["n_lines"], errors="coerce").fillna(0).astype(int))
    ranks = view.event_ranks
    rows = []
    for event_id in list(view.heat_matrix.index)[:MD_HEAT_EVENTS]:
        on = heat[(heat["event_id"] == event_id) & (heat["n_lines"] > 0)]
        on = on.groupby("node")["n_lines"].sum()
        top = sorted(on.items(), key=lambda kv: (-kv[1], kv[0]))[:MD_HEAT_NODES]
        named = ", ".join(f"{n} ({c:,})" for n, c in top) + (", …" if len(on) > MD_HEAT_NODES else "")
        rows.append([ranks.get(event_id, "-"), code(event_id), f"{len(on):,}", code(named)])
    out.append(_table(["Rank", "Event", "Nodes", f"Most lines (top {MD_HEAT_NODES} nodes)"], rows,
                      numeric={0, 2}))
    if view.heat_events_total > MD_HEAT_EVENTS:
        out += ["", f"The {MD_HEAT_EVENTS} best of {view.heat_events_total:,} flagged events."]
    return out


def render_markdown(report: JobReport | ReportView) -> str:
    """The report as Markdown: header table, root cause and remedy, patterns, ranked events,
    node table, anomalous iterations, pace per unit (with per-rank readings), first error per node, top nodes per flagged event.
    ``report`` may be its ``ReportView`` already built.

    Raises ``ReportInputError`` like ``render_html``.
    """
    view = report if isinstance(report, ReportView) else build_view(report)
    lines = (_header(view) + _root_cause(view) + _events(view) + _nodes(view) + _iterations(view)
             + _pace(view) + _first_errors(view) + _heat(view))
    lines += ["", "---", "", " · ".join(f"{k}: {md(v)}" for k, v in provenance_facts(view))]
    return "\n".join(lines) + "\n"
