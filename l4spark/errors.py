"""Specific errors, and how a process reports them.

Each error says what was expected and what was found. ``run_command`` is the exit-code contract of
every entry point (the ``l4spark`` command and the ``python -m`` tools): 0 done, 2 bad arguments,
configuration or input layout (one line on stderr; the stack trace only with ``--verbose``), 3 a
batch that finished and wrote its tables but in which some jobs failed. A crash of the program
itself is Python's 1, with its stack trace.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from typing import Callable

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_PARTIAL = 3


class L4SparkError(Exception):
    """Base class of every error l4spark raises on purpose."""


class ConfigError(L4SparkError):
    """A configuration file or value is invalid (the message names the key)."""


class InputLayoutError(L4SparkError):
    """The logs root or a path in it does not fit the configured layout."""


class QueryError(L4SparkError):
    """A user's query (``l4spark sql``) does not run: an unknown table or column, bad syntax."""


class TemplateStoreError(L4SparkError):
    """The persisted template store is missing, corrupt or of an unknown version."""


def run_command(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, prog: str) -> int:
    """Run an entry point: logging by ``--verbose``; an L4SparkError is a one-line message and exit 2."""
    verbose = bool(getattr(args, "verbose", False))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(func(args) or 0)
    except L4SparkError as exc:
        if verbose:
            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
