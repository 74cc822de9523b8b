"""What every renderer shows, computed once: sorted tables, caps, the iteration threshold.

Pure pandas, no rendering. Orders are total (ties broken by name/id) so that the same input
gives the same page. Text from the logs goes through ``clean_text`` (control characters such as
ANSI escapes become visible ``\\xNN``) before any format-specific escaping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from l4spark.report.model import JobReport, checked

TOP_NODES = 40          # bars in the node chart, columns in the heat map
TIMELINE_NODES = 20     # rows of the timeline
TIMELINE_OTHERS = 4     # non-suspect nodes kept in the timeline for comparison
HEAT_EVENTS = 30        # rows of the heat map
TABLE_EVENTS = 100      # rows of the events table (HTML, Markdown)
PACE_UNITS = 8          # units in the pace table and figure (slowest first)
SLOW_RATIO = 1.1        # a step this many times its peers' median is slow


def is_missing(value) -> bool:
    """True for None, NaN, NaT and pd.NA (lists and arrays are never missing)."""
    if value is None:
        return True
    if isinstance(value, (list, tuple, dict, set, np.ndarray)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def as_list(value) -> list:
    """A list from a list, tuple, numpy array or a single value; [] for missing."""
    if is_missing(value):
        return []
    if isinstance(value, (list, tuple, np.ndarray, pd.Series)):
        return [v for v in list(value) if not is_missing(v)]
    return [value]


def clean_text(value, limit: int | None = None) -> str:
    """Log text on one line: whitespace runs kept, newlines/tabs as spaces, other control
    characters as ``\\xNN``; cut to ``limit`` characters with an ellipsis. Missing -> ''."""
    if is_missing(value):
        return ""
    out = []
    for ch in str(value):
        code = ord(ch)
        if ch in "\t\r\n":
            out.append(" ")
        elif code < 32 or 127 <= code < 160:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    text = "".join(out)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def fmt_value(value) -> str:
    """A header value as text: '-' for missing, thousands separators for integers."""
    if is_missing(value):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, (float, np.floating)):
        return f"{int(value):,}" if float(value).is_integer() else f"{float(value):.3g}"
    if isinstance(value, (pd.Timestamp, np.datetime64)) or hasattr(value, "isoformat"):
        return fmt_ts(value)
    return clean_text(value)


def fmt_score(value) -> str:
    return "-" if is_missing(value) else f"{float(value):.3f}"


def fmt_int(value) -> str:
    return "-" if is_missing(value) else f"{int(value):,}"


def fmt_ts(value) -> str:
    """'YYYY-MM-DD HH:MM:SS[.mmm]', in UTC with a ' UTC' suffix when tz-aware; '-' if missing."""
    if is_missing(value):
        return "-"
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError):
        return clean_text(value)
    suffix = ""
    if ts.tzinfo is not None:
        ts, suffix = ts.tz_convert("UTC"), " UTC"
    text = ts.strftime("%Y-%m-%d %H:%M:%S")
    if ts.microsecond:
        text += f".{ts.microsecond // 1000:03d}"
    return text + suffix


def naive_utc(values: pd.Series) -> pd.Series:
    """Timestamps as naive UTC datetime64 (naive input is taken as UTC); unparsable -> NaT."""
    return pd.to_datetime(values, utc=True, errors="coerce").dt.tz_localize(None)


def sorted_by_rank(frame: pd.DataFrame, name_column: str) -> pd.DataFrame:
    """Rows by rank (missing ranks last), ties by name; a stable total order."""
    if frame.empty:
        return frame
    ordered = frame.assign(
        _rank=pd.to_numeric(frame["rank"], errors="coerce"),
        _name=frame[name_column].map(lambda v: "" if is_missing(v) else str(v)))
    ordered = ordered.sort_values(["_rank", "_name"], na_position="last", kind="mergesort")
    return ordered.drop(columns=["_rank", "_name"]).reset_index(drop=True)


def iteration_threshold(iterations: pd.DataFrame) -> float | None:
    """The given threshold (first non-null), else mean - 3 * std (population) of the scores;
    None with fewer than two scored iterations."""
    given = pd.to_numeric(iterations["threshold"], errors="coerce").dropna()
    if len(given):
        return float(given.iloc[0])
    scores = pd.to_numeric(iterations["score"], errors="coerce").dropna()
    if len(scores) < 2:
        return None
    return float(scores.mean() - 3 * scores.std(ddof=0))


@dataclass
class ReportView:
    """The report's content, shaped for rendering. Frames are sorted; caps are applied in the
    ``*_shown`` frames and the totals kept to say what was left out."""

    report: JobReport
    events: pd.DataFrame           # by rank
    nodes: pd.DataFrame            # by rank
    nodes_shown: pd.DataFrame      # top TOP_NODES by rank
    suspects: list[str]            # suspect nodes, in rank order
    iterations: pd.DataFrame       # by iteration, scored rows only
    threshold: float | None
    anomalous: pd.DataFrame        # anomalous iterations, by iteration
    timeline_nodes: list[str]
    first_errors: pd.DataFrame     # earliest first; NaT last
    heat_matrix: pd.DataFrame      # rows event ids (rank order), columns nodes; counts
    heat_events_total: int
    heat_nodes_total: int
    pace_units: pd.DataFrame       # slowest PACE_UNITS units: unit, source, median_ratio, max_ratio, slow_from, n_steps
    pace_series: pd.DataFrame      # unit, step, ratio of those units (and of the others' median: unit "others")

    @property
    def job(self) -> dict:
        return self.report.job

    @property
    def patterns(self) -> list[dict]:
        return self.report.patterns

    @property
    def event_ranks(self) -> dict[str, str]:
        return {str(e): fmt_int(r) for e, r in zip(self.events["event_id"], self.events["rank"])}


def _suspect_names(job: dict, nodes: pd.DataFrame) -> list[str]:
    flagged = [str(n) for n, s in zip(nodes["node"], nodes["suspect"]) if not is_missing(s) and bool(s)]
    listed = [str(n) for n in as_list(job.get("suspect_nodes"))]
    return flagged + [n for n in listed if n not in flagged]


def _timeline_nodes(nodes: pd.DataFrame, suspects: list[str], stages: pd.DataFrame,
                    first_errors: pd.DataFrame) -> list[str]:
    """Suspects first (rank order), then the next nodes by rank, then nodes seen only in the
    stages or errors (by name); at most TIMELINE_NODES, at least TIMELINE_OTHERS non-suspects
    when there are that many."""
    with_data = {str(n) for n in stages["node"]} | {str(n) for n in first_errors["node"]}
    ranked = [str(n) for n in nodes["node"]]
    order = ranked + sorted(with_data - set(ranked))
    order = [n for n in order if n in with_data]
    suspect_set = set(suspects)
    chosen_suspects = [n for n in order if n in suspect_set]
    others = [n for n in order if n not in suspect_set]
    n_others = min(len(others), max(TIMELINE_OTHERS, TIMELINE_NODES - len(chosen_suspects)))
    keep = set(chosen_suspects[: TIMELINE_NODES - n_others]) | set(others[:n_others])
    return [n for n in order if n in keep]


def _heat_matrix(heat: pd.DataFrame, events: pd.DataFrame, nodes: pd.DataFrame
                 ) -> tuple[pd.DataFrame, int, int]:
    """Counts of the flagged events (rows, rank order, top HEAT_EVENTS) on the nodes
    (columns, node rank order then name, top TOP_NODES of those with a line)."""
    counts = heat.assign(event_id=heat["event_id"].astype(str), node=heat["node"].astype(str),
                         n_lines=pd.to_numeric(heat["n_lines"], errors="coerce").fillna(0))
    counts = counts[counts["n_lines"] > 0]
    if counts.empty:
        return pd.DataFrame(), 0, 0
    ranked_events = [str(e) for e in events["event_id"]]
    present = set(counts["event_id"])
    event_order = [e for e in ranked_events if e in present] + sorted(present - set(ranked_events))
    ranked_nodes = [str(n) for n in nodes["node"]]
    present_nodes = set(counts["node"])
    node_order = [n for n in ranked_nodes if n in present_nodes] + sorted(present_nodes - set(ranked_nodes))
    matrix = counts.pivot_table(index="event_id", columns="node", values="n_lines", aggfunc="sum",
                                fill_value=0)
    matrix = matrix.reindex(index=event_order[:HEAT_EVENTS], columns=node_order[:TOP_NODES],
                            fill_value=0)
    return matrix.astype(int), len(event_order), len(node_order)


def unit_label(node, process_rank) -> str:
    return str(node) if is_missing(process_rank) else f"{node}#{int(process_rank)}"


def _slow_from(steps: pd.Series, ratios: pd.Series) -> float | None:
    """The first step from which the unit's ratios stay slow (median of the rest >= SLOW_RATIO)."""
    ratios, steps = ratios.to_numpy(), steps.to_numpy()
    for i in range(len(ratios)):
        if ratios[i] >= SLOW_RATIO and np.median(ratios[i:]) >= SLOW_RATIO:
            return float(steps[i])
    return None


