"""Plan a fleet of training jobs (settings groups, faults, sizes) and write it.

Planning happens first and only draws from ``random.Random`` instances derived from the seed,
so the same options give the same plan; every job is then written from its own seed, so the
same plan gives byte-identical files.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from l4spark.simulate import behaviours, noise
from l4spark.simulate.faults import BASE_KINDS, FAULT_CLASSES, FAULT_FRAMEWORKS, FAULT_KINDS, FAULT_STAGES, FaultPlan
from l4spark.simulate.formats import Clock, RankLog, Truth, iso
from l4spark.simulate.kinds_extra import rank_timers_bytes
from l4spark.simulate.lifecycle import FRAMEWORKS, PARAMS, Ctx, rank_rng
from l4spark.simulate.spec import JobSpec, Timeline
from l4spark.simulate.topology import Layout, choose_parallel, clusters_for, node_ip, pick_nodes
from l4spark.simulate.writer import JobFiles

log = logging.getLogger(__name__)

ALL_FRAMEWORKS = ("megatron", "deepspeed", "hf_trainer", "mindspeed")
# frameworks a fleet has only when asked for (``--frameworks``): the default fleets of a seed
# stay as they were. Megatron-DeepSpeed (session 50) is a family no rule was written on
OPT_IN_FRAMEWORKS = ("megatron_deepspeed",)
KNOWN_FRAMEWORKS = ALL_FRAMEWORKS + OPT_IN_FRAMEWORKS
DEFAULT_JOBS = 48


@dataclass
class FleetOptions:
    """Every knob of the simulator, with defaults that give a ~200 MB mixed fleet."""

    seed: int = 7
    jobs: int | None = None  # None: 48, or more when target_bytes asks for a much bigger fleet
    nodes: tuple[int, int] = (4, 16)  # node count range, drawn per settings group
    ranks_per_node: int = 8
    iterations: int | None = None  # None: drawn per job (600-3500)
    target_bytes: int | None = None  # stretch iteration counts (and jobs) to about this total size
    gzip: bool = False
    failed_share: float = 0.45
    fault_kinds: tuple[str, ...] | None = None  # restrict the failed jobs' kinds
    frameworks: tuple[str, ...] | None = None  # restrict the frameworks
    start_date: str = "2026-11-02"  # first job start (UTC); jobs follow over the next weeks
    behaviours: tuple[str, ...] | None = None  # behaviours.BEHAVIOURS allowed (None: all, each in its share of jobs)


@dataclass
class FleetSummary:
    n_jobs: int = 0
    n_failed: int = 0
    n_files: int = 0
    n_bytes: int = 0  # bytes written to rank files (compressed size with gzip)
    n_raw_bytes: int = 0  # uncompressed bytes of the rank files
    n_lines: int = 0
    seconds: float = 0.0
    fault_kinds: dict[str, int] = field(default_factory=dict)
    fault_classes: dict[str, int] = field(default_factory=dict)
    frameworks: dict[str, int] = field(default_factory=dict)

    @property
    def mb_per_s(self) -> float:
        return self.n_raw_bytes / 1e6 / self.seconds if self.seconds else 0.0


_MODELS = ["llama2-7b", "llama3-8b", "llama2-13b", "mixtral-8x7b", "llama3-70b", "qwen2-72b", "deepseek-67b", "gpt3-175b"]
_VERSIONS = {
    "megatron": ["core_r0.8.0", "core_r0.9.0", "core_r0.10.0"],
    "deepspeed": ["0.14.4", "0.15.1", "0.16.2"],
    "hf_trainer": ["4.44.2", "4.46.3", "4.47.1"],
    "mindspeed": ["1.0.0", "2.0.0"],
    "megatron_deepspeed": ["0.12.6", "0.14.4", "0.15.1"],  # the DeepSpeed it runs on
}
_TORCH = {"megatron": ["2.3.0", "2.4.0", "2.5.1"], "deepspeed": ["2.1.2", "2.3.1", "2.4.1"],
          "hf_trainer": ["2.2.2", "2.4.1", "2.5.1"], "mindspeed": ["2.1.0", "2.4.0"],
          "megatron_deepspeed": ["2.1.2", "2.3.1", "2.4.1"]}
_NCCL = {"2.1.2": "2.18.6+cuda12.1", "2.2.2": "2.19.3+cuda12.1", "2.3.0": "2.20.5+cuda12.4", "2.3.1": "2.20.5+cuda12.4",
         "2.4.0": "2.20.5+cuda12.4", "2.4.1": "2.20.5+cuda12.4", "2.5.1": "2.21.5+cuda12.4"}


def _parse_date(day: str) -> float:
    return float(time.mktime(time.strptime(day + " 00:00:00", "%Y-%m-%d %H:%M:%S")) - time.timezone)


def _styles(torch_version: str) -> tuple[int, int]:
    minor = int(torch_version.split(".")[1])
    c10 = 1 if minor <= 1 else (2 if minor <= 3 else 3)
    agent = 1 if minor <= 1 else (2 if minor <= 3 else 3)
    return c10, agent


@dataclass
class _Group:
    gid: str
    framework: str
    rng_seed: int
    jobs: list = field(default_factory=list)  # (status, kind)


def plan_fleet(options: FleetOptions) -> list[JobSpec]:
    """Decide every job of the fleet (no file is written)."""
    frameworks = tuple(options.frameworks or ALL_FRAMEWORKS)
    for fw in frameworks:
        if fw not in KNOWN_FRAMEWORKS:
            raise ValueError("unknown framework %r (expected one of %s)" % (fw, ", ".join(KNOWN_FRAMEWORKS)))
    kinds = [k for k in (options.fault_kinds or FAULT_KINDS)]
    for k in kinds:
        if k not in FAULT_CLASSES:
            raise ValueError("unknown fault kind %r (expected one of %s)" % (k, ", ".join(FAULT_KINDS)))
    kinds = [k for k in kinds if set(FAULT_FRAMEWORKS[k]) & set(frameworks)]
    n_jobs = options.jobs if options.jobs is not None else DEFAULT_JOBS
    specs = _plan(options, n_jobs, frameworks, kinds)
    if options.target_bytes:
        for _ in range(3):
            fixed, per_iter = _estimate(specs)
            factor = max(0.02, (options.target_bytes - fixed) / per_iter) if per_iter else 1.0
            if options.jobs is None and (factor > 6 or options.target_bytes < fixed * 0.7):
                grow = math.sqrt(max(factor, 1e-9) / 3) if factor > 6 else options.target_bytes / (fixed + per_iter)
                n_new = max(8, int(n_jobs * grow))
                if n_new != n_jobs:
                    n_jobs = n_new
                    specs = _plan(options, n_jobs, frameworks, kinds)
                    continue
            for s in specs:
                s.n_iter = max(30, int(s.n_iter * factor))
                s.train_iters = s.start_iter + s.n_iter
                _fit_intervals(s)
            break
    return specs


def _estimate(specs: list[JobSpec]) -> tuple[float, float]:
    """Approximate bytes of a fleet: (fixed part, part proportional to iterations)."""
    fixed = per_iter = 0.0
    for s in specs:
        lay = s.layout
        W = lay.world
        groups = 1 + (lay.tp > 1) + (lay.dp > 1) + (lay.pp > 1)
        rank = 2500.0
        if s.nccl_debug == "INFO" and s.accelerator == "cuda":
            rank += 700 + groups * (14 * 110 + 2 * s.n_channels * 78)
        ring = groups * s.n_channels * 4.0 * W if s.nccl_debug == "INFO" else 0
        f = W * rank + ring + 15000
        L = s.log_interval
        it = {"megatron": 330.0, "mindspeed": 330.0, "deepspeed": 430.0, "hf_trainer": 95.0, "megatron_deepspeed": 420.0}[s.framework] / L
        if s.framework == "hf_trainer" and s.settings.get("tqdm_lines"):
            it += 62
        if s.settings.get("log_timers"):
            it += 14 * 75 / (10.0 * L)
        if s.settings.get("timing_all_ranks"):
            # Megatron's per-rank timer block after every progress line: world x 3 lines. At 256
            # ranks that is 50 times the progress line, and `make bench`'s "2G" fleet came out at
            # 8.9 GB while this was left out (session 54)
            it += rank_timers_bytes(W) / L
        it += s.noise.get("zero3_flush", 0) / 1000.0 * 480 * W
        if s.framework == "deepspeed":
            it += W * 4 * 170.0 / s.save_interval
        over = {"none": 0, "torchrun": 12, "pdsh": 16, "slurm": 4, "cri": 45, "rfc3339": 30,
                "cri+torchrun": 57, "rfc3339+slurm": 34, "cri+pdsh": 61}[s.wrapper]
        scale = 1 + over / 105.0
        share = 1.0
        if s.status == "failed":
            stages = s.fault_params.get("stages", ("training",))
            share = 0.6 if "training" in stages or "checkpoint_saving" in stages else 0.0
        fixed += f * scale
        per_iter += it * scale * s.n_iter * share
    # per_iter is returned as bytes per unit of the iteration-scaling factor
    return fixed, per_iter


def _fit_intervals(s: JobSpec) -> None:
    need_save = s.fault_kind in ("ckpt_save_failure", "timeout_too_low", "ckpt_save_shared_fs")
    cap = max(10, s.n_iter // (3 if need_save else 2))
    options = [i for i in (50, 100, 200, 250, 500, 1000, 2000) if i <= cap] or [max(10, s.n_iter // 3)]
    if s.save_interval > cap or s.save_interval not in options:
        s.save_interval = options[-1] if not need_save else options[len(options) // 2]
    s.eval_interval = max(s.save_interval, min(s.eval_interval, max(s.save_interval, s.n_iter // 2)))
    s.start_iter = (s.start_iter // s.save_interval) * s.save_interval
    if s.fault_kind == "ckpt_load_failure" and s.start_iter == 0:
        s.start_iter = s.save_interval * 4
    s.train_iters = s.start_iter + s.n_iter


def _plan(options: FleetOptions, n_jobs: int, frameworks: tuple[str, ...], kinds: list[str]) -> list[JobSpec]:
    rng = random.Random(options.seed * 7_777_777 + 13)
    n_failed = min(n_jobs, max(0, int(round(n_jobs * options.failed_share))))
    if n_failed and not kinds:
        raise ValueError("no fault kind is compatible with the frameworks %s" % (frameworks,))
    n_success = n_jobs - n_failed
    # the original kinds are shuffled with the planner's stream exactly as before; kinds added
    # later are inserted from a generator of their own, so the rest of the plan keeps its draws
    order = [k for k in kinds if k in BASE_KINDS]
    rng.shuffle(order)
    order = behaviours.insert_kinds(order, [k for k in kinds if k not in BASE_KINDS], options.seed)
    failed_kinds = [order[i % len(order)] for i in range(n_failed)] if n_failed else []
    # settings groups: shared groups hold successful history for most failed jobs
    n_orphan = 0
    if n_failed:
        n_orphan = n_failed if n_success < 2 else max(1 if n_failed >= 3 else 0, int(round(0.15 * n_failed)))
    n_shared = 0 if n_success < 2 else max(1, min(n_success // 2, math.ceil((n_failed - n_orphan) / 2) or 1))
    fw_cycle = list(frameworks)
    rng.shuffle(fw_cycle)
    groups: list[_Group] = []
    for i in range(n_shared):
        groups.append(_Group("g%03d" % i, fw_cycle[i % len(fw_cycle)], rng.getrandbits(32)))
        groups[-1].jobs += [("succeeded", None), ("succeeded", None)]
    spare = n_success - 2 * n_shared
    while spare >= 4 and rng.random() < 0.6:
        size = min(spare, rng.randint(2, 5))
        g = _Group("g%03d" % len(groups), rng.choice(frameworks), rng.getrandbits(32))
        g.jobs += [("succeeded", None)] * size
        groups.append(g)
        spare -= size
    for _ in range(spare):
        target = groups[rng.randrange(len(groups))] if groups else None
        if target is None:
            target = _Group("g%03d" % len(groups), rng.choice(frameworks), rng.getrandbits(32))
            groups.append(target)
        target.jobs.append(("succeeded", None))
    orphan_kinds = set(rng.sample(range(n_failed), n_orphan)) if n_orphan else set()
    for i, kind in enumerate(failed_kinds):
        allowed = [f for f in frameworks if f in FAULT_FRAMEWORKS[kind]]
        shared = [g for g in groups[:n_shared] if g.framework in allowed]
        if i in orphan_kinds or not shared:
            g = _Group("g%03d" % len(groups), rng.choice(allowed), rng.getrandbits(32))
            groups.append(g)
        else:
            g = min(shared, key=lambda x: (sum(1 for s, _ in x.jobs if s == "failed"), x.gid))
        g.jobs.append(("failed", kind))
    # jobs, ordered by start time
    entries = [(g, status, kind) for g in groups for status, kind in g.jobs]
    rng.shuffle(entries)
    day0 = _parse_date(options.start_date)
    t = day0 + rng.uniform(0, 6 * 3600)
    group_traits = {g.gid: _group_traits(options, g) for g in groups}
    specs = []
    for seq, (g, status, kind) in enumerate(entries):
        t += rng.uniform(1800, 5 * 3600)
        specs.append(_job_spec(options, rng, seq, g, group_traits[g.gid], status, kind, t))
    return specs


def _group_traits(options: FleetOptions, g: _Group) -> dict:
    """Settings shared by every job of a group (its fingerprint) and the group's noise."""
    rng = random.Random(g.rng_seed)
    fw = g.framework
    accel = "ascend" if fw == "mindspeed" else "cuda"
    cluster = rng.choice(clusters_for(accel))
    lo, hi = options.nodes
    pow2 = [n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if lo <= n <= hi]
    n_nodes = rng.choice(pow2) if pow2 and rng.random() < 0.7 else rng.randint(lo, hi)
    n_nodes = min(n_nodes, cluster.size)
    R = options.ranks_per_node
    model = rng.choice(_MODELS)
    if fw in ("deepspeed", "hf_trainer"):
        tp, pp = 1, 1
    else:
        tp, pp = choose_parallel(rng, n_nodes, R)
    torch_version = rng.choice(_TORCH[fw])
    # (the literal draws for every framework: a framework added later draws after it, so the
    # groups of the others keep their draws)
    launcher = {"megatron": rng.choice(("torchrun", "torchrun", "srun")), "deepspeed": rng.choice(("deepspeed", "deepspeed", "torchrun")),
                "hf_trainer": "torchrun", "mindspeed": "torchrun"}.get(fw)
    if fw == "megatron_deepspeed":
        launcher = rng.choice(("deepspeed", "deepspeed", "srun"))
    settings = {
        "model": model, "framework": fw, "framework_version": rng.choice(_VERSIONS[fw]),
        "tensor_parallel": tp, "pipeline_parallel": pp, "data_parallel": n_nodes * R // (tp * pp),
        "nodes": n_nodes, "gpus_per_node": R, "accelerator": cluster.gpu,
        "image": "%s/%s:%s" % ("registry.internal/llm" if accel == "cuda" else "swr.internal/ascend",
                              {"megatron": "megatron-lm", "deepspeed": "deepspeed", "hf_trainer": "hf-train", "mindspeed": "mindspeed-llm",
                               "megatron_deepspeed": "megatron-deepspeed"}[fw],
                              "24.%02d-py3" % rng.choice((3, 5, 7, 9, 10, 12))),
        "torch_version": torch_version, "launcher": launcher,
        "global_batch_size": rng.choice((256, 512, 1024, 2048)), "micro_batch_size": rng.choice((1, 2, 4)),
        "seq_length": rng.choice((2048, 4096, 8192)),
    }
    if accel == "cuda":
        settings["nccl_version"] = _NCCL[torch_version]
        settings["fabric"] = "IB" if cluster.name != "h800-c" else "RoCE"
    else:
        settings["cann_version"] = rng.choice(("8.0.RC2", "8.0.RC3", "8.0.0"))
    if fw == "deepspeed":
        settings["zero_stage"] = rng.choice((1, 2, 3))
    if fw == "megatron_deepspeed":
        # its examples pair pipeline parallelism with ZeRO stage 0 or 1; the engine prints its
        # step line every ``steps_per_print`` steps (ds_config)
        settings["zero_stage"] = rng.choice((0, 1, 1))
        settings["steps_per_print"] = rng.choice((1, 10, 10, 100))
    hidden = {
        "cluster": cluster, "iter_seconds": _iteration_seconds(rng, model, settings), "lr_max": rng.choice((1.5e-4, 3e-4, 6e-4)),
        "nccl_debug": "INFO" if rng.random() < 0.75 else "WARN", "log_interval": rng.choice((1, 1, 5, 10)),
        "noise": noise.draw_profile(rng, fw), "log_timers": fw in ("megatron", "mindspeed", "megatron_deepspeed") and rng.random() < 0.5,
        "log_straggler": fw in ("megatron", "mindspeed") and rng.random() < 0.4,
        "tqdm_lines": fw == "hf_trainer" and rng.random() < 0.6,
        "timeout_ms": rng.choice((600000, 600000, 1800000)), "channels": rng.choice((8, 16, 16, 32)),
        "colls_per_iter": rng.choice((24, 48, 96, 130)), "timeout_op": rng.choice(("ALLREDUCE", "_REDUCE_SCATTER_BASE", "_ALLGATHER_BASE", "ALLREDUCE")),
        "timeout_numel": rng.choice((1, 1048576, 67108864, 8388608)), "wrapper": None, "kernel_style": rng.choice((None, None, "dmesg_T", "uptime", "syslog")),
        "unbuffered": rng.random() < 0.6, "nccl_env": _nccl_env(rng, settings.get("fabric")),
    }
    hidden["wrapper"] = _wrapper(rng, launcher)
    return {"settings": settings, "hidden": hidden}


