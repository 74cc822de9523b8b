"""``render_html``: one self-contained HTML page per job (inline CSS and SVG, nothing fetched).

Every piece of text from the input goes through ``_text`` (``html.escape`` after
``clean_text``); the only markup not built here is the SVG from ``figures``, which matplotlib
escapes itself.
"""

from __future__ import annotations

import html

from l4spark.report import figures
from l4spark.report.model import JobReport
from l4spark.report.view import (
    HEAT_EVENTS,
    TABLE_EVENTS,
    TOP_NODES,
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
    nodes_caption,
    provenance_facts,
    silent_note,
)

SAMPLE_CHARS = 600
TEMPLATE_CHARS = 400

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;
  color:#1f2328;background:#f6f7f9;line-height:1.4}
main{max-width:1200px;margin:0 auto;padding:20px 28px 40px;background:#fff}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px;border-bottom:1px solid #e3e6ea;
  padding-bottom:4px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-size:.75em;font-weight:600;
  vertical-align:middle;text-transform:uppercase;letter-spacing:.04em}
.badge.diagnosed{background:#e6f4ea;color:#1e6b34}.badge.error{background:#fde8e6;color:#a12a1b}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(230px,1fr));gap:6px 18px;margin:12px 0}
.facts div{border-left:3px solid #d0d7de;padding:2px 8px}.facts dt{font-size:.75em;color:#57606a}
.facts dd{margin:0;font-weight:600;overflow-wrap:anywhere}
.cause{border:1px solid #f0b7ae;border-left:6px solid #c0392b;background:#fff6f4;border-radius:6px;
  padding:12px 16px;margin:10px 0}
.cause h3{margin:0 0 6px;font-size:1.1em}.cause p{margin:6px 0}.cause .label{font-weight:700}
.errorbox{border-left:6px solid #a12a1b;background:#fde8e6;padding:10px 14px;border-radius:6px}
table{border-collapse:collapse;width:100%;font-size:.88em;margin:6px 0}
th,td{border-bottom:1px solid #e3e6ea;padding:5px 7px;text-align:left;vertical-align:top}
th{background:#f3f5f8;font-weight:600}tr:nth-child(even) td{background:#fbfbfc}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td .mono{overflow-wrap:anywhere}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.92em}
.sample{white-space:pre-wrap;overflow-wrap:anywhere;color:#24292f;min-width:260px}.where{color:#57606a;font-size:.85em}
.tag{display:inline-block;background:#eef1f5;border-radius:4px;padding:0 5px;margin:1px;font-size:.85em}
.bar{display:inline-block;height:8px;background:#c0392b;border-radius:2px;vertical-align:middle;margin-right:6px}
figure{margin:8px 0 16px}figcaption{color:#57606a;font-size:.85em;margin-top:2px}
figure svg{max-width:100%;height:auto}
.missing{color:#57606a;font-style:italic}
details{margin:6px 0}summary{cursor:pointer;color:#57606a}
footer{margin-top:30px;color:#57606a;font-size:.8em}
""".strip()


def _text(value, limit: int | None = None) -> str:
    return html.escape(clean_text(value, limit), quote=True)


def _missing(sentence: str) -> str:
    return f'<p class="missing">{html.escape(sentence)}</p>'


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>"


def _header(view: ReportView) -> str:
    job = view.job
    status = clean_text(job.get("status")) or "unknown"
    badge = "diagnosed" if status == "diagnosed" else "error"
    facts = "".join(f"<div><dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd></div>"
                    for k, v in header_facts(view))
    parts = [f'<h1>Job <span class="mono">{_text(job.get("job_id"))}</span> '
             f'<span class="badge {badge}">{html.escape(status)}</span></h1>',
             f'<dl class="facts">{facts}</dl>']
    if status != "diagnosed" or not is_missing(job.get("error")):
        reason = clean_text(job.get("error")) or "no reason given"
        parts.append(f'<div class="errorbox"><strong>The job could not be diagnosed:</strong> '
                     f'{html.escape(reason)}</div>')
    return "\n".join(parts)


def _event_links(view: ReportView, event_ids) -> str:
    anchors = {str(e): i for i, e in enumerate(view.events["event_id"].head(TABLE_EVENTS))}
    links = []
    for event_id in as_list(event_ids):
        key = str(event_id)
        label = _text(key)
        links.append(f'<a href="#event-{anchors[key]}">{label}</a>' if key in anchors else label)
    return ", ".join(links) or "-"


def _confidence(value) -> str:
    if is_missing(value):
        return "-"
    share = min(max(float(value), 0.0), 1.0)
    return f'<span class="bar" style="width:{share * 60:.0f}px"></span>{share:.0%}'


def _root_cause(view: ReportView) -> str:
    if not view.patterns:
        return _missing("No known fault pattern matched this job: read the ranked events below.")
    best = view.patterns[0]
    parts = ['<div class="cause">',
             f'<h3>{_text(best.get("name") or best.get("pattern_id"))} '
             f'<span class="where">({_text(best.get("fault_class")) or "-"}, '
             f'confidence {_confidence_text(best.get("confidence"))})</span></h3>',
             f'<p><span class="label">Root cause:</span> {_text(best.get("root_cause")) or "-"}</p>',
             f'<p><span class="label">Remedy:</span> {_text(best.get("remedy")) or "-"}</p>',
             "</div>"]
    return "\n".join(parts)


def _confidence_text(value) -> str:
    return "-" if is_missing(value) else f"{min(max(float(value), 0.0), 1.0):.0%}"


def _patterns_table(view: ReportView) -> str:
    if not view.patterns:
        return ""
    rows = []
    for pattern in view.patterns:
        rows.append(
            "<tr>"
            f'<td>{_text(pattern.get("name"))}<div class="where mono">{_text(pattern.get("pattern_id"))}</div></td>'
            f'<td>{_text(pattern.get("fault_class")) or "-"}</td>'
            f'<td class="num">{_confidence(pattern.get("confidence"))}</td>'
            f'<td>{_text(pattern.get("root_cause")) or "-"}</td>'
            f'<td>{_text(pattern.get("remedy")) or "-"}</td>'
            f'<td class="mono">{_event_links(view, pattern.get("matched_event_ids"))}</td>'
            "</tr>")
    return (f"<h3>Matched fault patterns ({len(view.patterns)}), best first</h3>"
            "<table><thead><tr><th>Pattern</th><th>Fault class</th><th class=\"num\">Confidence</th>"
            "<th>Root cause</th><th>Remedy</th><th>Matched events</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _events_table(view: ReportView) -> str:
    events = view.events
    if events.empty:
        return _missing("No event was flagged as failure-indicating.")
    rows = []
    for i, event in enumerate(events.head(TABLE_EVENTS).to_dict("records")):
        sources = "".join(f'<span class="tag">{_text(s)}</span>' for s in as_list(event["sources"]))
        where = f'{_text(event["sample_node"]) or "-"} · {html.escape(fmt_ts(event["sample_ts"]))}'
        rows.append(
            f'<tr id="event-{i}">'
            f'<td class="num">{html.escape(fmt_int(event["rank"]))}</td>'
            f'<td class="num">{html.escape(fmt_score(event["score"]))}</td>'
            f"<td>{sources or '-'}</td>"
            f'<td><code>{_text(event["event_id"])}</code> '
            f'<span class="mono">{_text(event["template"], TEMPLATE_CHARS)}</span></td>'
            f'<td><div class="sample mono">{_text(event["sample"], SAMPLE_CHARS) or "-"}</div>'
            f'<div class="where">{where}</div></td>'
            f'<td class="num">{html.escape(fmt_int(event["n_lines"]))}</td>'
            f'<td class="num">{html.escape(fmt_int(event["n_nodes"]))}</td>'
            f'<td>{_text(event["stage"]) or "-"}</td>'
            "</tr>")
    note = ""
    if len(events) > TABLE_EVENTS:
        note = f'<p class="where">The {TABLE_EVENTS} best of {len(events):,} flagged events.</p>'
    return ('<table><thead><tr><th class="num">Rank</th><th class="num">Score</th><th>Sources</th>'
            "<th>Event and template</th><th>Sample line (node · time)</th><th class=\"num\">Lines</th>"
            '<th class="num">Nodes</th><th>Stage</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>" + note)


def _nodes_section(view: ReportView) -> str:
    if view.nodes.empty:
        return _missing("No node scores for this job.")
    svg = figures.node_scores_svg(view)
    if svg is None:
        node = clean_text(view.nodes["node"].iloc[0])
        return _missing(f"The job ran on one node ({node}): there is no peer to compare it with.")
    parts = [_figure(svg, nodes_caption(view) + " Suspect nodes in red, silent nodes hatched.")]
    listed = view.nodes[view.nodes["node"].astype(str).isin(view.suspects)]
    if not listed.empty:
        rows = []
        for node in listed.to_dict("records"):
            evidence = ", ".join(clean_text(e) for e in as_list(node["evidence"])[:6])
            rows.append(
                f'<tr><td class="num">{html.escape(fmt_int(node["rank"]))}</td>'
                f'<td class="mono">{_text(node["node"])}</td>'
                f'<td class="num">{html.escape(fmt_score(node["score"]))}</td>'
                f'<td>{html.escape(silent_note(node)) if is_silent(node) else ""}</td>'
                f'<td class="num">{html.escape(fmt_int(node["n_lines"]))}</td>'
                f'<td class="mono">{html.escape(evidence) or "-"}</td></tr>')
        parts.append('<table><thead><tr><th class="num">Rank</th><th>Suspect node</th>'
                     '<th class="num">Score</th><th>Silent</th><th class="num">Lines</th>'
                     "<th>Evidence events</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    return "\n".join(parts)


def _iterations_section(view: ReportView) -> str:
    svg = figures.iteration_curve_svg(view)
    if svg is None:
        if view.iterations.empty:
            return _missing("No iteration was logged: no iteration curve.")
        return _missing("Only one iteration was logged: no iteration curve.")
    listed = ", ".join(f"{int(i)} ({s:.3f})" for i, s in zip(view.anomalous["iteration"].head(20),
                                                            view.anomalous["score"].head(20)))
    caption = (f"{len(view.iterations):,} iterations; threshold "
               f"{'-' if view.threshold is None else f'{view.threshold:.3f}'}; anomalous: "
               f"{listed or 'none'}{' …' if len(view.anomalous) > 20 else ''}.")
    return _figure(svg, caption)


def _pace_section(view: ReportView) -> str:
    sentence = pace_sentence(view)
    if sentence is None:
        return _missing("No per-rank step reading (per-rank timers or per-rank progress lines): no pace view.")
    parts = [f"<p>{html.escape(sentence)}</p>"]
    svg = figures.pace_svg(view)
    if svg is not None:
        parts.append(_figure(svg, "Time per step of the slowest units against their peers' median "
                                  "(1.0 = as fast as the median unit)."))
    rows = "".join("<tr>" + "".join(f'<td{" class=num" if i else ""}>{html.escape(v)}</td>' for i, v in enumerate(row))
                   + "</tr>" for row in pace_rows(view))
    parts.append('<table><thead><tr><th>Unit</th><th class="num">Median ratio</th><th class="num">Largest</th>'
                 '<th class="num">Slow from step</th><th class="num">Steps</th></tr></thead><tbody>'
                 + rows + "</tbody></table>")
    return "\n".join(parts)


def _timeline_section(view: ReportView) -> str:
    svg = figures.timeline_svg(view)
    if svg is None:
        return _missing("No timestamped stage span or error line: no timeline.")
    total = len(set(view.report.stages["node"].astype(str)) | set(view.report.first_errors["node"].astype(str)))
    shown = len(view.timeline_nodes)
    scope = f"{shown} of {total} nodes (suspects first, then by rank)" if shown < total else f"all {total} nodes"
    return _figure(svg, f"Stages per node over time, {scope}; a red cross marks each node's first "
                        "ERROR/FATAL line.")


def _heat_section(view: ReportView) -> str:
    svg = figures.heatmap_svg(view)
    if svg is None:
        return _missing("No flagged event has lines per node: no heat map.")
    rows, cols = view.heat_matrix.shape
    cut = []
    if view.heat_events_total > rows:
        cut.append(f"the {rows} best of {view.heat_events_total} events (cap {HEAT_EVENTS})")
    if view.heat_nodes_total > cols:
        cut.append(f"the {cols} most suspect of {view.heat_nodes_total} nodes (cap {TOP_NODES})")
    scope = "; showing " + " and ".join(cut) if cut else ""
    return _figure(svg, f"Lines of each flagged event (rows, by rank) per node (columns, by rank){scope}.")


def _footer(view: ReportView) -> str:
    facts = " · ".join(f"{html.escape(k)}: {html.escape(v)}" for k, v in provenance_facts(view))
    return f"<footer>{facts}</footer>"


def render_html(report: JobReport | ReportView) -> str:
    """One self-contained HTML page for ``report``: header, root cause and remedy, matched
    patterns, ranked events, node scores, iteration curve, timeline and event x node heat map.
    ``report`` may be its ``ReportView`` already built (``write_reports`` builds it once for
    both files).

    Missing parts render as a short sentence. Raises ``ReportInputError`` for a report without
    job_id or with a frame lacking a required column.
    """
    view = report if isinstance(report, ReportView) else build_view(report)
    title = f"l4spark diagnosis: {clean_text(view.job.get('job_id'))}"
    sections = [
        _header(view),
        "<h2>Root cause and remedy</h2>", _root_cause(view), _patterns_table(view),
        "<h2>Failure-indicating events</h2>", _events_table(view),
        "<h2>Node anomaly scores</h2>", _nodes_section(view),
        "<h2>Iteration similarity</h2>", _iterations_section(view),
        "<h2>Pace per unit</h2>", _pace_section(view),
        "<h2>Timeline</h2>", _timeline_section(view),
        "<h2>Flagged events by node</h2>", _heat_section(view),
        _footer(view),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(sections) + "\n</main>\n</body>\n</html>\n")
