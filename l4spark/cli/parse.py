"""``l4spark parse``: parse rank log files into the events and templates tables."""

from __future__ import annotations

import argparse

from l4spark.cli.common import add_common_options, config_from_args, locked_session, progress_printer


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("parse", help="parse rank log files into the events and templates tables")
    parser.add_argument("--logs-root", required=True, help="folder holding <job_id>/<node>/rank-<r>.log[.gz]")
    parser.add_argument("--jobs", nargs="+", metavar="JOB", help="parse only these job ids")
    add_common_options(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from l4spark.parse.pipeline import parse_jobs

    config = config_from_args(args)
    progress = progress_printer()
    progress(f"starting Spark ({config.spark.master})")
    with locked_session(config, "parse") as spark:
        summary = parse_jobs(spark, config, args.logs_root, args.jobs, progress=progress)
    print_parse_summary(summary, config.storage.warehouse)
    return 0


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
