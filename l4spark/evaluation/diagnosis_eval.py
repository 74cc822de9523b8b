"""The whole diagnosis on a labelled generated fleet, with the paper's tables.

    l4spark evaluate --fleet DIR [--warehouse W] [--json OUT] [--no-filter-ablation]

Parses the fleet into the warehouse (default ``<fleet>.warehouse``) unless it already holds every
job, builds the normal pool from its successful jobs, diagnoses every labelled (failed) job and
prints:

- events: precision, recall and F1 of the flagged events against the labelled failure-indicating
  events (an event of a job is labelled when one of its lines carries a labelled message:
  ``labels.indicating_events``), micro-averaged over (job, event) pairs, with and without
  the cross-job filter (the ablation the paper does not report);
- nodes: top-1/3/5/8 accuracy of ``diagnosis_nodes`` and of the Error_time and Error_count
  baselines, over the jobs with labelled faulty nodes;
- stage accuracy and iteration hit rate (the labelled fault iteration flagged anomalous, or the
  reported failure iteration within 1 of it);
- fault class: the share of failed jobs whose best matched pattern's ``fault_class``
  (``diagnosis_jobs.fault_class``) is the label's, over every failed job (a job with no match
  counts wrong), and again over the jobs whose labelled class some pattern of the library has
  (a straggler's ``slowdown`` has none: no error line names it); the share with no match;
- every figure per fault kind; the paper's figures alongside. ``--json`` writes the same.

Only evaluation code reads ``_labels``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import pandas as pd

K_VALUES = (1, 3, 5, 8)
PAPER = {"event_precision": 0.786, "event_recall": 0.982, "event_f1": 0.873, "node_top1": 0.658,
         "node_top5": 0.80, "node_top8": 0.912, "error_time_top1": 0.473, "error_count_top1": 0.367}
BAR = {"event_f1": 0.90, "event_recall": 0.95, "node_top1": 0.85, "stage_accuracy": 0.95}
# a dump's files of the node ranking's inputs, by their names in ``Diagnosis.ranking_inputs``:
# what ``rerank`` ranks again
RANKING_INPUT_FILES = {"facts": "ranking_facts.parquet", "activity": "ranking_activity.parquet",
                       "lifts": "ranking_lifts.parquet"}
# and of the event score's inputs (``assemble.score_inputs``): what ``rescore`` scores again
SCORE_INPUT_FILES = {name: f"{name}.parquet" for name in ("score_evidence", "score_timing", "score_spatial",
                                                           "score_temporal", "score_hits", "score_shares")}


def event_scores(flagged: pd.DataFrame, indicating: pd.DataFrame, job_ids: Sequence[str]) -> pd.DataFrame:
    """Per job: tp, fp, fn over (job, event) pairs of flagged vs labelled events."""
    rows = []
    for job_id in job_ids:
        got = set(flagged.loc[flagged["job_id"] == job_id, "event_id"])
        want = set(indicating.loc[indicating["job_id"] == job_id, "event_id"].dropna())
        rows.append({"job_id": job_id, "tp": len(got & want), "fp": len(got - want), "fn": len(want - got)})
    return pd.DataFrame(rows, columns=["job_id", "tp", "fp", "fn"])


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


def node_rankings(rows: pd.DataFrame) -> dict[str, list[str]]:
    """Each job's distinct nodes, first-ranked first, from ranking rows (job_id, node, rank)."""
    return {j: g["node"].drop_duplicates().tolist() for j, g in rows.sort_values(["job_id", "rank"]).groupby("job_id")}


def node_hits(rankings: dict[str, list[str]], faulty: dict[str, tuple[str, ...]]) -> pd.DataFrame:
    """Per job with faulty nodes: the top-k hit share for each k (columns job_id, top1, top3, ...)."""
    from l4spark.spatial.score import top_k_hit

    return pd.DataFrame([{"job_id": j, **{f"top{k}": top_k_hit(rankings.get(j, []), nodes, k) for k in K_VALUES}}
                         for j, nodes in sorted(faulty.items())],
                        columns=["job_id", *(f"top{k}" for k in K_VALUES)])


def iteration_hit(flags: list[int], reported: int | None, want: int) -> bool:
    return want in flags or (bool(flags) and abs(flags[0] - want) <= 1) or (
        reported is not None and abs(reported - want) <= 1)


