"""The report input of a diagnosed job: a ``JobReport`` made from a ``Diagnosis``, and the
report files of every job of a diagnosis batch."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from l4spark.crossjob.reasons import NO_HISTORY
from l4spark.diagnosis.assemble import Diagnosis
from l4spark.report.files import write_reports
from l4spark.report.model import JobReport


def job_report(diagnosis: Diagnosis, job_id: str):
    """The report input (``l4spark.report.JobReport``) of one job of ``diagnosis``."""
    def of(frame: pd.DataFrame) -> pd.DataFrame:
        if not len(frame) or "job_id" not in frame.columns:
            return frame.drop(columns=["job_id"], errors="ignore")
        return frame[frame["job_id"] == job_id].drop(columns=["job_id"]).reset_index(drop=True)

    row = diagnosis.jobs[diagnosis.jobs["job_id"] == job_id].iloc[0].to_dict()
    row = {k: (None if not isinstance(v, (list, np.ndarray)) and pd.isna(v) else v) for k, v in row.items()}
    row["processed_at"] = str(row["processed_at"])
    row.update(diagnosis.extra.get(job_id, {"settings": {}, "history": NO_HISTORY, "n_nodes": 0, "n_ranks": 0}))
    kwargs = {name: of(getattr(diagnosis, name)) for name in ("events", "nodes", "iterations", "stages",
                                                               "first_errors", "heat", "pace")}
    if "combined_score" in kwargs["nodes"].columns:  # the score the ranking uses, not the forest's alone
        kwargs["nodes"] = kwargs["nodes"].assign(score=kwargs["nodes"]["combined_score"])
    return JobReport(job=row, patterns=diagnosis.patterns.get(job_id, []), **kwargs)


def write_job_reports(diagnosis: Diagnosis, out_dir, skip: Iterable[str] = (), spark=None) -> dict[str, tuple]:
    """HTML and Markdown report of every job of ``diagnosis`` but ``skip`` (jobs whose failed
    rediagnosis kept the last good one: their reports stay too) under ``out_dir``: job -> (html, md).
    ``spark``: needed when ``out_dir`` is a remote URI (``report.files``)."""
    skip = set(skip)
    return {job_id: write_reports(job_report(diagnosis, job_id), out_dir, spark=spark)
            for job_id in diagnosis.jobs["job_id"] if job_id not in skip}
