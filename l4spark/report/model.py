"""The input of the per-job report: one job's diagnosis, already computed, as plain pandas/dicts.

``JobReport`` holds the ``diagnosis_jobs`` row (a dict) and the job's rows of the other output
tables (DataFrames without ``job_id``). Every DataFrame may be empty; a frame with no columns at
all counts as empty too. ``checked`` returns a copy whose frames carry every column the
renderers read (optional ones added as nulls) and raises ``ReportInputError`` naming the frame
and the columns when a required one is missing from a non-empty frame.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pandas as pd

from l4spark.errors import L4SparkError

STAGES = ("init", "data_loading", "model_loading", "training", "checkpoint_saving", "finished")

# frame -> (required columns of a non-empty frame, optional columns filled with nulls)
FRAME_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "events": (("event_id", "rank"),
               ("template", "score", "sources", "n_lines", "n_nodes", "first_ts", "stage",
                "sample", "sample_node", "sample_ts")),
    "nodes": (("node", "rank", "score"),
              ("process_rank", "suspect", "silent", "silent_gap_s", "n_lines", "evidence",
               "evidence_scores")),
    "iterations": (("iteration", "score"), ("anomalous", "event_ids", "threshold")),
    "stages": (("node", "stage", "start_ts", "end_ts"), ()),
    "first_errors": (("node", "ts"), ("event_id", "message")),
    "heat": (("event_id", "node", "n_lines"), ()),
    "pace": (("node", "step", "ratio"), ("process_rank", "source", "timer", "ms", "peer_ms")),
}


class ReportInputError(L4SparkError):
    """A JobReport lacks a column or value the renderers need (the message names it)."""


def empty_frame(name: str) -> pd.DataFrame:
    """An empty DataFrame with every column of ``name`` (one of ``FRAME_COLUMNS``)."""
    required, optional = FRAME_COLUMNS[name]
    return pd.DataFrame(columns=list(required + optional))


def _frame_field(name: str):
    return field(default_factory=lambda: empty_frame(name))


@dataclass
class JobReport:
    """One job's diagnosis, the input of every renderer.

    job: the diagnosis_jobs row: job_id, status ('diagnosed'|'error'), failure_stage,
        failure_iteration (int|None), suspect_nodes (list[str]), matched_patterns (list[str]),
        n_lines, n_candidate_events, error (str|None), run_id, processed_at, version; extra keys
        settings (dict), n_nodes, n_ranks, history (str). Missing keys render as "-".
    patterns: matched patterns, best first: pattern_id, name, fault_class, confidence (0-1),
        root_cause, remedy, matched_event_ids (list).
    events: diagnosis_events rows: event_id, template, rank, score, sources (list[str]),
        n_lines, n_nodes, first_ts (may be NaT), stage, sample, sample_node, sample_ts.
    nodes: diagnosis_nodes rows: node, process_rank, rank, score, suspect, silent,
        silent_gap_s, n_lines, evidence (list), evidence_scores (list).
    iterations: iteration, score, anomalous, event_ids (list), threshold (missing or NaN: the
        renderers use mean - 3 * std of the scores).
    stages: node, stage, start_ts, end_ts: the span of each stage on each node.
    first_errors: node, ts, event_id, message: each node's first ERROR/FATAL line.
    heat: event_id, node, n_lines: lines of each flagged event per node.
    pace: diagnosis_pace rows: node, process_rank, source, step, timer, ms, peer_ms, ratio: each
        unit's slowest per-rank reading per logged step against its peers' median.
    """

    job: dict
    patterns: list[dict] = field(default_factory=list)
    events: pd.DataFrame = _frame_field("events")
    nodes: pd.DataFrame = _frame_field("nodes")
    iterations: pd.DataFrame = _frame_field("iterations")
    stages: pd.DataFrame = _frame_field("stages")
    first_errors: pd.DataFrame = _frame_field("first_errors")
    heat: pd.DataFrame = _frame_field("heat")
    pace: pd.DataFrame = _frame_field("pace")


def checked(report: JobReport) -> JobReport:
    """A copy of ``report`` whose frames have every column of ``FRAME_COLUMNS``.

    Raises ``ReportInputError`` when the job has no job_id or a non-empty frame lacks a
    required column. Optional columns missing from a frame are added as nulls.
    """
    if not isinstance(report.job, dict) or not str(report.job.get("job_id") or ""):
        raise ReportInputError(f"JobReport.job needs a non-empty 'job_id'; found {report.job!r:.200}")
    frames = {}
    for name, (required, optional) in FRAME_COLUMNS.items():
        frame = getattr(report, name)
        if frame is None or (len(frame) == 0 and len(frame.columns) == 0):
            frames[name] = empty_frame(name)
            continue
        missing = [c for c in required if c not in frame.columns]
        if missing:
            raise ReportInputError(
                f"JobReport.{name} lacks column(s) {missing}; expected at least {list(required)}, "
                f"found {list(frame.columns)}")
        frame = frame.copy()
        for column in optional:
            if column not in frame.columns:
                frame[column] = None
        frames[name] = frame.reset_index(drop=True)
    patterns = [dict(p) for p in (report.patterns or [])]
    return dataclasses.replace(report, job=dict(report.job), patterns=patterns, **frames)
