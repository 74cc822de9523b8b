"""Temporal evaluation: failure stage, fault iteration flagged, false anomalous iterations.

    python -m l4spark.evaluation.temporal_eval --generate 61     # generate, parse, evaluate
    python -m l4spark.evaluation.temporal_eval --fleet DIR --warehouse WH   # fleet already parsed into WH
    ... --indicating stand-in                                     # without the cross-job filter

Prints failure-stage accuracy, the share of in-training faults whose labelled iteration is
flagged (exactly, or the first flagged iteration within 1), the mean number of false anomalous
iterations per job, the share of successful jobs with no flagged iteration, per fault kind, and
every miss. Only evaluation code reads the fleet's ``_labels``.

Indicating set (``--indicating``): ``candidates`` (default) is what the real pipeline passes to
``analyse_iterations``: the cross-job filter's candidate events (job_id, event_id), from a normal
pool built from the fleet's successful jobs. A failed job is filtered with the pool of every
successful job; a successful job with a leave-one-out pool (every *other* successful job), so it
never counts as history of itself. ``stand-in`` uses ``indicating_stand_in`` (ERROR/FATAL lines and
events of a single job) for every job.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

from l4spark.evaluation.labels import load_labels

LOO_TAG = "|loo:"  # settings-key suffix naming the held-out job of a leave-one-out pool


def evaluate(jobs: pd.DataFrame, points: pd.DataFrame, iterations: pd.DataFrame, labels: dict) -> dict:
    """Metrics from pandas frames: jobs (job_id, status), points (job_id, failure_stage,
    failure_iteration), iterations (job_id, iteration, anomalous)."""
    flagged = iterations[iterations["anomalous"]].groupby("job_id")["iteration"].apply(sorted).to_dict()
    stages = points.set_index("job_id").to_dict("index")
    rows = []
    for job in jobs.itertuples():
        label = labels.get(job.job_id)
        want_stage = label.failure_stage if label else "finished"
        got = stages.get(job.job_id, {})
        flags = flagged.get(job.job_id, [])
        want_it = label.failure_iteration if label else None
        hit = None
        if want_it is not None:
            hit = want_it in flags or (bool(flags) and abs(flags[0] - want_it) <= 1)
        false = [f for f in flags if want_it is None or abs(f - want_it) > 1]
        rows.append({"job_id": job.job_id, "kind": label.fault_kind if label else "succeeded",
                     "stage": want_stage, "got_stage": got.get("failure_stage"),
                     "iteration": want_it, "got_iteration": got.get("failure_iteration"),
                     "flagged": flags, "iteration_hit": hit, "false_flags": len(false)})
    table = pd.DataFrame(rows)
    table["stage_ok"] = table["stage"] == table["got_stage"]
    in_training = table[table["iteration"].notna()]
    ok_jobs = table[table["kind"] == "succeeded"]
    return {
        "jobs": len(table),
        "stage_accuracy": round(float(table["stage_ok"].mean()), 4),
        "iteration_flagged_share": round(float(in_training["iteration_hit"].mean()), 4) if len(in_training) else None,
        "false_anomalous_per_job": round(float(table["false_flags"].mean()), 4),
        "successful_clean_share": round(float((ok_jobs["false_flags"] == 0).mean()), 4) if len(ok_jobs) else None,
        "table": table,
    }


def candidate_events(spark, config, events, jobs):
    """(job_id, event_id) the cross-job filter keeps, for every job of ``jobs`` (job_id, status,
    settings): failed jobs against the pool of all successful jobs, successful jobs against a
    leave-one-out pool. Builds or updates the warehouse's normal pool first."""
    from pyspark.sql import functions as F

    from l4spark.crossjob.normal_pool import (
        NormalPool,
        build_pool,
        build_variants,
        filter_normal_events,
        read_normal_pool,
        update_normal_pool,
    )
    from l4spark.io.storage import read_table, table_exists
    from l4spark.io.tables import NORMAL_POOL_LEDGER

    settings = config.normal_pool
    update_normal_pool(spark, config, settings, progress=lambda m: print(m, file=sys.stderr))
    succeeded = list(settings.succeeded_statuses)

    def kept(job_events, job_rows, pool):
        return (filter_normal_events(job_events, job_rows, pool, settings, masking=config.masking,
                                     fold_digits=config.structure.fold_digits)
                .candidates.select("job_id", "event_id").distinct())

    failed_jobs = jobs.where(~F.col("status").isin(succeeded))
    parts = [kept(events.join(failed_jobs.select("job_id"), on="job_id", how="left_semi"), failed_jobs,
                  read_normal_pool(spark, config.storage))]
    if table_exists(config.storage, NORMAL_POOL_LEDGER.name):
        ledger = read_table(spark, config.storage, NORMAL_POOL_LEDGER.name)
        held_out = sorted(r.job_id for r in ledger.select("job_id").distinct().collect())
        copies, groups = _leave_one_out(spark, ledger, settings)
        pools = NormalPool(build_pool(copies, groups).localCheckpoint(), build_variants(copies, groups).localCheckpoint())
        for job_id in held_out:
            tag = LOO_TAG + job_id
            pool = NormalPool(*[_untagged(frame, tag) for frame in (pools.entries, pools.variants)])
            parts.append(kept(events.where(F.col("job_id") == job_id), jobs.where(F.col("job_id") == job_id), pool))
    candidates = parts[0]
    for part in parts[1:]:
        candidates = candidates.unionByName(part)
    return candidates.localCheckpoint()


