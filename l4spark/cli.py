"""The ``l4spark`` command: prints for people; the work is in the library."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from contextlib import contextmanager
from typing import Iterator, Sequence

from l4spark.errors import L4SparkError


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args.func, args, "l4spark")


def run_command(func, args: argparse.Namespace, prog: str) -> int:
    """Run a command: logging by ``--verbose``; an L4SparkError is a one-line message and exit 2
    (bad input is reported, not dumped as a stack trace)."""
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(func(args) or 0)
    except L4SparkError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l4spark", description="Diagnose failed LLM training jobs from their logs (the L4 method on Spark).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    commands = parser.add_subparsers(dest="command", required=True)

    from l4spark.diagnose_cli import add_parser as add_diagnose
    from l4spark.evaluation.diagnosis_eval import add_parser as add_evaluate
    from l4spark.nightly_cli import add_parser as add_nightly
    from l4spark.normal_pool_cli import add_parser as add_normal_pool
    from l4spark.patterns_cli import add_parser as add_patterns
    from l4spark.simulate.cli import add_parser as add_simulate
    from l4spark.spatial_cli import add_parser as add_spatial
    add_simulate(commands)
    add_patterns(commands)
    add_spatial(commands)
    add_normal_pool(commands)
    add_diagnose(commands)
    add_evaluate(commands)
    add_nightly(commands)

    parse = commands.add_parser("parse", help="parse rank log files into the events and templates tables")
    parse.add_argument("--logs-root", required=True, help="folder holding <job_id>/<node>/rank-<r>.log[.gz]")
    parse.add_argument("--warehouse", help="warehouse root (default from conf: ./warehouse)")
    parse.add_argument("--jobs", nargs="+", metavar="JOB", help="parse only these job ids")
    _add_common(parse)
    parse.set_defaults(func=run_parse)
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", action="append", default=[], metavar="FILE",
                        help="TOML config file overriding the defaults (repeatable; later wins)")
    parser.add_argument("--master", help="Spark master (default from conf: local[*])")
    parser.add_argument("--format", choices=("parquet", "delta"), help="table format (default parquet)")
    parser.add_argument("--lock-wait", type=float, metavar="SECONDS",
                        help="wait this long for another run's warehouse lock (default from conf: 0, fail at once)")


def config_from_args(args: argparse.Namespace):
    """The config of a sub-command: defaults, ``--conf`` files, then the common flags."""
    from l4spark.config import load_config
    overrides = {}
    if getattr(args, "warehouse", None):
        overrides["storage.warehouse"] = args.warehouse
    if getattr(args, "master", None):
        overrides["spark.master"] = args.master
    if getattr(args, "format", None):
        overrides["storage.format"] = args.format
    if getattr(args, "lock_wait", None) is not None:
        overrides["storage.lock_wait_s"] = args.lock_wait
    return load_config(*args.conf, overrides=overrides)


@contextmanager
def locked_session(config, command: str) -> Iterator:
    """A Spark session for a command that writes the warehouse: the warehouse lock is taken
    before Spark starts and released after it stops (l4spark/lock.py)."""
    from l4spark.lock import warehouse_lock
    from l4spark.session import build_session

    with warehouse_lock(config.storage, f"l4spark {command}"):
        spark = build_session(config.spark)
        try:
            yield spark
        finally:
            spark.stop()


def run_parse(args: argparse.Namespace) -> int:
    from l4spark.parse import parse_jobs

    config = config_from_args(args)
    progress = progress_printer()
    progress(f"starting Spark ({config.spark.master})")
    with locked_session(config, "parse") as spark:
        summary = parse_jobs(spark, config, args.logs_root, args.jobs, progress=progress)
    print_parse_summary(summary, config.storage.warehouse)
    return 0


def progress_printer():
    """A progress callback that prints each message with the seconds since it was made."""
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", flush=True)

    return progress


def print_parse_summary(summary, warehouse: str) -> None:
    seconds = summary.total_seconds
    print()
    print(f"parse run {summary.run_id} -> {warehouse}")
    print(f"  jobs            {len(summary.jobs)}")
    print(f"  files           {summary.files:,}")
    print(f"  bytes           {summary.bytes:,} ({summary.bytes / 1e6:.1f} MB)")
    print(f"  lines           {summary.lines:,}")
    print(f"  events          {summary.events:,} distinct in these jobs")
    print(f"  new templates   {summary.new_templates:,}")
    print(f"  quarantined     {summary.set_aside_lines:,} lines set aside; issues: "
          + (", ".join(f"{k}={v}" for k, v in summary.issues_by_reason.items()) or "none"))
    rate = summary.lines / seconds if seconds else 0.0
    print(f"  seconds         {seconds:.1f} ({rate:,.0f} lines/s, {summary.bytes / 1e6 / seconds if seconds else 0:.1f} MB/s)"
          f"  [" + ", ".join(f"{k} {v:.1f}" for k, v in summary.seconds.items()) + "]")
    flagged = [j for j in summary.per_job if j["issues"] or j["meta_error"]]
    if flagged:
        print("  per job issues:")
        for job in flagged:
            detail = ", ".join(f"{k}={v}" for k, v in sorted(job["issues"].items()))
            print(f"    {job['job_id']}: {detail}" + (f" ({job['meta_error']})" if job["meta_error"] else ""))


if __name__ == "__main__":
    sys.exit(main())