def _iteration_seconds(rng: random.Random, model: str, settings: dict) -> float:
    """Seconds per iteration from the model FLOPs at a plausible achieved TFLOP/s per GPU."""
    flops = 6.0 * PARAMS[model] * settings["global_batch_size"] * settings["seq_length"]
    gpus = settings["nodes"] * settings["gpus_per_node"]
    achieved = rng.uniform(140, 420) * (0.6 if model == "mixtral-8x7b" else 1.0) * 1e12
    return min(90.0, max(0.4, flops / (gpus * achieved)))


def _nccl_env(rng: random.Random, fabric: str | None) -> list[tuple[str, str]]:
    env = [("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_TIMEOUT", str(rng.choice((18, 20, 22))))]
    if fabric == "RoCE":
        env += [("NCCL_IB_GID_INDEX", "3"), ("NCCL_IB_TC", "106")]
    if rng.random() < 0.5:
        env.append(("NCCL_IB_HCA", "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"))
    return env


def _wrapper(rng: random.Random, launcher: str) -> str:
    prefix = {"torchrun": "torchrun", "deepspeed": "pdsh", "srun": "slurm"}[launcher]
    collector = rng.choice(("none", "cri", "rfc3339", "none"))
    own = rng.random() < 0.6
    if collector == "none":
        return prefix if own else "none"
    if not own:
        return collector
    combo = "%s+%s" % (collector, prefix)
    return combo if combo in ("cri+torchrun", "rfc3339+slurm", "cri+pdsh") else collector


