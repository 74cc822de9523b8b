"""``l4spark normal-pool``: build or update the normal-event pool of successful jobs.

    l4spark normal-pool --warehouse W [--logs-root R]

With ``--logs-root``, jobs under it that are not in the warehouse yet are parsed first.
"""

from __future__ import annotations

import argparse

from l4spark.cli.common import add_common_options, config_from_args, locked_session, progress_printer


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("normal-pool", help="build or update the normal-event pool of successful jobs",
                                   description="Count the events of successful jobs not yet in the pool "
                                               "(incremental; a rerun changes nothing) and rewrite normal_pool.")
    parser.add_argument("--logs-root", help="parse the jobs under this folder that the warehouse does not have yet")
    add_common_options(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from l4spark.crossjob.normal_pool import update_normal_pool
    from l4spark.nightly.batch import catch_up

    config = config_from_args(args)
    progress = progress_printer()
    progress(f"starting Spark ({config.spark.master})")
    with locked_session(config, "normal-pool") as spark:
        if args.logs_root:
            catch_up(spark, config, args.logs_root, progress)
        update = update_normal_pool(spark, config, config.normal_pool, progress=progress)
    print()
    print(f"normal pool -> {config.storage.warehouse}")
    print(f"  successful jobs counted  {update.counted_jobs}")
    print(f"  added this run           {len(update.added_jobs)}")
    print(f"  dropped this run         {len(update.removed_jobs)} (no longer successful or registered)")
    print(f"  pool                     {update.pool_rows} rows, {update.groups} groups "
          f"({'rebuilt' if update.rebuilt else 'unchanged'})")
    return 0
