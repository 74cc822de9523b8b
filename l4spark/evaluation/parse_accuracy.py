"""Parsing quality parity on Loghub-2k: ``python -m l4spark.evaluation.parse_accuracy [--benchmarks DIR] [--json OUT]``.

Two sets of eight systems: the development eight (``--benchmarks``) and eight systems l4spark was
never configured for (``--more-benchmarks``, ``loghub-2k-more``). For each system, parses the
2,000 lines with single-process drain3 and with the Spark pipeline (``parse_jobs``), both
configured by ``conf/loghub/<System>.toml`` (logparser's benchmark settings), and prints grouping
accuracy (GA), parsing accuracy (PA), templates showing a digit none of their lines has, and the
reference Drain GA. Exits 1 when the bar fails (a system's Spark GA more than 0.01 from drain3's,
a line missing from events, a false digit in a template, or a set's Spark average below its
target: 0.92 for the development eight, 0.80 for the other eight), 2 on bad input. One
SparkSession serves every system.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

from l4spark.errors import L4SparkError

DEFAULT_BENCHMARKS = "../shared/benchmarks/loghub-2k"
DEFAULT_MORE_BENCHMARKS = "../shared/benchmarks/loghub-2k-more"


def main(argv: Sequence[str] | None = None) -> int:
    from l4spark.errors import run_command

    return run_command(run, build_parser().parse_args(argv), "l4spark.evaluation.parse_accuracy")


def build_parser() -> argparse.ArgumentParser:
    from l4spark.evaluation.loghub import MORE_SYSTEMS, SYSTEMS

    parser = argparse.ArgumentParser(prog="python -m l4spark.evaluation.parse_accuracy", description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", default=DEFAULT_BENCHMARKS,
                        help=f"Loghub-2k folder with one sub-folder per system (default {DEFAULT_BENCHMARKS})")
    parser.add_argument("--more-benchmarks", default=DEFAULT_MORE_BENCHMARKS,
                        help=f"the other eight systems' folder (default {DEFAULT_MORE_BENCHMARKS})")
    parser.add_argument("--set", choices=["dev", "more", "both"], default="both",
                        help="which set of eight systems (default both)")
    parser.add_argument("--conf-dir", help="folder of the per-system TOML files (default: conf/loghub of the checkout)")
    parser.add_argument("--systems", nargs="+", choices=[s.name for s in (*SYSTEMS, *MORE_SYSTEMS)], metavar="SYSTEM",
                        help="evaluate only these systems (the average bar then is not checked)")
    parser.add_argument("--lines", type=int, help="use only the first N lines of each system")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    return parser


def run(args: argparse.Namespace) -> int:
    from l4spark.config import load_config
    from l4spark.evaluation.loghub import (
        MORE_SYSTEMS,
        PUBLISHED_SOURCE,
        SYSTEMS,
        TARGET_AVERAGE_GA,
        TARGET_AVERAGE_GA_MORE,
        default_conf_dir,
        evaluate_system,
        load_sample,
        system_config,
        verdict,
    )
    from l4spark.io.session import build_session

    sets = {"dev": (Path(args.benchmarks), SYSTEMS, TARGET_AVERAGE_GA),
            "more": (Path(args.more_benchmarks), MORE_SYSTEMS, TARGET_AVERAGE_GA_MORE)}
    chosen = ["dev", "more"] if args.set == "both" else [args.set]
    for key in chosen:
        if not sets[key][0].is_dir():
            raise L4SparkError(f"expected the Loghub-2k folder at {sets[key][0].resolve()}, found nothing "
                               f"(see --benchmarks / --more-benchmarks)")
    conf_dir = Path(args.conf_dir) if args.conf_dir else default_conf_dir()
    plan = [(key, [load_sample(sets[key][0], s.name, args.lines) for s in sets[key][1]
                   if not args.systems or s.name in args.systems]) for key in chosen]

    started = time.perf_counter()
    spark_conf = load_config(overrides={"spark.master": args.master, "spark.shuffle_partitions": 2}).spark
    # The per-system lines printed below are the progress display; Spark's bar would garble them.
    spark_conf = replace(spark_conf, extra={**spark_conf.extra, "spark.ui.showConsoleProgress": "false"})
    spark = build_session(spark_conf)
    results_by_set: dict[str, list] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="l4spark-loghub-") as work:
            logs_root = Path(work) / "logs"
            for key, samples in plan:
                results_by_set[key] = []
                for sample in samples:
                    print(f"  {sample.system}: {len(sample.raw_lines)} lines ...", end="", flush=True)
                    config = system_config(conf_dir, sample.system, warehouse=Path(work) / "warehouse" / sample.system)
                    result = evaluate_system(spark, sample, config, logs_root)
                    results_by_set[key].append(result)
                    print(f" GA drain3 {result.ga_drain3:.4f}, l4spark {result.ga_l4spark:.4f} "
                          f"({result.seconds['l4spark']:.1f} s)")
    finally:
        spark.stop()

    full_run = not args.systems and not args.lines
    titles = {"dev": f"development eight ({sets['dev'][0]})", "more": f"eight more systems ({sets['more'][0]})"}
    outcomes = {}
    for key, results in results_by_set.items():
        if not results:
            continue
        outcomes[key] = verdict(results, check_average=full_run, target_average=sets[key][2])
        print()
        print(titles[key])
        print(format_table(results, outcomes[key]))
    results = [r for rs in results_by_set.values() for r in rs]
    print()
    for note in notes(results):
        print(note)
    print(f"published: {PUBLISHED_SOURCE}")
    print(f"configs: {conf_dir}; {time.perf_counter() - started:.1f} s")
    if args.json:
        payload = {"sets": {key: {"systems": [r.as_dict() for r in results_by_set[key]],
                                  "verdict": asdict(outcome)} for key, outcome in outcomes.items()},
                   "published_source": PUBLISHED_SOURCE, "conf_dir": str(conf_dir)}
        Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
        print(f"wrote {args.json}")
    failed = [f"{key}: {reason}" for key, outcome in outcomes.items() for reason in outcome.reasons]
    if not failed:
        print("PASS: Spark GA within 0.01 of drain3 on every system, no false digit in a template"
              + (", each set's average at its bar (0.92 development, 0.80 other)" if full_run
                 else " (averages not checked on a partial run)"))
        return 0
    print("FAIL: " + "; ".join(failed))
    return 1


def notes(results) -> list[str]:
    """What the table's columns hide: input checks and group counts that differ."""
    out = []
    for r in results:
        checks = {"lines no header matched (kept whole)": r.header_misses,
                  "messages differing from Loghub's Content": r.content_mismatches,
                  "JVM messages differing from Python's": r.message_mismatches,
                  "JVM-masked texts differing from drain3's": r.mask_mismatches,
                  "templates showing a digit none of their lines has": r.false_digit_templates,
                  "lines set aside by the reader": r.set_aside_lines}
        out += [f"note: {r.system}: {n} {what}" for what, n in checks.items() if n]
        if r.groups_drain3 != r.groups_l4spark:
            out.append(f"note: {r.system}: {r.groups_l4spark} l4spark events vs {r.groups_drain3} drain3 clusters "
                       f"({r.groups_truth} in the ground truth)")
    if not any(r.header_misses or r.content_mismatches or r.message_mismatches or r.mask_mismatches
               or r.set_aside_lines for r in results):
        out.append("checks: every line matched its header rule, every message equals Loghub's Content, and the "
                   "JVM gives the same messages and masked texts as Python/drain3")
    return out


