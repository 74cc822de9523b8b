"""The ``fault_patterns`` table: the seed library plus the patterns users added or confirmed.

The table is small and rewritten whole on every change. A table row with the id of a seed
pattern replaces the seed (a site can tune a remedy). Rows are validated when read, so a row
written by another tool that is not a safe pattern is reported, not matched.
"""

from __future__ import annotations

import logging

import pandas as pd
from pyspark.sql import SparkSession

from l4spark.config import StorageConfig
from l4spark.diagnosis.patterns import (DEAD_UNIT_PATTERN_ID, HUNG_UNIT_PATTERN_ID, SAVE_HANG_PATTERN_ID,
                                       SLOW_UNIT_PATTERN_ID, FaultPattern, PatternError, pattern_from_dict,
                                       seed_patterns)
from l4spark.errors import ConfigError
from l4spark.io.storage import read_table, table_exists, write_table
from l4spark.io.tables import FAULT_PATTERNS

log = logging.getLogger(__name__)


def stored_patterns(spark: SparkSession, storage: StorageConfig) -> list[FaultPattern]:
    """The patterns of the table (not the seeds); invalid rows are logged and skipped."""
    if not table_exists(storage, FAULT_PATTERNS.name):
        return []
    patterns = []
    for row in read_table(spark, storage, FAULT_PATTERNS.name).toPandas().to_dict("records"):
        row["signature"] = list(row["signature"]) if row["signature"] is not None else []
        try:
            patterns.append(pattern_from_dict(row))
        except PatternError as exc:
            log.warning("fault_patterns row skipped: %s", exc)
    return patterns


def pattern_library(spark: SparkSession, storage: StorageConfig) -> list[FaultPattern]:
    """Seeds, with table rows added and replacing seeds of the same id; ordered by id."""
    library = {p.pattern_id: p for p in seed_patterns()}
    library.update({p.pattern_id: p for p in stored_patterns(spark, storage)})
    return [library[k] for k in sorted(library)]


def enabled_patterns(spark: SparkSession, storage: StorageConfig, disabled: tuple[str, ...] = ()) -> list[FaultPattern]:
    """``pattern_library`` without the ids of ``disabled`` (``diagnosis.disabled_patterns``). An
    id that is in neither the seeds nor the table is refused (``ConfigError``, naming it and the
    library's ids): a misspelt id would otherwise switch nothing off, unnoticed."""
    library = pattern_library(spark, storage)
    unknown = sorted(set(disabled) - {p.pattern_id for p in library})
    if unknown:
        raise ConfigError(f"diagnosis.disabled_patterns: no pattern {', '.join(map(repr, unknown))} in the library "
                          f"(seeds and the fault_patterns table: {', '.join(p.pattern_id for p in library)}); "
                          "see `l4spark patterns list`")
    return [p for p in library if p.pattern_id not in set(disabled)]


def save_pattern(spark: SparkSession, storage: StorageConfig, pattern: FaultPattern, replace: bool = False) -> None:
    """Add ``pattern`` to the table (validated by construction). An id already in the table is
    refused unless ``replace``."""
    reserved = {SLOW_UNIT_PATTERN_ID: "straggler fault (diagnosis.slow_unit_fault)",
                HUNG_UNIT_PATTERN_ID: "hang fault (diagnosis.hung_unit_fault)",
                DEAD_UNIT_PATTERN_ID: "dead node fault (diagnosis.dead_unit_fault)",
                SAVE_HANG_PATTERN_ID: "hang while saving fault (diagnosis.save_hang_unit_fault)"}
    if pattern.pattern_id in reserved:
        raise PatternError(f"pattern id {pattern.pattern_id!r} is reserved for the built-in "
                           f"{reserved[pattern.pattern_id]}; use another id")
    stored = {p.pattern_id: p for p in stored_patterns(spark, storage)}
    if pattern.pattern_id in stored and not replace:
        raise PatternError(f"pattern {pattern.pattern_id!r} already exists; use another id or replace it")
    stored[pattern.pattern_id] = pattern
    rows = [{**p.__dict__, "signature": list(p.signature)} for p in sorted(stored.values(), key=lambda p: p.pattern_id)]
    frame = spark.createDataFrame(pd.DataFrame(rows), schema=FAULT_PATTERNS.schema)
    write_table(frame.localCheckpoint(), storage, FAULT_PATTERNS.name)


def template_regex(template: str, max_gap: int = 200) -> str:
    """A signature regex from an event template: the text literal, each ``<*>`` a bounded gap."""
    import re

    parts = [re.escape(part) for part in template.strip().split("<*>")]
    return f".{{0,{max_gap}}}".join(parts)


def pattern_from_diagnosis(spark: SparkSession, storage: StorageConfig, job_id: str, *, pattern_id: str, name: str,
                           fault_class: str, root_cause: str, remedy: str, event_ids: list[str] | None = None,
                           n_events: int = 3, created_at: str | None = None) -> FaultPattern:
    """A pattern from a diagnosed job: the signature is the templates of ``event_ids`` (default:
    the job's ``n_events`` best flagged events), the stage is the job's failure stage. Raises
    PatternError when the job has no diagnosis or none of the events is flagged for it."""
    from pyspark.sql import functions as F

    if not (table_exists(storage, "diagnosis_jobs") and table_exists(storage, "diagnosis_events")):
        raise PatternError(f"no diagnosis in {storage.warehouse}: run `l4spark diagnose --job {job_id}` first")
    jobs = read_table(spark, storage, "diagnosis_jobs").where(F.col("job_id") == job_id).collect()
    if not jobs or jobs[0].status != "diagnosed":
        reason = "no diagnosis" if not jobs else f"status {jobs[0].status}: {jobs[0].error}"
        raise PatternError(f"job {job_id} has {reason}; diagnose it before confirming")
    events = (read_table(spark, storage, "diagnosis_events").where(F.col("job_id") == job_id)
              .select("event_id", "template", "rank").orderBy("rank").toPandas())
    if event_ids:
        unknown = sorted(set(event_ids) - set(events["event_id"]))
        if unknown:
            raise PatternError(f"events {unknown} are not flagged for job {job_id}; flagged: "
                               f"{events['event_id'].head(10).tolist()}")
        chosen = events[events["event_id"].isin(event_ids)]
    else:
        chosen = events.head(n_events)
    signature = tuple(template_regex(t) for t in chosen["template"].dropna() if t.strip("<*> "))
    if not signature:
        raise PatternError(f"job {job_id} has no flagged event with a usable template to build a signature from")
    return FaultPattern(pattern_id, name, fault_class, root_cause, remedy, signature, jobs[0].failure_stage,
                        created_at, job_id)