def summarise(per_job: pd.DataFrame) -> dict:
    """Overall and per-kind figures from the per-job table."""
    def block(frame: pd.DataFrame) -> dict:
        out = {"jobs": int(len(frame)), **prf(int(frame["tp"].sum()), int(frame["fp"].sum()), int(frame["fn"].sum()))}
        with_nodes = frame[frame["has_faulty_nodes"]]
        out["node_jobs"] = int(len(with_nodes))
        for method in ("l4spark", "error_time", "error_count"):
            for k in K_VALUES:
                column = f"{method}_top{k}"
                out[column] = round(float(with_nodes[column].mean()), 4) if len(with_nodes) else None
        out["stage_accuracy"] = round(float(frame["stage_ok"].mean()), 4) if len(frame) else None
        with_iteration = frame[frame["iteration_hit"].notna()]
        out["iteration_jobs"] = int(len(with_iteration))
        out["iteration_hit_rate"] = (round(float(with_iteration["iteration_hit"].astype(bool).mean()), 4)
                                     if len(with_iteration) else None)
        out.update(_class_figures(frame))
        return out

    # by the job's size: small jobs defeat comparisons with peers (two nodes have no median)
    sizes = per_job["n_nodes"] if "n_nodes" in per_job.columns else pd.Series(0, index=per_job.index)
    return {"overall": block(per_job),
            "per_kind": {kind: block(group) for kind, group in per_job.groupby("fault_kind", sort=True)},
            "per_size": {str(int(n)): block(group) for n, group in per_job.groupby(sizes, sort=True)}}


def _class_figures(frame: pd.DataFrame) -> dict:
    """Fault class accuracy over every job and over the jobs whose class the library has, and
    the share of jobs no pattern matched (None where the rows lack the columns)."""
    if "class_ok" not in frame.columns or not len(frame):
        return {"fault_class_accuracy": None, "class_jobs": 0, "fault_class_accuracy_in_library": None,
                "no_pattern_share": None}
    known = frame[frame["class_in_library"].astype(bool)]
    return {"fault_class_accuracy": round(float(frame["class_ok"].astype(bool).mean()), 4),
            "class_jobs": int(len(known)),
            "fault_class_accuracy_in_library": (round(float(known["class_ok"].astype(bool).mean()), 4)
                                                if len(known) else None),
            "no_pattern_share": round(float(frame["no_pattern"].astype(bool).mean()), 4)}


def evaluate_fleet(spark, config, fleet: Path, ablation: bool = True, dump: Path | None = None,
                   progress=print) -> dict:
    """Parse what the warehouse of ``config`` lacks of ``fleet``, diagnose its labelled jobs and
    score the diagnosis against the labels (``ablation``: again without the cross-job filter)."""
    import dataclasses

    from pyspark.sql import functions as F

    from l4spark.diagnosis.assemble import diagnose_jobs, write_diagnosis
    from l4spark.diagnosis.pattern_store import enabled_patterns
    from l4spark.diagnosis.patterns import unit_fault_patterns
    from l4spark.evaluation.labels import indicating_events, load_labels
    from l4spark.nightly.batch import catch_up
    from l4spark.spatial.ranking import baseline_rankings
    from l4spark.io.storage import read_table

    labels = load_labels(fleet)
    started = time.perf_counter()
    catch_up(spark, config, str(fleet), progress)
    job_ids = sorted(labels)
    diagnosis = diagnose_jobs(spark, config, job_ids, progress=progress, keep_ranking_inputs=dump is not None)
    write_diagnosis(spark, config, diagnosis)
    seconds = time.perf_counter() - started
    events = read_table(spark, config.storage, "events").where(F.col("job_id").isin(job_ids))
    indicating = indicating_events(spark, events, labels)
    baselines = baseline_rankings(events).toPandas()
    no_filter = None
    if ablation:
        progress("ablation: the same diagnosis without the cross-job filter")
        plain = dataclasses.replace(config, diagnosis=dataclasses.replace(config.diagnosis, use_normal_pool=False))
        no_filter = diagnose_jobs(spark, plain, job_ids, progress=progress).events
    library_classes = {p.fault_class for p in enabled_patterns(spark, config.storage, config.diagnosis.disabled_patterns)}
    library_classes |= {p.fault_class for p in unit_fault_patterns(config.diagnosis.slow_unit_fault,
                                                                   config.diagnosis.hung_unit_fault,
                                                                   config.diagnosis.dead_unit_fault,
                                                                   config.diagnosis.save_hang_unit_fault)}
    per_job = _per_job(diagnosis, indicating, baselines, labels, library_classes)
    if dump is not None:
        _dump(dump, diagnosis, indicating, per_job)
    result = {"fleet": str(fleet), "warehouse": str(config.storage.warehouse), "failed_jobs": len(labels),
              "diagnosis_seconds": round(seconds, 1), **summarise(per_job), "paper": PAPER, "bar": BAR,
              "errors": diagnosis.jobs.loc[diagnosis.jobs["status"] == "error", ["job_id", "error"]].to_dict("records")}
    if no_filter is not None:
        counts = event_scores(no_filter, indicating, sorted(labels))
        result["without_cross_job_filter"] = prf(int(counts["tp"].sum()), int(counts["fp"].sum()),
                                                 int(counts["fn"].sum()))
    result["misses"] = _misses(per_job)
    return result