def _job_name(rng: random.Random, seq: int, t: float, model: str, launcher: str, wrapper: str) -> tuple[str, int]:
    day = time.strftime("%Y%m%d", time.gmtime(t))
    short = model.replace("-", "").replace("llama", "llama").replace(".", "")
    slurm_id = 4_800_000 + seq * 37 + rng.randint(0, 30)
    if launcher == "srun":
        return "slurm-%d-%s" % (slurm_id, model), slurm_id
    if wrapper.startswith("cri"):
        return "pt-%s-%s-%06x" % (model, day, rng.getrandbits(24)), slurm_id
    return "job-%s-%04d-%s" % (day, seq, short), slurm_id


def _job_spec(options: FleetOptions, rng: random.Random, seq: int, g: _Group, traits: dict,
              status: str, kind: str | None, t: float) -> JobSpec:
    settings = dict(traits["settings"])
    hid = traits["hidden"]
    cluster = hid["cluster"]
    n_nodes = settings["nodes"]
    R = options.ranks_per_node
    idx = pick_nodes(rng, cluster, n_nodes)
    nodes = [cluster.node_name(i) for i in idx]
    ips = [node_ip(cluster, i) for i in idx]
    layout = Layout(nodes, ips, R, settings["tensor_parallel"], settings["pipeline_parallel"])
    skews = []
    for _ in nodes:
        u = rng.random()
        skews.append(rng.gauss(0, 0.15) if u < 0.7 else (rng.gauss(0, 2.5) if u < 0.95 else rng.uniform(-40, 40)))
    wrapper = hid["wrapper"] if rng.random() < 0.75 else _wrapper(rng, settings["launcher"])
    job_id, slurm_id = _job_name(rng, seq, t, settings["model"], settings["launcher"], wrapper)
    n_iter = options.iterations or rng.randint(600, 3500)
    c10, agent = _styles(settings["torch_version"])
    params: dict = {}
    timeout_ms = hid["timeout_ms"]
    kernel_style = hid["kernel_style"]
    if kind:
        params["stages"] = FAULT_STAGES[kind]
        if kind == "timeout_too_low":
            timeout_ms = rng.choice((30000, 60000))
            params["save_seconds"] = timeout_ms / 1000.0 * rng.uniform(1.6, 3.0)
        if kind == "slowdown" and not hid["log_straggler"] and kernel_style is None:
            kernel_style = "dmesg_T"
    # Megatron's --timing-log-option all (per-rank timers), a group trait from a stream of its own
    timing_all = (settings["framework"] in ("megatron", "mindspeed", "megatron_deepspeed") and random.Random(g.rng_seed ^ 0x7157).random() < 0.35
                  and (options.behaviours is None or behaviours.PER_RANK_TIMERS in options.behaviours))
    if kind == "straggler" and not hid["log_straggler"]:
        timing_all = True  # a straggler is only visible through per-rank timing
    # the per-rank block (world x 3 lines) follows every progress line (``lifecycle.iteration_lines``):
    # a group that prints it logs every ten iterations or fewer
    # DeepSpeed scripts and HF Trainer reloading their tokenized dataset from the HF datasets
    # cache (a group trait, from a stream of its own)
    cached_dataset = (settings["framework"] in ("deepspeed", "hf_trainer")
                      and random.Random(g.rng_seed ^ 0xCA54E).random() < 0.5
                      and (options.behaviours is None or behaviours.CACHED_DATASET in options.behaviours))
    spec_settings = dict(settings)
    spec_settings.update({"nccl_env": hid["nccl_env"], "log_timers": hid["log_timers"], "log_straggler": hid["log_straggler"],
                          "tqdm_lines": hid["tqdm_lines"], "colls_per_iter": hid["colls_per_iter"], "timeout_op": hid["timeout_op"],
                          "timeout_numel": hid["timeout_numel"], "slurm_job_id": slurm_id, "timing_all_ranks": timing_all,
                          "cached_dataset": cached_dataset,
                          "entrypoint": {"megatron": "pretrain_gpt.py", "mindspeed": "pretrain_gpt.py",
                                         "megatron_deepspeed": "pretrain_gpt.py"}.get(settings["framework"], "train.py")})
    spec = JobSpec(
        job_id=job_id, group_id=g.gid, status=status, framework=settings["framework"],
        framework_version=settings["framework_version"], model=settings["model"], cluster=cluster, layout=layout,
        settings=spec_settings, seed=(options.seed * 1_000_003 + seq * 97 + 11) & 0x7FFFFFFFFFFF, start=t, skews=skews,
        torch_version=settings["torch_version"], c10_style=c10, agent_style=agent, launcher=settings["launcher"],
        wrapper=wrapper, kernel_style=kernel_style, nccl_debug=hid["nccl_debug"], unbuffered=hid["unbuffered"],
        start_iter=rng.choice((0, 1, 2, 5, 12, 30)) * 1000, n_iter=n_iter, train_iters=0,
        log_interval=max(hid["log_interval"], 10) if timing_all else hid["log_interval"], save_interval=rng.choice((100, 200, 250, 500, 1000)),
        eval_interval=rng.choice((500, 1000, 2000)), iter_seconds=hid["iter_seconds"],
        global_batch=settings["global_batch_size"], micro_batch=settings["micro_batch_size"], seq_len=settings["seq_length"],
        lr_max=hid["lr_max"], timeout_ms=timeout_ms, n_channels=hid["channels"], noise=hid["noise"],
        ckpt_dir="/mnt/ckpt/%s/%s" % (settings["model"], g.gid), data_path="/mnt/data/%s_text_document" % rng.choice(("pile", "redpajama_v2", "fineweb_edu", "slimpajama")),
        fault_kind=kind, fault_params=params)
    _fit_intervals(spec)
    spec.behaviours = behaviours.draw_behaviours(spec.seed, options.behaviours)
    if "wide_clock_skew" in spec.behaviours:
        spec.skews = behaviours.widen_skews(spec.skews, spec.seed)
    return spec


