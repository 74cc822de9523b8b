"""Tests of the training-fleet simulator (l4spark.simulate): each realism property on a small fleet."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import time
from datetime import datetime
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from l4spark.simulate import FAULT_CLASSES, FAULT_KINDS, FleetOptions, simulate_fleet
from l4spark.simulate.cli import main as cli_main
from l4spark.simulate.cli import parse_range, parse_size
from l4spark.simulate.fleet import plan_fleet
from l4spark.simulate.formats import Clock, RankLog, Truth, template_of
from l4spark.simulate.stats import label_stats

SMALL = dict(jobs=42, failed_share=0.6, nodes=(2, 5), iterations=150)


def _read(path: Path) -> list[str]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read().split("\n")[:-1]
    return path.read_text(encoding="utf-8").split("\n")[:-1]


class Fleet:
    """A generated fleet, read back: jobs, labels and lines per rank file."""

    def __init__(self, root: Path, summary) -> None:
        self.root, self.summary = root, summary
        self.jobs = {p.parent.name: json.loads(p.read_text()) for p in sorted(root.glob("*/job.json"))}
        self.labels = {p.stem: json.loads(p.read_text()) for p in sorted((root / "_labels").glob("*.json"))}
        self._files: dict[str, dict[tuple[str, int], list[str]]] = {}

    def files(self, job: str) -> dict[tuple[str, int], list[str]]:
        if job not in self._files:
            out = {}
            for p in sorted((self.root / job).glob("*/rank-*")):
                rank = int(re.match(r"rank-(\d+)", p.name).group(1))
                out[(p.parent.name, rank)] = _read(p)
            self._files[job] = out
        return self._files[job]

    def lines(self, job: str) -> list[str]:
        return [line for lines in self.files(job).values() for line in lines]

    def all_lines(self):
        for job in self.jobs:
            yield from self.lines(job)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Fleet:
    root = tmp_path_factory.mktemp("fleet")
    summary = simulate_fleet(root, FleetOptions(seed=7, **SMALL))
    return Fleet(root, summary)


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


# -- layout and summary ---------------------------------------------------------------------------
def test_layout_is_exactly_the_documented_one(fleet):
    for job_dir in fleet.root.iterdir():
        if job_dir.name == "_labels":
            assert all(p.suffix == ".json" for p in job_dir.iterdir())
            continue
        names = {p.name for p in job_dir.iterdir()}
        assert "job.json" in names
        job = fleet.jobs[job_dir.name]
        assert sorted(names - {"job.json"}) == sorted(job["nodes"])
        for node in job["nodes"]:
            ranks = sorted(int(p.name[5:-4]) for p in (job_dir / node).iterdir())
            i = job["nodes"].index(node)
            per = job["settings"]["gpus_per_node"]
            assert ranks == list(range(i * per, (i + 1) * per))
    assert set(fleet.labels) == {j for j, d in fleet.jobs.items() if d["status"] == "failed"}
    assert fleet.summary.n_jobs == 42 and fleet.summary.n_failed == 25 == len(fleet.labels)
    assert fleet.summary.n_files == sum(1 for _ in fleet.root.glob("*/*/rank-*"))


def test_job_json_fields(fleet):
    for job_id, job in fleet.jobs.items():
        assert job["job_id"] == job_id and job["status"] in ("succeeded", "failed")
        s = job["settings"]
        for key in ("model", "framework", "framework_version", "tensor_parallel", "pipeline_parallel",
                    "data_parallel", "nodes", "gpus_per_node", "image"):
            assert key in s
        assert s["tensor_parallel"] * s["pipeline_parallel"] * s["data_parallel"] == s["nodes"] * s["gpus_per_node"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", job["start_time"])
        assert job["start_time"] < job["end_time"]
        assert re.fullmatch(r"[A-Za-z0-9._-]+", job_id)


# -- fault kinds -----------------------------------------------------------------------------------
def test_at_least_twelve_kinds_cover_every_class_and_all_appear(fleet):
    assert len(FAULT_KINDS) >= 12
    assert set(FAULT_CLASSES.values()) == {
        "network", "accelerator", "node", "storage", "configuration", "software_incompatibility",
        "program_bug", "out_of_memory", "hang", "slowdown", "loss_divergence"}
    assert set(fleet.summary.fault_kinds) == set(FAULT_KINDS)
    assert {lab["fault_kind"] for lab in fleet.labels.values()} == set(FAULT_KINDS)
    for lab in fleet.labels.values():
        assert lab["fault_class"] == FAULT_CLASSES[lab["fault_kind"]]
        assert lab["failure_stage"] in ("init", "data_loading", "model_loading", "training", "checkpoint_saving")
        # a straggler logs no error: only the straggler detector's lines (when enabled) are indicating
        assert lab["indicating_messages"] or lab["fault_kind"] == "straggler", lab["job_id"]


# -- labels agree with the files ------------------------------------------------------------------
def test_every_indicating_message_occurs_in_the_stated_count(fleet):
    for job, lab in fleet.labels.items():
        lines = fleet.lines(job)
        for m in lab["indicating_messages"]:
            carrying = [line for line in lines if m["message"] in line]
            assert len(carrying) == m["count"], (job, m["message"][:100])
            assert re.fullmatch(re.escape(m["template"]).replace(re.escape("<*>"), ".*?"), m["message"], re.S), m
        for node in lab["faulty_nodes"]:
            assert (fleet.root / job / node).is_dir()


def _iterations_printed(lines: list[str]) -> list[int]:
    its = []
    for line in lines:
        m = re.search(r" iteration +(\d+)/ *\d+ \|", line) or re.search(r"\[Rank 0\] step=(\d+),", line) \
            or re.search(r"(?:^|\]:|F |00 ) ?\d+%\|[^|]*\| (\d+)/\d+ \[[0-9:]+<", line)
        if m:
            its.append(int(m.group(1)))
    return its


def test_labelled_stage_and_iteration_are_where_the_fault_lines_are(fleet):
    checked = Counter()
    for job, lab in fleet.labels.items():
        its = _iterations_printed(fleet.lines(job))
        stage = lab["failure_stage"]
        if stage in ("init", "model_loading", "data_loading"):
            assert its == [], job
            checked["pre-training"] += 1
        elif stage == "training":
            assert isinstance(lab["failure_iteration"], int)
            if lab["fault_kind"] in ("slowdown", "loss_nan", "straggler"):
                continue  # training goes on after the fault iteration
            if not its and lab["framework"] == "hf_trainer":
                continue  # no progress bars in this job: only loss dicts, which carry no step
            assert its and max(its) < lab["failure_iteration"], job
            checked["training"] += 1
        else:
            # a failed save fails at the iteration it saves: the last one printed
            assert its and lab["failure_iteration"] == max(its) or not its and lab["framework"] == "hf_trainer", job
            saving = re.compile(r"saving checkpoint at iteration|Saving model checkpoint|\[Torch\] Saving ")
            assert any(saving.search(line) for line in fleet.lines(job)), job
            checked["saving"] += 1
    assert checked["pre-training"] >= 3 and checked["training"] >= 8 and checked["saving"] >= 2


# -- formats ---------------------------------------------------------------------------------------
FORMATS = {
    "megatron_iteration": r" \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration +\d+/ *\d+ \| consumed samples: +\d+ \| elapsed time per iteration \(ms\): [\d.]+ \|.* lm loss: [\d.E+-]+ \| loss scale: [\d.]+ \| grad norm: [\d.]+ \| number of skipped iterations: +\d+ \| number of nan iterations: +\d+ \|",
    "megatron_timers": r"^(\S+ )?\s+forward-backward \.+: \([\d.]+, [\d.]+\)",
    "deepspeed_log_dist": r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\] \[logging\.py:96:log_dist\] \[Rank 0\] step=\d+, skipped=\d+, lr=\[",
    "torchrun_prefix": r"\[default\d+\]:",
    "nccl_info": r"[\w-]+:\d+:\d+ \[\d+\] NCCL INFO ",
    "nccl_warn": r"[\w-]+:\d+:\d+ \[\d+\] \S+:\d+ NCCL WARN ",
    "hf_dict": r"\{'loss': [\d.]+, 'grad_norm': [\d.e-]+, 'learning_rate': [\d.e-]+, 'epoch': [\d.]+\}",
    "ascend_cann": r"\[(INFO|ERROR)\] HCCL\(\d+,python\):\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} \[",
    "c10_glog": r"\[rank\d+\]:\[[EW]\d{4} \d\d:\d\d:\d\d\.\d{9} \w+\.(cpp|h|ts):\d+\]",
    "elastic_agent": r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of binary: ",
}


def test_every_framework_format_appears_in_a_mixed_fleet(fleet):
    found = {name: False for name in FORMATS}
    patterns = {name: re.compile(p) for name, p in FORMATS.items()}
    for line in fleet.all_lines():
        for name, pat in patterns.items():
            if not found[name] and pat.search(line):
                found[name] = True
    assert found == {name: True for name in FORMATS}
    assert set(fleet.summary.frameworks) == {"megatron", "deepspeed", "hf_trainer", "mindspeed"}


def test_kernel_xid_lines(tmp_path):
    simulate_fleet(tmp_path, FleetOptions(seed=3, jobs=14, failed_share=1.0, nodes=(2, 3), iterations=80,
                                          fault_kinds=("gpu_ecc_error", "gpu_fallen_off_bus", "kernel_exec_failure"),
                                          frameworks=("megatron", "deepspeed", "hf_trainer")))
    xid = re.compile(r"NVRM: Xid \(PCI:0000:[0-9a-f]{2}:00\): (\d+), pid=\d+, ")
    seen = set()
    for p in tmp_path.glob("*/*/rank-*.log"):
        for line in _read(p):
            m = xid.search(line)
            if m:
                seen.add(int(m.group(1)))
    assert {79} <= seen and seen & {48, 94} and seen & {13, 31}
    fallen = [line for p in tmp_path.glob("*/*/rank-*.log") for line in _read(p) if "GPU has fallen off the bus." in line]
    assert any("NVRM: Xid (PCI:" in line and ": 79, pid=" in line for line in fallen)


# -- lifecycle and roles ----------------------------------------------------------------------------
def _successful(fleet, framework):
    return [j for j, d in fleet.jobs.items() if d["status"] == "succeeded" and d["settings"]["framework"] == framework]


def test_lifecycle_order_in_a_successful_megatron_rank0(fleet):
    job = _successful(fleet, "megatron")[0]
    files = fleet.files(job)
    rank0 = files[(fleet.jobs[job]["nodes"][0], 0)]
    marks = ["> initializing torch distributed ...", "building GPT model ...", "[after model, optimizer",
             "> building train, validation, and test datasets ...", "training ...", "saving checkpoint at iteration",
             "successfully saved checkpoint", "[after training is done]"]
    pos = [next(i for i, line in enumerate(rank0) if m in line) for m in marks]
    assert pos == sorted(pos)
    world = fleet.jobs[job]["settings"]["nodes"] * fleet.jobs[job]["settings"]["gpus_per_node"]
    last = files[(fleet.jobs[job]["nodes"][-1], world - 1)]
    its = _iterations_printed(last)
    assert its == sorted(its) and len(its) > 10


def test_only_some_ranks_print_iterations_and_rank0_prints_more(fleet):
    for fw, printer in (("megatron", "last"), ("deepspeed", "first"), ("hf_trainer", "first"), ("mindspeed", "last")):
        job = _successful(fleet, fw)[0]
        files = fleet.files(job)
        world = len(files)
        with_its = sorted(rank for (node, rank), lines in files.items() if _iterations_printed(lines))
        assert with_its == [world - 1 if printer == "last" else 0], (fw, with_its)
        sizes = sorted(len(lines) for lines in files.values())
        rank0 = len(files[(fleet.jobs[job]["nodes"][0], 0)])
        assert rank0 > sizes[len(sizes) // 2], fw


def test_benign_error_lines_in_successful_jobs(fleet):
    benign = re.compile(r"\bERROR\b")
    jobs_with_errors = 0
    for job, d in fleet.jobs.items():
        if d["status"] != "succeeded":
            continue
        if any(benign.search(line) for line in fleet.lines(job)):
            jobs_with_errors += 1
    n_ok = sum(1 for d in fleet.jobs.values() if d["status"] == "succeeded")
    assert 0 < jobs_with_errors < n_ok or jobs_with_errors == n_ok > 1
    assert jobs_with_errors >= n_ok // 3
    # and no successful job carries a failure's indicating message
    indicating = {m["message"] for lab in fleet.labels.values() for m in lab["indicating_messages"]}
    ok_lines = [line for j, d in fleet.jobs.items() if d["status"] == "succeeded" for line in fleet.lines(j)]
    assert not any(msg in line for msg in list(indicating)[:300] for line in ok_lines[::7])


# -- propagation --------------------------------------------------------------------------------------
def test_peers_name_the_faulty_node_after_the_root_cause(fleet):
    checked = 0
    for job, lab in fleet.labels.items():
        if lab["fault_kind"] not in ("nic_link_down", "gpu_ecc_error", "gpu_fallen_off_bus", "oom", "node_down",
                                     "ib_completion_error", "kernel_exec_failure") or not lab["faulty_nodes"]:
            continue
        faulty = set(lab["faulty_nodes"])
        names = set(lab["faulty_nodes"]) | set(lab["faulty_node_ips"])
        naming = [m for m in lab["indicating_messages"]
                  if set(m["nodes"]) - faulty and any(n in m["message"] for n in names)]
        if not naming:
            continue
        checked += 1
        own = [m for m in lab["indicating_messages"] if set(m["nodes"]) & faulty]
        for m in naming:
            assert m["first_ts"] >= lab["root_cause_ts"] >= lab["fault_ts"], (job, m["message"][:80])
            if own:
                assert m["first_ts"] > min(o["first_ts"] for o in own), (job, m["message"][:80])
    assert checked >= 3


def _error_counts(lines_by_node: dict[str, list[str]]) -> Counter:
    err = re.compile(r"ERROR|\[E\d{4}|\[E |NCCL WARN|Error|Traceback|^E\d{4} ")
    return Counter({n: sum(1 for line in lines if err.search(line)) for n, lines in lines_by_node.items()})


def test_faulty_node_is_not_always_most_errors_nor_first(fleet):
    not_top = top = not_first = 0
    for job, lab in fleet.labels.items():
        if len(lab["faulty_nodes"]) != 1:
            continue
        by_node = defaultdict(list)
        for (node, _), lines in fleet.files(job).items():
            by_node[node].extend(lines)
        counts = _error_counts(by_node)
        f = lab["faulty_nodes"][0]
        if counts[f] < max(counts.values()):
            not_top += 1
        else:
            top += 1
        skew = lab["node_clock_skew_s"]
        written = {}  # node -> first indicating line as the node's clock wrote it
        for m in lab["indicating_messages"]:
            t = datetime.fromisoformat(m["first_ts"].replace("Z", "+00:00")).timestamp()
            for n in m["nodes"]:
                written[n] = min(written.get(n, t + skew[n]), t + skew[n])
        if f not in written or any(w < written[f] for n, w in written.items() if n != f):
            not_first += 1
    assert not_top >= 3 and top >= 1 and not_first >= 2


def test_indicating_lines_have_several_levels_and_some_repeat_many_times(fleet, tmp_path):
    stats = label_stats(fleet.root)
    # (INFO-level labelled lines were NCCL's back trace until session 59, which labels it no more:
    # a straggler detector's lines are the INFO ones now, and this small fleet may have none)
    assert {"ERROR", "WARN", "NONE"} <= set(stats["line_share_by_level"])
    assert abs(sum(stats["line_share_by_level"].values()) - 1) < 1e-3
    big = simulate_fleet(tmp_path, FleetOptions(seed=8, jobs=6, failed_share=1.0, nodes=(8, 8), iterations=100,
                                                fault_kinds=("nic_link_down", "node_down", "nccl_timeout"),
                                                frameworks=("megatron",)))
    assert big.n_failed == 6
    counts = [m["count"] for p in (tmp_path / "_labels").glob("*.json") for m in json.loads(p.read_text())["indicating_messages"]]
    assert max(counts) >= 1000


# -- timestamps, skew, continuation lines, wrappers ----------------------------------------------
TIMESTAMPS = {
    "python_logging": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}",
    "megatron_seconds": r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] iteration",
    "glog_no_year": r"[EWI]\d{4} \d\d:\d\d:\d\d\.\d{6,9} ",
    "cann": r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3}",
    "us_date": r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d - ",
    "cri_rfc3339_nano": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z std(out|err) F ",
    "rfc3339_offset": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 ",
}


def test_several_timestamp_formats_and_untimestamped_continuations(fleet):
    pats = {k: re.compile(v) for k, v in TIMESTAMPS.items()}
    found = set()
    continuation = 0
    for line in fleet.all_lines():
        for k, p in pats.items():
            if k not in found and p.search(line):
                found.add(k)
        if line.startswith('  File "') or line.startswith("[rank") and ']:   File "' in line:
            continuation += 1
    assert found == set(TIMESTAMPS)
    assert continuation > 40


def test_clock_skew_is_applied_per_node():
    truth, clock = Truth(), Clock()
    t = 1_795_000_000.25
    logs = [RankLog(host="n%d" % i, ip="10.0.0.%d" % i, rank=i, local=0, pid=100, skew=skew, clock=clock, truth=truth,
                    prefix="", collector=None, c10_style=3, agent_style=3, kernel_style=None, boot=0.0)
            for i, skew in enumerate((0.0, 7.5))]
    for r in logs:
        r.pylog(t, "INFO", "x.py:1:f", "hello")
    assert logs[0].out == ["[2026-11-18 11:06:40,250] [INFO] [x.py:1:f] hello"]
    assert logs[1].out == ["[2026-11-18 11:06:47,750] [INFO] [x.py:1:f] hello"]


def test_fleet_has_skewed_nodes(fleet):
    skews = [s for lab in fleet.labels.values() for s in lab["node_clock_skew_s"].values()]
    assert any(abs(s) > 1.0 for s in skews) and any(abs(s) < 0.3 for s in skews)


WRAPPERS = {
    "none": re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[INFO\]|^[\w-]+:\d+:\d+ \[\d+\] NCCL INFO"),
    "cri": re.compile(r"^\S+Z std(out|err) F "),
    "rfc3339": re.compile(r"^\S+\+00:00 "),
    "torchrun": re.compile(r"^\[default\d+\]:"),
    "pdsh": re.compile(r"^[\w-]+: \["),
    "slurm": re.compile(r"^\d+: "),
    "cri+torchrun": re.compile(r"^\S+Z std(out|err) F \[default\d+\]:"),
}


def test_line_wrappers_vary_per_job(fleet):
    found = set()
    for job in fleet.jobs:
        for lines in list(fleet.files(job).values())[:2]:
            for line in lines[:400]:
                for k, p in WRAPPERS.items():
                    if p.search(line):
                        found.add(k)
    assert found == set(WRAPPERS)


def test_labelled_message_survives_wrappers(fleet):
    wrapped = 0
    for job, lab in fleet.labels.items():
        lines = fleet.lines(job)
        if not lab["indicating_messages"]:
            continue  # a straggler without the straggler detector logs nothing indicating
        m = lab["indicating_messages"][0]
        carrying = [line for line in lines if m["message"] in line]
        assert carrying
        wrapped += any(not line.startswith(m["message"]) for line in carrying)
    assert wrapped >= 10


# -- settings groups ----------------------------------------------------------------------------------
def _fingerprint(job: dict) -> str:
    return json.dumps(job["settings"], sort_keys=True)


def test_settings_groups_give_history_to_most_failed_jobs(fleet):
    ok = Counter(_fingerprint(d) for d in fleet.jobs.values() if d["status"] == "succeeded")
    failed = [d for d in fleet.jobs.values() if d["status"] == "failed"]
    with_history = sum(1 for d in failed if ok[_fingerprint(d)] >= 2)
    without = sum(1 for d in failed if ok[_fingerprint(d)] == 0)
    assert with_history >= len(failed) // 2 and without >= 1
    assert len(ok) >= 4


def test_noise_differs_between_groups(fleet):
    def benign_kinds(job):
        text = "\n".join(fleet.lines(job))
        keys = ("pip's dependency resolver", "Failed building wheel", "checkpoint_uploader", "Skipping corrupted sample",
                "wandb: Network error", "use_reentrant", "allocator cache flushes", "DataLoader will create")
        return frozenset(k for k in keys if k in text)
    groups = defaultdict(set)
    for job, d in fleet.jobs.items():
        if d["status"] == "succeeded":
            groups[_fingerprint(d)].add(benign_kinds(job))
    assert len({frozenset().union(*v) for v in groups.values()}) >= 3


# -- determinism, gzip, scale, CLI -------------------------------------------------------------------
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    opts = dict(jobs=6, failed_share=0.5, nodes=(2, 3), iterations=60)
    simulate_fleet(tmp_path / "a", FleetOptions(seed=11, **opts))
    simulate_fleet(tmp_path / "b", FleetOptions(seed=11, **opts))
    simulate_fleet(tmp_path / "c", FleetOptions(seed=12, **opts))
    assert _tree_hash(tmp_path / "a") == _tree_hash(tmp_path / "b")
    assert _tree_hash(tmp_path / "a") != _tree_hash(tmp_path / "c")


def test_gzip_output_is_readable_identical_and_deterministic(tmp_path):
    opts = dict(seed=4, jobs=4, failed_share=0.5, nodes=(2, 2), iterations=50)
    simulate_fleet(tmp_path / "plain", FleetOptions(**opts))
    simulate_fleet(tmp_path / "gz1", FleetOptions(gzip=True, **opts))
    simulate_fleet(tmp_path / "gz2", FleetOptions(gzip=True, **opts))
    assert _tree_hash(tmp_path / "gz1") == _tree_hash(tmp_path / "gz2")
    plain = sorted((tmp_path / "plain").glob("*/*/rank-*.log"))
    assert plain and not list((tmp_path / "gz1").glob("*/*/rank-*.log"))
    for p in plain:
        gz = tmp_path / "gz1" / p.relative_to(tmp_path / "plain").with_suffix(".log.gz")
        assert gzip.decompress(gz.read_bytes()) == p.read_bytes()


def test_large_jobs_with_few_iterations_stay_fast(tmp_path):
    t0 = time.perf_counter()
    s = simulate_fleet(tmp_path, FleetOptions(seed=1, jobs=2, failed_share=0.5, nodes=(96, 96), iterations=30,
                                              fault_kinds=("gpu_fallen_off_bus",), frameworks=("megatron",)))
    assert s.n_files == 2 * 96 * 8
    assert time.perf_counter() - t0 < 30


def test_fault_kind_and_framework_restrictions(tmp_path):
    s = simulate_fleet(tmp_path, FleetOptions(seed=2, jobs=10, failed_share=0.8, nodes=(2, 2), iterations=40,
                                              fault_kinds=("oom", "hang"), frameworks=("deepspeed",)))
    assert set(s.fault_kinds) == {"oom", "hang"} and s.n_failed == 8 and set(s.frameworks) == {"deepspeed"}
    with pytest.raises(ValueError, match="unknown fault kind 'nope'"):
        simulate_fleet(tmp_path / "x", FleetOptions(fault_kinds=("nope",)))


def test_target_bytes_scales_the_fleet(tmp_path):
    small = simulate_fleet(tmp_path / "s", FleetOptions(seed=9, jobs=6, nodes=(2, 2), target_bytes=3_000_000))
    large = simulate_fleet(tmp_path / "l", FleetOptions(seed=9, jobs=6, nodes=(2, 2), target_bytes=12_000_000))
    assert large.n_jobs == small.n_jobs == 6
    assert 2.0 < large.n_bytes / small.n_bytes < 8.0


def test_target_bytes_counts_the_per_rank_timer_blocks(tmp_path):
    """Megatron's per-rank timers print world x 3 lines after every progress line; the size
    estimate left them out, and `make bench`'s "2G" fleet came out at 8.9 GB (session 54). Six
    wide Megatron/MindSpeed jobs that all print them (seed 3) now land near the target (14.7x it
    before)."""
    options = FleetOptions(seed=3, jobs=6, nodes=(8, 8), ranks_per_node=8, frameworks=("megatron", "mindspeed"),
                           target_bytes=30_000_000)
    assert all(spec.settings.get("timing_all_ranks") for spec in plan_fleet(options))
    summary = simulate_fleet(tmp_path / "f", options)
    assert 0.5 < summary.n_bytes / 30_000_000 < 2.0


def test_cli_writes_a_fleet_and_prints_a_summary(tmp_path, capsys):
    code = cli_main(["--out", str(tmp_path / "f"), "--seed", "3", "--jobs", "5", "--nodes", "2-3", "--iterations", "40",
                     "--failed-share", "0.4", "--fault-kinds", "oom,hang", "--gzip"])
    out = capsys.readouterr().out
    assert code == 0
    assert "jobs      5 (3 succeeded, 2 failed)" in out and "MB/s" in out
    assert list((tmp_path / "f").glob("*/*/rank-*.log.gz")) and len(list((tmp_path / "f" / "_labels").glob("*.json"))) == 2


def test_parsers():
    assert parse_size("500M") == 500_000_000 and parse_size("2G") == 2_000_000_000 and parse_size("1.5GB") == 1_500_000_000
    assert parse_range("8-256") == (8, 256) and parse_range("12") == (12, 12)
    with pytest.raises(Exception):
        parse_range("9-3")
    assert template_of("[Rank {r}] x {{y}}") == "[Rank <*>] x {y}"


# -- issue #18: behaviours that blur where the fault is, and the kinds added with them ----------------
def _fleet(tmp_path: Path, name: str, **kw) -> Fleet:
    root = tmp_path / name
    return Fleet(root, simulate_fleet(root, FleetOptions(**kw)))


def _node_of(job: dict, node: str) -> int:
    return job["nodes"].index(node)


def test_original_kinds_without_behaviours_write_the_same_files_as_before(tmp_path):
    """Old seeds stay comparable: the rank files of the simulator before issue #18 (golden hash; session 19
    changed the one hccl_timeout job: CANN's EI0013 and EI0002 texts, faults.T_HCCL_*; session 21 one
    DeepSpeed launcher exit line, which quotes the last spawned command as launch.py does; session 23 the IB
    completion-error lines of jobs on NCCL >= 2.20, "with status=N opcode=N ...": 82 lines, nothing else)."""
    from l4spark.simulate.faults import BASE_KINDS
    root = tmp_path / "gold"
    simulate_fleet(root, FleetOptions(seed=5, jobs=12, failed_share=0.6, nodes=(2, 3), iterations=60, ranks_per_node=2,
                                      fault_kinds=BASE_KINDS, behaviours=()))
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "_labels" not in p.parts:
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    # the same code writes other bytes on the machine image of session 33 (Python 3.11.7, glibc 2.36,
    # numpy 2.2.6-2.4.6 alike; deterministic run to run there): the cause is not found yet, so the
    # digest of either image is accepted, and a change of the simulator's output still fails on both
    assert h.hexdigest() in {"c79a1964b880fc0eb4ee9c09055f4ef5127a929bf7ddcd1ce52e3e9e09099e17",  # sessions 19-32
                             "f0df4afb17e03291d85b8f5624172088748bba462f3f52a62917002ee162bd2c"}  # session 33's image


def test_every_rank_names_the_store_host_when_the_fault_is_elsewhere(tmp_path):
    fleet = _fleet(tmp_path, "store", seed=21, jobs=10, failed_share=1.0, nodes=(4, 4), ranks_per_node=2, iterations=80,
                   frameworks=("megatron",), fault_kinds=("gpu_ecc_error", "kernel_exec_failure", "oom", "host_oom_kill"),
                   behaviours=("store_host_retry",))
    every = 0
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        store, faulty = job["nodes"][0], lab["faulty_nodes"]
        if "store_host_retry" not in lab["behaviours"] or int(job["settings"]["torch_version"].split(".")[1]) < 4 or store in faulty:
            continue
        named = f"remote=[{store}]:29500"
        others = {key: lines for key, lines in fleet.files(job_id).items() if key[0] not in (store, *faulty)}
        if all(any(named in line for line in lines) for lines in others.values()):
            every += 1
            msgs = [m for m in lab["indicating_messages"] if named in m["message"]]
            assert msgs and set().union(*(m["nodes"] for m in msgs)) == {k[0] for k in others}
            assert not any(named in line for line in fleet.lines(job_id) if store + "]:" in line.split("addr=[")[-1][:len(store) + 2])
    assert every >= 1


def test_ranks_of_other_nodes_name_the_rank_that_signalled_the_dump(tmp_path):
    # PyTorch 2.3+: the first rank whose watchdog timed out signals a dump through the store; on
    # some nodes the ranks' dump lines name it ("from  rank N") instead of "this local rank"
    fleet = _fleet(tmp_path, "dump", seed=23, jobs=8, failed_share=1.0, nodes=(6, 6), ranks_per_node=2, iterations=80,
                   frameworks=("megatron", "deepspeed"), fault_kinds=("nccl_timeout", "hang"),
                   behaviours=("dump_signal_from_peer",))
    pattern = re.compile(r"Received a dump signal due to a collective timeout from  rank (\d+) and")
    named_jobs = 0
    for job_id, lab in fleet.labels.items():
        nodes = fleet.jobs[job_id]["nodes"]
        named = {(node, int(m.group(1))) for (node, rank), lines in fleet.files(job_id).items()
                 for line in lines if (m := pattern.search(line)) and "dump_signal_from_peer" in lab["behaviours"]}
        assert "dump_signal_from_peer" in lab["behaviours"] or not named
        if not named:
            continue
        named_jobs += 1
        signalled = {rank for _, rank in named}
        assert len(signalled) == 1  # one rank signalled the job's dump
        (first,) = signalled
        holder = next(node for (node, rank) in fleet.files(job_id) if rank == first)
        assert holder not in {node for node, _ in named} and holder not in lab["faulty_nodes"]
        assert 0 < len({node for node, _ in named}) < len(nodes) - 1  # some nodes, not all
    assert named_jobs >= 2


def test_ring_neighbours_name_each_other_one_hop_beyond_the_faulty_node(tmp_path):
    fleet = _fleet(tmp_path, "ring", seed=22, jobs=10, failed_share=1.0, nodes=(8, 8), ranks_per_node=2, iterations=80,
                   frameworks=("deepspeed", "hf_trainer"), fault_kinds=("gpu_ecc_error", "host_oom_kill", "kernel_exec_failure"),
                   behaviours=("neighbour_cascade",))
    second_hop = faulty_names = 0
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        n = len(job["nodes"])
        f = _node_of(job, lab["faulty_nodes"][0])
        files = fleet.files(job_id)
        for step in (-1, 1):  # data parallel only: the ring is the node order
            nb, beyond = (f + step) % n, (f + 2 * step) % n
            nb_host, nb_ip = job["nodes"][nb], job["node_ips"][job["nodes"][nb]]
            names_nb = re.compile(r"Got completion from peer %s<|Connection closed by remote peer %s<" % (re.escape(nb_ip), re.escape(nb_host)))
            if any(names_nb.search(line) for (host, _), lines in files.items() if host == job["nodes"][beyond] for line in lines):
                second_hop += 1
                assert any(names_nb.search(m["message"]) and job["nodes"][beyond] in m["nodes"] for m in lab["indicating_messages"])
            flushed = "Got completion from peer %s<" % nb_ip
            if any(flushed in line and ("with error 5," in line or "with status=5 " in line) for (host, _), lines in files.items() if host == lab["faulty_nodes"][0] for line in lines):
                faulty_names += 1
    assert second_hop >= 3 and faulty_names >= 3


def test_peers_time_out_before_the_stalled_node(tmp_path):
    def first_watchdog(lab, on_faulty):  # the kernel's NETDEV WATCHDOG still comes first, when collected
        return min(m["first_ts"] for m in lab["indicating_messages"] if "Watchdog caught" in m["message"]
                   and bool(set(m["nodes"]) & set(lab["faulty_nodes"])) == on_faulty)
    kw = dict(seed=23, jobs=8, failed_share=1.0, nodes=(4, 4), ranks_per_node=2, iterations=80, fault_kinds=("nccl_timeout",))
    late = _fleet(tmp_path, "late", behaviours=("peers_time_out_first",), **kw)
    early = _fleet(tmp_path, "early", behaviours=(), **kw)
    on = [lab for lab in late.labels.values() if "peers_time_out_first" in lab["behaviours"]]
    assert on and all(first_watchdog(lab, True) > first_watchdog(lab, False) for lab in on)
    assert all(first_watchdog(lab, True) < first_watchdog(lab, False) for lab in early.labels.values())


def test_subgroup_collectives_print_the_rank_within_the_data_parallel_group(tmp_path):
    """Megatron's collectives run in named sub-groups: the watchdog lines of a job with
    ``subgroup_collectives`` carry the data-parallel group's prefix and each rank's number within
    that group, which for most ranks is not its global rank."""
    fleet = _fleet(tmp_path, "pg", seed=26, jobs=6, failed_share=1.0, nodes=(6, 6), ranks_per_node=2, iterations=60,
                   frameworks=("megatron",), fault_kinds=("nccl_timeout",), behaviours=("subgroup_collectives",))
    prefix = re.compile(r"\[PG ID (\d+) PG GUID (\d+)\(DATA_PARALLEL_GROUP\) Rank (?P<r>\d+)\]")
    watchdog = re.compile(r"\[Rank (?P<r>\d+)\] Watchdog caught")
    on = 0
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        if "subgroup_collectives" not in lab["behaviours"]:
            assert not any(prefix.search(line) for line in fleet.lines(job_id))
            continue
        tp, dp = job["settings"]["tensor_parallel"], len(job["nodes"]) * 2 // (job["settings"]["tensor_parallel"]
                                                                               * job["settings"]["pipeline_parallel"])
        if dp in (1, len(job["nodes"]) * 2):
            continue
        seen = {}
        for (host, rank), lines in fleet.files(job_id).items():
            for line in lines:
                for m in (prefix.search(line), watchdog.search(line)):
                    if m:  # Megatron's order: tp, then dp
                        assert int(m.group("r")) == (rank // tp) % dp, line
                        seen[rank] = int(m.group("r"))
                m = prefix.search(line)
                assert m is None or int(m.group(1)) >= 2
        assert any(g != rank for rank, g in seen.items())
        on += 1
    assert on >= 1


def test_hccl_heartbeat_names_the_lost_devices_server_in_the_peers_ei0002(tmp_path):
    """Ascend: a peer's EI0002 goes on with HCCL's heartbeat report naming the server address of
    the faulty node, whose process exited or which dropped off the network."""
    fleet = _fleet(tmp_path, "hb", seed=29, jobs=8, failed_share=1.0, nodes=(6, 6), ranks_per_node=2, iterations=60,
                   frameworks=("mindspeed",), fault_kinds=("node_down", "host_oom_kill", "oom", "gpu_ecc_error"),
                   behaviours=("hccl_heartbeat",))
    lost = re.compile(r"serverId\[([0-9.]+)\], deviceId\[\d+\], Heartbeat Lost Occurred|"
                      r"Cluster Exception Location\[IP/ID\]:\[([0-9.]+)/\d+\]")
    on = 0
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        named = {m.group(1) or m.group(2) for line in fleet.lines(job_id) for m in [lost.search(line)] if m}
        if "hccl_heartbeat" not in lab["behaviours"]:
            assert not named
            continue
        assert named <= {job["node_ips"][lab["faulty_nodes"][0]]}, job_id
        if named:
            assert any("Heartbeat Lost" in m["message"] for m in lab["indicating_messages"])
            on += 1
    assert on >= 2


def test_hccl_notify_wait_tags_the_communicator_it_ran_in(tmp_path):
    """Ascend: a peer's EI0002 tag names the communicator of the collective, the data-parallel
    group's under ``subgroup_collectives`` (not the world's, which the init lines state), and with
    ``hccl_group_information`` the line states that communicator's size and the peer's group rank."""
    fleet = _fleet(tmp_path, "tag", seed=31, jobs=10, failed_share=1.0, nodes=(4, 4), ranks_per_node=2, iterations=60,
                   frameworks=("mindspeed",), fault_kinds=("hccl_timeout",),
                   behaviours=("subgroup_collectives", "hccl_group_information"))
    tag = re.compile(r"remote rank:? \[(\d+)\].*?tag\[AllReduce_([^\]]+)\]")
    size = re.compile(r"group information: \[group:\[([^\]]+)\].*rankSize\[(\d+)\]")
    world = re.compile(r"rankSize\[(\d+)\] commId\[([^\]]+)\]")
    kinds = Counter()
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        tp, pp = job["settings"]["tensor_parallel"], job["settings"]["pipeline_parallel"]
        dp = 8 // (tp * pp)
        lines = fleet.lines(job_id)
        worlds = {m.group(2) for m in map(world.search, lines) if m and m.group(1) == "8"}
        tags = [m for m in map(tag.search, lines) if m]
        if not tags:
            continue
        grouped = "subgroup_collectives" in lab["behaviours"] and dp not in (1, 8)
        for m in tags:
            assert (m.group(2) not in worlds) if grouped else (not worlds or m.group(2) in worlds), job_id
            if grouped:
                assert int(m.group(1)) < dp
        stated = [m for m in map(size.search, lines) if m]
        if "hccl_group_information" in lab["behaviours"]:
            assert stated and all(int(m.group(2)) == (dp if grouped else 8) for m in stated), job_id
            assert {m.group(1) for m in stated} == {m.group(2) for m in tags}
        else:
            assert not stated
        kinds[(grouped, bool(stated))] += 1
    assert kinds[(True, True)] and len(kinds) >= 2, kinds


def test_megatrons_elapsed_time_per_iteration_is_its_log_intervals_mean(tmp_path):
    """Megatron-LM's ``training_log`` divides the ``interval-time`` timer by the iterations of the
    log interval. A straggler (a step change of the pace) that began inside an interval slows s of
    its L steps, so the line closing it states about ((L - s) x the interval before + s x the
    interval after) / L (session 40 and before: the last step's time, as if the whole interval
    were slow)."""
    fleet = _fleet(tmp_path, "pace", seed=41, jobs=24, failed_share=1.0, nodes=(2, 3), ranks_per_node=2, iterations=80,
                   frameworks=("megatron",), fault_kinds=("straggler",), behaviours=())
    line = re.compile(r"iteration +(\d+)/ *\d+ \| consumed samples: +\d+ \| elapsed time per iteration \(ms\): ([0-9.]+)")
    inside = 0
    for job_id, lab in fleet.labels.items():
        stated = {int(m.group(1)): float(m.group(2)) for m in map(line.search, fleet.lines(job_id)) if m}
        its = sorted(stated)
        stride = min(b - a for a, b in zip(its, its[1:]))
        onset = lab["failure_iteration"]
        closing = next((i for i in its if i >= onset), None)
        if stride < 2 or closing is None or {closing - stride, closing + stride} - set(stated):
            continue
        slow = closing - onset + 1  # slow steps of the closing interval
        if slow >= stride:
            continue
        before, after = stated[closing - stride], stated[closing + stride]
        mean = ((stride - slow) * before + slow * after) / stride
        # nearer the interval's mean than the last step's time (noise of a step is a share of either)
        assert abs(stated[closing] - mean) < abs(stated[closing] - after), (job_id, before, stated[closing], after)
        inside += 1
    assert inside >= 3


def test_wide_clock_skew_puts_nodes_seconds_apart(tmp_path):
    kw = dict(seed=24, jobs=12, failed_share=1.0, nodes=(6, 6), ranks_per_node=2, iterations=60)
    wide = _fleet(tmp_path, "wide", behaviours=("wide_clock_skew",), **kw)
    spread = [max(s.values()) - min(s.values()) for s in (lab["node_clock_skew_s"] for lab in wide.labels.values()
                                                           if "wide_clock_skew" in lab["behaviours"])]
    assert spread
    assert all(x > 1.0 for x in spread) and sum(spread) / len(spread) > 5


def test_straggler_without_errors_is_the_rank_with_the_slowest_compute(tmp_path):
    fleet = _fleet(tmp_path, "strag", seed=25, jobs=4, failed_share=1.0, nodes=(2, 4), ranks_per_node=4, iterations=200,
                   frameworks=("megatron",), fault_kinds=("straggler",), behaviours=())
    rank_line = re.compile(r"\s{5}rank +(\d+): ([\d.]+)$")
    name_line = re.compile(r"\s{2}(forward-compute|backward-compute|all-grads-sync):$")
    elapsed = re.compile(r"iteration +(\d+)/ *\d+ \| consumed samples: +\d+ \| elapsed time per iteration \(ms\): ([\d.]+)")
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        assert lab["fault_kind"] == "straggler" and lab["failure_stage"] == "training" and len(lab["faulty_nodes"]) == 1
        lines = fleet.lines(job_id)
        assert not any("Watchdog caught" in line or "NCCL WARN" in line or "CUDA error" in line for line in lines)
        # the only tracebacks are the launcher's, cancelled by the scheduler
        assert sum("Traceback" in line for line in lines) == sum("SignalException: Process" in line for line in lines)
        times = {int(m.group(1)): float(m.group(2)) for m in map(elapsed.search, lines) if m}
        before = [v for it, v in times.items() if it < lab["failure_iteration"]]
        after = [v for it, v in times.items() if it >= lab["failure_iteration"]]
        assert before and after and min(after) > max(before)
        # per-rank timers (or the straggler detector) single out a rank on the labelled node
        slowest = Counter()
        block, name = {}, None
        for line in lines:  # wrappers (collector, torchrun, srun) precede the timer text
            n = name_line.search(line)
            if n:
                name = n.group(1)
            m = rank_line.search(line)
            if m and name == "forward-compute":
                block[int(m.group(1))] = float(m.group(2))
                if len(block) == len(job["nodes"]) * 4:
                    slowest[max(block, key=block.get)] += 1
                    block = {}
        detector = [int(re.search(r"MnRtt/Slo: [\d.]+ms/(\d+)", m["message"]).group(1)) for m in lab["indicating_messages"]]
        named = {r for r, _ in slowest.most_common(1)} | set(detector)  # before the onset the slowest rank is noise
        assert named and {job["nodes"][r // 4] for r in named} == set(lab["faulty_nodes"]), job_id


def test_megatrons_per_rank_timer_block_follows_every_progress_line(tmp_path):
    """Megatron-LM's ``training_log`` logs its timers under the progress line's own
    ``iteration % args.log_interval == 0`` (``timers.log(timers_to_log, normalizer=args.log_interval)``):
    with ``--timing-log-option all`` a ``times across ranks (ms):`` block follows every progress
    line, so a straggler that began a few log intervals before the job was stopped has blocks after
    its onset (session 49's two straggler misses had none: the blocks came every tenth line)."""
    fleet = _fleet(tmp_path, "blocks", seed=43, jobs=10, failed_share=1.0, nodes=(2, 3), ranks_per_node=2, iterations=300,
                   frameworks=("megatron", "mindspeed"), fault_kinds=("straggler",), behaviours=())
    progress = re.compile(r"iteration +(\d+)/ *\d+ \| consumed samples")
    with_blocks = 0
    for job_id, lab in fleet.labels.items():
        for lines in fleet.files(job_id).values():
            blocks = [i for i, line in enumerate(lines) if line.endswith("times across ranks (ms):")]
            if not blocks:
                continue
            with_blocks += 1
            steps = [(i, int(m.group(1))) for i, m in ((i, progress.search(line)) for i, line in enumerate(lines)) if m]
            assert len(blocks) == len(steps), job_id
            # each block right after its progress line, and the log interval at least ten
            assert all(0 < b - i <= 2 for (i, _), b in zip(steps, blocks)), job_id
            its = [it for _, it in steps]
            assert min(b - a for a, b in zip(its, its[1:])) >= 10, job_id
            assert sum(it >= lab["failure_iteration"] for it in its) >= 2, job_id
    assert with_blocks >= 3


def test_megatron_deepspeed_is_a_family_of_its_own_only_when_asked_for(tmp_path):
    """Megatron-DeepSpeed (session 50), a family no rule was written on: Megatron's arguments and
    progress lines in its own words (no date; ``consumed tokens``, ``samples per second``, ``TFLOPs``;
    a NaN loss left out), ``ds_report`` on every rank, DeepSpeed's engine step line and its
    ``global_stepN`` checkpoints between Megatron's save lines. A default fleet has none."""
    fleet = _fleet(tmp_path, "mds", seed=44, jobs=16, failed_share=0.6, nodes=(2, 3), ranks_per_node=4, iterations=300,
                   frameworks=("megatron_deepspeed",))
    progress = re.compile(r" iteration +\d+/ *\d+ \| consumed samples: +\d+ \| consumed tokens: +\d+ \| "
                          r"elapsed time per iteration \(ms\): [\d.]+ \| learning rate: [\d.]+E[-+]\d+ \|.* samples per second: "
                          r"[\d.]+ \| tokens per gpu per second \(tgs\): [\d.]+ \| TFLOPs: [\d.]+ \|$")
    kinds, nans = Counter(), 0
    for job_id, job in fleet.jobs.items():
        assert job["settings"]["framework"] == "megatron_deepspeed"
        files = fleet.files(job_id)
        world = len(files)
        reports = sum(any(line.endswith("DeepSpeed general environment info:") for line in lines) for lines in files.values())
        last = next(lines for (host, rank), lines in files.items() if rank == world - 1)
        steps = [line for line in last if progress.search(line)]
        if job["status"] == "succeeded" or fleet.labels[job_id]["failure_stage"] in ("training", "checkpoint_saving"):
            assert steps, job_id
            assert reports == world, job_id
        lab = fleet.labels.get(job_id)
        if lab:
            kinds[lab["fault_kind"]] += 1
            if lab["fault_kind"] == "loss_nan":
                # no loss from the NaN on; ``grad norm: nan`` under the pipeline engine only
                lossless = [line for line in steps if "lm loss" not in line]
                assert lossless and len(lossless) < len(steps), job_id
                pipeline = job["settings"]["pipeline_parallel"] > 1
                assert all(("grad norm: nan" in line) == pipeline for line in lossless), job_id
                nans += 1
            if lab["failure_stage"] == "checkpoint_saving" and lab["fault_kind"] != "timeout_too_low":
                assert lab["failure_iteration"], job_id
    assert len(kinds) >= 5 and nans
    default = _fleet(tmp_path, "default", seed=44, jobs=16, failed_share=0.5, nodes=(2, 3), ranks_per_node=2, iterations=60)
    assert "megatron_deepspeed" not in {job["settings"]["framework"] for job in default.jobs.values()}


def test_node_faults_added_for_issue_18_log_on_the_faulty_node(tmp_path):
    fleet = _fleet(tmp_path, "kinds", seed=26, jobs=9, failed_share=1.0, nodes=(2, 4), ranks_per_node=2, iterations=80,
                   fault_kinds=("host_oom_kill", "nic_down_init", "dataloader_bus_error"), behaviours=())
    expect = {"host_oom_kill": r"failed \(exitcode: -9\)|Out of memory: Killed process \d+ \(python3\)|exits with return code = -9|srun: error",
              "nic_down_init": r"Call to ibv_modify_qp failed with error (Network is unreachable|No such device)",
              "dataloader_bus_error": r"DataLoader worker \(pid \d+\) is killed by signal: Bus error"}
    seen = Counter()
    for job_id, lab in fleet.labels.items():
        kind = lab["fault_kind"]
        seen[kind] += 1
        pat = re.compile(expect[kind])
        on_faulty = [line for (host, _), lines in fleet.files(job_id).items() if host in lab["faulty_nodes"] for line in lines]
        assert any(pat.search(line) for line in on_faulty), job_id
        if kind == "nic_down_init":
            assert lab["failure_stage"] == "init"
    assert set(seen) == set(expect)


def test_deepspeeds_exit_line_quotes_the_last_spawned_command_whichever_rank_failed(tmp_path):
    # deepspeed/launcher/launch.py: ``logger.error(f"{cmd} exits with return code = {last_return_code}")``
    # in sigkill_handler, where ``cmd`` is left over from the loop that spawned the local ranks
    fleet = _fleet(tmp_path, "dsexit", seed=27, jobs=8, failed_share=1.0, nodes=(2, 3), ranks_per_node=4, iterations=80,
                   frameworks=("deepspeed",), fault_kinds=("host_oom_kill", "gpu_ecc_error"), behaviours=())
    quoted = Counter()
    for job_id in fleet.labels:
        for lines in fleet.files(job_id).values():
            for line in lines:
                found = re.search(r"'--local_rank=(\d+)'.* exits with return code = -?\d+", line)
                if found:
                    quoted[int(found.group(1))] += 1
    assert quoted and set(quoted) == {3}


def test_storage_failures_are_labelled_with_their_stage_and_the_saved_iteration(tmp_path):
    fleet = _fleet(tmp_path, "storage", seed=31, jobs=24, failed_share=0.7, nodes=(2, 3), ranks_per_node=2, iterations=300,
                   fault_kinds=("dataset_read_failure", "ckpt_save_shared_fs"))
    seen = set()
    for job_id, lab in fleet.labels.items():
        text = "\n".join(fleet.lines(job_id))
        errors = [m["message"] for m in lab["indicating_messages"]]
        seen.add((lab["fault_kind"], lab["framework"]))
        if lab["fault_kind"] == "dataset_read_failure":
            assert (lab["failure_stage"], lab["failure_iteration"]) == ("data_loading", None)
            assert any(m.startswith("OSError: [Errno 116] Stale file handle: '") for m in errors)
            continue
        n = lab["failure_iteration"]
        assert lab["failure_stage"] == "checkpoint_saving" and isinstance(n, int)
        # the save that failed names the iteration in the framework's own words
        named = {"megatron": r"saving checkpoint at iteration\s+%d to ", "mindspeed": r"saving checkpoint at iteration\s+%d to ",
                 "deepspeed": r"Checkpoint global_step%d is about to be saved!",
                 "hf_trainer": r"Saving model checkpoint to \S+/checkpoint-%d\b"}
        assert re.search(named[lab["framework"]] % n, text)
        assert any("[Errno 116] Stale file handle" in m or "[Errno 122] Disk quota exceeded" in m
                   or ("[Errno 2] No such file or directory" in m and "' -> '" in m) for m in errors)
        assert not re.search(r"iteration\s+%d\s*/" % (n + 1), text)  # nothing trained after the failed save
    assert {k for k, _ in seen} == {"dataset_read_failure", "ckpt_save_shared_fs"}
    assert len({f for _, f in seen}) == 4


def test_cached_dataset_groups_print_the_hf_datasets_cache_lines(tmp_path):
    fleet = _fleet(tmp_path, "cached", seed=32, jobs=16, failed_share=0.0, nodes=(2, 2), ranks_per_node=2, iterations=60,
                   frameworks=("deepspeed", "hf_trainer"))
    cached = [j for j in fleet.jobs if any(line.startswith("Loading cached processed dataset at ") for line in fleet.lines(j))]
    assert 0 < len(cached) < len(fleet.jobs)
    for job_id in cached:
        assert not any("Using custom data configuration" in line or "Loading dataset shards from" in line
                       for line in fleet.lines(job_id))
    none = _fleet(tmp_path, "plain", seed=32, jobs=16, failed_share=0.0, nodes=(2, 2), ranks_per_node=2, iterations=60,
                  frameworks=("deepspeed", "hf_trainer"), behaviours=())
    assert not any("Loading cached processed dataset" in line for line in none.all_lines())


def test_hccl_timeout_peers_say_they_waited_and_the_faulty_node_reports_its_link(tmp_path):
    """MindSpeed's hccl_timeout in the texts CANN prints (faults.T_HCCL_*): the other nodes' EI0002
    notify waits name a remote rank and match ``remote_patterns``; the faulty node's EI0013 error
    CQE names its peer's address and does not (the side whose link failed prints it)."""
    from l4spark.spatial.config import SpatialConfig

    remote = [re.compile(p) for p in SpatialConfig().remote_patterns]
    fleet = _fleet(tmp_path, "hccl", seed=27, jobs=4, failed_share=1.0, nodes=(3, 3), ranks_per_node=2, iterations=60,
                   frameworks=("mindspeed",), fault_kinds=("hccl_timeout",), behaviours=())
    for job_id, lab in fleet.labels.items():
        job, faulty = fleet.jobs[job_id], lab["faulty_nodes"]
        files = fleet.files(job_id)
        waits = [line for (host, _), lines in files.items() if host not in faulty for line in lines if "EI0002" in line]
        cqes = [line for (host, _), lines in files.items() if host in faulty for line in lines if "EI0013" in line]
        assert waits and all(any(p.search(line) for p in remote) for line in waits), job_id
        assert cqes and not any(p.search(line) for p in remote for line in cqes), job_id
        peers = {job["node_ips"][n] for n in job["nodes"] if n not in faulty}
        assert all(re.search(r"Peer information: server ([0-9.]+),", line).group(1) in peers for line in cqes)
        solution = [line for lines in files.values() for line in lines if "Solution: 1." in line]
        assert solution and all("check other ranks to see whether other errors have been reported earlier" in line
                                for line in solution)


def test_ascend_neighbours_report_an_error_cqe_once_the_links_are_up(tmp_path):
    """Session 55: HCCL sets up a link when a communicator is first used. A rank or node lost during
    training leaves its neighbours' RoCE transfers without an answer: the RoCE driver's ``error cqe``
    plog line, EI0013 naming the lost node as the peer, and torch_npu's ``HCCL_E_REMOTE``. They no
    longer print the link-establishment timeout, which real HCCL prints only while setting up a link
    (before, 1-6 jobs of each mixed fleet of sessions 50-54 with MindSpeed jobs printed it)."""
    fleet = _fleet(tmp_path, "cqe", seed=29, jobs=8, failed_share=1.0, nodes=(3, 4), ranks_per_node=2, iterations=60,
                   frameworks=("mindspeed",), fault_kinds=("node_down", "oom", "kernel_exec_failure"), behaviours=())
    named = 0
    for job_id, lab in fleet.labels.items():
        job, faulty = fleet.jobs[job_id], lab["faulty_nodes"]
        lines = [line for (host, _), rank_lines in fleet.files(job_id).items() if host not in faulty for line in rank_lines]
        assert not any("wait socket establish timeout" in line or "EI0006" in line for line in lines), job_id
        cqes = [line for line in lines if "EI0013" in line]
        if not cqes:  # no neighbour ended by itself before the job was torn down
            continue
        named += 1
        lost = {job["node_ips"][n] for n in faulty}
        assert all(re.search(r"Peer information: server ([0-9.]+),", line).group(1) in lost for line in cqes), job_id
        assert any("error cqe status: 0x15" in line for line in lines), job_id
        assert any("what():  HCCL error: HCCL_E_REMOTE: A call failed possibly due to a network error or a remote "
                   "process exiting prematurely." in line for line in lines), job_id
    assert named >= 3


def test_ascend_link_establishment_times_out_the_connect_timeout_after_the_peer_was_lost(tmp_path):
    """At ``init`` the links are not up yet: a neighbour of the node whose ranks failed waits to set
    one up and gives up HCCL_CONNECT_TIMEOUT (120 s) after its wait began, as real HCCL does
    (vllm-project/vllm-ascend#1955: ``listen ... fail`` at 03:47:57.070, ``wait socket establish
    timeout ... timeout[120]`` at 03:49:57.177). Before session 55 it came 1.5-48 s after the loss."""
    from datetime import datetime, timezone

    fleet = _fleet(tmp_path, "link", seed=31, jobs=6, failed_share=1.0, nodes=(3, 4), ranks_per_node=2, iterations=60,
                   frameworks=("mindspeed",), fault_kinds=("invalid_rank_table",), behaviours=())
    waits = []
    for job_id, lab in fleet.labels.items():
        lost = datetime.fromisoformat(lab["root_cause_ts"].replace("Z", "+00:00"))
        for line in fleet.lines(job_id):
            m = re.search(r"HCCL\(\d+,python\):(\S+) \[hccl_socket_manager.cc:778\].*wait socket establish timeout", line)
            if m:
                at = datetime.strptime(m.group(1)[:-4], "%Y-%m-%d-%H:%M:%S.%f")  # CANN's ``.mmm.uuu``, to the ms
                waits.append((at.replace(tzinfo=timezone.utc) - lost).total_seconds())
    assert len(waits) >= 3
    assert all(95 <= w <= 125 for w in waits), waits


def test_ib_completion_errors_are_worded_as_the_jobs_nccl_version_prints_them(tmp_path):
    """NCCL up to 2.19 writes "with error 12, opcode 0, len 0, ..."; from 2.20 (tag v2.20.3-1)
    "with status=12 opcode=0 len=0 ... remoteGids..." (transport/net_ib.cc; NVIDIA/nccl#1405, #1814)."""
    fleet = _fleet(tmp_path, "ibwords", seed=23, jobs=16, failed_share=1.0, nodes=(2, 3), ranks_per_node=2, iterations=60,
                   frameworks=("megatron", "deepspeed", "hf_trainer"), fault_kinds=("ib_completion_error", "nic_link_down"))
    seen = set()
    for job_id, lab in fleet.labels.items():
        version = tuple(int(x) for x in fleet.jobs[job_id]["settings"]["nccl_version"].split("+")[0].split(".")[:2])
        completions = [line for line in fleet.lines(job_id) if "Got completion from peer" in line]
        assert completions, job_id
        status = version >= (2, 20)
        assert all(("with status=" in line) == status and ("with error " in line) != status for line in completions)
        assert all(re.search(r"remoteGids::ffff:[0-9.]+$", line) for line in completions) == status
        seen.add(status)
    assert seen == {True, False}


def test_a_slurm_host_oom_kill_is_reported_by_the_nodes_stepd_and_by_srun(tmp_path):
    """Session 44: under srun, the killed task's node's slurmstepd reports its step cgroup's OOM kill
    (hafs-community/HAFS#101, chrisknewman/tusas#149) and srun reports the task "Out Of Memory",
    naming the node, on the launching node; a kernel's OOM line names the step's cgroup."""
    fleet = _fleet(tmp_path, "slurm_oom", seed=23, jobs=12, failed_share=1.0, nodes=(2, 3), ranks_per_node=2,
                   iterations=60, frameworks=("megatron",), fault_kinds=("host_oom_kill",))
    stepd = re.compile(r"^(?:.* )?slurmstepd: error: Detected 1 oom(?:-kill event\(s\) in StepId=(\d+)\.0 cgroup\. Some of your "
                       r"processes|_kill event in StepId=(\d+)\.0\. Some of the step tasks)")
    slurm = kernel = 0
    for job_id, lab in fleet.labels.items():
        job = fleet.jobs[job_id]
        if job["settings"]["launcher"] != "srun":
            assert not any("slurmstepd" in line or "Out Of Memory" in line for line in fleet.lines(job_id))
            continue
        slurm += 1
        (faulty,) = lab["faulty_nodes"]
        number = job_id.split("-")[1]  # slurm-<job number>-<model>
        reported = {node for (node, _), lines in fleet.files(job_id).items()
                    if any((m := stepd.match(line)) and number in m.groups() for line in lines)}
        assert reported == {faulty}
        rank = int(re.search(r"rank (\d+)", lab["description"]).group(1))
        assert sum(line.endswith(f"srun: error: {faulty}: task {rank}: Out Of Memory") for line in fleet.lines(job_id)) == 1
        memcg = [line for line in fleet.lines(job_id) if "task_memcg=" in line]
        assert all(f"task_memcg=/slurm/uid_0/job_{number}/step_0," in line for line in memcg)
        kernel += bool(memcg)
        assert any("slurmstepd" in m["message"] for m in lab["indicating_messages"])
    assert slurm >= 2 and kernel >= 1