def _per_job(diagnosis, indicating: pd.DataFrame, baselines: pd.DataFrame, labels: dict,
             library_classes: set[str]) -> pd.DataFrame:
    counts = event_scores(diagnosis.events, indicating, sorted(labels)).set_index("job_id")
    n_nodes = diagnosis.nodes.groupby("job_id")["node"].nunique().to_dict()
    rankings = {"l4spark": node_rankings(diagnosis.nodes)}
    for method, group in baselines.groupby("method"):
        rankings[method] = node_rankings(group)
    faulty = {j: label.faulty_nodes for j, label in labels.items() if label.faulty_nodes}
    hits = {method: node_hits(ranking, faulty).set_index("job_id") for method, ranking in rankings.items()}
    flagged_iterations = (diagnosis.iterations[diagnosis.iterations["anomalous"].astype(bool)]
                          .groupby("job_id")["iteration"].apply(lambda s: sorted(int(i) for i in s)).to_dict()
                          if len(diagnosis.iterations) else {})
    jobs = diagnosis.jobs.set_index("job_id")
    rows = []
    for job_id, label in sorted(labels.items()):
        job = jobs.loc[job_id]
        reported = job["failure_iteration"]
        reported = None if reported is None or pd.isna(reported) else int(reported)
        want = label.failure_iteration
        row = {"job_id": job_id, "fault_kind": label.fault_kind, "status": job["status"],
               **counts.loc[job_id].to_dict(), "has_faulty_nodes": bool(label.faulty_nodes),
               "stage": label.failure_stage, "got_stage": job["failure_stage"],
               "stage_ok": job["failure_stage"] == label.failure_stage,
               "iteration": want, "got_iteration": reported,
               "iteration_hit": None if want is None else iteration_hit(flagged_iterations.get(job_id, []), reported, want),
               "faulty_nodes": list(label.faulty_nodes), "n_nodes": int(n_nodes.get(job_id, 0)),
               "fault_class": label.fault_class, "got_fault_class": job["fault_class"],
               "class_ok": job["fault_class"] == label.fault_class,
               "class_in_library": label.fault_class in library_classes,
               "no_pattern": len(job["matched_patterns"] if job["matched_patterns"] is not None else []) == 0}
        for method in ("l4spark", "error_time", "error_count"):
            for k in K_VALUES:
                frame = hits.get(method)
                row[f"{method}_top{k}"] = (float(frame.loc[job_id, f"top{k}"])
                                           if frame is not None and job_id in frame.index else None)
        rows.append(row)
    return pd.DataFrame(rows)