# -- writing --------------------------------------------------------------------------------------
def _prefix(spec: JobSpec, host: str, rank: int, local: int) -> tuple[str, str | None]:
    parts = spec.wrapper.split("+")
    collector = parts[0] if parts[0] in ("cri", "rfc3339") else None
    static = ""
    for p in parts:
        if p == "torchrun":
            static = "[default%d]:" % local
        elif p == "pdsh":
            static = "%s: " % host
        elif p == "slurm":
            static = "%d: " % rank
    return static, collector


def write_job(spec: JobSpec, files: JobFiles) -> dict:
    """Write one job's rank files and job.json; return its label (failed) and counters."""
    rng = random.Random(spec.seed)
    tl = Timeline(spec, rng)
    tl.finalize()
    ctx = Ctx(spec, tl)
    plan = FaultPlan(ctx, random.Random(spec.seed ^ 0x5EED)) if spec.status == "failed" else None
    fw = FRAMEWORKS[spec.framework](ctx)
    truth, clock = Truth(), Clock()
    lay = spec.layout
    R = lay.ranks_per_node
    boot = spec.start - rng.uniform(3600, 90 * 86400)
    n_lines = n_raw = n_bytes = 0
    base_pids = rng.sample(range(12000, 3_900_000, 64), lay.n_nodes)  # distinct per node: pids appear in labelled lines
    for ni, host in enumerate(lay.nodes):
        base_pid = base_pids[ni] + rng.randrange(0, 64 - R) if R < 64 else base_pids[ni]
        for local in range(R):
            rank = ni * R + local
            static, collector = _prefix(spec, host, rank, local)
            r = RankLog(host=host, ip=lay.ips[ni], rank=rank, local=local, pid=base_pid + local, skew=spec.skews[ni],
                        clock=clock, truth=truth, prefix=static, collector=collector, c10_style=spec.c10_style,
                        agent_style=spec.agent_style, kernel_style=spec.kernel_style, boot=boot)
            r.master = lay.nodes[0]
            rr = rank_rng(spec, rank)
            if plan is not None:
                r.until = plan.until(rank)
            fw.run(r, rr, healthy_end=plan is None)
            if plan is not None:
                plan.emit(r, rr)
            raw, written = files.write_rank(host, rank, r.out)
            n_lines += len(r.out)
            n_raw += raw
            n_bytes += written
    end = (plan.t_last + 5 if plan.propagation != "slow" else plan.t_kill + 5) if plan else tl.t_finish + 10
    job = {"job_id": spec.job_id, "status": spec.status, "settings": _public_settings(spec),
           "start_time": iso(spec.start), "end_time": iso(end), "cluster": spec.cluster.name,
           "nodes": lay.nodes, "node_ips": dict(zip(lay.nodes, lay.ips)), "group_id": spec.group_id}
    files.write_json("job.json", job)
    label = _label(spec, plan, truth) if plan else None
    return {"label": label, "n_lines": n_lines, "n_raw": n_raw, "n_bytes": n_bytes, "n_files": lay.world}


