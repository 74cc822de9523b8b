"""``l4spark spatial``: rank the nodes of failed jobs and write ``diagnosis_nodes``.

    l4spark spatial --warehouse W [--jobs J ...] [--granularity rank] [--top-k 5]
"""

from __future__ import annotations

import argparse
import time

from l4spark.cli.common import add_common_options, config_from_args, locked_session


def add_parser(subparsers) -> argparse.ArgumentParser:
    from l4spark.spatial.config import GRANULARITIES, NORMALISATIONS

    parser = subparsers.add_parser("spatial", help="rank the nodes of failed jobs into diagnosis_nodes "
                                                   "(isolation, peer blame, first to fail, silence)")
    parser.add_argument("--jobs", nargs="+", metavar="JOB", help="these job ids (default: every failed job)")
    parser.add_argument("--candidates", metavar="PARQUET",
                        help="Parquet of (job_id, event_id) candidate events from cross-job filtering "
                             "(default: every event)")
    parser.add_argument("--granularity", choices=GRANULARITIES, help="node (default) or rank")
    parser.add_argument("--normalisation", choices=NORMALISATIONS, help="default: role")
    parser.add_argument("--top-k", type=int, help="suspects per job (default 8)")
    parser.add_argument("--show", type=int, default=3, help="units printed per job (default 3)")
    add_common_options(parser, warehouse_help="warehouse root holding the events and jobs tables (default from conf)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from l4spark.nightly.selection import failed_jobs
    from l4spark.spatial.ranking import rank_nodes, write_diagnosis_nodes
    from l4spark.io.storage import read_table

    config = config_from_args(args, {f"spatial.{key}": getattr(args, key)
                                     for key in ("granularity", "normalisation", "top_k")})
    spatial = config.spatial
    started = time.perf_counter()
    with locked_session(config, "spatial") as spark:
        job_ids = sorted(args.jobs) if args.jobs else failed_jobs(spark, config)
        if not job_ids:
            print("no failed job to rank")
            return 0
        events = read_table(spark, config.storage, "events").where(F.col("job_id").isin(job_ids))
        candidates = spark.read.parquet(args.candidates) if args.candidates else None
        rows = rank_nodes(events, spatial, candidates).cache()
        write_diagnosis_nodes(rows, config.storage, job_ids)
        shown = rows.where(F.col("rank") <= args.show).orderBy("job_id", "rank").toPandas()
        rows.unpersist()
    print(f"ranked {len(job_ids)} jobs at {spatial.granularity} granularity in "
          f"{time.perf_counter() - started:.1f}s -> {config.storage.warehouse}/diagnosis_nodes")
    for job_id, group in shown.groupby("job_id", sort=True):
        print(job_id)
        for row in group.itertuples():
            unit = row.node if row.process_rank is None or row.process_rank != row.process_rank else f"{row.node} rank {row.process_rank}"
            flags = ("suspect " if row.suspect else "") + ("silent" if row.silent else "")
            print(f"  {row.rank:>3}  {unit:<28} combined {row.combined_score:.3f}  {flags.strip()}")
            for signal in row.signals:
                print(f"         {signal}")
    return 0
