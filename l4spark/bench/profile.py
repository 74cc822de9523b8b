"""Where the diagnosis of a batch spends its time (issue #21): ``python -m l4spark.bench.profile
--warehouse W``.

Diagnoses the failed jobs of a parsed warehouse (or ``--jobs``) ``--rounds`` times in one Spark
application (``diagnose_jobs``: nothing is written) and prints, per round, its time and the time
of each Spark action (``collect``, ``toPandas``, ``count``, ``localCheckpoint``, ...) by the
l4spark line that called it. Spark runs a DataFrame's plan at its action, so the line is where
the work of everything that plan holds is paid: ``assemble.py:336`` is the per-line frame. The
first round also pays the JVM's warm-up, as a nightly does; the later ones show the steady cost.
"""

from __future__ import annotations

import argparse
import threading
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

ACTIONS = ("collect", "toPandas", "count", "localCheckpoint", "checkpoint", "first", "take", "head")


@dataclass
class Round:
    seconds: float
    jobs: int
    by_caller: Counter = field(default_factory=Counter)

    @property
    def attributed(self) -> float:
        return sum(self.by_caller.values())


@contextmanager
def timed_actions(spent: Counter) -> Iterator[None]:
    """While open, each DataFrame action adds its seconds to ``spent`` under "action file:line
    function" of the innermost l4spark frame that called it (``l4spark/io/frames.py`` skipped:
    its helpers only run the caller's plan). The methods are restored on exit. Classic Spark's
    DataFrame only (Spark Connect's client runs its plans elsewhere)."""
    from pyspark.sql.classic.dataframe import DataFrame

    originals = {name: getattr(DataFrame, name) for name in ACTIONS if hasattr(DataFrame, name)}
    inside = threading.local()   # an action that calls another (toPandas -> collect) counts once, outermost

    def wrapped(name, method):
        def run(self, *args, **kwargs):
            if getattr(inside, "action", False):
                return method(self, *args, **kwargs)
            inside.action, started = True, time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                inside.action = False
                spent[f"{name:<15} {_caller()}"] += time.perf_counter() - started
        return run

    for name, method in originals.items():
        setattr(DataFrame, name, wrapped(name, method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(DataFrame, name, method)


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):   # not this function, nor the wrapper
        path = frame.filename.replace("\\", "/")
        if "/l4spark/" in path and "/l4spark/bench/" not in path and not path.endswith("/io/frames.py"):
            return f"{path.rsplit('/l4spark/', 1)[1]}:{frame.lineno} {frame.name}"
    return "(outside l4spark)"


def profile_diagnosis(spark, config, job_ids: list[str], rounds: int = 2) -> list[Round]:
    """``rounds`` diagnoses of ``job_ids`` with their actions timed (``timed_actions``)."""
    from l4spark.diagnosis.assemble import diagnose_jobs

    done = []
    for _ in range(max(rounds, 1)):
        spent: Counter = Counter()
        with timed_actions(spent):
            started = time.perf_counter()
            diagnose_jobs(spark, config, job_ids, progress=lambda message: None)
            seconds = time.perf_counter() - started
        done.append(Round(seconds, len(job_ids), spent))
    return done


def failed_jobs(spark, config) -> list[str]:
    from pyspark.sql import functions as F

    from l4spark.io.storage import read_table

    rows = read_table(spark, config.storage, "jobs").where(F.col("status") == "failed").select("job_id").collect()
    return sorted(r.job_id for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.bench.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouse", required=True, help="a parsed warehouse (with its normal pool)")
    parser.add_argument("--jobs", nargs="*", default=None, help="job ids (default: the failed jobs)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--top", type=int, default=20, help="callers shown per round")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], metavar="FILE")
    args = parser.parse_args(argv)

    from l4spark.config import load_config
    from l4spark.io.session import build_session

    config = load_config(*args.conf, overrides={"spark.master": args.master, "storage.warehouse": args.warehouse})
    spark = build_session(config.spark)
    try:
        job_ids = args.jobs or failed_jobs(spark, config)
        for number, run in enumerate(profile_diagnosis(spark, config, job_ids, args.rounds), 1):
            print(f"round {number}: {run.jobs} jobs in {run.seconds:.1f} s ({run.seconds / max(run.jobs, 1):.2f} s "
                  f"per job); Spark actions {run.attributed:.1f} s, by the line that ran them:")
            for caller, seconds in run.by_caller.most_common(args.top):
                print(f"  {seconds:7.2f} s  {caller}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
