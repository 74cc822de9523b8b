"""What every ``l4spark`` command shares: the options, the config built from them, the locked
Spark session and progress printing. The exit codes are ``l4spark.errors``' (docs/deploy.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping


def add_common_options(parser: argparse.ArgumentParser, warehouse_help: str | None = None) -> argparse.ArgumentParser:
    """The options of every command that starts Spark or takes the warehouse lock."""
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="log progress details (and show the stack trace of an error)")
    parser.add_argument("--warehouse", help=warehouse_help or "warehouse root (default from conf: ./warehouse)")
    parser.add_argument("--conf", action="append", default=[], metavar="FILE",
                        help="TOML config file overriding the defaults (repeatable; later wins)")
    parser.add_argument("--master", help="Spark master (default from conf: local[*])")
    parser.add_argument("--format", choices=("parquet", "delta"),
                        help="table format (default from conf: auto, Delta when its jars are there)")
    parser.add_argument("--lock-wait", type=float, metavar="SECONDS",
                        help="wait this long for another run's warehouse lock (default from conf: 0, fail at once)")
    return parser


def config_from_args(args: argparse.Namespace, overrides: Mapping[str, Any] | None = None):
    """The config of a command: defaults, ``--conf`` files, the common flags, then ``overrides``
    (dotted keys of a command's own flags, e.g. ``{"spatial.top_k": 5}``). Every section is
    validated here, before Spark starts."""
    from l4spark.config import load_config

    flags = {"storage.warehouse": getattr(args, "warehouse", None), "spark.master": getattr(args, "master", None),
             "storage.format": getattr(args, "format", None), "storage.lock_wait_s": getattr(args, "lock_wait", None)}
    merged = {key: value for key, value in {**flags, **(overrides or {})}.items() if value is not None}
    return load_config(*args.conf, overrides=merged)


@contextmanager
def spark_session(config) -> Iterator:
    """A Spark session for a command, with the warehouse's persistent catalog when tables are
    registered by name (``catalog.register``, l4spark/io/catalog.py)."""
    from l4spark.io.catalog import metastore_folder
    from l4spark.io.session import build_session

    from l4spark.io import fs

    embedded = config.catalog.register and (config.catalog.metastore or fs.is_local(config.storage.warehouse))
    metastore = metastore_folder(config.storage, config.catalog) if embedded else None
    if metastore is not None:
        Path(metastore).mkdir(parents=True, exist_ok=True)
    spark = build_session(config.spark, metastore)
    try:
        yield spark
    finally:
        spark.stop()


@contextmanager
def locked_session(config, command: str) -> Iterator:
    """A Spark session for a command that writes the warehouse: the warehouse lock is taken
    before Spark starts and released after it stops (l4spark/io/lock.py). A remote warehouse's
    lock is taken through Spark: after it starts, released before it stops."""
    from l4spark.io import fs
    from l4spark.io.lock import warehouse_lock

    if not fs.is_local(config.storage.warehouse):
        with spark_session(config) as spark:
            with warehouse_lock(config.storage, f"l4spark {command}", spark=spark):
                yield spark
        return
    with warehouse_lock(config.storage, f"l4spark {command}"):
        with spark_session(config) as spark:
            yield spark


def progress_printer() -> Callable[[str], None]:
    """A progress callback that prints each message with the seconds since it was made."""
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", flush=True)

    return progress
