"""``l4spark diagnose``: diagnose failed jobs, write the diagnosis tables, reports and a summary.

    l4spark diagnose --warehouse W --job J [J ...]          # jobs already parsed
    l4spark diagnose --warehouse W --logs-root R --all-failed  # parse what is missing first
"""

from __future__ import annotations

import argparse

from l4spark.cli.common import add_common_options, config_from_args, locked_session, progress_printer
from l4spark.errors import EXIT_OK, EXIT_PARTIAL


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("diagnose", help="diagnose failed jobs: diagnosis tables, reports, summary",
                                   description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--job", "--jobs", nargs="+", dest="jobs", metavar="JOB", help="job ids to diagnose")
    chosen.add_argument("--all-failed", action="store_true", help="every job whose status is failed")
    parser.add_argument("--logs-root", help="parse the jobs under this folder that the warehouse does not have "
                                            "yet, and update the normal pool, before diagnosing")
    parser.add_argument("--reports", metavar="DIR", help="write <job>.html and <job>.md here "
                                                         "(default: <warehouse>/_reports)")
    parser.add_argument("--no-reports", action="store_true", help="write no report files")
    parser.add_argument("--show", type=int, default=1, metavar="N",
                        help="print the terminal summary of the first N diagnosed jobs (default 1)")
    add_common_options(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from l4spark.diagnosis.assemble import diagnose_jobs, write_diagnosis
    from l4spark.io.maintenance import maintain_tables
    from l4spark.nightly.batch import catch_up, register_by_name
    from l4spark.nightly.selection import failed_jobs
    from l4spark.report import render_terminal
    from l4spark.report.diagnosed import job_report, write_job_reports

    config = config_from_args(args)
    progress = progress_printer()
    progress(f"starting Spark ({config.spark.master})")
    with locked_session(config, "diagnose") as spark:
        if args.logs_root:
            catch_up(spark, config, args.logs_root, progress)
        job_ids = sorted(set(args.jobs)) if args.jobs else failed_jobs(spark, config)
        if not job_ids:
            print("no failed job to diagnose")
            return 0
        diagnosis = diagnose_jobs(spark, config, job_ids, progress=progress)
        progress("writing the diagnosis tables" if args.no_reports else "writing the diagnosis tables and the reports")
        reports = {}

        def write_reports(kept: list[str]) -> None:  # <warehouse>/_reports by default: still under the lock
            from l4spark.io import fs

            out = args.reports or fs.child(config.storage.warehouse, "_reports")
            reports.update(write_job_reports(diagnosis, out, skip=kept, spark=spark))

        # the reports are rendered while the tables are written (write_diagnosis)
        kept = write_diagnosis(spark, config, diagnosis, beside=None if args.no_reports else write_reports)
        maintain_tables(spark, config.storage)
        register_by_name(spark, config, progress)
    shown = [j for j in diagnosis.diagnosed][: max(0, args.show)]
    for job_id in shown:
        print()
        print(render_terminal(job_report(diagnosis, job_id)))
    print()
    print_batch_summary(diagnosis, config.storage.warehouse, reports, kept)
    return EXIT_PARTIAL if (diagnosis.jobs["status"] == "error").any() else EXIT_OK


def print_batch_summary(diagnosis, warehouse: str, reports: dict, kept: list[str]) -> None:
    jobs = diagnosis.jobs
    ok = jobs[jobs["status"] == "diagnosed"]
    print(f"diagnosis run {diagnosis.run_id} -> {warehouse}/diagnosis_*")
    print(f"  jobs diagnosed  {len(ok)}   errors {len(jobs) - len(ok)}")
    for row in jobs.itertuples():
        if row.status == "error":
            print(f"  {row.job_id}: ERROR {row.error}"
                  + ("; its last good diagnosis is kept" if row.job_id in kept else ""))
            continue
        pattern = row.matched_patterns[0] if len(row.matched_patterns) else "no known pattern"
        iteration = "" if row.failure_iteration is None or row.failure_iteration != row.failure_iteration \
            else f" it {int(row.failure_iteration)}"
        suspects = ", ".join(list(row.suspect_nodes)[:3]) or "none"
        print(f"  {row.job_id}: {row.failure_stage}{iteration}; {pattern}; suspects {suspects}; "
              f"{row.n_flagged_events} events")
    if reports:
        print("  reports:")
        for job_id, (html, md) in sorted(reports.items()):
            print(f"    {html}")
