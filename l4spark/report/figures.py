"""The report's pictures as inline SVG (matplotlib, imported lazily: the CLI starts fast).

Each ``*_svg`` function takes a ``ReportView`` and returns an ``<svg>`` element as text, or
None when there is nothing to draw (the page then says why in a sentence). The SVG has no XML
prolog, DOCTYPE or metadata, no date, text kept as text, and ids salted per picture so that
several pictures can live in one page and the same input gives the same bytes.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd

from l4spark.report.view import (
    SLOW_RATIO,
    ReportView,
    clean_text,
    is_missing,
    is_silent,
    naive_utc,
    silent_note,
)

SUSPECT_COLOUR = "#c0392b"
NODE_COLOUR = "#8da0b8"
THRESHOLD_COLOUR = "#c0392b"
CURVE_COLOUR = "#2c6fbb"
STAGE_COLOURS = {
    "init": "#9e9e9e",
    "data_loading": "#17becf",
    "model_loading": "#9467bd",
    "training": "#2ca02c",
    "checkpoint_saving": "#ff7f0e",
    "finished": "#4d4d4d",
}
OTHER_STAGE_COLOUR = "#d9d9d9"
LABEL_CHARS = 28        # node / event labels on the axes are cut to this many characters

_RC = {
    "svg.fonttype": "none",         # text as <text>: smaller, selectable
    "text.parse_math": False,       # '$' in a node name is text, not mathtext
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _label(value) -> str:
    return clean_text(value, LABEL_CHARS)


def _svg(figure, salt: str) -> str:
    """The figure as an inline ``<svg>`` element (deterministic for a given salt)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"l4spark-{salt}"}):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return text.strip()


def _figure(width: float, height: float):
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        return Figure(figsize=(width, height), dpi=100)


def node_scores_svg(view: ReportView) -> str | None:
    """Horizontal bars of the top nodes' anomaly scores, most suspect on top; suspects red,
    silent nodes hatched and labelled with their gap. None with fewer than two nodes."""
    if len(view.nodes) < 2:
        return None
    import matplotlib
    from matplotlib.patches import Patch

    shown = view.nodes_shown
    scores = pd.to_numeric(shown["score"], errors="coerce")
    suspects = set(view.suspects)
    with matplotlib.rc_context(_RC):
        figure = _figure(8.5, 0.8 + 0.22 * len(shown))
        axes = figure.add_subplot()
        positions = np.arange(len(shown))
        values = scores.fillna(0.0).to_numpy()
        colours = [SUSPECT_COLOUR if str(n) in suspects else NODE_COLOUR for n in shown["node"]]
        bars = axes.barh(positions, values, color=colours, height=0.7)
        top = max(float(np.nanmax(values)) if len(values) else 0.0, 1e-9)
        for bar, (_, row), score in zip(bars, shown.iterrows(), scores):
            note = "n/a" if is_missing(score) else f"{score:.3f}"
            if is_silent(row):
                bar.set_hatch("///")
                bar.set_edgecolor("#333333")
                note += f"  ({silent_note(row)})"
            axes.text(bar.get_width() + top * 0.01, bar.get_y() + bar.get_height() / 2, note,
                      va="center", fontsize=7.5, color="#333333")
        axes.set_yticks(positions, [_label(n) for n in shown["node"]])
        for tick, colour in zip(axes.get_yticklabels(), colours):
            tick.set_color("#7b1d12" if colour == SUSPECT_COLOUR else "#333333")
        axes.set_ylim(len(shown) - 0.5, -0.5)
        axes.set_xlim(0, top * 1.25)
        axes.set_xlabel("anomaly score (rank order, most suspect on top)")
        axes.legend(handles=[Patch(color=SUSPECT_COLOUR, label="suspect"),
                             Patch(color=NODE_COLOUR, label="other"),
                             Patch(facecolor="white", edgecolor="#333333", hatch="///", label="silent")],
                    loc="lower right", fontsize=8, frameon=False)
        return _svg(figure, "nodes")


