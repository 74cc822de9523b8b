"""``l4spark normal-pool``: build or update the normal-event pool of successful jobs.

    l4spark normal-pool --warehouse W [--logs-root R]
    python -m l4spark.normal_pool_cli --warehouse W [--logs-root R]

With ``--logs-root``, jobs under it that are not in the warehouse yet are parsed first.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence



def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("normal-pool", help="build or update the normal-event pool of successful jobs",
                                   description="Count the events of successful jobs not yet in the pool "
                                               "(incremental; a rerun changes nothing) and rewrite normal_pool.")
    _add_arguments(parser)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warehouse", help="warehouse root (default from conf: ./warehouse)")
    parser.add_argument("--logs-root", help="parse the jobs under this folder that the warehouse does not have yet")
    parser.add_argument("--conf", action="append", default=[], metavar="FILE",
                        help="TOML config file overriding the defaults (repeatable; later wins)")
    parser.add_argument("--master", help="Spark master (default from conf: local[*])")
    parser.add_argument("--format", choices=("parquet", "delta"), help="table format (default parquet)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from l4spark.cli import config_from_args, locked_session, progress_printer
    from l4spark.normal_pool import pool_config, update_normal_pool

    config = config_from_args(args)
    progress = progress_printer()

    progress(f"starting Spark ({config.spark.master})")
    with locked_session(config, "normal-pool") as spark:
        if args.logs_root:
            parse_missing_jobs(spark, config, args.logs_root, progress)
        update = update_normal_pool(spark, config, pool_config(config), progress=progress)
    print()
    print(f"normal pool -> {config.storage.warehouse}")
    print(f"  successful jobs counted  {update.counted_jobs}")
    print(f"  added this run           {len(update.added_jobs)}")
    print(f"  dropped this run         {len(update.removed_jobs)} (no longer successful or registered)")
    print(f"  pool                     {update.pool_rows} rows, {update.groups} groups "
          f"({'rebuilt' if update.rebuilt else 'unchanged'})")
    return 0


def parse_missing_jobs(spark, config, logs_root: str, progress) -> list[str]:
    """Parse the jobs under ``logs_root`` that the warehouse's jobs table does not list; returns them."""
    from l4spark.layout import scan_logs_root
    from l4spark.parse import parse_jobs
    from l4spark.storage import read_table, table_exists

    scanned = set(scan_logs_root(logs_root, config.layout.pattern, config.layout.job_file).jobs)
    known = set()
    if table_exists(config.storage, "jobs"):
        known = {row.job_id for row in read_table(spark, config.storage, "jobs").select("job_id").collect()}
    missing = sorted(scanned - known)
    if missing:
        progress(f"parsing {len(missing)} jobs not yet in the warehouse")
        parse_jobs(spark, config, logs_root, missing, progress=progress)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.normal_pool_cli", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    _add_arguments(parser)
    from l4spark.cli import run_command

    return run_command(run, parser.parse_args(argv), "l4spark normal-pool")


if __name__ == "__main__":
    sys.exit(main())
