"""``l4spark nightly``: the nightly batch over every failed job without a current diagnosis."""

from __future__ import annotations

import argparse
from datetime import date

from l4spark.cli.common import add_common_options, config_from_args, locked_session, progress_printer
from l4spark.errors import EXIT_OK, EXIT_PARTIAL


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("nightly", help="parse new jobs, refresh the normal pool, diagnose every "
                                                   "failed job without a current diagnosis, record the run")
    parser.add_argument("--logs-root", required=True, help="folder holding <job_id>/<node>/rank-<r>.log[.gz]")
    parser.add_argument("--date", type=_date, help="run date YYYY-MM-DD: failed jobs that ended on or before it "
                                                   "(default: every failed job)")
    parser.add_argument("--rediagnose-older", action="store_true",
                        help="also rediagnose jobs diagnosed by another l4spark version")
    parser.add_argument("--reports", metavar="DIR", help="report folder (default: <warehouse>/_reports)")
    parser.add_argument("--no-reports", action="store_true", help="write no report files")
    add_common_options(parser)
    parser.set_defaults(func=run)
    return parser


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, found {text!r}") from exc


def run(args: argparse.Namespace) -> int:
    from l4spark.io import fs
    from l4spark.nightly.batch import run_nightly, summary_lines

    config = config_from_args(args)
    progress = progress_printer()
    reports = None if args.no_reports else (args.reports or fs.child(config.storage.warehouse, "_reports"))
    with locked_session(config, "nightly") as spark:
        result = run_nightly(spark, config, args.logs_root, args.date, args.rediagnose_older, reports, progress)
    print("\n".join(summary_lines(result)))
    return EXIT_PARTIAL if result.errors else EXIT_OK
