"""``l4spark evaluate``: diagnose a labelled generated fleet and print the paper's tables."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from l4spark.cli.common import add_common_options, config_from_args, locked_session, progress_printer


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("evaluate", help="diagnose a labelled generated fleet and print the paper's tables")
    parser.add_argument("--fleet", required=True, help="a fleet written by `l4spark simulate` (with _labels)")
    parser.add_argument("--json", metavar="OUT", help="write the figures, per kind and misses as JSON")
    parser.add_argument("--no-filter-ablation", action="store_true", help="skip the run without the cross-job filter")
    parser.add_argument("--dump", metavar="DIR", help="also write the evidence of every candidate event and the node ranking's "
                        "inputs as Parquet (studies without Spark: python -m l4spark.evaluation.rerank, .known_faults)")
    parser.add_argument("--misses", type=int, default=20, help="misses printed (default 20)")
    add_common_options(parser, warehouse_help="warehouse root (default: <fleet>.warehouse)")
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from l4spark.evaluation.diagnosis_eval import evaluate_fleet, format_result

    fleet = Path(args.fleet)
    warehouse = args.warehouse or str(fleet.with_name(fleet.name + ".warehouse"))
    config = config_from_args(args, {"storage.warehouse": warehouse})
    with locked_session(config, "evaluate") as spark:
        result = evaluate_fleet(spark, config, fleet, ablation=not args.no_filter_ablation,
                                dump=Path(args.dump) if args.dump else None, progress=progress_printer())
    print(format_result(result))
    if result["misses"] and args.misses:
        print(f"\nmisses ({len(result['misses'])} jobs; first {args.misses}):")
        for miss in result["misses"][: args.misses]:
            print(f"  {miss['job_id']} [{miss['fault_kind']}]: {'; '.join(miss['problems'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str), "utf-8")
        print(f"\nwrote {args.json}")
    return 0
