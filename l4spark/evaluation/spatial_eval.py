"""Faulty-node localisation on a labelled fleet: l4spark against Error_time and Error_count.

    python -m l4spark.evaluation.spatial_eval --generate 11 --out /tmp/spatial-fleet
    python -m l4spark.evaluation.spatial_eval --fleet /tmp/spatial-fleet [--compare]

``--generate SEED`` writes a fleet of hardware-fault jobs (network, accelerator and node
classes; 48 jobs of 8-256 nodes, 4 ranks per node, 40 iterations) first. The fleet is parsed
into ``--warehouse`` (default ``<fleet>.warehouse``) unless it already holds every job. Every
labelled job with a non-empty ``faulty_nodes`` is ranked; top-k accuracy (k = 1, 3, 5, 8) is
the share of its faulty nodes within the first k units, averaged over jobs. ``--compare``
also ranks with each signal left out, with isolation alone (the method before peer blame and
timing) and with the other normalisations: the ablation table of docs/spatial.md. The
ranking inputs are built once and ranked under every variant. Only this evaluation reads
``_labels``; the ranking sees the events and nothing else (no history: every event is a
candidate, as for a new kind of job).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import pandas as pd

K_VALUES = (1, 3, 5, 8)
HARDWARE_CLASSES = ("network", "accelerator", "node")


def generate_fleet(out: Path, seed: int, jobs: int = 48) -> None:
    from l4spark.simulate import FAULT_CLASSES, FleetOptions, simulate_fleet

    kinds = tuple(k for k, c in FAULT_CLASSES.items() if c in HARDWARE_CLASSES)
    simulate_fleet(out, FleetOptions(seed=seed, jobs=jobs, nodes=(8, 256), ranks_per_node=4, iterations=40,
                                     failed_share=1.0, fault_kinds=kinds))


def ablations(base) -> dict[str, object]:
    """Named SpatialConfig variants of ``base`` for the ablation table (``base`` first)."""
    from l4spark.spatial.config import NORMALISATIONS

    replace = dataclasses.replace
    variants = {
        f"l4spark ({base.normalisation})": base,
        "- peer blame": replace(base, blame_weight=0.0),
        "- first to fail": replace(base, timing_weight=0.0),
        "- evidence rule": replace(base, evidence_required=False),
        "isolation + evidence": replace(base, blame_weight=0.0, timing_weight=0.0),
        "isolation only": replace(base, blame_weight=0.0, timing_weight=0.0, evidence_required=False),
    }
    for normalisation in NORMALISATIONS:
        if normalisation != base.normalisation:
            variants[f"all signals, {normalisation}"] = replace(base, normalisation=normalisation)
            variants[f"isolation only, {normalisation}"] = replace(
                base, normalisation=normalisation, blame_weight=0.0, timing_weight=0.0, evidence_required=False)
    return variants


def accuracy(rankings: dict[str, list[str]], faulty: dict[str, tuple[str, ...]]) -> dict[int, float]:
    """Mean top-k hit share over the jobs of ``faulty`` (job -> faulty nodes, all non-empty)."""
    from l4spark.spatial.ranking import top_k_hit

    return {k: sum(top_k_hit(rankings.get(j, []), nodes, k) for j, nodes in faulty.items()) / len(faulty)
            for k in K_VALUES}


def _rankings(frame: pd.DataFrame) -> dict[str, list[str]]:
    ordered = frame.sort_values(["job_id", "rank"])
    return {job_id: list(group["node"]) for job_id, group in ordered.groupby("job_id", sort=False)}


def _table(rows: list[tuple[str, dict[int, float]]]) -> str:
    head = f"  {'method':<30}" + "".join(f"{'top-' + str(k):>8}" for k in K_VALUES)
    body = [f"  {name:<30}" + "".join(f"{acc[k]:>8.3f}" for k in K_VALUES) for name, acc in rows]
    return "\n".join([head, *body])


def _describe(row) -> str:
    if row is None:
        return "-"
    signals = "; ".join(row["signals"]) if len(row["signals"]) else "no signal"
    return f"{row['node']} (combined {row['combined_score']:.3f}: {signals})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spatial_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--fleet", type=Path, help="a generated fleet (with _labels)")
    source.add_argument("--generate", type=int, metavar="SEED", help="generate a hardware-fault fleet first")
    parser.add_argument("--out", type=Path, default=Path("/tmp/spatial-fleet"), help="where --generate writes")
    parser.add_argument("--jobs", type=int, default=48, help="jobs to generate (default 48)")
    parser.add_argument("--warehouse", type=Path, help="default: <fleet>.warehouse")
    parser.add_argument("--normalisation", help="default: the SpatialConfig default (role)")
    parser.add_argument("--compare", action="store_true", help="also rank with the ablation variants")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    fleet = args.fleet
    if args.generate is not None:
        fleet = args.out
        print(f"generating fleet seed {args.generate} ({args.jobs} jobs) into {fleet}", flush=True)
        generate_fleet(fleet, args.generate, args.jobs)

    from pyspark.sql import functions as F

    from l4spark.config import load_config
    from l4spark.evaluation.labels import load_labels
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.io.session import build_session
    from l4spark.spatial.ranking import baseline_rankings, rank_unit_inputs, unit_inputs
    from l4spark.io.storage import read_table, table_exists

    labels = load_labels(fleet)
    faulty = {j: label.faulty_nodes for j, label in labels.items() if label.faulty_nodes}
    skipped = sorted(set(labels) - set(faulty))
    warehouse = args.warehouse or Path(str(fleet).rstrip("/") + ".warehouse")
    config = load_config(overrides={"storage.warehouse": str(warehouse), "spark.master": args.master})
    spark = build_session(config.spark)
    try:
        parsed = set()
        if table_exists(config.storage, "jobs"):
            parsed = {r.job_id for r in read_table(spark, config.storage, "jobs").select("job_id").collect()}
        if not set(faulty) <= parsed:
            print(f"parsing {fleet} into {warehouse}", flush=True)
            parse_jobs(spark, config, fleet, progress=lambda m: print("  " + m, flush=True))
        events = read_table(spark, config.storage, "events").where(F.col("job_id").isin(sorted(faulty)))
        base = config.spatial
        if args.normalisation:
            base = dataclasses.replace(base, normalisation=args.normalisation)
        variants = ablations(base) if args.compare else {f"l4spark ({base.normalisation})": base}
        facts, activity = unit_inputs(events, base.granularity)
        facts, activity = facts.cache(), activity.cache()
        ranked = {}
        for name, variant in variants.items():
            ranked[name] = rank_unit_inputs(facts, activity, variant).toPandas()
            print(f"  ranked: {name} ({time.perf_counter() - started:.0f}s)", flush=True)
        facts.unpersist()
        activity.unpersist()
        baselines = baseline_rankings(events).toPandas()
    finally:
        spark.stop()

    names = list(variants)
    ours = ranked[names[0]]
    rankings = {"l4spark": _rankings(ours)}
    for method in ("error_time", "error_count"):
        rankings[method] = _rankings(baselines[baselines["method"] == method])
    sizes = ours.groupby("job_id")["node"].nunique()
    print(f"\n{len(faulty)} hardware-fault jobs with a faulty node ({sizes.min()}-{sizes.max()} nodes); "
          f"{len(skipped)} labelled jobs without a node-local fault skipped")
    rows = [(names[0], accuracy(rankings["l4spark"], faulty)),
            ("Error_time", accuracy(rankings["error_time"], faulty)),
            ("Error_count", accuracy(rankings["error_count"], faulty))]
    rows += [(name, accuracy(_rankings(ranked[name]), faulty)) for name in names[1:]]
    print(_table(rows))

    print("\nper fault kind (l4spark top-1/3/5/8 | Error_time top-1 | Error_count top-1):")
    kinds = sorted({labels[j].fault_kind for j in faulty})
    for kind in kinds:
        jobs = {j: n for j, n in faulty.items() if labels[j].fault_kind == kind}
        ours_acc = accuracy(rankings["l4spark"], jobs)
        print(f"  {kind:<22} n={len(jobs):<3}" + "".join(f"{ours_acc[k]:>7.2f}" for k in K_VALUES)
              + f"  | {accuracy(rankings['error_time'], jobs)[1]:.2f} | {accuracy(rankings['error_count'], jobs)[1]:.2f}")

    print("\nmisses (faulty node not ranked first):")
    by_job = ours.set_index(["job_id", "node"])
    for job_id, nodes in sorted(faulty.items()):
        ranking = rankings["l4spark"].get(job_id, [])
        if ranking[:1] and ranking[0] in nodes:
            continue
        position = min((ranking.index(n) + 1 for n in nodes if n in ranking), default=None)
        first = by_job.loc[(job_id, ranking[0])].to_dict() | {"node": ranking[0]} if ranking else None
        truth = by_job.loc[(job_id, nodes[0])].to_dict() | {"node": nodes[0]} if (job_id, nodes[0]) in by_job.index else None
        print(f"  {job_id:<36} {labels[job_id].fault_kind:<20} faulty at rank {position} of {sizes.get(job_id, 0)}\n"
              f"      first:  {_describe(first)}\n      faulty: {_describe(truth)}")
    print(f"\n{time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
