"""How well the cross-job filter keeps failure-indicating events and removes the rest.

    python -m l4spark.evaluation.filter_eval --fleet DIR [--warehouse W] [--master M] [--json OUT]

Parses the fleet's jobs the warehouse does not have yet, builds or updates the normal pool,
applies ``filter_normal_events`` to every labelled (failed) job and prints, per job and overall:

- recall: share of the job's labelled indicating events (event ids whose lines carry a labelled
  message, ``labels.indicating_events``) that the filter keeps; the bar is 1.0;
- removed share: share of the job's distinct *non-indicating* events that the filter removes
  (by the pool, or as failure-path boilerplate: stack frames, teardown and advice lines, the
  per-line flag of ``diagnose.with_line_flags``, as in ``l4spark diagnose``); the bar is >= 0.8
  for jobs with history; the pool's share alone is printed beside it;
- jobs without history: events the pool removed (must be 0), and the boilerplate removed.

Only this evaluation reads ``_labels``.
"""

from __future__ import annotations

import dataclasses

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from l4spark.crossjob.reasons import NOT_IN_GROUP, NOT_IN_POOL

RECALL_BAR = 1.0
REMOVED_BAR = 0.8


@dataclass
class JobFigures:
    job_id: str
    fault_kind: str
    history: str
    group_jobs: int | None
    events_before: int
    events_after: int
    indicating: int
    indicating_kept: int
    non_indicating: int
    non_indicating_removed: int
    labelled_without_lines: int
    non_indicating_unseen: int  # non-indicating events no successful job of the group wrote
    non_indicating_boilerplate: int = 0  # of the removed: as boilerplate (no pool entry involved)
    events_boilerplate: int = 0  # every event removed as boilerplate (indicating ones included)
    missed: list[dict] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.indicating_kept / self.indicating if self.indicating else None

    @property
    def removed_share(self) -> float | None:
        return self.non_indicating_removed / self.non_indicating if self.non_indicating else None


def evaluate(decisions: pd.DataFrame, indicating: pd.DataFrame, labels: dict) -> list[JobFigures]:
    """Per labelled job figures from the filter's decisions (pandas) and the indicating events."""
    figures = []
    for job_id, label in sorted(labels.items()):
        job = decisions[decisions["job_id"] == job_id]
        wanted = set(indicating.loc[indicating["job_id"] == job_id, "event_id"].dropna())
        found_messages = set(indicating.loc[indicating["job_id"] == job_id, "message"])
        kept = set(job.loc[job["kept"], "event_id"].dropna())
        every = set(job["event_id"].dropna())
        others = every - wanted
        boilerplate = set(job.loc[job["reason"] == "boilerplate", "event_id"].dropna()) - kept
        missed = job[job["event_id"].isin(wanted - kept)]
        figures.append(JobFigures(
            job_id=job_id, fault_kind=label.fault_kind,
            history=str(job["history"].iloc[0]) if len(job) else "none",
            group_jobs=None if not len(job) or pd.isna(job["group_jobs"].iloc[0]) else int(job["group_jobs"].iloc[0]),
            events_before=len(every), events_after=len(kept), indicating=len(wanted & every),
            indicating_kept=len(wanted & kept), non_indicating=len(others),
            non_indicating_removed=len(others - kept),
            non_indicating_unseen=len(others & set(job.loc[job["reason"].isin([NOT_IN_POOL, NOT_IN_GROUP]), "event_id"])),
            non_indicating_boilerplate=len(others & boilerplate), events_boilerplate=len(boilerplate),
            labelled_without_lines=sum(1 for m in label.messages if m.message not in found_messages),
            missed=[{"event_id": r.event_id, "n_lines": int(r.n_lines), "detail": r.detail} for r in missed.itertuples()],
        ))
    return figures