def pace_svg(view: ReportView) -> str | None:
    """Each of the slowest units' ratio to its peers' median per step (the slowest in red, the
    median of the other units in grey), the slow line dashed. None with fewer than two steps."""
    series = view.pace_series
    if series.empty or series["step"].nunique() < 2:
        return None
    import matplotlib

    with matplotlib.rc_context(_RC):
        figure = _figure(9.5, 3.0)
        axes = figure.add_subplot()
        order = [*view.pace_units["unit"], "others"]
        for i, unit in enumerate(order):
            part = series[series["unit"] == unit].sort_values("step", kind="mergesort")
            if part.empty:
                continue
            colour = SUSPECT_COLOUR if i == 0 else ("#9e9e9e" if unit == "others" else NODE_COLOUR)
            label = "median of the other units" if unit == "others" else _label(unit)
            axes.plot(part["step"], part["ratio"], color=colour, linewidth=1.6 if i == 0 else 0.9,
                      label=label if i < 4 or unit == "others" else None)
        axes.axhline(SLOW_RATIO, color="#555555", linestyle="--", linewidth=0.8, label=f"slow ({SLOW_RATIO}x)")
        axes.set_xlabel("step (iteration)")
        axes.set_ylabel("time / peers' median")
        axes.legend(loc="best", fontsize=8, frameon=False)
        axes.margins(x=0.02, y=0.15)
        return _svg(figure, "pace")


def iteration_curve_svg(view: ReportView) -> str | None:
    """Score per iteration, the threshold as a dashed line, anomalous iterations as red dots
    (the first ten labelled), the failure iteration as a dotted line. None with < 2 points."""
    iterations = view.iterations
    if len(iterations) < 2:
        return None
    import matplotlib

    with matplotlib.rc_context(_RC):
        figure = _figure(9.5, 3.0)
        axes = figure.add_subplot()
        many = len(iterations) > 200
        axes.plot(iterations["iteration"], iterations["score"], color=CURVE_COLOUR, linewidth=1.2,
                  marker=None if many else "o", markersize=3, label="similarity score")
        if view.threshold is not None:
            axes.axhline(view.threshold, color=THRESHOLD_COLOUR, linestyle="--", linewidth=1,
                         label=f"threshold {view.threshold:.3f}")
        anomalous = view.anomalous
        if len(anomalous):
            axes.scatter(anomalous["iteration"], anomalous["score"], color=THRESHOLD_COLOUR,
                         s=28, zorder=3, label="anomalous")
            for iteration, score in zip(anomalous["iteration"].head(10), anomalous["score"].head(10)):
                axes.annotate(str(int(iteration)), (iteration, score), textcoords="offset points",
                              xytext=(0, -12), ha="center", fontsize=7.5, color=THRESHOLD_COLOUR)
        failure = view.job.get("failure_iteration")
        if not is_missing(failure):
            axes.axvline(float(failure), color="#555555", linestyle=":", linewidth=1,
                         label=f"failure iteration {int(failure)}")
        axes.set_xlabel("iteration")
        axes.set_ylabel("score")
        axes.legend(loc="best", fontsize=8, frameon=False)
        axes.margins(x=0.02, y=0.15)
        return _svg(figure, "iterations")


