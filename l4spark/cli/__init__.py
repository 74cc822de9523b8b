"""The ``l4spark`` command: argument parsing and printing for people, nothing else.

Takes command-line arguments; builds the config (``common.config_from_args``), opens the locked
Spark session and calls the library (``l4spark.nightly``, the steps, ``l4spark.evaluation``).
Nothing in the library imports this package.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from l4spark.cli import diagnose, evaluate, nightly, normal_pool, parse, patterns, spatial, sql
from l4spark.errors import run_command
from l4spark.simulate import cli as simulate


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args.func, args, "l4spark")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="l4spark", description="Diagnose failed LLM training jobs from their "
                                                                 "logs (the L4 method on Spark).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in (simulate, patterns, spatial, normal_pool, diagnose, evaluate, nightly, parse, sql):
        command.add_parser(commands)
    return parser
