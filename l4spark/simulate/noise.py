"""Benign noise: warnings and harmless ERROR lines that successful jobs print too.

Each settings group draws its own subset of these items and its own rates (``JobSpec.noise``),
so the normal noise differs between groups and is shared by the jobs of one group. Items are
real messages of the tools named (pip, DeepSpeed's op builder, torch, NCCL, wandb, the kernel)
or close copies of platform scripts' messages. Some deliberately share a template with a
failure-indicating message (a rare c10d connect retry, a single CPU throttle event, a GID
table change) so that "this template never appears in healthy jobs" is not a safe rule.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable

from l4spark.simulate.formats import RankLog

Emit = Callable[[RankLog, random.Random, float], None]


@dataclass(frozen=True)
class NoiseItem:
    phase: str  # preamble | init | data_loading | model_loading | training | end
    who: str  # all | rank0 | local0 | last
    frameworks: tuple[str, ...]  # empty: every framework
    emit: Emit
    kind: str = "once"  # once: probability per process; rate: expected count per 1000 iterations (or per phase)


def poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, int(round(rng.gauss(lam, math.sqrt(lam)))))
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _pip_resolver(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. This behaviour is the source of the following dependency conflicts.", True)
    r.plain(t, "torchvision 0.18.0 requires torch==2.3.0, but you have torch 2.3.1 which is incompatible.", True)
    r.plain(t, "Successfully installed accelerate-0.33.0 sentencepiece-0.2.0 tiktoken-0.7.0")


def _wheel_error(r: RankLog, rng: random.Random, t: float) -> None:
    for line in ("  error: subprocess-exited-with-error", "  ", "  × Building wheel for flash-attn (setup.py) did not run successfully.",
                 "  │ exit code: 1", "  ╰─> [6 lines of output]", "      fatal: not a git repository (or any of the parent directories): .git",
                 "      torch.__version__  = 2.3.1+cu121", "      error: [Errno 2] No such file or directory: 'nvcc'", "      [end of output]", "  ",
                 "  note: This error originates from a subprocess, and is likely not a problem with pip.",
                 "  ERROR: Failed building wheel for flash-attn", "  Running setup.py clean for flash-attn",
                 "Failed to build flash-attn", "ERROR: Could not build wheels for flash-attn, which is required to install pyproject.toml-based projects",
                 "WARNING: flash-attn could not be built; falling back to the prebuilt flash-attn in the image"):
        r.plain(t, line, True)
        t += 0.001


def _apt(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "debconf: delaying package configuration, since apt-utils is not installed", True)


def _ds_op_builder(r: RankLog, rng: random.Random, t: float) -> None:
    for msg in ("async_io requires the dev libaio .so object and headers but these were not found.",
                "async_io: please install the libaio-dev package with apt",
                "If libaio is already installed (perhaps from source), try setting the CFLAGS and LDFLAGS environment variables to where it can be found.",
                "Please specify the CUTLASS repo directory as environment variable $CUTLASS_PATH",
                "sparse_attn requires a torch version >= 1.5 and < 2.0 but detected 2.3",
                "using untested triton version (2.3.1), only 1.0.0 is known to be compatible"):
        r.ds_bare(t, "WARNING", msg)


def _future_allgather(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py:83: FutureWarning: `torch.distributed._all_gather_base` is a private function and will be deprecated. Please use `torch.distributed.all_gather_into_tensor` instead.", True)
    r.plain(t, "  return func(*args, **kwargs)", True)


def _custom_fwd(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "/workspace/Megatron-LM/megatron/core/tensor_parallel/layers.py:290: FutureWarning: `torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., device_type='cuda')` instead.", True)
    r.plain(t, "  def forward(", True)


def _barrier_device(r: RankLog, rng: random.Random, t: float) -> None:
    r.c10(t, "W", "ProcessGroupNCCL.cpp:4115", "[PG 0 Rank %d]  using GPU %d to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.Specify device_ids in barrier() to force use of a particular device,or call init_process_group() with a device_id." % (r.rank, r.local))


def _socket_retry(r: RankLog, rng: random.Random, t: float) -> None:
    master = r.truth_master if hasattr(r, "truth_master") else "localhost"
    r.c10(t, "W", "socket.cpp:697", "[c10d] The client socket has failed to connect to [%s]:29500 (errno: 99 - Cannot assign requested address)." % master)


def _dataloader_workers(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of worker in current system is 12, which is smaller than what this DataLoader is going to create. Please be aware that excessive worker creation might get DataLoader running slow or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.", True)
    r.plain(t, "  warnings.warn(_create_warning_msg(", True)


def _token_length(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "Token indices sequence length is longer than the specified maximum sequence length for this model (%d > 8192). Running this sequence through the model will result in indexing errors" % rng.randint(8193, 40000), True)


def _use_cache(r: RankLog, rng: random.Random, t: float) -> None:
    r.hf(t, "WARNING", "logging.py:329", "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.")


def _te_warning(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "/usr/local/lib/python3.10/dist-packages/transformer_engine/pytorch/attention.py:4977: UserWarning: window_size should be (-1, -1) or (>=0, >=0) for attn_mask_type=causal", True)
    r.plain(t, "  warnings.warn(", True)


def _use_reentrant(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details on the differences between the two variants.", True)
    r.plain(t, "  warnings.warn(", True)


def _grad_strides(r: RankLog, rng: random.Random, t: float) -> None:
    r.c10(t, "W", "reducer.cpp:1300", "Warning: Grad strides do not match bucket view strides. This may indicate grad was not created according to the gradient layout contract, or that the param's strides changed since DDP was constructed.  This is not an error, but may impair performance.")


def _ascend_owner(r: RankLog, rng: random.Random, t: float) -> None:
    r.c10(t, "W", "compiler_depend.ts:164", "Warning: Warning: Device do not support double dtype now, dtype cast repalce with float. (function operator())")


def _gid_change(r: RankLog, rng: random.Random, t: float) -> None:
    r.nccl_warn(t, "transport/net_ib.cc:103", "NET/IB : mlx5_%d:1 Got async event : GID table change" % (r.local % 8), r.pid + 201)


def _kernel_perf(r: RankLog, rng: random.Random, t: float) -> None:
    r.kern(t, "perf: interrupt took too long (%d > %d), lowering kernel.perf_event_max_sample_rate to %d" % (rng.randint(2501, 3200), 2500, rng.choice((79750, 63750, 50000))))


def _kernel_mce(r: RankLog, rng: random.Random, t: float) -> None:
    cpu = rng.randint(0, 95)
    r.kern(t, "mce: CPU%d: Core temperature above threshold, cpu clock throttled (total events = %d)" % (cpu, rng.randint(1, 3)))
    r.kern(t + 0.01, "mce: CPU%d: Core temperature/speed normal" % cpu)


def _upload_retry(r: RankLog, rng: random.Random, t: float) -> None:
    n = rng.randint(1, 3)
    shard = "__%d_%d.distcp" % (rng.randint(0, 63), rng.randint(0, 1))
    for attempt in range(1, n + 1):
        r.pylog(t, "ERROR", "checkpoint_uploader.py:211:_upload",
                "upload of %s to s3://ckpt-bucket/%s failed (attempt %d/5): ReadTimeoutError: Read timed out. (read timeout=60); retrying in %ds" % (shard, r.host.split("-")[0], attempt, 2 ** attempt))
        t += 2 ** attempt + 0.5
    r.pylog(t, "INFO", "checkpoint_uploader.py:219:_upload", "upload of %s succeeded on attempt %d" % (shard, n + 1))


def _bad_sample(r: RankLog, rng: random.Random, t: float) -> None:
    r.basic(t, "ERROR", "root", "Skipping corrupted sample %d in shard /data/shards/part-%05d.jsonl: UnicodeDecodeError: 'utf-8' codec can't decode byte 0x%02x in position %d: invalid start byte" % (
        rng.randint(0, 10**7), rng.randint(0, 4095), rng.randint(0x80, 0xff), rng.randint(0, 4000)))


def _wandb(r: RankLog, rng: random.Random, t: float) -> None:
    r.plain(t, "wandb: Network error (ReadTimeout), entering retry loop.", True)


_ZERO3 = ["%d pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is detrimental to performance. if this is happening frequently consider adjusting settings to reduce memory consumption. If you are unable to make the cache flushes go away consider adding get_accelerator().empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time" % n for n in (1, 1, 1, 2, 3, 4)]


def _zero3_flush(r: RankLog, rng: random.Random, t: float) -> None:
    r.pylog(t, "WARNING", "stage3.py:2069:step", _ZERO3[int(rng.random() * 6)])


def _driver_shutdown(r: RankLog, rng: random.Random, t: float) -> None:
    r.c10(t, "W", "CUDAGuardImpl.h:119", "Warning: CUDA warning: driver shutting down (function uncheckedGetDevice)")


NOISE: dict[str, NoiseItem] = {
    "pip_resolver_error": NoiseItem("preamble", "local0", (), _pip_resolver),
    "wheel_build_error": NoiseItem("preamble", "local0", ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed"), _wheel_error),
    "apt_utils": NoiseItem("preamble", "local0", (), _apt),
    "ds_op_builder": NoiseItem("init", "all", ("deepspeed", "megatron_deepspeed"), _ds_op_builder),
    "future_allgather": NoiseItem("init", "all", ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed"), _future_allgather),
    "barrier_device": NoiseItem("init", "all", ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed"), _barrier_device),
    "socket_retry": NoiseItem("init", "all", (), _socket_retry, "rate"),
    "ascend_double_dtype": NoiseItem("init", "all", ("mindspeed",), _ascend_owner),
    "dataloader_workers": NoiseItem("data_loading", "all", (), _dataloader_workers),
    "token_length": NoiseItem("data_loading", "local0", (), _token_length, "rate"),
    "custom_fwd": NoiseItem("model_loading", "all", ("megatron",), _custom_fwd),
    "use_cache": NoiseItem("model_loading", "all", ("hf_trainer",), _use_cache),
    "te_window": NoiseItem("model_loading", "all", ("megatron",), _te_warning),
    "use_reentrant": NoiseItem("model_loading", "all", ("hf_trainer", "deepspeed"), _use_reentrant),
    "grad_strides": NoiseItem("model_loading", "all", ("hf_trainer",), _grad_strides),
    "gid_change": NoiseItem("training", "all", ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed"), _gid_change, "rate"),
    "kernel_perf": NoiseItem("training", "local0", (), _kernel_perf, "rate"),
    "kernel_mce": NoiseItem("training", "local0", (), _kernel_mce, "rate"),
    "upload_retry": NoiseItem("training", "rank0", (), _upload_retry, "rate"),
    "bad_sample": NoiseItem("training", "all", (), _bad_sample, "rate"),
    "wandb_retry": NoiseItem("training", "rank0", (), _wandb, "rate"),
    "zero3_flush": NoiseItem("training", "all", ("deepspeed",), _zero3_flush, "rate"),
    "driver_shutdown": NoiseItem("end", "all", ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed"), _driver_shutdown),
}

# (probability a group has the item, low, high): "once" items draw a per-process probability,
# "rate" items a rate per 1000 iterations (training) or an expected count per phase.
_PROFILE = {
    "pip_resolver_error": (0.5, 1.0, 1.0), "wheel_build_error": (0.3, 1.0, 1.0), "apt_utils": (0.4, 1.0, 1.0),
    "ds_op_builder": (0.9, 1.0, 1.0), "future_allgather": (0.6, 1.0, 1.0), "barrier_device": (0.7, 1.0, 1.0),
    "socket_retry": (0.3, 0.02, 0.2), "ascend_double_dtype": (0.8, 1.0, 1.0), "dataloader_workers": (0.4, 1.0, 1.0),
    "token_length": (0.5, 0.5, 3.0), "custom_fwd": (0.6, 1.0, 1.0), "use_cache": (0.8, 1.0, 1.0),
    "te_window": (0.4, 1.0, 1.0), "use_reentrant": (0.6, 1.0, 1.0), "grad_strides": (0.3, 0.3, 1.0),
    "gid_change": (0.25, 0.005, 0.05), "kernel_perf": (0.5, 0.5, 4.0), "kernel_mce": (0.3, 0.2, 1.5),
    "upload_retry": (0.5, 2.0, 20.0), "bad_sample": (0.3, 0.05, 1.0), "wandb_retry": (0.3, 0.5, 5.0),
    "zero3_flush": (0.5, 100.0, 900.0), "driver_shutdown": (0.3, 0.05, 0.4),
}


def draw_profile(rng: random.Random, framework: str) -> dict[str, float]:
    """The noise items of one settings group, with their rates."""
    profile = {}
    for name, item in NOISE.items():
        if item.frameworks and framework not in item.frameworks:
            continue
        share, low, high = _PROFILE[name]
        if rng.random() < share:
            profile[name] = round(math.exp(rng.uniform(math.log(low), math.log(high))), 4) if low != high else low
    return profile


def _applies(item: NoiseItem, r: RankLog, world: int) -> bool:
    who = item.who
    return (who == "all" or (who == "rank0" and r.rank == 0) or (who == "local0" and r.local == 0)
            or (who == "last" and r.rank == world - 1))


def emit_phase(ctx, r: RankLog, rng: random.Random, phase: str, t0: float, t1: float) -> None:
    """Noise of a non-training phase, at random times inside [t0, t1)."""
    world = ctx.spec.layout.world
    due = []
    for name, rate in ctx.spec.noise.items():
        item = NOISE[name]
        if item.phase != phase or not _applies(item, r, world):
            continue
        n = (1 if rng.random() < rate else 0) if item.kind == "once" else poisson(rng, rate)
        due.extend((rng.uniform(t0, max(t0, t1 - 0.5)), len(due), item.emit) for _ in range(n))
    for t, _, emit in sorted(due, key=lambda d: (d[0], d[1])):
        emit(r, rng, t)


def train_events(ctx, r: RankLog, rng: random.Random, first: int, last: int) -> list[tuple[int, Emit]]:
    """Training-phase noise of this rank: (iteration, writer) pairs."""
    if last < first:
        return []
    world = ctx.spec.layout.world
    events: list[tuple[int, Emit]] = []
    n_iter = last - first + 1
    for name, rate in ctx.spec.noise.items():
        item = NOISE[name]
        if item.phase != "training" or not _applies(item, r, world):
            continue
        rnd = rng.random
        emit = item.emit
        events.extend([(first + int(rnd() * n_iter), emit) for _ in range(poisson(rng, rate * n_iter / 1000.0))])
    events.sort(key=lambda e: e[0])
    return events