def _public_settings(spec: JobSpec) -> dict:
    keep = ("model", "framework", "framework_version", "tensor_parallel", "pipeline_parallel", "data_parallel", "nodes",
            "gpus_per_node", "accelerator", "image", "torch_version", "nccl_version", "cann_version", "fabric", "launcher",
            "global_batch_size", "micro_batch_size", "seq_length", "zero_stage")
    return {k: spec.settings[k] for k in keep if k in spec.settings}


def _label(spec: JobSpec, plan: FaultPlan, truth: Truth) -> dict:
    lay = spec.layout
    faulty = [lay.nodes[n] for n in sorted(plan.faulty)]
    msgs = []
    for msg, (tmpl, level, count, nodes, first_t) in truth.messages.items():
        if count == 0:
            log.warning("job %s: indicating message registered but never written: %r", spec.job_id, msg[:80])
            continue
        msgs.append({"message": msg, "template": tmpl, "level": level, "count": count,
                     "nodes": sorted(nodes), "first_ts": iso(first_t)})
    order = {m: i for i, m in enumerate(truth.messages)}
    msgs.sort(key=lambda m: (truth.messages[m["message"]][4], order[m["message"]]))
    firsts = [truth.first_by_node[n] for n in faulty if n in truth.first_by_node] or list(truth.first_by_node.values())
    root_ts = min(firsts) if firsts else plan.t_root
    # a failed checkpoint save fails at the iteration it saves (the save's own lines name it)
    iteration = {"training": plan.iteration, "checkpoint_saving": getattr(plan, "save_iter", None)}.get(plan.stage)
    return {
        "job_id": spec.job_id, "fault_class": plan.fault_class, "fault_kind": plan.kind, "faulty_nodes": faulty,
        "faulty_node_ips": [lay.ips[n] for n in sorted(plan.faulty)], "failure_stage": plan.stage,
        "failure_iteration": iteration, "root_cause_ts": iso(root_ts), "fault_ts": iso(min(plan.t_root, root_ts)), "description": plan.description,
        "framework": spec.framework, "node_clock_skew_s": {n: round(s, 6) for n, s in zip(lay.nodes, spec.skews)},
        "behaviours": sorted(spec.behaviours),
        "indicating_messages": msgs,
    }


def simulate_fleet(out_dir: str | Path, options: FleetOptions) -> FleetSummary:
    """Write a whole fleet under out_dir (layout in docs/simulator.md) and summarise it."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    specs = plan_fleet(options)
    summary = FleetSummary()
    for spec in specs:
        files = JobFiles(out, spec.job_id, options.gzip)
        res = write_job(spec, files)
        summary.n_jobs += 1
        summary.n_files += res["n_files"]
        summary.n_lines += res["n_lines"]
        summary.n_raw_bytes += res["n_raw"]
        summary.n_bytes += res["n_bytes"]
        summary.frameworks[spec.framework] = summary.frameworks.get(spec.framework, 0) + 1
        if res["label"] is not None:
            summary.n_failed += 1
            kind = spec.fault_kind
            summary.fault_kinds[kind] = summary.fault_kinds.get(kind, 0) + 1
            cls = FAULT_CLASSES[kind]
            summary.fault_classes[cls] = summary.fault_classes.get(cls, 0) + 1
            JobFiles.write_label(out, spec.job_id, res["label"])
        log.info("wrote %s (%s, %d files)", spec.job_id, spec.status, res["n_files"])
    summary.seconds = time.perf_counter() - t0
    return summary