def format_table(results, outcome) -> str:
    """The results as a fixed-width text table, one row per system, then the averages."""
    header = (f"{'system':<12}{'lines':>6}{'in events':>10}{'hdr miss':>9}{'jvm!=py':>8}"
              f"{'GA drain3':>10}{'GA l4spark':>11}{'diff':>8}{'PA drain3':>10}{'PA l4spark':>11}"
              f"{'false dig':>10}{'reference':>10}")
    rows = [header, "-" * len(header)]
    for r in results:
        rows.append(
            f"{r.system:<12}{r.lines:>6}{r.lines_in_events:>10}{r.header_misses:>9}"
            f"{r.message_mismatches + r.mask_mismatches:>8}{r.ga_drain3:>10.4f}{r.ga_l4spark:>11.4f}"
            f"{r.ga_diff:>+8.4f}{r.pa_drain3:>10.4f}{r.pa_l4spark:>11.4f}{r.false_digit_templates:>10}"
            f"{r.published_ga:>10.3f}")
    n = len(results)
    rows.append("-" * len(header))
    rows.append(
        f"{'average':<12}{sum(r.lines for r in results) / n:>6.0f}{'':>10}{'':>9}{'':>8}"
        f"{outcome.average_ga_drain3:>10.4f}{outcome.average_ga_l4spark:>11.4f}"
        f"{outcome.average_ga_l4spark - outcome.average_ga_drain3:>+8.4f}"
        f"{sum(r.pa_drain3 for r in results) / n:>10.4f}{sum(r.pa_l4spark for r in results) / n:>11.4f}"
        f"{sum(r.false_digit_templates for r in results):>10}{outcome.average_published_ga:>10.3f}")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
