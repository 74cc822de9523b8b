"""Small-files benchmark (``make bench-small``, issue #21): many small rank files, one run.

A fleet whose jobs log little per rank (>= 30,000 rank files, most of 5-30 KB, a third of the
jobs gzipped) is generated with ``l4spark simulate`` (small worlds, 4-8 nodes of 8 ranks, few
iterations per job) and kept under ``--fleet``. Measured in the same run, on it:

- ``read floor``: one Python process reading and decompressing every file, counting lines;
- ``raw scan``: ``spark.read.text(<explicit file list>).count()`` (best of ``--scan-runs``);
- ``drain3 single``: single-process drain3 over a sample of the lines, as the pipeline hands
  them to its template store (messages after the header, digits folded; ``bench.parse``);
- ``drain3 raw lines``: single-process drain3 as a user would run it on the same sample: the
  whole lines as read (headers included, no folding), this repo's masks, reading timed too;
- ``parse``: ``parse_jobs`` into a fresh warehouse, with its phases; the faster of
  ``--parse-runs`` runs (each into a warehouse of its own), as the raw scan is the faster of
  ``--scan-runs``: the first run of either also warms the JVM up;
- ``nightly``: ``run_nightly`` in a fresh Spark application and warehouse, with its phases;
  with ``--baseline-code DIR`` (a checkout of other code, e.g. main) also the same nightly run
  by that code, and the two warehouses' diagnosis tables compared row for row
  (``bench.compare``).

Ratios are of this run only. ``--scale 0.1`` makes a tenth of the fleet for a quick run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from l4spark.bench.parse import Measure, PeakMemory, drain3_raw_lines, drain3_single, full_parse, raw_scan
from l4spark.config import load_config

JOBS = 640
TARGET_BYTES = 500_000_000
NODES = (4, 8)
RANKS_PER_NODE = 8
FAILED_SHARE = 0.1
GZIP_EVERY = 3  # every third job (in name order) has its rank files gzipped


def fleet_params(scale: float, seed: int) -> dict:
    return {"seed": seed, "jobs": max(3, round(JOBS * scale)), "target_bytes": int(TARGET_BYTES * scale),
            "nodes": list(NODES), "ranks_per_node": RANKS_PER_NODE, "failed_share": FAILED_SHARE,
            "gzip_every": GZIP_EVERY}


def ensure_fleet(folder: Path, params: dict) -> tuple[Path, bool]:
    """Generate the fleet of ``params`` in ``folder`` unless its marker (``<folder>.json``) says
    it is there; every ``gzip_every``-th job's rank files are then gzipped in place."""
    from l4spark.simulate import FleetOptions, simulate_fleet

    marker = folder.with_name(folder.name + ".json")
    if folder.is_dir() and marker.is_file() and json.loads(marker.read_text()).get("params") == params:
        return folder, True
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    summary = simulate_fleet(folder, FleetOptions(seed=params["seed"], jobs=params["jobs"], nodes=tuple(params["nodes"]),
                                                   ranks_per_node=params["ranks_per_node"],
                                                   failed_share=params["failed_share"],
                                                   target_bytes=params["target_bytes"]))
    jobs = sorted(p for p in folder.iterdir() if p.is_dir())
    for job in jobs[::params["gzip_every"]]:
        for log_file in sorted(job.glob("*/rank-*.log")):
            with open(log_file, "rb") as raw, gzip.GzipFile(str(log_file) + ".gz", "wb", compresslevel=6, mtime=0) as out:
                shutil.copyfileobj(raw, out)
            log_file.unlink()
    marker.write_text(json.dumps({"params": params, "generated": {
        "seconds": round(time.perf_counter() - started, 1), "files": summary.n_files, "lines": summary.n_lines,
        "raw_bytes": summary.n_raw_bytes, "jobs": summary.n_jobs, "failed": summary.n_failed}}, indent=2))
    return folder, False


