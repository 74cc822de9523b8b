"""Temporal analysis (L4 step 4): stage and iteration of every line, failure stage and iteration,
DTW-scored iterations, hangs and slowdowns. See docs/temporal.md."""

from __future__ import annotations

from pyspark.sql import DataFrame

from l4spark.config import Config, StorageConfig
from l4spark.errors import ConfigError
from l4spark.session import materialize
from l4spark.storage import write_job_rows
from l4spark.temporal.config import STAGES, IterationRule, StageRule, TemporalConfig, temporal_config_from_mapping
from l4spark.temporal.jobs import (
    analyse_iterations,
    failure_stages,
    indicating_stand_in,
    job_failure_points,
    temporal_events,
)
from l4spark.temporal.lines import node_clock_offsets, with_stage_and_iteration

__all__ = ["STAGES", "IterationRule", "StageRule", "TemporalConfig", "temporal_config", "analyse_iterations", "failure_stages",
           "indicating_stand_in", "job_failure_points", "node_clock_offsets", "temporal_events",
           "with_stage_and_iteration", "write_diagnosis_iterations"]


def temporal_config(config: Config) -> TemporalConfig:
    """The ``[temporal]`` section of the conf as a TemporalConfig (unknown keys refused)."""
    try:
        return temporal_config_from_mapping(config.steps.get("temporal", {}))
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(str(exc)) from exc


def write_diagnosis_iterations(iterations: DataFrame, storage: StorageConfig, job_ids: list[str]) -> None:
    """Replace the ``diagnosis_iterations`` rows of ``job_ids`` (job_id, iteration, score,
    anomalous, event_ids, threshold, and reason when ``iterations`` has it); jobs without
    iterations lose their old rows. ``threshold`` is the job's anomaly line (the report draws it)."""
    extra = [c for c in ("threshold", "reason") if c in iterations.columns]
    rows = materialize(iterations.select("iteration", "score", "anomalous", "event_ids", *extra, "job_id"))
    with_rows = [r.job_id for r in rows.select("job_id").distinct().collect()]
    write_job_rows(rows, storage, "diagnosis_iterations", job_ids, with_rows, small=True)