def _leave_one_out(spark, ledger, settings):
    """Ledger copies and job groups of one pool per held-out successful job: every other
    successful job, its group keys suffixed with ``|loo:<held-out job>`` so the pools of all
    held-out jobs are built in one pass (``build_pool`` groups by settings_key)."""
    from pyspark.sql import functions as F

    from l4spark.crossjob.fingerprint import canonical_settings, parse_settings, settings_key

    counted = {r.job_id: parse_settings(r.settings) for r in ledger.select("job_id", "settings").distinct().collect()}
    pairs, groups = [], []
    for held_out in counted:
        for job_id, job_settings in counted.items():
            if job_id == held_out:
                continue
            copy = f"{job_id}{LOO_TAG}{held_out}"
            pairs.append((job_id, copy))
            for index, level in enumerate(settings.levels):
                key = settings_key(job_settings, level)
                if key is not None:
                    groups.append((copy, index, level.name, key + LOO_TAG + held_out,
                                   canonical_settings(job_settings, level.keys)))
    pair_frame = spark.createDataFrame(pairs or [("", "")], "job_id string, copy_id string")
    copies = (ledger.join(F.broadcast(pair_frame), on="job_id", how="inner")
              .withColumn("job_id", F.col("copy_id")).drop("copy_id"))
    group_frame = spark.createDataFrame(
        groups, "job_id string, level int, level_name string, settings_key string, group_settings string")
    return copies, group_frame


def _untagged(frame, tag: str):
    from pyspark.sql import functions as F

    return (frame.where(F.col("settings_key").endswith(tag))
            .withColumn("settings_key", F.expr(f"substring(settings_key, 1, length(settings_key) - {len(tag)})")))


def run(fleet: Path, warehouse: Path, parse: bool, indicating: str = "candidates") -> dict:
    from pyspark.sql import functions as F

    from l4spark.config import load_config
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.io.session import build_session
    from l4spark.io.storage import read_table
    from l4spark.temporal.jobs import analyse_iterations, job_failure_points
    from l4spark.temporal.lines import with_stage_and_iteration

    config = load_config(overrides={"storage.warehouse": str(warehouse)})
    spark = build_session(config.spark)
    try:
        if parse:
            parse_jobs(spark, config, fleet, progress=lambda m: print(m, file=sys.stderr))
        conf = config.temporal
        events = read_table(spark, config.storage, "events")
        jobs_table = read_table(spark, config.storage, "jobs")
        staged = with_stage_and_iteration(events, conf).localCheckpoint()
        gate = (candidate_events(spark, config, events, jobs_table.select("job_id", "status", "settings"))
                if indicating == "candidates" else None)
        iterations, progress = analyse_iterations(staged, gate, conf)
        points = job_failure_points(staged, progress, conf).toPandas()
        jobs = jobs_table.select("job_id", "status").toPandas()
        its = iterations.select("job_id", "iteration", F.col("anomalous")).toPandas()
    finally:
        spark.stop()
    result = evaluate(jobs, points, its, load_labels(fleet))
    result["indicating"] = (
        "cross-job filter candidates (failed jobs: pool of all successful jobs; successful jobs: "
        "leave-one-out pool of the other successful jobs)" if indicating == "candidates"
        else "stand-in (ERROR/FATAL lines and events of a single job), every job")
    return result


def report(result: dict) -> str:
    table = result["table"]
    lines = [f"jobs {result['jobs']}; indicating set: {result.get('indicating', '?')}",
             f"failure-stage accuracy          {result['stage_accuracy']}",
             f"in-training fault iteration hit {result['iteration_flagged_share']}",
             f"false anomalous iterations/job  {result['false_anomalous_per_job']}",
             f"successful jobs with no flag    {result['successful_clean_share']}", "", "per kind:"]
    for kind, group in table.groupby("kind"):
        hits = group["iteration_hit"].dropna()
        lines.append(f"  {kind:24s} n={len(group):3d} stage={group['stage_ok'].mean():.2f} "
                     f"iter={hits.mean() if len(hits) else float('nan'):.2f} false={group['false_flags'].mean():.2f}")
    lines += ["", "misses:"]
    for row in table.itertuples():
        if not row.stage_ok or row.iteration_hit is False or row.false_flags:
            lines.append(f"  {row.job_id} {row.kind}: stage {row.stage}->{row.got_stage}, iteration "
                         f"{row.iteration}->{row.got_iteration}, flagged {row.flagged[:8]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.evaluation.temporal_eval")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--fleet", type=Path, help="a generated fleet")
    src.add_argument("--generate", type=int, metavar="SEED", help="generate a fleet with every fault kind")
    parser.add_argument("--warehouse", type=Path, help="warehouse the fleet is parsed into (default: a temp dir)")
    parser.add_argument("--indicating", choices=("candidates", "stand-in"), default="candidates",
                        help="indicating set: the cross-job filter's candidates (default) or the stand-in")
    parser.add_argument("--jobs", type=int, default=44)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="temporal-eval-"))
    fleet = args.fleet
    if args.generate is not None:
        from l4spark.simulate import FleetOptions, simulate_fleet

        fleet = work / "fleet"
        simulate_fleet(fleet, FleetOptions(seed=args.generate, jobs=args.jobs, nodes=(2, 4), ranks_per_node=4,
                                           iterations=150, failed_share=0.6))
    warehouse = args.warehouse or work / "warehouse"
    parse = args.warehouse is None or not (warehouse / "events").exists()
    result = run(fleet, warehouse, parse, args.indicating)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "table"}))
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