def _pace(pace: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The slowest units by their median ratio to their peers (one source per unit: the one
    with more steps), and the ratio per step of those units and of the other units' median."""
    units_columns = ["unit", "source", "median_ratio", "max_ratio", "slow_from", "n_steps"]
    frame = pace.assign(step=pd.to_numeric(pace["step"], errors="coerce"),
                        ratio=pd.to_numeric(pace["ratio"], errors="coerce")).dropna(subset=["step", "ratio"])
    if frame.empty:
        return pd.DataFrame(columns=units_columns), pd.DataFrame(columns=["unit", "step", "ratio"])
    frame = frame.assign(unit=[unit_label(n, r) for n, r in zip(frame["node"], frame["process_rank"])],
                         source=frame["source"].fillna("timers").astype(str))
    source = frame.groupby("source")["step"].nunique().sort_values(ascending=False, kind="mergesort").index[0]
    frame = frame[frame["source"] == source].sort_values(["unit", "step"], kind="mergesort")
    rows = [{"unit": unit, "source": source, "median_ratio": float(part["ratio"].median()),
             "max_ratio": float(part["ratio"].max()), "slow_from": _slow_from(part["step"], part["ratio"]),
             "n_steps": int(len(part))} for unit, part in frame.groupby("unit", sort=True)]
    units = (pd.DataFrame(rows, columns=units_columns)
             .sort_values(["median_ratio", "unit"], ascending=[False, True], kind="mergesort")
             .head(PACE_UNITS).reset_index(drop=True))
    shown = frame[frame["unit"].isin(set(units["unit"]))][["unit", "step", "ratio"]]
    others = (frame[~frame["unit"].isin(set(units["unit"]))].groupby("step", as_index=False)["ratio"].median()
              .assign(unit="others"))
    series = pd.concat([shown, others[["unit", "step", "ratio"]]], ignore_index=True) if len(others) else shown
    return units, series.reset_index(drop=True)


def build_view(report: JobReport) -> ReportView:
    """Check ``report`` and shape it for the renderers."""
    report = checked(report)
    events = sorted_by_rank(report.events, "event_id")
    nodes = sorted_by_rank(report.nodes, "node")
    suspects = _suspect_names(report.job, nodes)

    iterations = report.iterations.assign(
        iteration=pd.to_numeric(report.iterations["iteration"], errors="coerce"),
        score=pd.to_numeric(report.iterations["score"], errors="coerce"))
    iterations = iterations.dropna(subset=["iteration", "score"]).sort_values(
        "iteration", kind="mergesort").reset_index(drop=True)
    threshold = iteration_threshold(report.iterations)
    flagged = iterations["anomalous"].map(lambda v: not is_missing(v) and bool(v))
    if not flagged.any() and threshold is not None and report.iterations["anomalous"].map(is_missing).all():
        flagged = iterations["score"] < threshold
    anomalous = iterations[flagged.astype(bool)].reset_index(drop=True)

    first_errors = report.first_errors.assign(_ts=naive_utc(report.first_errors["ts"]),
                                              _node=report.first_errors["node"].astype(str))
    first_errors = first_errors.sort_values(["_ts", "_node"], na_position="last", kind="mergesort")
    first_errors = first_errors.drop(columns=["_ts", "_node"]).reset_index(drop=True)

    heat_matrix, heat_events_total, heat_nodes_total = _heat_matrix(report.heat, events, nodes)
    pace_units, pace_series = _pace(report.pace)
    return ReportView(
        report=report, events=events, nodes=nodes, nodes_shown=nodes.head(TOP_NODES),
        suspects=suspects, iterations=iterations, threshold=threshold, anomalous=anomalous,
        timeline_nodes=_timeline_nodes(nodes, suspects, report.stages, report.first_errors),
        first_errors=first_errors, heat_matrix=heat_matrix,
        heat_events_total=heat_events_total, heat_nodes_total=heat_nodes_total,
        pace_units=pace_units, pace_series=pace_series)


PACE_SOURCES = {"timers": "per-rank timers", "progress": "per-rank progress lines"}


def pace_rows(view: ReportView) -> list[list[str]]:
    """The pace table's rows: unit, median and largest ratio to its peers, slow from, steps."""
    return [[clean_text(r["unit"]), f"{r['median_ratio']:.2f}x", f"{r['max_ratio']:.2f}x",
             "-" if is_missing(r["slow_from"]) else str(int(r["slow_from"])), fmt_int(r["n_steps"])]
            for _, r in view.pace_units.iterrows()]


def pace_sentence(view: ReportView) -> str | None:
    """One sentence on the slowest unit, or None without per-rank readings."""
    if view.pace_units.empty:
        return None
    top = view.pace_units.iloc[0]
    source = PACE_SOURCES.get(str(top["source"]), str(top["source"]))
    if top["median_ratio"] < SLOW_RATIO:
        return f"No unit is slower than its peers ({source}, {int(top['n_steps'])} steps; the slowest at " \
               f"{top['median_ratio']:.2f}x their median)."
    since = "" if is_missing(top["slow_from"]) else f" from step {int(top['slow_from'])}"
    return (f"{clean_text(top['unit'])} takes {top['median_ratio']:.2f}x its peers' median time per step{since} "
            f"({source}, {int(top['n_steps'])} steps): the others wait for it.")


def header_facts(view: ReportView) -> list[tuple[str, str]]:
    """(label, value) pairs of the report header, in display order."""
    job = view.job
    iteration = job.get("failure_iteration")
    failure_iteration = "-" if is_missing(iteration) else str(int(iteration))
    suspects = ", ".join(clean_text(n) for n in as_list(job.get("suspect_nodes"))) or "none"
    return [
        ("Status", fmt_value(job.get("status"))),
        ("Failure stage", fmt_value(job.get("failure_stage"))),
        ("Failure iteration", failure_iteration),
        ("Suspect nodes", suspects),
        ("History group", fmt_value(job.get("history"))),
        ("Lines", fmt_value(job.get("n_lines"))),
        ("Candidate events", fmt_value(job.get("n_candidate_events"))),
        ("Flagged events", f"{len(view.events):,}"),
        ("Nodes", fmt_value(job.get("n_nodes")) if not is_missing(job.get("n_nodes"))
         else f"{len(view.nodes):,}"),
        ("Ranks", fmt_value(job.get("n_ranks"))),
        ("Iterations", f"{len(view.iterations):,} ({len(view.anomalous):,} anomalous)"),
    ]


def provenance_facts(view: ReportView) -> list[tuple[str, str]]:
    """(label, value) pairs of where the diagnosis comes from: run, time, version, settings."""
    job = view.job
    settings = job.get("settings") or {}
    settings_text = ", ".join(f"{clean_text(k)}={clean_text(settings[k])}" for k in sorted(settings, key=str))
    return [
        ("Run id", fmt_value(job.get("run_id"))),
        ("Processed at", fmt_value(job.get("processed_at"))),
        ("Version", fmt_value(job.get("version"))),
        ("Settings", settings_text or "-"),
    ]


def nodes_caption(view: ReportView) -> str:
    total = len(view.nodes)
    shown = len(view.nodes_shown)
    if shown < total:
        return f"Top {shown} of {total} nodes by rank."
    return f"All {total} nodes by rank."


def is_silent(row) -> bool:
    value = row.get("silent")
    return not is_missing(value) and bool(value)


def silent_note(row) -> str:
    gap = row.get("silent_gap_s")
    if is_missing(gap) or not math.isfinite(float(gap)):
        return "silent"
    return f"silent {float(gap):,.0f} s"
