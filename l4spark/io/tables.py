"""Every table of the warehouse: its name, partition key, column schema and how it is written.

The one place a table is declared. ``warehouse.storage`` looks a table up here to write it (its
partition key, whether its rows go through one writer task) and refuses a name that is not
here; the steps build their rows against the schemas below. The README's "Output tables" lists
the same tables for people; tests/test_tables.py keeps the two in step.

``events`` has no fixed schema here: the parse decides its columns (docs/parsing.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """A warehouse table. ``key``: the column whose values are replaced together (rows of one job,
    or run), None for a small table rewritten whole. ``small``: all rows of a write in one task (a
    remote Parquet warehouse: a few tasks, ``storage._small_write_tasks``).
    ``schema``: Spark DDL of its columns, None where the writer decides them. ``stats_columns``:
    as Delta, the columns whose per-file statistics (min, max, nulls) the table keeps
    (``delta.dataSkippingStatsColumns``, set when the write creates the table); empty: Delta's
    default, the first 32 columns."""

    name: str
    key: str | None
    schema: str | None
    small: bool = True
    stats_columns: tuple[str, ...] = ()

    def partition_columns(self, storage_format: str) -> list[str]:
        """The folder partitioning of the table in ``storage_format``. Parquet: by ``key`` (a
        dynamic partition overwrite replaces a job's folder). Delta: none; ``replaceWhere`` on the
        key column replaces a job's rows, rewriting only the files whose statistics say they may
        hold it (``key`` is the first column, so Delta keeps its min and max per file), and
        ``OPTIMIZE`` packs a nightly's files into few. A batch adds a file per writing task
        instead of one per job, and a drill-down into one job reads the files whose key range
        holds it (docs/delta.md#small-files-layout-optimize-vacuum)."""
        if self.key is None or storage_format == "delta":
            return []
        return [self.key]


# Statistics on job_id only: every reader of events filters on job_id (a job's rows, the files
# whose job range holds it), and collecting min/max of every string column (message, file...)
# for each of a million lines was about a third of the events write on the small-files bench.
EVENTS = Table("events", "job_id", None, small=False, stats_columns=("job_id",))
TEMPLATES = Table("templates", None, None)
JOBS = Table("jobs", "job_id", (
    "job_id string, status string, settings string, start_time string, end_time string, meta_error string, "
    "n_files long, n_bytes long, n_lines long, n_events long, n_set_aside_lines long, n_issues long, "
    "run_id string, parsed_at timestamp, parser_version string"))
QUARANTINE = Table("quarantine", "job_id", (
    "job_id string, file string, reason string, detail string, n_lines long, n_bytes long, line_no long, "
    "sample string, run_id string"))
JOB_EVENT_COUNTS = Table("job_event_counts", "job_id", "job_id string, event_id string, n_lines long, first_ts timestamp")
JOB_EVENT_FORMS = Table("job_event_forms", "job_id",
                        "job_id string, event_id string, masked string, n_lines long, masks string, run_id string")
NORMAL_POOL = Table("normal_pool", None, (
    "level int, level_name string, settings_key string, settings string, event_id string, n_jobs long, "
    "group_jobs long, support double, median_lines_per_node double, max_lines_per_node double, "
    "median_lines double, variant_novelty double"))
NORMAL_POOL_VARIANTS = Table("normal_pool_variants", None,
                             "level int, settings_key string, event_id string, masked string, n_jobs long")
NORMAL_POOL_LEDGER = Table("normal_pool_ledger", "job_id", (
    "job_id string, event_id string, masked string, n_lines long, job_nodes long, settings string, "
    "parse_run_id string"))
DIAGNOSIS_JOBS = Table("diagnosis_jobs", "job_id", (
    "job_id string, status string, failure_stage string, failure_iteration long, suspect_nodes array<string>, "
    "matched_patterns array<string>, n_lines long, n_candidate_events long, error string, run_id string, "
    "processed_at timestamp, version string, history string, n_events long, n_flagged_events long, "
    "fault_class string, root_cause string, remedy string, pattern_confidence double"))
DIAGNOSIS_EVENTS = Table("diagnosis_events", "job_id", (
    "job_id string, event_id string, template string, rank int, score double, sources array<string>, "
    "n_lines long, n_nodes long, first_ts timestamp, stage string, sample string, sample_node string, "
    "sample_ts timestamp, level string, keep_reason string"))
DIAGNOSIS_NODES = Table("diagnosis_nodes", "job_id", (
    "job_id string, node string, process_rank int, rank int, score double, suspect boolean, "
    "silent boolean, silent_gap_s double, n_lines long, evidence array<string>, "
    "evidence_scores array<double>, named_by int, onset_lag_s double, combined_score double, "
    "signals array<string>"))
# threshold and reason are written when the temporal step gives them
DIAGNOSIS_ITERATIONS = Table("diagnosis_iterations", "job_id", (
    "job_id string, iteration long, score double, anomalous boolean, event_ids array<string>, "
    "threshold double, reason string"))
# Per unit and logged step of a job with per-rank readings: its slowest reading against its peers' median
DIAGNOSIS_PACE = Table("diagnosis_pace", "job_id", (
    "job_id string, node string, process_rank int, source string, step long, timer string, ms double, "
    "peer_ms double, ratio double"))
# One row per job a diagnosis was attempted on: its last attempt, and how many attempts in a row
# failed on the same input (the parse it read); the nightly gives up after nightly.max_attempts.
DIAGNOSIS_ATTEMPTS = Table("diagnosis_attempts", "job_id", (
    "job_id string, run_id string, attempted_at timestamp, status string, error string, "
    "failed_attempts int, parsed_at timestamp, version string"))
FAULT_PATTERNS = Table("fault_patterns", None, (
    "pattern_id string, name string, fault_class string, root_cause string, remedy string, "
    "signature array<string>, stage string, created_at string, source_job_id string"))
RUNS = Table("runs", "run_id", (
    "run_id string, run_date string, started_at timestamp, finished_at timestamp, status string, "
    "n_scanned_jobs long, n_parsed_jobs long, n_selected_jobs long, n_diagnosed long, n_errors long, "
    "errors string, seconds string, version string"))

TABLES: dict[str, Table] = {t.name: t for t in (
    EVENTS, TEMPLATES, JOBS, QUARANTINE, JOB_EVENT_COUNTS, JOB_EVENT_FORMS, NORMAL_POOL, NORMAL_POOL_VARIANTS,
    NORMAL_POOL_LEDGER, DIAGNOSIS_JOBS, DIAGNOSIS_EVENTS, DIAGNOSIS_NODES, DIAGNOSIS_ITERATIONS,
    DIAGNOSIS_PACE, DIAGNOSIS_ATTEMPTS, FAULT_PATTERNS, RUNS)}


def table(name: str) -> Table:
    """The declared table ``name``; a name that is not declared is a programming error."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"'{name}' is not a warehouse table (l4spark/io/tables.py): {sorted(TABLES)}") from None


def columns(schema: str) -> list[str]:
    """Column names of a Spark DDL schema string."""
    return [part.split()[0] for part in schema.split(", ")]
