"""Read the result tables of a warehouse for analysts: small pandas frames for the notebooks.

``notebooks/fleet_overview.ipynb`` (which faults recur, which nodes keep showing up, at which
stage jobs die) and ``notebooks/job_drilldown.ipynb`` (one job's diagnosis and the lines around
its first flagged event) call these functions and hold no logic of their own.

Why pyarrow and not Spark: the diagnosis tables are small (a row per job, per flagged event, per
node, per iteration), and a pyarrow read takes milliseconds where a SparkSession takes tens of
seconds to start and a JVM's memory to hold. ``events`` is the one big table (a row per log
line); it is only ever read one job at a time, from that job's partition folder, with a filter
that Parquet statistics push down (the anchor line's event, then a line-number window of one
file), so a drill-down reads kilobytes whatever the size of the warehouse and nothing collects a
whole table. Spark stays the tool for fleet-wide questions over ``events`` (Spark SQL on
``l4spark.io.storage.read_table``).

Both formats are read, each table in the one it is stored in: a Delta table through its log
with delta-rs (``deltalake``, no Spark; its folder also holds files the log has removed, so it is
never read as plain Parquet), a Parquet table as its folder tree. A Delta table's partition and
file statistics prune the same filters.

Every function takes the warehouse root (``str`` or ``Path``) and returns a new pandas frame (or
Series); list columns (``suspect_nodes``, ``sources``...) hold numpy arrays, as pyarrow gives
them. Timestamps are naive UTC (the session time zone of the writers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable

from l4spark.config import StorageConfig
from l4spark.io import tables
from l4spark.errors import L4SparkError
from l4spark.diagnosis.patterns import FaultPattern
from l4spark.io.storage import escape_partition_value, stored_format

UNKNOWN = "unknown"


class AnalysisError(L4SparkError):
    """A table or a job the analysis needs is not in the warehouse, or cannot be read here."""


def read_result_table(warehouse: str | Path, table: str, job_id: str | None = None,
                      columns: list[str] | None = None, row_filter: ds.Expression | None = None) -> pd.DataFrame:
    """The rows of ``table`` (of one job when ``job_id`` is given: only its partition folder is
    read), optionally only ``columns`` and the rows matching ``row_filter``.

    A job without rows gives an empty frame with the table's columns. Raises AnalysisError when
    the table does not exist (the message says which command writes it).
    """
    base = _table_dir(warehouse, table)
    if job_id is None or _format(warehouse, table) == "delta":
        if job_id is not None:
            in_job = ds.field("job_id") == job_id
            row_filter = in_job if row_filter is None else in_job & row_filter
        return _read(_dataset(base, table), columns, row_filter)
    folder = base / f"job_id={escape_partition_value(job_id)}"
    if not folder.is_dir():
        in_job = ds.field("job_id") == job_id
        return _read(_dataset(base, table), columns, in_job if row_filter is None else in_job & row_filter)
    rows = _read(ds.dataset(folder, format="parquet"), [c for c in columns or [] if c != "job_id"] or None, row_filter)
    rows.insert(0, "job_id", job_id)
    return rows[columns] if columns else rows


def failures_by(warehouse: str | Path, column: str) -> pd.DataFrame:
    """Diagnosed jobs counted by a column of ``diagnosis_jobs`` (``failure_stage``,
    ``fault_class``, ``history``...).

    Output: ``column``, n_jobs, share (of the diagnosed jobs); most jobs first, then by value.
    A null value counts as ``unknown`` (no matched pattern, no stage found). Jobs whose diagnosis
    erred are left out: ``diagnosis_errors`` lists them.
    """
    jobs = _diagnosed(read_result_table(warehouse, "diagnosis_jobs"))
    if column not in jobs.columns:
        raise AnalysisError(f"diagnosis_jobs has no column {column!r}; columns: {', '.join(jobs.columns)}")
    counts = (jobs[column].astype("object").where(jobs[column].notna(), UNKNOWN).astype(str)
              .value_counts().rename("n_jobs").rename_axis(column).reset_index())
    counts["share"] = counts["n_jobs"] / max(len(jobs), 1)
    return counts.sort_values(["n_jobs", column], ascending=[False, True], ignore_index=True)


def recurring_suspects(warehouse: str | Path, min_jobs: int = 2) -> pd.DataFrame:
    """Nodes that the diagnosis named suspect in at least ``min_jobs`` diagnosed jobs: the bad
    machine list.

    Input: ``diagnosis_jobs.suspect_nodes`` (the diagnosis' verdict, most suspect first).
    Output: node, n_jobs, jobs (sorted ids), best_position (1 = the job's most suspect node, at
    least once), fault_classes (sorted, ``unknown`` for jobs without a matched pattern); most
    jobs first, then best position, then node.
    """
    jobs = _diagnosed(read_result_table(warehouse, "diagnosis_jobs", columns=["job_id", "status", "suspect_nodes", "fault_class"]))
    named = jobs.assign(node=jobs["suspect_nodes"].map(_as_list))[["job_id", "node", "fault_class"]]
    named["position"] = named["node"].map(lambda nodes: list(range(1, len(nodes) + 1)))
    named = named.explode(["node", "position"]).dropna(subset=["node"]).drop_duplicates(["node", "job_id"])
    named["fault_class"] = named["fault_class"].fillna(UNKNOWN)
    suspects = (named.groupby("node", as_index=False)
                .agg(n_jobs=("job_id", "nunique"), jobs=("job_id", lambda ids: sorted(set(ids))),
                     best_position=("position", "min"), fault_classes=("fault_class", lambda cs: sorted(set(cs)))))
    suspects = suspects[suspects["n_jobs"] >= min_jobs].astype({"n_jobs": "int64", "best_position": "int64"})
    return suspects.sort_values(["n_jobs", "best_position", "node"], ascending=[False, True, True], ignore_index=True)


def top_events(warehouse: str | Path, n: int = 20) -> pd.DataFrame:
    """The failure-indicating events flagged in the most jobs (``diagnosis_events`` by event_id).

    Output: event_id, template, n_jobs, n_lines (candidate lines over those jobs), best_rank,
    mean_score, sources (union), sample (line of the event's best-ranked row, whose template
    is shown too); most jobs first, then most lines, then event id; at most ``n`` rows.
    """
    events = read_result_table(warehouse, "diagnosis_events",
                               columns=["job_id", "event_id", "template", "rank", "score", "sources", "n_lines", "sample"])
    best = events.sort_values(["rank", "job_id"]).drop_duplicates("event_id").set_index("event_id")
    counted = (events.groupby("event_id")
               .agg(n_jobs=("job_id", "nunique"), n_lines=("n_lines", "sum"), best_rank=("rank", "min"),
                    mean_score=("score", "mean"),
                    sources=("sources", lambda lists: sorted({s for one in lists for s in _as_list(one)}))))
    counted = counted.join(best[["template", "sample"]]).reset_index()
    counted = counted[["event_id", "template", "n_jobs", "n_lines", "best_rank", "mean_score", "sources", "sample"]]
    return (counted.astype({"n_jobs": "int64", "n_lines": "int64", "best_rank": "int64"})
            .sort_values(["n_jobs", "n_lines", "event_id"], ascending=[False, False, True], ignore_index=True)
            .head(n))


def diagnosis_errors(warehouse: str | Path) -> pd.DataFrame:
    """Jobs the diagnosis could not diagnose: job_id, error (the reason), run_id, processed_at;
    latest first, then by job id."""
    jobs = read_result_table(warehouse, "diagnosis_jobs", columns=["job_id", "status", "error", "run_id", "processed_at"])
    errors = jobs[jobs["status"] == "error"].drop(columns="status")
    return errors.sort_values(["processed_at", "job_id"], ascending=[False, True], ignore_index=True)


def latest_runs(warehouse: str | Path, n: int = 10) -> pd.DataFrame:
    """The ``n`` latest nightly runs (``runs`` table), latest first; an empty frame when the
    warehouse was never run by the nightly batch (``l4spark diagnose`` alone writes no runs)."""
    if not _exists(warehouse, "runs"):
        return pd.DataFrame(columns=["run_id", "run_date", "started_at", "finished_at", "status", "n_scanned_jobs",
                                     "n_parsed_jobs", "n_selected_jobs", "n_diagnosed", "n_errors", "errors"])
    runs = read_result_table(warehouse, "runs")
    first = ["run_id", "run_date", "started_at", "finished_at", "status"]
    runs = runs[first + [c for c in runs.columns if c not in first]]
    return runs.sort_values(["started_at", "run_id"], ascending=[False, False], ignore_index=True).head(n)


def default_job(warehouse: str | Path) -> str:
    """A job to drill into when none is named: the diagnosed job with the most flagged events
    (ties: the latest processed, then the smallest id)."""
    jobs = _diagnosed(read_result_table(warehouse, "diagnosis_jobs",
                                        columns=["job_id", "status", "n_flagged_events", "processed_at"]))
    if jobs.empty:
        raise AnalysisError(f"no diagnosed job in {warehouse}: run `l4spark diagnose` or `l4spark nightly` first")
    ranked = jobs.sort_values(["n_flagged_events", "processed_at", "job_id"], ascending=[False, False, True])
    return str(ranked["job_id"].iloc[0])


def job_summary(warehouse: str | Path, job_id: str) -> pd.Series:
    """The job's ``diagnosis_jobs`` row (status, failure stage and iteration, suspect nodes,
    matched patterns, best pattern's fault class, root cause and remedy...). Raises
    AnalysisError when the job has no diagnosis."""
    rows = read_result_table(warehouse, "diagnosis_jobs", job_id=job_id)
    if rows.empty:
        raise AnalysisError(f"job {job_id!r} has no diagnosis in {warehouse}; diagnosed jobs are listed in "
                            "diagnosis_jobs (l4spark diagnose --job ... writes one)")
    return rows.iloc[0]


def job_patterns(warehouse: str | Path, job_id: str, library: Iterable[FaultPattern]) -> pd.DataFrame:
    """The job's matched fault patterns, best first, with what the library says about them.

    ``library``: the patterns to look up (``l4spark.diagnosis.pattern_store.pattern_library``).
    Output: position (1 = best), pattern_id, name, fault_class, root_cause, remedy, stage,
    in_library; a pattern id the library no longer has keeps its row, with nulls and
    in_library False. No matched pattern: an empty frame.
    """
    summary = job_summary(warehouse, job_id)
    by_id = {p.pattern_id: p for p in library}
    rows = []
    for position, pattern_id in enumerate(_as_list(summary["matched_patterns"]), start=1):
        pattern = by_id.get(pattern_id)
        rows.append({"position": position, "pattern_id": pattern_id,
                     **{key: getattr(pattern, key, None) for key in ("name", "fault_class", "root_cause", "remedy", "stage")},
                     "in_library": pattern is not None})
    return pd.DataFrame(rows, columns=["position", "pattern_id", "name", "fault_class", "root_cause", "remedy", "stage",
                                       "in_library"])


def job_events(warehouse: str | Path, job_id: str) -> pd.DataFrame:
    """The job's flagged events (``diagnosis_events`` without job_id), most indicative first."""
    events = read_result_table(warehouse, "diagnosis_events", job_id=job_id).drop(columns="job_id")
    return events.sort_values(["rank", "event_id"], ignore_index=True)


def job_nodes(warehouse: str | Path, job_id: str) -> pd.DataFrame:
    """The job's node ranking (``diagnosis_nodes`` without job_id), most suspect first."""
    nodes = read_result_table(warehouse, "diagnosis_nodes", job_id=job_id).drop(columns="job_id")
    return nodes.sort_values(["rank", "node"], ignore_index=True)


def job_iterations(warehouse: str | Path, job_id: str) -> pd.DataFrame:
    """The job's iterations (``diagnosis_iterations`` without job_id) in order; ``anomalous``
    marks those below the DTW three-sigma threshold. Empty when the job never trained."""
    iterations = read_result_table(warehouse, "diagnosis_iterations", job_id=job_id).drop(columns="job_id")
    return iterations.sort_values("iteration", ignore_index=True)


def first_flagged_event(warehouse: str | Path, job_id: str) -> pd.Series | None:
    """The job's flagged event that appeared first (``first_ts``; no time: after the timed ones,
    by rank), as its ``diagnosis_events`` row; None when the job has no flagged event."""
    events = job_events(warehouse, job_id)
    if events.empty:
        return None
    return events.sort_values(["first_ts", "rank"], na_position="last").iloc[0]


def lines_around(warehouse: str | Path, job_id: str, event_id: str, node: str | None = None,
                 before: int = 10, after: int = 10) -> pd.DataFrame:
    """The ``events`` lines around the first line of ``event_id`` in the job (on ``node`` when
    given, as ``sample_node`` of a flagged event): ``before`` and ``after`` lines of the same
    rank file, by line number.

    Reads only the job's partition. Output: node, rank, file, line_no, ts, level, event_id,
    message, anchor (the event's line), flagged (its event is one of the job's flagged
    events). "First" is the earliest timestamp on that node (lines without one come last), then
    file and line number. Raises AnalysisError when the job has no line of the event.
    """
    match = ds.field("event_id") == event_id
    if node is not None:
        match = match & (ds.field("node") == node)
    occurrences = read_result_table(warehouse, "events", job_id=job_id, columns=["file", "line_no", "ts"],
                                    row_filter=match)
    if occurrences.empty:
        where = f" on node {node!r}" if node is not None else ""
        raise AnalysisError(f"job {job_id!r} has no line of event {event_id!r}{where} in the events table of {warehouse}")
    anchor = occurrences.sort_values(["ts", "file", "line_no"], na_position="last").iloc[0]
    window = ((ds.field("file") == anchor["file"]) & (ds.field("line_no") >= int(anchor["line_no"]) - before)
              & (ds.field("line_no") <= int(anchor["line_no"]) + after))
    lines = read_result_table(warehouse, "events", job_id=job_id, row_filter=window,
                              columns=["node", "rank", "file", "line_no", "ts", "level", "event_id", "message"])
    lines = lines.sort_values("line_no", ignore_index=True)
    lines["anchor"] = lines["line_no"] == anchor["line_no"]
    flagged = set(read_result_table(warehouse, "diagnosis_events", job_id=job_id, columns=["event_id"])["event_id"])
    lines["flagged"] = lines["event_id"].isin(flagged)
    return lines


def _table_dir(warehouse: str | Path, table: str) -> Path:
    if not _exists(warehouse, table):
        raise AnalysisError(f"no {table} table under {warehouse}: "
                            "`make demo`, `l4spark diagnose` or `l4spark nightly` write the result tables")
    return Path(warehouse) / table


def _format(warehouse: str | Path, table: str) -> str | None:
    return stored_format(StorageConfig(warehouse=str(warehouse)), table)


def _exists(warehouse: str | Path, table: str) -> bool:
    return _format(warehouse, table) is not None


def _dataset(base: Path, table: str) -> ds.Dataset:
    if (base / "_delta_log").is_dir():
        return DeltaTable(str(base)).to_pyarrow_dataset()
    # Partition values stay strings: pyarrow would infer an all-digit job id as an integer.
    key = tables.table(table).key
    return ds.dataset(base, format="parquet", partitioning=ds.partitioning(pa.schema([(key, pa.string())]), flavor="hive"))


def _read(dataset: ds.Dataset, columns: list[str] | None, row_filter: ds.Expression | None) -> pd.DataFrame:
    return _naive_utc(dataset.to_table(columns=columns, filter=row_filter)).to_pandas()


def _naive_utc(rows: pa.Table) -> pa.Table:
    """Timestamps as naive UTC whatever the format: delta-rs gives Delta's timestamps with a UTC
    time zone, Spark's Parquet files give them naive (the writers' session time zone is UTC)."""
    for i, column in enumerate(rows.schema):
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            naive = rows.column(i).cast(pa.timestamp(column.type.unit))
            rows = rows.set_column(i, column.name, naive)
    return rows


def _diagnosed(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs[jobs["status"] == "diagnosed"]


def _as_list(values) -> list:
    """A list column's cell as a list (pyarrow gives numpy arrays; a null cell is no item)."""
    return [] if values is None or (not hasattr(values, "__len__") and pd.isna(values)) else list(values)
