"""Nightly-run benchmark (``make bench-nightly``): the whole nightly batch at 1x, (2x,) 4x the data.

For each scale k a fleet is generated with ``l4spark simulate`` (one seed; k times the jobs and
k times the target bytes of the 1x fleet, so the failed jobs grow with the data) and kept under
``--fleets``, reused when present with the same parameters. Each fleet then goes through
``l4spark.nightly.batch.run_nightly`` in a Spark application of its own (a fresh process, so no JIT
warm-up or cache is carried from one size to the next) into a fresh warehouse: scan, parse,
normal pool, diagnosis of every failed job, tables, reports, the runs row.

Reported per size: input bytes, files, lines, failed jobs diagnosed, wall time of the nightly
run, MB/s, seconds per failed job, seconds per step (read back from the ``runs`` table, and
finer steps from the run's progress messages), CPU seconds per phase and peak memory of the
process tree; then how time grows against data. Absolute times depend on the machine and on what else runs on it (the load
average before and after each run is recorded); the ratios are of one run.
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import os
import shutil
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from l4spark.bench.parse import (PeakMemory, descendants, generate_fleet, parse_size, spark_jobs_started,
                                 stat_cpu_seconds)

# Steps of run_nightly (its ``runs.seconds`` keys, in order) split into finer phases at the
# progress message that ends each phase; the time after the last marker is the step's remainder.
PHASE_MARKERS: dict[str, tuple[list[tuple[str, str]], str]] = {
    "parse": ([("list", "listed "), ("read shapes", "read "), ("template", "templated:")], "write"),
    "diagnose": ([("select", "diagnosing "), ("prepare + cross-job filter", "cross-job filter:"),
                  ("spatial + temporal", "spatial and temporal steps done")], "patterns + scoring"),
}


class NightlyRunFailed(RuntimeError):
    """The nightly run of one size did not finish (its output says why)."""


class TreeCpu:
    """CPU seconds (user + system, reaped children included) of this process's descendants
    (the run's Python, its JVM, the Python workers), sampled every ``interval`` seconds as
    (epoch seconds, cumulative CPU seconds). A process that exits between two samples loses at
    most its last interval."""

    def __init__(self, interval: float = 1.0) -> None:
        self.samples: list[tuple[float, float]] = []
        self._last: dict[int, float] = {}
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeCpu":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._interval)

    def _sample(self) -> None:
        for pid, fields in descendants(os.getpid()):
            self._last[pid] = stat_cpu_seconds(fields)
        self.samples.append((time.time(), round(sum(self._last.values()), 2)))


def phase_cpu_seconds(phases: dict[str, float], run_started: float,
                      samples: list[tuple[float, float]]) -> dict[str, float]:
    """CPU seconds spent during each phase (``phase_seconds`` order, the first starting at epoch
    ``run_started``): the cumulative CPU of ``samples`` interpolated at the phase boundaries."""
    if len(samples) < 2:
        return {}
    times = [t for t, _ in samples]

    def cpu_at(moment: float) -> float:
        i = bisect.bisect_left(times, moment)
        if i <= 0:
            return samples[0][1]
        if i >= len(samples):
            return samples[-1][1]
        (t0, c0), (t1, c1) = samples[i - 1], samples[i]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1

    out, start = {}, run_started
    for name, seconds in phases.items():
        out[name] = round(cpu_at(start + seconds) - cpu_at(start), 2)
        start += seconds
    return out


@dataclass(frozen=True)
class FleetPlan:
    """One fleet of the bench: ``l4spark simulate`` arguments of scale ``scale``."""

    scale: int
    seed: int
    jobs: int
    target_bytes: int
    failed_share: float
    nodes: tuple[int, int]
    ranks_per_node: int

    @property
    def name(self) -> str:
        lo, hi = self.nodes
        return (f"seed{self.seed}-jobs{self.jobs}-bytes{self.target_bytes}-failed{self.failed_share:g}"
                f"-nodes{lo}-{hi}-rpn{self.ranks_per_node}")

    def simulate_command(self, out: Path) -> str:
        lo, hi = self.nodes
        return (f"l4spark simulate --out {out} --seed {self.seed} --jobs {self.jobs} --nodes {lo}-{hi} "
                f"--ranks-per-node {self.ranks_per_node} --failed-share {self.failed_share:g} "
                f"--target-bytes {self.target_bytes}")


def plan_fleets(scales: list[int], seed: int, jobs: int, target_bytes: int, failed_share: float,
                nodes: tuple[int, int], ranks_per_node: int) -> list[FleetPlan]:
    """Scale k: k * jobs jobs and k * target_bytes bytes (per-job size and failed share stay)."""
    return [FleetPlan(k, seed, k * jobs, k * target_bytes, failed_share, nodes, ranks_per_node) for k in scales]


def ensure_fleet(plan: FleetPlan, fleets: Path) -> tuple[Path, bool]:
    """The fleet folder of ``plan`` under ``fleets``, generated unless a complete one exists.

    Complete means its marker ``<name>.json`` (beside the folder, outside the logs root) holds
    the same parameters; a folder without it (an interrupted generation) is generated again.
    Returns (folder, reused).
    """
    folder, marker = fleets / plan.name, fleets / f"{plan.name}.json"
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(plan).items() if k != "scale"}
    if folder.is_dir() and marker.is_file() and json.loads(marker.read_text()).get("params") == params:
        return folder, True
    if folder.exists():
        shutil.rmtree(folder)
    fleets.mkdir(parents=True, exist_ok=True)
    print(f"generating: {plan.simulate_command(folder)}", flush=True)
    made = generate_fleet(folder, plan.target_bytes, plan.seed, jobs=plan.jobs, nodes=plan.nodes,
                          ranks_per_node=plan.ranks_per_node, failed_share=plan.failed_share)
    print(f"  {made.bytes / 1e6:,.1f} MB, {made.lines:,} lines, {made.note}, in {made.seconds:.1f} s", flush=True)
    marker.write_text(json.dumps({"params": params, "command": plan.simulate_command(folder),
                                  "generate": asdict(made)}, indent=2))
    return folder, False


def phase_seconds(steps: dict[str, float], timeline: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds per phase: each step of ``steps`` (runs.seconds, in run order) split at the first
    progress message of ``PHASE_MARKERS`` inside it; ``timeline`` holds (seconds since the run
    started, message). A marker not found leaves its time to the next phase. The phases of a
    step add up to the step."""
    phases: dict[str, float] = {}
    start = 0.0
    for step, seconds in steps.items():
        end = start + seconds
        markers, rest = PHASE_MARKERS.get(step, ([], ""))
        cursor = start
        for name, prefix in markers:
            hit = next((t for t, message in timeline if cursor <= t <= end and message.startswith(prefix)), None)
            if hit is not None:
                phases[f"{step}: {name}"] = round(hit - cursor, 2)
                cursor = hit
        phases[f"{step}: {rest}" if markers else step] = round(end - cursor, 2)
        start = end
    return phases


def growth(sizes: list[dict]) -> list[dict]:
    """Per size, against the smallest: data ratio (input bytes), failed-job ratio, time ratio
    (nightly seconds), CPU ratio (None without CPU figures: less sensitive to other load than
    wall time) and per-phase time ratios; ``time_per_data`` = time ratio / data ratio (1.0 is
    linear)."""
    if not sizes:
        return []
    base = min(sizes, key=lambda s: s["input_bytes"])
    out = []
    for size in sorted(sizes, key=lambda s: s["input_bytes"]):
        data = size["input_bytes"] / base["input_bytes"]
        time_ratio = size["nightly_seconds"] / base["nightly_seconds"]
        out.append({
            "scale": size["scale"], "data_ratio": round(data, 3),
            "failed_jobs_ratio": round(size["failed_jobs"] / base["failed_jobs"], 3) if base["failed_jobs"] else None,
            "time_ratio": round(time_ratio, 3), "time_per_data": round(time_ratio / data, 3),
            "cpu_ratio": (round(size["cpu_seconds"] / base["cpu_seconds"], 3)
                          if size.get("cpu_seconds") and base.get("cpu_seconds") else None),
            "phase_ratios": {name: round(seconds / base["phases"][name], 3)
                             for name, seconds in size["phases"].items() if base["phases"].get(name)},
        })
    return out


def run_size(plan: FleetPlan, fleet: Path, warehouse: Path, master: str, conf_files: list[str],
             overrides: dict | None = None) -> dict:
    """The nightly run of one fleet in a fresh Spark application (a child process), measured
    from outside (wall time with JVM start, peak memory of the whole process tree)."""
    if warehouse.exists():
        shutil.rmtree(warehouse)
    warehouse.mkdir(parents=True)
    result_path = warehouse.parent / f"{warehouse.name}.result.json"
    result_path.unlink(missing_ok=True)
    load_before = os.getloadavg()
    child = multiprocessing.get_context("spawn").Process(
        target=_nightly_process, args=(str(fleet), str(warehouse), master, conf_files, str(result_path), overrides or {}))
    with PeakMemory() as memory, TreeCpu() as cpu:
        started = time.perf_counter()
        child.start()
        child.join()
        process_seconds = time.perf_counter() - started
    if child.exitcode != 0 or not result_path.is_file():
        raise NightlyRunFailed(f"the nightly run on {fleet} exited with code {child.exitcode} (output above)")
    inner = json.loads(result_path.read_text())
    by_status = inner["jobs_by_status"]
    failed = by_status.get("failed", {})
    input_bytes = sum(s["bytes"] for s in by_status.values())
    seconds = inner["nightly_seconds"]
    n_failed = inner["run"]["n_selected_jobs"]
    phases = phase_seconds(inner["run"]["seconds"], inner["timeline"])
    phase_cpu = phase_cpu_seconds(phases, inner["run_started_epoch"], cpu.samples)
    return {
        "scale": plan.scale, "fleet": str(fleet), "simulate": plan.simulate_command(fleet),
        "warehouse": str(warehouse), "run_id": inner["run"]["run_id"],
        "jobs": sum(s["jobs"] for s in by_status.values()), "failed_jobs": n_failed,
        "diagnosed": inner["diagnosis_by_status"].get("diagnosed", 0),
        "diagnosis_errors": inner["run"]["n_errors"], "errors": json.loads(inner["run"]["errors"]),
        "files": sum(s["files"] for s in by_status.values()), "input_bytes": input_bytes,
        "lines": sum(s["lines"] for s in by_status.values()),
        "failed_bytes": failed.get("bytes", 0), "failed_lines": failed.get("lines", 0),
        "nightly_seconds": round(seconds, 2), "process_seconds": round(process_seconds, 2),
        "session_seconds": inner["session_seconds"],
        "mb_per_s": input_bytes / 1e6 / seconds,
        "seconds_per_failed_job": round(seconds / n_failed, 2) if n_failed else None,
        "steps": inner["run"]["seconds"], "phases": phases, "phase_cpu_seconds": phase_cpu,
        "cpu_seconds": round(sum(phase_cpu.values()), 2), "process_cpu_seconds": cpu.samples[-1][1],
        "timeline": inner["timeline"], "peak_memory_bytes": memory.peak_bytes,
        "format": inner["format"], "table_files": inner["table_files"], "spark_jobs": inner["spark_jobs"],
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def _nightly_process(fleet: str, warehouse: str, master: str, conf_files: list[str], result_path: str,
                     overrides: dict | None = None) -> None:
    """Child process: one Spark application, one nightly run, its rows read back, a JSON result."""
    from l4spark.config import load_config
    from l4spark.nightly.batch import run_nightly
    from l4spark.io.session import build_session

    config = load_config(*conf_files, overrides={"spark.master": master, "storage.warehouse": warehouse, **(overrides or {})})
    started = time.perf_counter()
    spark = build_session(config.spark)
    session_seconds = time.perf_counter() - started
    timeline: list[tuple[float, str]] = []
    run_started_epoch, run_started = time.time(), time.perf_counter()

    def progress(message: str) -> None:
        elapsed = time.perf_counter() - run_started
        timeline.append((round(elapsed, 2), message))
        print(f"    [{elapsed:7.1f}s] {message}", flush=True)

    try:
        jobs_before = spark_jobs_started(spark)
        run = run_nightly(spark, config, fleet, reports_dir=Path(warehouse) / "_reports", progress=progress)
        nightly_seconds = time.perf_counter() - run_started
        spark_jobs = spark_jobs_started(spark) - jobs_before
        readback = _read_back(spark, config, run.run_id)
    finally:
        spark.stop()
    result = {"nightly_seconds": nightly_seconds, "session_seconds": round(session_seconds, 2),
              "run_started_epoch": run_started_epoch, "timeline": timeline, "format": config.storage.format,
              "spark_jobs": spark_jobs,
              "table_files": table_files(config.storage, run.upkeep), **readback}
    Path(result_path).write_text(json.dumps(result, indent=2, default=str))


def table_files(storage, upkeep) -> dict[str, dict[str, int]]:
    """Per table: data files of its current version before the run's upkeep (OPTIMIZE) and after,
    and data files on disk (a Delta table's folder also holds the files its log removed, until
    VACUUM). Parquet has no upkeep: before = after = on disk."""
    from l4spark.io.storage import table_path

    by_table = {u.table: u for u in upkeep}
    files = {}
    for table in sorted(p.name for p in Path(storage.warehouse).iterdir() if not p.name.startswith(("_", "."))):
        on_disk = sum(1 for f in Path(table_path(storage, table)).rglob("*.parquet") if "_delta_log" not in f.parts)
        done = by_table.get(table)
        files[table] = {"before": done.files_before if done else on_disk, "after": done.files_after if done else on_disk,
                        "on_disk": on_disk}
    return files


def _read_back(spark, config, run_id: str) -> dict:
    """The run's ``runs`` row (steps' seconds as a dict), the parsed jobs by status (jobs, files,
    bytes, lines) and the diagnosis rows by status, from the warehouse tables."""
    from pyspark.sql import functions as F

    from l4spark.io.storage import read_table

    storage = config.storage
    rows = read_table(spark, storage, "runs").where(F.col("run_id") == run_id).collect()
    if len(rows) != 1:
        raise NightlyRunFailed(f"expected one runs row for {run_id}, found {len(rows)}")
    run = rows[0].asDict()
    run["seconds"] = json.loads(run["seconds"])
    jobs = (read_table(spark, storage, "jobs").groupBy("status")
            .agg(F.count(F.lit(1)).alias("jobs"), F.sum("n_files").alias("files"), F.sum("n_bytes").alias("bytes"),
                 F.sum("n_lines").alias("lines"))
            .collect())
    diagnosis = read_table(spark, storage, "diagnosis_jobs").groupBy("status").count().collect()
    return {"run": run,
            "jobs_by_status": {r.status: {"jobs": r.jobs, "files": int(r.files or 0), "bytes": int(r.bytes or 0),
                                          "lines": int(r.lines or 0)} for r in jobs},
            "diagnosis_by_status": {r.status: r["count"] for r in diagnosis}}


def print_report(sizes: list[dict], ratios: list[dict]) -> None:
    print()
    print(f"{'run':>9}{'jobs':>6}{'failed':>7}{'files':>8}{'MB':>9}{'lines':>12}{'nightly s':>11}"
          f"{'process s':>11}{'cpu s':>8}{'MB/s':>7}{'s/failed':>9}{'peak GiB':>9}{'Spark jobs':>11}  load before/after")
    for s in sizes:
        per_failed = f"{s['seconds_per_failed_job']:.1f}" if s["seconds_per_failed_job"] is not None else "-"
        print(f"{s['name']:>9}{s['jobs']:>6}{s['failed_jobs']:>7}{s['files']:>8,}{s['input_bytes'] / 1e6:>9,.1f}"
              f"{s['lines']:>12,}{s['nightly_seconds']:>11.1f}{s['process_seconds']:>11.1f}{s['cpu_seconds']:>8.0f}"
              f"{s['mb_per_s']:>7.2f}"
              f"{per_failed:>9}{s['peak_memory_bytes'] / 2**30:>9.2f}{s['spark_jobs']:>11,}  "
              f"{s['load_average_before'][0]:.1f}/{s['load_average_after'][0]:.1f}")
    print()
    tables = sorted({t for s in sizes for t in s["table_files"]})
    print(f"{'files per table: before upkeep / after / on disk':<50}" + "".join(f"{s['name']:>22}" for s in sizes))
    for table in tables + ["all"]:
        cells = []
        for s in sizes:
            files = s["table_files"]
            got = ({k: sum(f[k] for f in files.values()) for k in ("before", "after", "on_disk")} if table == "all"
                   else files.get(table))
            cells.append(f"{got['before']} / {got['after']} / {got['on_disk']}" if got else "-")
        print(f"{table:<50}" + "".join(f"{c:>22}" for c in cells))
    print()
    names = list(dict.fromkeys(name for s in sizes for name in s["phases"]))
    print(f"{'phase: wall s (cpu s)':<40}" + "".join(f"{s['name']:>16}" for s in sizes)
          + (f"{'wall ratio':>12}" if len(sizes) > 1 else ""))
    for name in names:
        values = [s["phases"].get(name) for s in sizes]
        cells = [f"{v:.1f} ({s['phase_cpu_seconds'].get(name, 0):.0f})" if v is not None else "-"
                 for v, s in zip(values, sizes)]
        line = f"{name:<40}" + "".join(f"{c:>16}" for c in cells)
        if len(sizes) > 1 and values[0] and values[-1] is not None:
            line += f"{values[-1] / values[0]:>12.2f}"
        print(line)
    if len(ratios) > 1:
        print()
        for r in ratios[1:]:
            print(f"{r['scale']}x vs {ratios[0]['scale']}x: data {r['data_ratio']:.2f}x, failed jobs "
                  f"{r['failed_jobs_ratio']}x, time {r['time_ratio']:.2f}x -> time/data {r['time_per_data']:.2f} "
                  f"(1.00 = linear); CPU {r['cpu_ratio']}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.bench.nightly", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,4", help="scales of the 1x fleet, comma-separated (default 1,4)")
    parser.add_argument("--jobs", type=int, default=240, help="jobs of the 1x fleet")
    parser.add_argument("--target-bytes", default="560M",
                        help="approximate size of the 1x fleet (e.g. 300M, 1G; the default makes the 4x fleet 2.05 GB)")
    parser.add_argument("--failed-share", type=float, default=0.1, help="share of failed jobs (0.1: 24 of 240)")
    parser.add_argument("--nodes", default="4-16", help="nodes per job, LO-HI")
    parser.add_argument("--ranks-per-node", type=int, default=4)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], metavar="FILE", help="l4spark TOML for the runs")
    parser.add_argument("--formats", default="",
                        help="table formats to run each size in, one after the other, e.g. parquet,delta "
                             "(default: the conf's storage.format)")
    parser.add_argument("--fleets", default="out/bench-nightly/fleets", help="generated fleets (reused)")
    parser.add_argument("--out", default="out/bench-nightly", help="warehouses and the JSON result")
    args = parser.parse_args(argv)

    scales = sorted({int(k) for k in args.sizes.split(",") if k.strip()})
    lo, _, hi = args.nodes.partition("-")
    plans = plan_fleets(scales, args.seed, args.jobs, parse_size(args.target_bytes), args.failed_share,
                        (int(lo), int(hi or lo)), args.ranks_per_node)
    out, fleets = Path(args.out), Path(args.fleets)
    out.mkdir(parents=True, exist_ok=True)
    sizes = []
    formats = [f.strip() for f in args.formats.split(",") if f.strip()] or [""]
    for plan in plans:
        fleet, reused = ensure_fleet(plan, fleets)
        for storage_format in formats:
            name = f"{plan.scale}x" + (f" {storage_format}" if storage_format else "")
            print(f"{name}: nightly run on {fleet}{' (fleet reused)' if reused else ''}", flush=True)
            overrides = {"storage.format": storage_format} if storage_format else {}
            warehouse = out / ("warehouse-" + name.replace(" ", "-"))
            sizes.append({"name": name, **run_size(plan, fleet, warehouse, args.master, args.conf, overrides)})
            print(f"{name}: {sizes[-1]['nightly_seconds']:.1f} s, steps {sizes[-1]['steps']}", flush=True)
    if len(formats) > 1:
        for plan in plans:
            runs = [s for s in sizes if s["scale"] == plan.scale]
            print(f"{plan.scale}x wall: " + ", ".join(f"{s['format']} {s['nightly_seconds']:.1f} s" for s in runs)
                  + f"; {runs[-1]['format']}/{runs[0]['format']} {runs[-1]['nightly_seconds'] / runs[0]['nightly_seconds']:.2f}")
    ratios = growth([s for s in sizes if s["name"].endswith(formats[-1])]) if formats != [""] else growth(sizes)
    print_report(sizes, ratios)
    result = {"sizes": sizes, "growth": ratios, "master": args.master, "cpus": os.cpu_count(),
              "command": " ".join([Path(sys.executable).name, "-m", "l4spark.bench.nightly", *(argv or sys.argv[1:])])}
    path = out / "nightly-bench.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