def _dump(folder: Path, diagnosis, indicating: pd.DataFrame, per_job: pd.DataFrame) -> None:
    """Every candidate event with its evidence, the node ranking and its inputs, the labelled
    events and the per-job figures as Parquet: what a study of the score needs, without rerunning
    Spark (``known_faults``, ``rerank``, ``rescore``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in (("scored", diagnosis.scored), ("nodes", diagnosis.nodes), ("indicating", indicating),
                        ("per_job", per_job), ("iterations", diagnosis.iterations)):
        frame.to_parquet(folder / f"{name}.parquet", index=False)
    for name, frame in diagnosis.ranking_inputs.items():
        frame.to_parquet(folder / {**RANKING_INPUT_FILES, **SCORE_INPUT_FILES}[name], index=False)


def _misses(per_job: pd.DataFrame) -> list[dict]:
    out = []
    for row in per_job.itertuples():
        problems = []
        if row.fn:
            problems.append(f"{row.fn} labelled events not flagged")
        if not row.stage_ok:
            problems.append(f"stage {row.got_stage} (labelled {row.stage})")
        if row.has_faulty_nodes and row.l4spark_top1 is not None and row.l4spark_top1 < 1:
            problems.append(f"faulty nodes {row.faulty_nodes} not at rank 1")
        if row.iteration_hit is False:
            problems.append(f"iteration {row.iteration} not flagged (reported {row.got_iteration})")
        if not row.class_ok and row.class_in_library:
            problems.append(f"fault class {row.got_fault_class} (labelled {row.fault_class})")
        if problems:
            out.append({"job_id": row.job_id, "fault_kind": row.fault_kind, "problems": problems})
    return out


def format_result(result: dict) -> str:
    o = result["overall"]
    lines = [f"diagnosis of {result['failed_jobs']} failed jobs of {result['fleet']} "
             f"in {result['diagnosis_seconds']} s",
             "", f"{'':<28}{'l4spark':>10}{'paper':>10}{'bar':>10}"]

    def line(name: str, value, paper=None, bar=None) -> None:
        fmt = (lambda v: "-" if v is None else f"{v:.3f}")
        lines.append(f"{name:<28}{fmt(value):>10}{fmt(paper):>10}{fmt(bar):>10}")

    line("event precision", o["precision"], PAPER["event_precision"])
    line("event recall", o["recall"], PAPER["event_recall"], BAR["event_recall"])
    line("event F1", o["f1"], PAPER["event_f1"], BAR["event_f1"])
    if "without_cross_job_filter" in result:
        w = result["without_cross_job_filter"]
        lines.append(f"{'  without cross-job filter':<28}P {w['precision']:.3f}  R {w['recall']:.3f}  F1 {w['f1']:.3f}")
    line("stage accuracy", o["stage_accuracy"], None, BAR["stage_accuracy"])
    line(f"iteration hit ({o['iteration_jobs']} jobs)", o["iteration_hit_rate"])
    line("fault class", o.get("fault_class_accuracy"))
    line(f"  class in library ({o.get('class_jobs', 0)})", o.get("fault_class_accuracy_in_library"))
    line("no matched pattern", o.get("no_pattern_share"))
    lines += ["", f"nodes ({o['node_jobs']} jobs with faulty nodes)"
              + "".join(f"{'top-' + str(k):>9}" for k in K_VALUES)]
    for method, paper in (("l4spark", ("node_top1", None, "node_top5", "node_top8")),
                          ("error_time", ("error_time_top1", None, None, None)),
                          ("error_count", ("error_count_top1", None, None, None))):
        values = "".join(f"{o[f'{method}_top{k}']:>9.3f}" if o[f"{method}_top{k}"] is not None else f"{'-':>9}"
                         for k in K_VALUES)
        papers = " ".join(f"{PAPER[p]:.3f}" if p else "-" for p in paper)
        lines.append(f"  {method:<35}{values}   paper {papers}")
    lines += ["", f"{'fault kind':<24}{'jobs':>5}{'P':>7}{'R':>7}{'F1':>7}{'top1':>7}{'stage':>7}{'iter':>7}"
              f"{'class':>7}{'none':>7}"]
    def f(v):
        return f"{v:>7.2f}" if v is not None else f"{'-':>7}"

    for kind, b in result["per_kind"].items():
        lines.append(f"{kind:<24}{b['jobs']:>5}{f(b['precision'])}{f(b['recall'])}{f(b['f1'])}"
                     f"{f(b['l4spark_top1'])}{f(b['stage_accuracy'])}{f(b['iteration_hit_rate'])}"
                     f"{f(b.get('fault_class_accuracy'))}{f(b.get('no_pattern_share'))}")
    lines += ["", f"{'nodes per job':<24}{'jobs':>5}{'P':>7}{'R':>7}{'F1':>7}{'top1':>7}{'E_time':>7}"]
    for size, b in result.get("per_size", {}).items():
        lines.append(f"{size:<24}{b['jobs']:>5}{f(b['precision'])}{f(b['recall'])}{f(b['f1'])}"
                     f"{f(b['l4spark_top1'])}{f(b['error_time_top1'])}")
    if result["errors"]:
        lines += ["", "errors:"] + [f"  {e['job_id']}: {e['error']}" for e in result["errors"]]
    return "\n".join(lines)
