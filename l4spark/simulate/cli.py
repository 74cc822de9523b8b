"""``l4spark simulate``: write a training fleet with ground truth.

``l4spark/cli/common.py`` adds it as ``l4spark simulate``; ``python -m l4spark.simulate.cli`` runs it
standalone.
"""

from __future__ import annotations

import argparse
import re
import sys

from l4spark.simulate.behaviours import BEHAVIOURS
from l4spark.simulate.faults import FAULT_CLASSES, FAULT_KINDS
from l4spark.simulate.fleet import KNOWN_FRAMEWORKS, FleetOptions, simulate_fleet

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
           "KI": 2**10, "MI": 2**20, "GI": 2**30, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(text: str) -> int:
    """``500M``, ``2G``, ``1.5GB``, ``123456`` -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _SUFFIX:
        raise argparse.ArgumentTypeError("expected a size like 500M or 2G, got %r" % text)
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


def parse_range(text: str) -> tuple[int, int]:
    """``8`` or ``8-256`` -> (low, high)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError("expected N or LOW-HIGH, got %r" % text)
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError("expected 1 <= LOW <= HIGH, got %r" % text)
    return lo, hi


def _names(allowed: list[str] | tuple[str, ...], what: str):
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError("unknown %s %s (expected some of: %s)" % (what, ", ".join(unknown) or "(none)", ", ".join(allowed)))
        return names
    return parse


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--out", required=True, help="output folder (created)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--jobs", type=int, default=None, help="number of jobs (default 48)")
    parser.add_argument("--nodes", type=parse_range, default=(4, 16), help="nodes per job: N or LOW-HIGH (default 4-16)")
    parser.add_argument("--ranks-per-node", type=int, default=8, help="ranks (GPUs/NPUs) per node (default 8)")
    parser.add_argument("--iterations", type=int, default=None, help="iterations per job run (default: drawn, 600-3500)")
    parser.add_argument("--target-bytes", type=parse_size, default=None, help="approximate fleet size, e.g. 500M, 2G")
    parser.add_argument("--gzip", action="store_true", help="write rank-N.log.gz")
    parser.add_argument("--failed-share", type=float, default=0.45, help="share of failed jobs (default 0.45)")
    parser.add_argument("--fault-kinds", type=_names(FAULT_KINDS, "fault kind"), default=None,
                        help="comma-separated fault kinds of the failed jobs: " + ",".join(FAULT_KINDS))
    parser.add_argument("--frameworks", type=_names(KNOWN_FRAMEWORKS, "framework"), default=None,
                        help="comma-separated frameworks: " + ",".join(KNOWN_FRAMEWORKS)
                        + " (megatron_deepspeed only when named here)")
    parser.add_argument("--behaviours", type=_behaviours, default=None,
                        help="behaviours allowed, each on in its share of jobs: 'all' (default), 'none' or a comma-separated list of "
                        + ",".join(BEHAVIOURS))
    parser.set_defaults(func=run)
    return parser


def _behaviours(text: str) -> tuple[str, ...] | None:
    if text == "all":
        return None
    if text == "none":
        return ()
    return _names(BEHAVIOURS, "behaviour")(text)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``simulate`` sub-command to an argparse sub-parsers object."""
    parser = subparsers.add_parser("simulate", help="write a simulated training fleet with ground-truth labels",
                                   description="Write failed and successful LLM training jobs' rank logs with ground truth.")
    return configure(parser)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.failed_share <= 1:
        print("error: --failed-share must be within [0, 1], got %s" % args.failed_share, file=sys.stderr)
        return 2
    options = FleetOptions(seed=args.seed, jobs=args.jobs, nodes=tuple(args.nodes), ranks_per_node=args.ranks_per_node,
                           iterations=args.iterations, target_bytes=args.target_bytes, gzip=args.gzip,
                           failed_share=args.failed_share, fault_kinds=args.fault_kinds, frameworks=args.frameworks,
                           behaviours=args.behaviours)
    try:
        s = simulate_fleet(args.out, options)
    except ValueError as err:
        print("error: %s" % err, file=sys.stderr)
        return 2
    print("wrote %s" % args.out)
    print("  jobs      %d (%d succeeded, %d failed)" % (s.n_jobs, s.n_jobs - s.n_failed, s.n_failed))
    for kind in FAULT_KINDS:
        if kind in s.fault_kinds:
            print("    %-24s %-26s %d" % (kind, FAULT_CLASSES[kind], s.fault_kinds[kind]))
    print("  frameworks %s" % ", ".join("%s %d" % kv for kv in sorted(s.frameworks.items())))
    print("  files     %d" % s.n_files)
    print("  bytes     %d (%.1f MB%s)" % (s.n_bytes, s.n_bytes / 1e6, ", %.1f MB uncompressed" % (s.n_raw_bytes / 1e6) if args.gzip else ""))
    print("  lines     %d" % s.n_lines)
    print("  seconds   %.2f (%.1f MB/s uncompressed)" % (s.seconds, s.mb_per_s))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = configure(argparse.ArgumentParser(prog="l4spark simulate"))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
