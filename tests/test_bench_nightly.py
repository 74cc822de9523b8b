"""make bench-nightly: the phase split and growth arithmetic (pure), fleet reuse, and one real
run of ``python -m l4spark.bench.nightly`` on a tiny fleet whose JSON is checked against the
fleet on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from l4spark.bench.nightly import FleetPlan, ensure_fleet, growth, phase_cpu_seconds, phase_seconds, plan_fleets

TINY = ["--jobs", "4", "--target-bytes", "300K", "--nodes", "2", "--ranks-per-node", "2", "--failed-share", "0.5",
        "--seed", "21"]


def test_phase_seconds_split_steps_at_progress_messages_and_add_up():
    steps = {"scan": 1.0, "parse": 10.0, "normal_pool": 4.0, "diagnose": 20.0, "write": 2.0}
    timeline = [(0.5, "3 jobs under x; 3 new or changed"), (1.5, "listed 12 rank files"),
                (6.0, "read 1,000 lines; 10 distinct line shapes"), (6.5, "templated: 9 masked messages"),
                (15.2, "2 failed jobs to diagnose"), (16.0, "diagnosing 2 jobs"),
                (30.0, "cross-job filter: 5 candidate events in 2 jobs"),
                (33.0, "spatial and temporal steps done (4 units, 10 iterations)")]
    phases = phase_seconds(steps, timeline)
    assert phases == {"scan": 1.0, "parse: list": 0.5, "parse: read shapes": 4.5, "parse: template": 0.5,
                      "parse: write": 4.5, "normal_pool": 4.0, "diagnose: select": 1.0,
                      "diagnose: prepare + cross-job filter": 14.0, "diagnose: spatial + temporal": 3.0,
                      "diagnose: patterns + scoring": 2.0, "write": 2.0}
    assert sum(phases.values()) == pytest.approx(sum(steps.values()))


def test_phase_seconds_leaves_a_missing_marker_to_the_next_phase():
    phases = phase_seconds({"parse": 10.0}, [(4.0, "templated: 1 masked messages")])
    assert phases == {"parse: template": 4.0, "parse: write": 6.0}


def test_growth_against_the_smallest_size():
    sizes = [{"scale": 4, "input_bytes": 400, "failed_jobs": 8, "nightly_seconds": 100.0, "cpu_seconds": 90.0,
              "phases": {"a": 60.0, "b": 40.0}},
             {"scale": 1, "input_bytes": 100, "failed_jobs": 2, "nightly_seconds": 40.0, "cpu_seconds": 30.0,
              "phases": {"a": 20.0, "b": 0.0}}]
    first, second = growth(sizes)
    assert first == {"scale": 1, "data_ratio": 1.0, "failed_jobs_ratio": 1.0, "time_ratio": 1.0,
                     "time_per_data": 1.0, "cpu_ratio": 1.0, "phase_ratios": {"a": 1.0}}
    assert second == {"scale": 4, "data_ratio": 4.0, "failed_jobs_ratio": 4.0, "time_ratio": 2.5,
                      "time_per_data": 0.625, "cpu_ratio": 3.0, "phase_ratios": {"a": 3.0}}
    assert growth([{**sizes[1], "cpu_seconds": None}])[0]["cpu_ratio"] is None


def test_plans_scale_jobs_and_bytes_together():
    plans = plan_fleets([1, 4], seed=3, jobs=10, target_bytes=1000, failed_share=0.2, nodes=(2, 4), ranks_per_node=4)
    assert [(p.scale, p.jobs, p.target_bytes) for p in plans] == [(1, 10, 1000), (4, 40, 4000)]
    assert plans[0].name != plans[1].name


def test_fleet_is_reused_only_with_the_same_parameters(tmp_path):
    plan = FleetPlan(1, 21, 3, 200_000, 0.34, (2, 2), 2)
    folder, reused = ensure_fleet(plan, tmp_path)
    assert not reused and (folder / "_labels").is_dir()
    stamp = (tmp_path / f"{plan.name}.json").stat().st_mtime_ns
    assert ensure_fleet(plan, tmp_path) == (folder, True)
    assert (tmp_path / f"{plan.name}.json").stat().st_mtime_ns == stamp
    (tmp_path / f"{plan.name}.json").unlink()  # as an interrupted generation leaves it
    assert ensure_fleet(plan, tmp_path) == (folder, False)


def test_bench_runs_the_nightly_batch_and_reports_what_the_fleet_holds(tmp_path):
    conf = tmp_path / "small.toml"
    conf.write_text('[spark]\nshuffle_partitions = 2\ndriver_memory = "2g"\n')
    out, fleets = tmp_path / "out", tmp_path / "fleets"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-m", "l4spark.bench.nightly", "--sizes", "1", *TINY, "--conf", str(conf),
                           "--fleets", str(fleets), "--out", str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "nightly-bench.json").read_text())
    (size,) = result["sizes"]
    fleet = Path(size["fleet"])
    rank_files = sorted(fleet.glob("*/*/rank-*.log"))
    failed = sorted(p.stem for p in (fleet / "_labels").glob("*.json"))
    assert size["files"] == len(rank_files)
    assert size["input_bytes"] == sum(p.stat().st_size for p in rank_files)
    assert size["lines"] == sum(p.read_bytes().count(b"\n") for p in rank_files)
    assert size["failed_jobs"] == size["diagnosed"] == len(failed) > 0 and size["diagnosis_errors"] == 0
    assert list(size["steps"]) == ["scan", "parse", "normal_pool", "diagnose", "write and reports", "upkeep"]
    assert size["format"] == "delta" and size["table_files"]["jobs"] == {"before": 1, "after": 1, "on_disk": 1}
    assert sum(size["phases"].values()) == pytest.approx(sum(size["steps"].values()), abs=0.05)
    assert {"parse: read shapes", "diagnose: prepare + cross-job filter"} <= set(size["phases"])
    assert size["mb_per_s"] == pytest.approx(size["input_bytes"] / 1e6 / size["nightly_seconds"], rel=1e-2)
    assert size["seconds_per_failed_job"] == pytest.approx(size["nightly_seconds"] / len(failed), rel=1e-2)
    assert size["process_seconds"] > size["nightly_seconds"] and size["peak_memory_bytes"] > 0
    assert set(size["phase_cpu_seconds"]) == set(size["phases"])
    assert 0 < size["cpu_seconds"] <= size["process_cpu_seconds"]
    # every write and every read back of a job is at least one Spark job
    assert size["spark_jobs"] > 2 * len(failed) and "Spark jobs" in done.stdout
    assert result["growth"][0]["data_ratio"] == 1.0
    assert "nightly run" in done.stdout and "written" in done.stdout


def test_phase_cpu_interpolates_the_cumulative_cpu_at_phase_boundaries():
    samples = [(100.0, 10.0), (102.0, 14.0), (106.0, 18.0)]
    cpu = phase_cpu_seconds({"a": 1.0, "b": 3.0, "c": 10.0}, 100.0, samples)
    assert cpu == {"a": 2.0, "b": 4.0, "c": 2.0}  # 10 -> 12 -> 16 -> 18 (held after the last sample)
    assert phase_cpu_seconds({"a": 1.0}, 100.0, samples[:1]) == {}
