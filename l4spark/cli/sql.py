"""``l4spark sql``: one Spark SQL query on the warehouse's tables by name (docs/analysts.md)."""

from __future__ import annotations

import argparse

from l4spark.cli.common import add_common_options, config_from_args


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("sql", help="run a Spark SQL query on the tables and views by name "
                                               "(l4spark.diagnosis_jobs, l4spark.recurring_suspects...)")
    parser.add_argument("query", help='e.g. "SELECT * FROM l4spark.recurring_suspects"')
    parser.add_argument("--rows", type=int, default=50, help="rows to print (default 50)")
    add_common_options(parser)
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from pyspark.errors import AnalysisException
    from pyspark.logger import PySparkLogger

    from l4spark.errors import QueryError
    from l4spark.io.catalog import open_metastore, register_tables
    from l4spark.io.session import build_session

    config = config_from_args(args)
    # The warehouse's own metastore when a writing run made one; else the tables are registered
    # in this session's in-memory catalog from their folders (the same names, for this query).
    spark = build_session(config.spark, open_metastore(config.storage, config.catalog))
    try:
        if not spark.catalog.databaseExists(config.catalog.database):
            register_tables(spark, config.storage, config.catalog)
        # PySpark logs a failed query's whole JVM trace as JSON before raising; the one line below
        # says what is wrong (the trace with --verbose)
        PySparkLogger.getLogger("SQLQueryContextLogger").disabled = not getattr(args, "verbose", False)
        try:
            spark.sql(args.query).show(args.rows, truncate=60, vertical=False)
        except AnalysisException as exc:  # the query is the user's input: one line, exit 2, no stack trace
            database = config.catalog.database
            names = sorted(f"{database}.{t.name}" for t in spark.catalog.listTables(database)) \
                if spark.catalog.databaseExists(database) else []
            raise QueryError(f"the query does not run: {(str(exc).splitlines() or [''])[0][:300]} "
                             f"(tables and views by name: {', '.join(names) or 'none in this warehouse'})") from None
    finally:
        spark.stop()
    return 0