def print_figures(figures: list[JobFigures]) -> bool:
    """Print the per-job table and the overall figures; True when the bar is met."""
    def fmt(value: float | None) -> str:
        return "  -  " if value is None else f"{value:5.3f}"

    print(f"{'job':<36} {'fault':<24} {'history':<18} {'grp':>3} {'before':>6} {'after':>5} "
          f"{'ind':>4} {'recall':>6} {'removed':>7}")
    for f in figures:
        print(f"{f.job_id:<36} {f.fault_kind:<24} {f.history:<18} {f.group_jobs or 0:>3} {f.events_before:>6} "
              f"{f.events_after:>5} {f.indicating:>4} {fmt(f.recall):>6} {fmt(f.removed_share):>7}")
        for miss in f.missed:
            print(f"    removed indicating event {miss['event_id']} ({miss['n_lines']} lines): {miss['detail']}")
    print()
    ok = True
    for name, group in _by_history(figures).items():
        recalls = [f.recall for f in group if f.recall is not None]
        shares = [f.removed_share for f in group if f.removed_share is not None]
        ind = sum(f.indicating for f in group)
        ind_kept = sum(f.indicating_kept for f in group)
        others = sum(f.non_indicating for f in group)
        removed = sum(f.non_indicating_removed for f in group)
        print(f"history {name}: {len(group)} jobs")
        boilerplate = sum(f.non_indicating_boilerplate for f in group)
        if name == "none":
            removed_any = sum(f.events_before - f.events_after - f.events_boilerplate for f in group)
            passed = removed_any == 0
            print(f"  events removed by the pool  {removed_any} (nothing may be removed without history)  "
                  f"[{'PASS' if passed else 'FAIL'}]")
            print(f"  removed as boilerplate      {sum(f.events_boilerplate for f in group)} events "
                  f"(stack frames, teardown and advice lines: no history needed)")
        else:
            low_recall = [f.job_id for f in group if f.recall is not None and f.recall < RECALL_BAR]
            low_share = [f.job_id for f in group if f.removed_share is not None and f.removed_share < REMOVED_BAR]
            passed = not low_recall and not low_share
            print(f"  recall                {ind_kept}/{ind} indicating events kept = {ind_kept / ind if ind else 1:.3f}; "
                  f"per job min {min(recalls, default=1):.3f}; jobs below {RECALL_BAR}: {len(low_recall)}")
            print(f"  removed share         {removed}/{others} non-indicating events removed = "
                  f"{removed / others if others else 0:.3f}; per job min {min(shares, default=0):.3f}, "
                  f"mean {sum(shares) / len(shares) if shares else 0:.3f}; jobs below {REMOVED_BAR}: {len(low_share)}")
            print(f"  of which              by the pool {removed - boilerplate} "
                  f"({(removed - boilerplate) / others if others else 0:.3f}), as boilerplate {boilerplate} "
                  f"({boilerplate / others if others else 0:.3f})")
            unseen = sum(f.non_indicating_unseen for f in group)
            removable = others - unseen
            print(f"  of which unseen       {unseen} non-indicating events no successful job of the group wrote "
                  f"(failure-path lines: a pool of successful jobs cannot remove them); removed share of the "
                  f"other {removable}: {removed / removable if removable else 0:.3f}")
            print(f"  bar                   {'PASS' if passed else 'FAIL'}"
                  + (f" (recall: {', '.join(low_recall)})" if low_recall else "")
                  + (f" (removed share: {', '.join(low_share)})" if low_share else ""))
        print(f"  events per job        {sum(f.events_before for f in group)} -> {sum(f.events_after for f in group)}")
        unmatched = sum(f.labelled_without_lines for f in group)
        if unmatched:
            print(f"  labelled messages no line carries: {unmatched} (not counted; the filter cannot see them)")
        ok = ok and passed
    return ok


def _by_history(figures: list[JobFigures]) -> dict[str, list[JobFigures]]:
    """Jobs by the history they were compared with (a grouping level's name, or ``none``), ``none`` last."""
    groups: dict[str, list[JobFigures]] = {}
    for f in figures:
        groups.setdefault(f.history, []).append(f)
    return dict(sorted(groups.items(), key=lambda item: (item[0] == "none", item[0])))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.evaluation.filter_eval", description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", required=True, help="a generated fleet (with _labels)")
    parser.add_argument("--warehouse", help="warehouse root (default: <fleet>.warehouse next to the fleet)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--no-rate-keep", action="store_true", help="switch off the rate-based keep")
    parser.add_argument("--no-variant-keep", action="store_true", help="switch off the new-masked-message keep")
    parser.add_argument("--no-boilerplate", action="store_true",
                        help="switch off the removal of stack frames, teardown and advice lines (the pool alone)")
    parser.add_argument("--json", help="also write the per-job figures to this JSON file")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from l4spark.config import load_config
    from l4spark.crossjob.normal_pool import filter_normal_events, read_normal_pool, update_normal_pool
    from l4spark.diagnosis.assemble import with_line_flags
    from l4spark.evaluation.labels import indicating_events, load_labels
    from l4spark.nightly.batch import parse_missing
    from l4spark.io.session import build_session
    from l4spark.io.storage import read_table

    fleet = Path(args.fleet)
    warehouse = args.warehouse or str(fleet.resolve().with_name(fleet.resolve().name + ".warehouse"))
    config = load_config(overrides={"storage.warehouse": warehouse, "spark.master": args.master})
    configured = config.normal_pool
    settings = dataclasses.replace(configured, rate_keep=configured.rate_keep and not args.no_rate_keep,
                                   variant_keep=configured.variant_keep and not args.no_variant_keep,
                                   remove_boilerplate=configured.remove_boilerplate and not args.no_boilerplate)
    labels = load_labels(fleet)
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", flush=True)

    spark = build_session(config.spark)
    try:
        parse_missing(spark, config, str(fleet), progress)
        update_normal_pool(spark, config, settings, progress=progress)
        failed = list(labels)
        events = read_table(spark, config.storage, "events").where(F.col("job_id").isin(failed))
        jobs = read_table(spark, config.storage, "jobs").where(F.col("job_id").isin(failed))
        result = filter_normal_events(with_line_flags(events, config.diagnosis), jobs, read_normal_pool(spark, config.storage), settings,
                                      masking=config.masking, fold_digits=config.structure.fold_digits)
        decisions = result.decisions.toPandas()
        indicating = indicating_events(spark, events, labels)
        progress(f"filtered {len(failed)} failed jobs")
    finally:
        spark.stop()
    figures = evaluate(decisions, indicating, labels)
    print()
    print(f"cross-job filter on {fleet} (warehouse {warehouse}; rate keep {'on' if settings.rate_keep else 'off'}, "
          f"variant keep {'on' if settings.variant_keep else 'off'}, "
          f"boilerplate removal {'on' if settings.remove_boilerplate else 'off'}, "
          f"min support {settings.min_support}, min group jobs {settings.min_group_jobs})")
    ok = print_figures(figures)
    if args.json:
        payload = [{**asdict(f), "recall": f.recall, "removed_share": f.removed_share} for f in figures]
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
