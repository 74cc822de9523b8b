"""Parse throughput of one generated fleet on a local path and on HDFS, in one run (make bench-storage).

    python -m tests.storage.bench_hdfs [--jobs N] [--iterations N] [--repeat N] [--formats parquet,delta] [--conf F.toml]

Starts a MiniDFSCluster on 127.0.0.1 (tests/storage/servers.py), copies the fleet to it, then
parses it with ``parse_jobs`` into a fresh warehouse, in turn logs+warehouse local (the ``auto``
format there: Delta with the jars) and logs+warehouse on HDFS once per format of ``--formats``,
``--repeat`` times each (the first round warms the JVM up and is not counted). Prints each
parse's wall and CPU seconds (this process, the Spark JVM and its Python workers, and the
MiniDFSCluster's JVM: all descendants; the MiniDFSCluster's share, which a cluster's storage
spends on other machines, apart) with the load average and the Spark jobs the parse started (a
count load does not move), then lines/s and the HDFS/local ratio per format, the best of each
against the best local parse of the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from l4spark.bench.parse import descendants, spark_jobs_started, stat_cpu_seconds, tree_cpu_seconds
from l4spark.config import load_config
from l4spark.io.session import build_session
from l4spark.parse.pipeline import parse_jobs
from l4spark.simulate import FleetOptions, simulate_fleet
from tests.storage.servers import hadoop_shell, start_minidfs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--ranks-per-node", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--formats", default="parquet,delta", help="formats of the HDFS warehouse, comma-separated")
    parser.add_argument("--conf", action="append", default=[], metavar="FILE",
                        help="l4spark TOML for the session and the parses (e.g. other [spark.extra] keys)")
    args = parser.parse_args()
    formats = [name.strip() for name in args.formats.split(",") if name.strip()]
    base = Path(tempfile.mkdtemp(prefix="l4spark-bench-storage-"))
    dfs = start_minidfs(base / "minidfs")
    try:
        logs = base / "logs"
        simulate_fleet(logs, FleetOptions(seed=5, jobs=args.jobs, nodes=(2, 4), ranks_per_node=args.ranks_per_node,
                                          iterations=args.iterations, failed_share=0.5))
        hadoop_shell(dfs.uri, "-put", str(logs), "/logs")
        spark = build_session(load_config(*args.conf, overrides={"spark.master": "local[2]"}).spark)
        runs = [("local", str(logs), str(base / "wh-{attempt}"), "auto")]
        runs += [(f"hdfs {name}", dfs.uri + "/logs", f"{dfs.uri}/wh-{name}-{{attempt}}", name) for name in formats]
        timings: dict[str, list[tuple[float, float]]] = {where: [] for where, *_ in runs}
        lines = 0
        for attempt in range(args.repeat + 1):
            for where, root, warehouse, storage_format in runs:
                config = load_config(*args.conf, overrides={"storage.warehouse": warehouse.format(attempt=attempt),
                                                "storage.format": storage_format, "spark.master": "local[2]"})
                cpu, dfs_cpu, jobs = tree_cpu_seconds(), _cpu_of(dfs.process.pid), spark_jobs_started(spark)
                started = time.perf_counter()
                summary = parse_jobs(spark, config, root, progress=lambda _: None)
                seconds, cpu = time.perf_counter() - started, tree_cpu_seconds() - cpu
                dfs_cpu, jobs = _cpu_of(dfs.process.pid) - dfs_cpu, spark_jobs_started(spark) - jobs
                lines = summary.lines
                if attempt:  # the first round warms the JVM and the workers up
                    timings[where].append((seconds, cpu))
                print(f"{where:12s} ({config.storage.format:7s}) attempt {attempt}: {seconds:6.1f} s, {cpu:6.1f} CPU s "
                      f"({dfs_cpu:.1f} MiniDFS), load {os.getloadavg()[0]:.1f}, {jobs} Spark jobs; "
                      f"{summary.lines:,} lines, {summary.bytes / 1e6:.1f} MB in {summary.files} files; "
                      f"{_phases(summary.seconds)}", flush=True)
        spark.stop()
        local, local_cpu = min(timings["local"])
        print(f"{args.jobs} jobs x {args.iterations} iterations; best of {args.repeat}: "
              f"local {local:.1f} s ({local_cpu:.1f} CPU s), {lines / local:,.0f} lines/s")
        for where, *_ in runs[1:]:
            seconds, cpu = min(timings[where])
            print(f"{where}: {seconds:.1f} s ({cpu:.1f} CPU s), {lines / seconds:,.0f} lines/s; "
                  f"{where}/local time ratio {seconds / local:.2f} (CPU {cpu / local_cpu:.2f})")
    finally:
        dfs.stop()
        shutil.rmtree(base, ignore_errors=True)


def _cpu_of(pid: int) -> float:
    """CPU seconds used so far by the descendant ``pid`` of this process."""
    return sum(stat_cpu_seconds(fields) for child, fields in descendants(os.getpid()) if child == pid)


def _phases(seconds: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.1f}" for name, value in seconds.items())


if __name__ == "__main__":
    main()
