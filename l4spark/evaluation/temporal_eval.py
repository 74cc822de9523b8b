"""Temporal evaluation: failure stage, fault iteration flagged, false anomalous iterations.

    python -m l4spark.evaluation.temporal_eval --generate 61     # generate, parse, evaluate
    python -m l4spark.evaluation.temporal_eval --fleet DIR --warehouse WH   # fleet already parsed into WH

Prints failure-stage accuracy, the share of in-training faults whose labelled iteration is
flagged (exactly, or the first flagged iteration within 1), the mean number of false anomalous
iterations per job, the share of successful jobs with no flagged iteration, per fault kind, and
every miss. Only evaluation code reads the fleet's ``_labels``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

from l4spark.evaluation.labels import load_labels


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


def run(fleet: Path, warehouse: Path, parse: bool) -> dict:
    from pyspark.sql import functions as F

    from l4spark.config import load_config
    from l4spark.parse import parse_jobs
    from l4spark.session import build_session
    from l4spark.storage import read_table
    from l4spark.temporal import analyse_iterations, job_failure_points, temporal_config, with_stage_and_iteration

    config = load_config(overrides={"storage.warehouse": str(warehouse)})
    spark = build_session(config.spark)
    try:
        if parse:
            parse_jobs(spark, config, fleet, progress=lambda m: print(m, file=sys.stderr))
        conf = temporal_config(config)
        staged = with_stage_and_iteration(read_table(spark, config.storage, "events"), conf).localCheckpoint()
        iterations, progress = analyse_iterations(staged, conf=conf)
        points = job_failure_points(staged, progress).toPandas()
        jobs = read_table(spark, config.storage, "jobs").select("job_id", "status").toPandas()
        its = iterations.select("job_id", "iteration", F.col("anomalous")).toPandas()
    finally:
        spark.stop()
    return evaluate(jobs, points, its, load_labels(fleet))


def report(result: dict) -> str:
    table = result["table"]
    lines = [f"jobs {result['jobs']}",
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
    result = run(fleet, warehouse, parse)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "table"}))
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
