"""Parse throughput of one generated fleet on a local path and on HDFS, in one run (make bench-storage).

    python -m tests.storage.bench_hdfs [--jobs N] [--iterations N] [--repeat N]

Starts a MiniDFSCluster on 127.0.0.1 (tests/storage/servers.py), copies the fleet to it, then
parses it with ``parse_jobs`` into a fresh warehouse, alternately logs+warehouse local and
logs+warehouse on HDFS, ``--repeat`` times each (the first pair warms the JVM up and is not
counted). Prints lines/s of both and their ratio (HDFS / local seconds).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from l4spark.config import load_config
from l4spark.io.session import build_session
from l4spark.parse.pipeline import parse_jobs
from l4spark.simulate import FleetOptions, simulate_fleet
from tests.storage.servers import hadoop_shell, start_minidfs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="l4spark-bench-storage-"))
    dfs = start_minidfs(base / "minidfs")
    try:
        logs = base / "logs"
        simulate_fleet(logs, FleetOptions(seed=5, jobs=args.jobs, nodes=(2, 4), ranks_per_node=4,
                                          iterations=args.iterations, failed_share=0.5))
        hadoop_shell(dfs.uri, "-put", str(logs), "/logs")
        spark = build_session(load_config(overrides={"spark.master": "local[2]"}).spark)
        timings: dict[str, list[float]] = {"local": [], "hdfs": []}
        lines = 0
        for attempt in range(args.repeat + 1):
            for where, root, warehouse in (("local", str(logs), str(base / f"wh-{attempt}")),
                                           ("hdfs", dfs.uri + "/logs", f"{dfs.uri}/wh-{attempt}")):
                config = load_config(overrides={"storage.warehouse": warehouse, "spark.master": "local[2]"})
                started = time.perf_counter()
                summary = parse_jobs(spark, config, root, progress=lambda _: None)
                seconds = time.perf_counter() - started
                lines = summary.lines
                if attempt:  # the first pair warms the JVM and the workers up
                    timings[where].append(seconds)
                print(f"{where:5s} attempt {attempt}: {seconds:6.1f} s, {summary.lines:,} lines, "
                      f"{summary.bytes / 1e6:.1f} MB in {summary.files} files", flush=True)
        spark.stop()
        local, hdfs = min(timings["local"]), min(timings["hdfs"])
        print(f"local {lines / local:,.0f} lines/s; hdfs {lines / hdfs:,.0f} lines/s; "
              f"hdfs/local time ratio {hdfs / local:.2f} (best of {args.repeat})")
    finally:
        dfs.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
