"""l4spark evaluate's figures: per fault kind and per job size (pure pandas)."""

from __future__ import annotations

import pandas as pd

from l4spark.evaluation.diagnosis_eval import format_result, summarise


def _job(job_id: str, kind: str, n_nodes: int, tp: int, fp: int, top1: float | None) -> dict:
    row = {"job_id": job_id, "fault_kind": kind, "n_nodes": n_nodes, "tp": tp, "fp": fp, "fn": 0,
           "has_faulty_nodes": top1 is not None, "stage_ok": True, "iteration_hit": None}
    for method in ("l4spark", "error_time", "error_count"):
        for k in (1, 3, 5, 8):
            row[f"{method}_top{k}"] = top1 if k == 1 or top1 is None else 1.0
    return row


def test_figures_are_split_by_the_number_of_nodes_of_a_job():
    per_job = pd.DataFrame([_job("a", "oom", 2, 1, 1, 0.0), _job("b", "oom", 2, 2, 0, 1.0),
                            _job("c", "hang", 8, 3, 1, 1.0), _job("d", "program_bug", 8, 1, 0, None)])
    result = summarise(per_job)
    assert list(result["per_size"]) == ["2", "8"]
    two, eight = result["per_size"]["2"], result["per_size"]["8"]
    assert (two["jobs"], two["node_jobs"], two["l4spark_top1"], two["precision"]) == (2, 2, 0.5, 0.75)
    assert (eight["jobs"], eight["node_jobs"], eight["l4spark_top1"], eight["precision"]) == (2, 1, 1.0, 0.8)
    assert result["overall"]["l4spark_top1"] == round(2 / 3, 4)
    text = format_result({**result, "failed_jobs": 4, "fleet": "f", "diagnosis_seconds": 1.0, "errors": []})
    assert "nodes per job" in text and text.splitlines()[-1].startswith("8 ")
