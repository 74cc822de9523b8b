"""Failure stage and iteration of a fleet's failed jobs from an already parsed warehouse (the
temporal step alone, much cheaper than ``l4spark evaluate``).

    python -m l4spark.evaluation.stage_eval FLEET WAREHOUSE OUT.json

The gate is ``indicating_stand_in`` (no normal pool), so two versions of the code compare on
staging and failure points only. Iteration hit as in ``diagnosis_eval.iteration_hit``. Prints
overall, per labelled stage (data_loading, checkpoint_saving) and per kind, then the misses.
"""
import inspect
import json
import sys
from collections import defaultdict
from pathlib import Path


def main() -> None:
    from pyspark.sql import functions as F
    from l4spark.config import load_config
    from l4spark.evaluation.labels import load_labels
    from l4spark.io.session import build_session
    from l4spark.io.storage import read_table
    from l4spark.temporal.jobs import analyse_iterations, job_failure_points
    from l4spark.temporal.lines import with_stage_and_iteration

    if len(sys.argv) != 4:
        sys.exit(__doc__)
    fleet, warehouse, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    labels = load_labels(fleet)
    config = load_config(overrides={"storage.warehouse": warehouse, "spark.master": "local[2]"})
    spark = build_session(config.spark)
    try:
        conf = config.temporal
        events = read_table(spark, config.storage, "events").where(F.col("job_id").isin(sorted(labels)))
        staged = with_stage_and_iteration(events, conf).localCheckpoint()
        iterations, progress = analyse_iterations(staged, None, conf)
        args = (staged, progress, conf) if "conf" in inspect.signature(job_failure_points).parameters else (staged, progress)
        points = {r.job_id: (r.failure_stage, r.failure_iteration) for r in job_failure_points(*args).collect()}
        flags = defaultdict(list)
        for r in iterations.where("anomalous").select("job_id", "iteration").collect():
            flags[r.job_id].append(int(r.iteration))
    finally:
        spark.stop()
    rows = []
    for job_id, lab in sorted(labels.items()):
        stage, it = points.get(job_id, (None, None))
        want = lab.failure_iteration
        f = sorted(flags[job_id])
        hit = None if want is None else (want in f or (bool(f) and abs(f[0] - want) <= 1) or (it is not None and abs(it - want) <= 1))
        rows.append({"job_id": job_id, "kind": lab.fault_kind, "stage": lab.failure_stage, "got_stage": stage,
                     "iteration": want, "got_iteration": it, "hit": hit})
    Path(out).write_text(json.dumps(rows, indent=1))
    def block(rs):
        st = sum(r["stage"] == r["got_stage"] for r in rs) / len(rs)
        its = [r for r in rs if r["hit"] is not None]
        return f"stage {st:.3f} ({len(rs)} jobs), iteration hit " + (f"{sum(r['hit'] for r in its) / len(its):.3f} ({len(its)} jobs)" if its else "-")
    print("all:", block(rows))
    for stage in ("data_loading", "checkpoint_saving"):
        rs = [r for r in rows if r["stage"] == stage]
        if rs:
            print(f"labelled {stage}:", block(rs))
    by = defaultdict(list)
    for r in rows:
        by[r["kind"]].append(r)
    for kind, rs in sorted(by.items()):
        print(f"  {kind:24s}", block(rs))
    for r in rows:
        if r["stage"] != r["got_stage"] or r["hit"] is False:
            print("  miss", r)


if __name__ == "__main__":
    main()
