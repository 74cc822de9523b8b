"""Ground truth of a generated fleet (``<fleet>/_labels/<job_id>.json``) and its link to events.

The labels name failure-indicating *messages* as they appear in the logs; the pipeline flags
*event ids*. A labelled message belongs to every event whose line message contains it (the
simulator guarantees it is a substring of each raw line that carries it; our message is the
line without wrappers and header, so it still contains it). Used by every evaluation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from l4spark.errors import InputLayoutError

LABELS_DIR = "_labels"


@dataclass(frozen=True)
class LabelledMessage:
    message: str
    template: str
    level: str
    count: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class JobLabel:
    job_id: str
    fault_class: str
    fault_kind: str
    faulty_nodes: tuple[str, ...]
    failure_stage: str
    failure_iteration: int | None
    messages: tuple[LabelledMessage, ...]


def load_labels(fleet: str | Path) -> dict[str, JobLabel]:
    """Every label of a fleet, by job id (only failed jobs have one)."""
    folder = Path(fleet) / LABELS_DIR
    if not folder.is_dir():
        raise InputLayoutError(f"{folder} does not exist: is {fleet} a generated fleet?")
    labels = {}
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text("utf-8"))
        labels[raw["job_id"]] = JobLabel(
            job_id=raw["job_id"],
            fault_class=raw["fault_class"],
            fault_kind=raw["fault_kind"],
            faulty_nodes=tuple(raw["faulty_nodes"]),
            failure_stage=raw["failure_stage"],
            failure_iteration=raw.get("failure_iteration"),
            messages=tuple(
                LabelledMessage(m["message"], m["template"], m["level"], int(m["count"]), tuple(m["nodes"]))
                for m in raw["indicating_messages"]
            ),
        )
    return labels


def indicating_events(spark: SparkSession, events: DataFrame, labels: dict[str, JobLabel]) -> pd.DataFrame:
    """Which event ids carry which labelled messages, per labelled job.

    Input: ``events`` with job_id, event_id, message (other columns ignored). Output (pandas):
    job_id, event_id, message (the labelled text), n_lines (lines of the event carrying it).
    A labelled message no line contains is absent from the output (callers count it missed).
    """
    rows = [(job_id, m.message) for job_id, label in labels.items() for m in label.messages]
    if not rows:
        return pd.DataFrame(columns=["job_id", "event_id", "message", "n_lines"])
    wanted = spark.createDataFrame(rows, "label_job string, label_message string")
    return (
        events.where(F.col("job_id").isin(list(labels)))
        .select("job_id", "event_id", F.col("message").alias("line_message"))
        .join(F.broadcast(wanted),
              on=(F.col("job_id") == F.col("label_job")) & (F.instr("line_message", F.col("label_message")) > 0),
              how="inner")
        .groupBy("job_id", "event_id", "label_message")
        .agg(F.count(F.lit(1)).alias("n_lines"))
        .select("job_id", "event_id", F.col("label_message").alias("message"), "n_lines")
        .toPandas()
    )