def timeline_svg(view: ReportView) -> str | None:
    """Per node (``view.timeline_nodes``), each stage span as a coloured bar along time and a
    red cross at the node's first ERROR/FATAL line. None without any timestamped span or error."""
    nodes = view.timeline_nodes
    stages = view.report.stages
    stages = stages.assign(node=stages["node"].astype(str), start=naive_utc(stages["start_ts"]),
                           end=naive_utc(stages["end_ts"]))
    stages = stages[stages["node"].isin(nodes) & stages["start"].notna()]
    stages = stages.assign(stage=stages["stage"].astype(str)).sort_values(
        ["stage", "node", "start", "end"], kind="mergesort")     # drawing order independent of input order
    errors = view.first_errors.assign(node=view.first_errors["node"].astype(str),
                                      when=naive_utc(view.first_errors["ts"]))
    errors = errors[errors["node"].isin(nodes) & errors["when"].notna()]
    if stages.empty and errors.empty:
        return None
    import matplotlib
    import matplotlib.dates as mdates
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    suspects = set(view.suspects)
    row_of = {node: i for i, node in enumerate(nodes)}
    with matplotlib.rc_context(_RC):
        figure = _figure(9.5, 1.0 + 0.28 * len(nodes))
        axes = figure.add_subplot()
        seen_stages = []
        for stage, spans in stages.groupby("stage", sort=True):
            starts = mdates.date2num(spans["start"].to_numpy())
            ends = mdates.date2num(spans["end"].fillna(spans["start"]).to_numpy())
            colour = STAGE_COLOURS.get(str(stage), OTHER_STAGE_COLOUR)
            axes.barh([row_of[n] for n in spans["node"]], np.maximum(ends - starts, 0), left=starts,
                      height=0.6, color=colour, edgecolor="white", linewidth=0.4)
            seen_stages.append(str(stage))
        if not errors.empty:
            axes.scatter(mdates.date2num(errors["when"].to_numpy()), [row_of[n] for n in errors["node"]],
                         marker="X", s=55, color=SUSPECT_COLOUR, edgecolor="white", linewidth=0.6,
                         zorder=3)
        axes.set_yticks(range(len(nodes)), [_label(n) for n in nodes])
        for tick, node in zip(axes.get_yticklabels(), nodes):
            if node in suspects:
                tick.set_color("#7b1d12")
                tick.set_fontweight("bold")
        axes.set_ylim(len(nodes) - 0.5, -0.5)
        locator = mdates.AutoDateLocator()
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        axes.set_xlabel("time (UTC)")
        order = [s for s in STAGE_COLOURS if s in seen_stages] + sorted(set(seen_stages) - set(STAGE_COLOURS))
        handles = [Patch(color=STAGE_COLOURS.get(s, OTHER_STAGE_COLOUR), label=s) for s in order]
        handles.append(Line2D([], [], marker="X", linestyle="none", color=SUSPECT_COLOUR,
                              markersize=7, label="first ERROR/FATAL"))
        axes.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0),
                    ncol=min(len(handles), 7), fontsize=8, frameon=False)
        return _svg(figure, "timeline")


def heatmap_svg(view: ReportView) -> str | None:
    """Lines of each flagged event (rows, rank order) on each node (columns, node rank order),
    log colour scale, empty cells blank; counts written in the cells of small maps."""
    matrix = view.heat_matrix
    if matrix.empty:
        return None
    import matplotlib
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    counts = matrix.to_numpy(dtype=float)
    masked = np.ma.masked_less(counts, 1)
    ranks = view.event_ranks
    suspects = set(view.suspects)
    with matplotlib.rc_context(_RC):
        n_rows, n_cols = counts.shape
        figure = _figure(min(2.8 + 0.24 * n_cols, 12.0), 1.6 + 0.26 * n_rows)
        axes = figure.add_subplot()
        colours = matplotlib.colormaps["YlOrRd"].with_extremes(bad="#f3f3f3")
        image = axes.imshow(masked, aspect="auto", interpolation="nearest", cmap=colours,
                            norm=LogNorm(vmin=1, vmax=max(float(counts.max()), 2.0)))
        if n_rows * n_cols <= 400:
            high = np.sqrt(max(float(counts.max()), 2.0))
            for (row, col), value in np.ndenumerate(counts):
                if value >= 1:
                    axes.text(col, row, f"{int(value)}", ha="center", va="center", fontsize=6.5,
                              color="white" if value > high else "#222222")
        row_labels = [f"#{ranks.get(e, '-')} {_label(e)}" for e in matrix.index]
        axes.set_yticks(range(n_rows), row_labels)
        axes.set_xticks(range(n_cols), [_label(n) for n in matrix.columns], rotation=90)
        for tick, node in zip(axes.get_xticklabels(), matrix.columns):
            if node in suspects:
                tick.set_color("#7b1d12")
                tick.set_fontweight("bold")
        axes.tick_params(length=0)
        for side in ("left", "bottom"):
            axes.spines[side].set_visible(False)
        colourbar = figure.colorbar(image, ax=axes, label="lines (log scale)", fraction=0.04, pad=0.02)
        # plain tick labels: the default log labels are mathtext, which text.parse_math turns off
        colourbar.ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        colourbar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        colourbar.ax.yaxis.set_minor_formatter(NullFormatter())
        return _svg(figure, "heat")
