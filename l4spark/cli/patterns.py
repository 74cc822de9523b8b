"""``l4spark patterns list|add|confirm``: read and extend the fault-pattern library."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from l4spark.cli.common import add_common_options, config_from_args, locked_session, spark_session


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("patterns", help="list, add or confirm known fault patterns")
    actions = parser.add_subparsers(dest="action", required=True)
    show = actions.add_parser("list", help="print the library (seeds and table)")
    add = actions.add_parser("add", help="add a pattern to the fault_patterns table")
    add.add_argument("--id", required=True, dest="pattern_id")
    add.add_argument("--name", required=True)
    add.add_argument("--fault-class", required=True)
    add.add_argument("--root-cause", required=True)
    add.add_argument("--remedy", required=True)
    add.add_argument("--signature", action="append", required=True, metavar="REGEX",
                     help="a regex the job's indicating events must contain (repeatable: all must be found)")
    add.add_argument("--stage")
    add.add_argument("--source-job")
    add.add_argument("--replace", action="store_true", help="replace a stored pattern with the same id")
    confirm = actions.add_parser("confirm", help="archive a job's confirmed diagnosis as a pattern")
    confirm.add_argument("--job", required=True, help="a diagnosed job")
    confirm.add_argument("--id", dest="pattern_id", help="pattern id (default: confirmed-<job>)")
    confirm.add_argument("--name", required=True)
    confirm.add_argument("--fault-class", required=True)
    confirm.add_argument("--root-cause", required=True)
    confirm.add_argument("--remedy", required=True)
    confirm.add_argument("--events", nargs="+", metavar="EVENT_ID",
                         help="the flagged events that make the signature (default: the 3 best)")
    confirm.add_argument("--replace", action="store_true", help="replace a stored pattern with the same id")
    for action in (show, add, confirm):
        add_common_options(action)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from l4spark.diagnosis.pattern_store import pattern_library, save_pattern
    from l4spark.diagnosis.patterns import FaultPattern, unit_fault_patterns

    config = config_from_args(args)
    pattern = None
    if args.action == "add":  # validate before starting Spark: a bad regex fails fast
        pattern = FaultPattern(args.pattern_id, args.name, args.fault_class, args.root_cause, args.remedy,
                               tuple(args.signature), args.stage,
                               datetime.now(timezone.utc).isoformat(timespec="seconds"), args.source_job)
    # list only reads; add and confirm write the fault_patterns table, under the warehouse lock
    session = (locked_session(config, f"patterns {args.action}") if args.action in ("add", "confirm")
               else spark_session(config))
    with session as spark:
        if args.action == "confirm":
            import re

            from l4spark.diagnosis.pattern_store import pattern_from_diagnosis
            pattern_id = args.pattern_id or "confirmed-" + re.sub(r"[^A-Za-z0-9_.-]", "-", args.job)[:80]
            pattern = pattern_from_diagnosis(
                spark, config.storage, args.job, pattern_id=pattern_id, name=args.name, fault_class=args.fault_class,
                root_cause=args.root_cause, remedy=args.remedy, event_ids=args.events,
                created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
            save_pattern(spark, config.storage, pattern, replace=args.replace)
            print(f"confirmed {args.job} as pattern {pattern.pattern_id} -> {config.storage.warehouse}/fault_patterns")
            for regex in pattern.signature:
                print(f"  signature: {regex}")
            return 0
        if pattern is not None:
            save_pattern(spark, config.storage, pattern, replace=args.replace)
            print(f"added pattern {pattern.pattern_id} to {config.storage.warehouse}/fault_patterns")
            return 0
        listed = [(p, f"from job {p.source_job_id}" if p.source_job_id else ("added" if p.created_at else "seed"))
                  for p in pattern_library(spark, config.storage)]
        listed += [(built_in, "built in: read from the node ranking's first unit")
                   for built_in in unit_fault_patterns(config.diagnosis.slow_unit_fault,
                                                       config.diagnosis.hung_unit_fault,
                                                       config.diagnosis.dead_unit_fault,
                                                       config.diagnosis.save_hang_unit_fault)]
        for p, origin in listed:
            print(f"{p.pattern_id:<26} {p.fault_class:<24} {p.name}  [{origin}]")
            print(f"{'':<26} remedy: {p.remedy}")
    return 0