def read_floor(paths: list[str]) -> Measure:
    """One Python process: read (and gunzip) every file, count its lines: what the disk and
    zlib allow before any parsing."""
    started = time.perf_counter()
    lines = size = 0
    for path in paths:
        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as handle:
            data = handle.read()
        size += len(data)
        lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return Measure("read floor", time.perf_counter() - started, lines, size, "one process, read + gunzip")


def file_sizes(paths: list[str]) -> dict:
    sizes = sorted(os.path.getsize(p) for p in paths)
    pick = lambda q: sizes[min(len(sizes) - 1, int(q * len(sizes)))]  # noqa: E731
    return {"files": len(sizes), "gzipped": sum(p.endswith(".gz") for p in paths), "p10": pick(0.1),
            "median": pick(0.5), "p90": pick(0.9), "max": sizes[-1],
            "share_5_30k": round(sum(5_000 <= s <= 30_000 for s in sizes) / len(sizes), 3)}


def nightly_run(code_root: Path, fleet: Path, warehouse: Path, master: str, conf_files: list[str]) -> dict:
    """``bench.nightly._nightly_process`` of the code under ``code_root``, in a child Python
    process (its own Spark application) into a fresh ``warehouse``; measured from outside."""
    from l4spark.bench.nightly import TreeCpu, phase_cpu_seconds, phase_seconds

    if warehouse.exists():
        shutil.rmtree(warehouse)
    warehouse.mkdir(parents=True)
    result_path = warehouse.parent / f"{warehouse.name}.result.json"
    result_path.unlink(missing_ok=True)
    code = ("import sys; from l4spark.bench.nightly import _nightly_process; "
            "_nightly_process(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5:], sys.argv[4])")
    # (no overrides argument: older code, e.g. the 3a79b42 as --baseline-code, has none)
    env = {**os.environ, "PYTHONPATH": str(code_root.resolve())}
    with PeakMemory() as memory, TreeCpu() as cpu:
        started = time.perf_counter()
        # -P: no working directory on sys.path, so that PYTHONPATH's code is the l4spark imported;
        # and run from code_root, because Spark's Python workers (`python -m pyspark.daemon`) do put
        # their working directory first on sys.path
        child = subprocess.run([sys.executable, "-P", "-c", code, str(fleet.resolve()), str(warehouse.resolve()), master,
                                str(result_path.resolve()), *[str(Path(c).resolve()) for c in conf_files]], env=env,
                               cwd=code_root.resolve())
        process_seconds = time.perf_counter() - started
    if child.returncode != 0 or not result_path.is_file():
        raise RuntimeError(f"the nightly run of {code_root} exited with {child.returncode}")
    inner = json.loads(result_path.read_text())
    phases = phase_seconds(inner["run"]["seconds"], inner["timeline"])
    phase_cpu = phase_cpu_seconds(phases, inner["run_started_epoch"], cpu.samples)
    n_failed = inner["run"]["n_selected_jobs"]
    return {"code": str(code_root), "warehouse": str(warehouse), "nightly_seconds": round(inner["nightly_seconds"], 2),
            "process_seconds": round(process_seconds, 2), "failed_jobs": n_failed,
            "diagnosed": inner["diagnosis_by_status"].get("diagnosed", 0), "errors": inner["run"]["n_errors"],
            "steps": inner["run"]["seconds"], "phases": phases, "spark_jobs": inner.get("spark_jobs"),
            "phase_cpu_seconds": phase_cpu, "cpu_seconds": round(sum(phase_cpu.values()), 2),
            "diagnose_seconds_per_failed_job": round(inner["run"]["seconds"].get("diagnose", 0) / n_failed, 2)
            if n_failed else None,
            "peak_memory_bytes": memory.peak_bytes, "load_average_after": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.bench.small", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="share of the full fleet (0.1 for a quick run)")
    parser.add_argument("--seed", type=int, default=2121)
    parser.add_argument("--fleet", default=None, help="fleet folder (default out/bench-small/fleet-<scale>)")
    parser.add_argument("--out", default="out/bench-small", help="warehouses and the JSON result")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--scan-runs", type=int, default=2)
    parser.add_argument("--parse-runs", type=int, default=2, help="parses, each into a fresh warehouse; the fastest counts")
    parser.add_argument("--drain-lines", type=int, default=200_000)
    parser.add_argument("--conf", action="append", default=[], metavar="FILE")
    parser.add_argument("--skip", default="",
                        help="comma-separated measures to skip: floor,scan,drain3,drain3raw,parse,nightly")
    parser.add_argument("--baseline-code", default=None, metavar="DIR",
                        help="also run the nightly with the l4spark under DIR (e.g. a checkout of main) and "
                             "compare the diagnosis tables")
    args = parser.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if args.baseline_code and "nightly" not in skip:   # refused before any measuring
        _check_same_jars({"baseline": Path(args.baseline_code), "this": Path(__file__).resolve().parents[2]})

    from l4spark.io.session import build_session
    from l4spark.parse.layout import scan_logs_root

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    params = fleet_params(args.scale, args.seed)
    fleet, reused = ensure_fleet(Path(args.fleet or out / f"fleet-{args.scale:g}"), params)
    config = load_config(*args.conf, overrides={"spark.master": args.master})
    scan = scan_logs_root(fleet, config.layout.pattern, config.layout.job_file)
    paths = [f.path for f in scan.files]
    sizes = file_sizes(paths)
    print(f"fleet {fleet}{' (reused)' if reused else ''}: {len(scan.jobs)} jobs, {sizes}", flush=True)
    load_before = os.getloadavg()
    measures: list[Measure] = []
    if "floor" not in skip:
        measures.append(read_floor(paths))
    if "drain3" not in skip:
        measures.append(drain3_single(config, scan.files, args.drain_lines))
    if "drain3raw" not in skip:
        measures.append(drain3_raw_lines(config, scan.files, args.drain_lines))
    if not {"scan", "parse"} <= skip:
        spark = build_session(config.spark)
        try:
            if "scan" not in skip:
                measures.append(raw_scan(spark, paths, scan.total_bytes, args.scan_runs))
            if "parse" not in skip:
                measures.append(parse_runs(spark, args.conf, args.master, fleet, scan.total_bytes, out,
                                           args.parse_runs))
        finally:
            spark.stop()
    for m in measures:
        print(f"  {m.name:<14}{m.seconds:>8.1f} s{m.lines:>12,} lines{m.lines_per_s:>12,.0f} lines/s  {m.note}", flush=True)
    nightly: dict[str, dict] = {}
    if "nightly" not in skip:
        codes = {"this": Path(__file__).resolve().parents[2]}
        if args.baseline_code:
            codes = {"baseline": Path(args.baseline_code), **codes}
        for name, root in codes.items():
            print(f"nightly ({name}: {root}) ...", flush=True)
            nightly[name] = nightly_run(root, fleet, out / f"warehouse-nightly-{name}", args.master, args.conf)
    comparison = None
    if "baseline" in nightly:
        from l4spark.bench.compare import all_equal, compare_warehouses

        spark = build_session(config.spark)
        try:
            comparison = compare_warehouses(spark, nightly["baseline"]["warehouse"], nightly["this"]["warehouse"])
        finally:
            spark.stop()
    result = {"params": params, "fleet": str(fleet), "file_sizes": sizes, "jobs": len(scan.jobs),
              "bytes": scan.total_bytes, "measures": [asdict(m) | {"lines_per_s": m.lines_per_s} for m in measures],
              "nightly": nightly, "comparison": comparison, "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    report(result)
    path = out / "small-bench.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"written {path}")
    return 0 if comparison is None or all_equal(comparison) else 1


def _check_same_jars(codes: dict[str, Path]) -> None:
    """Refuse a comparison of two checkouts of which one has Delta's jars (``<checkout>/jars``)
    and the other not: that one's nightly writes Parquet (``auto``), so the two runs would time
    different table formats. ``git archive`` leaves the git-ignored ``jars`` folder out."""
    from l4spark.io.delta_jars import find_jars

    with_jars = {name: find_jars(root / "jars") is not None for name, root in codes.items()}
    if len(set(with_jars.values())) > 1:
        lacking = [str(codes[name]) for name, present in with_jars.items() if not present]
        raise SystemExit(f"--baseline-code: Delta's jars are missing in {', '.join(lacking)}/jars (its nightly would "
                         f"write Parquet, the other's Delta): link them, e.g. `ln -s {codes['this']}/jars "
                         f"{lacking[0]}/jars` (and jars-storage)")


def parse_runs(spark, conf_files: list[str], master: str, fleet: Path, total_bytes: int, out: Path,
               runs: int) -> Measure:
    """The faster of ``runs`` full parses, each into a fresh warehouse of its own under ``out``
    (a second parse into the first one's warehouse would find its templates and tables)."""
    done = []
    for run in range(max(runs, 1)):
        warehouse = out / f"warehouse-parse-{run + 1}"
        if warehouse.exists():
            shutil.rmtree(warehouse)
        config = load_config(*conf_files, overrides={"spark.master": master, "storage.warehouse": str(warehouse)})
        done.append(full_parse(spark, config, fleet, total_bytes)[0])
    best = min(done, key=lambda m: m.seconds)
    if len(done) > 1:
        best.note += "; best of " + ", ".join(f"{m.seconds:.1f}s" for m in done)
    return best


def report(result: dict) -> None:
    measures = {m["name"]: m for m in result["measures"]}
    print()
    print(f"{'measure':<16}{'seconds':>9}{'CPU s':>8}{'jobs':>6}{'lines':>12}{'lines/s':>12}  note")
    for m in result["measures"]:
        cpu = "" if m.get("cpu_seconds") is None else f"{m['cpu_seconds']:.1f}"
        jobs = "" if m.get("spark_jobs") is None else str(m["spark_jobs"])
        print(f"{m['name']:<16}{m['seconds']:>9.1f}{cpu:>8}{jobs:>6}{m['lines']:>12,}{m['lines_per_s']:>12,.0f}  {m['note']}")
    parse = measures.get("full parse")
    for name in ("read floor", "raw scan", "drain3 single", "drain3 raw lines"):
        if parse and name in measures:
            print(f"parse / {name}: {parse['lines_per_s'] / measures[name]['lines_per_s']:.2f}x (lines/s)")
    scan = measures.get("raw scan")
    if parse and scan and parse.get("cpu_seconds") and scan.get("cpu_seconds"):
        print(f"parse / raw scan in CPU seconds: {parse['cpu_seconds'] / scan['cpu_seconds']:.2f}x "
              f"(Spark jobs: {parse['spark_jobs']} against {scan['spark_jobs']})")
    for name, run in result["nightly"].items():
        print(f"\nnightly ({name}): {run['nightly_seconds']:.1f} s ({run['cpu_seconds']:.0f} CPU s, "
              f"{run['spark_jobs']} Spark jobs), {run['failed_jobs']} failed jobs, "
              f"diagnose {run['diagnose_seconds_per_failed_job']} s per failed job")
        for phase, seconds in run["phases"].items():
            print(f"  {phase:<40}{seconds:>8.1f} s ({run['phase_cpu_seconds'].get(phase, 0):.0f} CPU s)")
    if {"baseline", "this"} <= set(result["nightly"]):
        base, this = result["nightly"]["baseline"], result["nightly"]["this"]
        print(f"\nthis / baseline: nightly {this['nightly_seconds'] / base['nightly_seconds']:.2f}x, "
              f"diagnose per failed job {this['diagnose_seconds_per_failed_job'] / base['diagnose_seconds_per_failed_job']:.2f}x")
        for phase, seconds in this["phases"].items():
            if base["phases"].get(phase):
                print(f"  {phase:<40}{seconds / base['phases'][phase]:>8.2f}x")
    if result["comparison"] is not None:
        print("\ndiagnosis tables, baseline against this:")
        for table, text in result["comparison"].items():
            print(f"  {table:<22} {text}")


if __name__ == "__main__":
    raise SystemExit(main())
