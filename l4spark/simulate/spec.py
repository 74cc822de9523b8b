"""What one simulated job is (``JobSpec``) and when everything in it happens (``Timeline``).

The spec is decided by the fleet planner; the timeline is derived from it with numpy, after
the fault (if any) has bent it (a slowdown stretches iteration times, a divergence bends the
loss). Lifecycle and fault writers only read these two objects, so every rank of a job agrees
on when iterations end, when checkpoints are saved and when the fault strikes.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field

import numpy as np

from l4spark.simulate.topology import Cluster, Layout

STAGES = ("init", "data_loading", "model_loading", "training", "checkpoint_saving")


@dataclass
class JobSpec:
    job_id: str
    group_id: str
    status: str  # "succeeded" | "failed"
    framework: str  # megatron | deepspeed | hf_trainer | mindspeed | megatron_deepspeed
    framework_version: str
    model: str
    cluster: Cluster
    layout: Layout
    settings: dict
    seed: int
    start: float
    skews: list[float]
    torch_version: str
    c10_style: int
    agent_style: int
    launcher: str  # torchrun | deepspeed | srun
    wrapper: str  # none | torchrun | pdsh | slurm | cri | rfc3339 | cri+torchrun | rfc3339+slurm
    kernel_style: str | None
    nccl_debug: str  # INFO | WARN
    unbuffered: bool
    start_iter: int
    n_iter: int
    train_iters: int
    log_interval: int
    save_interval: int
    eval_interval: int
    iter_seconds: float
    global_batch: int
    micro_batch: int
    seq_len: int
    lr_max: float
    timeout_ms: int
    n_channels: int
    noise: dict[str, float]  # benign noise item -> rate (group property)
    ckpt_dir: str
    data_path: str
    fault_kind: str | None = None
    fault_params: dict = field(default_factory=dict)
    behaviours: frozenset = frozenset()  # behaviours.BEHAVIOURS switched on in this job

    @property
    def accelerator(self) -> str:
        return self.cluster.accelerator


class Timeline:
    """Absolute true times (epoch seconds) of the phases and of every iteration end."""

    def __init__(self, spec: JobSpec, rng: random.Random) -> None:
        self.spec = spec
        t = spec.start
        self.t_launch = t
        self.t_preamble_end = t + rng.uniform(4, 40)
        order = phase_order(spec.framework)
        lengths = {
            "init": rng.uniform(20, 90),
            "data_loading": rng.uniform(8, 120),
            "model_loading": rng.uniform(30, 240) if spec.start_iter else rng.uniform(15, 60),
        }
        self.phase: dict[str, tuple[float, float]] = {}
        cur = self.t_preamble_end
        for name in order:
            self.phase[name] = (cur, cur + lengths[name])
            cur += lengths[name]
        self.t_train0 = cur + rng.uniform(1, 5)
        n = spec.n_iter
        gen = np.random.default_rng(spec.seed & 0xFFFFFFFF)
        self.iter_s = spec.iter_seconds * (1 + 0.02 * gen.standard_normal(n))
        first = spec.start_iter + 1
        self.iters = np.arange(first, first + n)  # absolute iteration numbers
        warm = max(1, spec.train_iters // 100)
        prog = np.clip((self.iters - warm) / max(1, spec.train_iters - warm), 0, 1)
        self.lr = np.where(self.iters < warm, spec.lr_max * self.iters / warm,
                           spec.lr_max * (0.1 + 0.45 * (1 + np.cos(np.pi * prog))))
        self.loss = 1.7 + 2.2 * np.exp(-self.iters / (spec.train_iters * 0.08 + 50)) \
            + 0.03 * gen.standard_normal(n)
        self.grad_norm = np.abs(0.25 + 0.6 * np.exp(-self.iters / 3000) + 0.05 * gen.standard_normal(n))
        self.nan_from: int | None = None  # absolute iteration from which loss is NaN
        self.save_seconds = spec.fault_params.get("save_seconds") or rng.uniform(20, 150)
        self.eval_seconds = rng.uniform(10, 60)

    def finalize(self) -> None:
        """Cumulative iteration end times, including checkpoint saves and evaluations."""
        spec = self.spec
        extra = np.zeros(len(self.iters))
        saves = (self.iters % spec.save_interval == 0)
        evals = (self.iters % spec.eval_interval == 0)
        # time spent after iteration k (save, eval) delays the end of iteration k+1
        shift = saves * self.save_seconds + evals * self.eval_seconds
        extra[1:] = shift[:-1]
        self.t_end = self.t_train0 + np.cumsum(self.iter_s + extra)
        self.t_end_list = self.t_end.tolist()
        self.save_iters = self.iters[saves].tolist()
        self.eval_iters = self.iters[evals].tolist()
        last = self.t_end_list[-1] if len(self.iters) else self.t_train0
        self.t_train_end = last + (self.save_seconds if saves[-1:].any() else 0) + 2.0
        self.t_finish = self.t_train_end + self.save_seconds + 10

    def end_of(self, iteration: int) -> float:
        """True end time of an absolute iteration number."""
        k = iteration - int(self.iters[0]) if len(self.iters) else 0
        if k < 0:
            return self.t_train0
        return self.t_end_list[min(k, len(self.t_end_list) - 1)]

    def iter_at(self, t: float) -> int:
        """Absolute number of the iteration running at true time t."""
        k = bisect.bisect_right(self.t_end_list, t)
        return int(self.iters[0]) + k


def phase_order(framework: str) -> tuple[str, ...]:
    """Megatron-style frameworks build the model (and load the checkpoint) before the data."""
    if framework in ("megatron", "mindspeed", "megatron_deepspeed"):
        return ("init", "model_loading", "data_loading")
    return ("init", "data_loading", "model_loading")
