"""Fault kinds added for issue #18: a straggler without errors and node faults seen in the field.

They plug into ``faults.FaultPlan`` through its ``_prep_<kind>`` / ``_root_<kind>`` /
``_kernel_<kind>`` dispatch (``ExtraKinds`` is mixed into it) and draw only from the plan's
generator, so jobs of the original kinds are unchanged. Every message format is in
``FORMATS`` with where it was seen.

| kind | class | what the logs show |
|---|---|---|
| ``straggler`` | slowdown | nothing fails: one GPU computes 1.25-1.8x slower from an iteration on, so every iteration slows; only per-rank timers (``times across ranks (ms):``) or Megatron's straggler detector name it |
| ``host_oom_kill`` | node | the kernel's OOM killer SIGKILLs one rank (kernel lines if collected); the rank writes nothing; its agent reports ``exitcode: -9``; under srun, the node's slurmstepd reports the step cgroup's OOM kill and srun reports the task ``Out Of Memory`` |
| ``nic_down_init`` | network | one node's HCA port is down at start: its ranks fail NCCL init (``ibv_modify_qp failed``, ``unhandled system error``); bootstrap neighbours see its sockets close |
| ``dataloader_bus_error`` | node | a DataLoader worker on one node dies of SIGBUS (small ``/dev/shm`` in that node's container) |
| ``dataset_read_failure`` | storage | data loading: one node's NFS client holds a stale handle to the dataset (HF datasets' cached Arrow file, Megatron's ``.bin`` / index): ``OSError: [Errno 116] Stale file handle`` |
| ``ckpt_save_shared_fs`` | storage | checkpoint saving on the shared file system: a stale NFS handle on one node, the project's disk quota (``[Errno 122] Disk quota exceeded``), or a rename race (HF Trainer's ``tmp-checkpoint-N``, torch DCP's ``.metadata.tmp``) |

The save kinds fail during the save after iteration N; their label's ``failure_iteration`` is N,
the iteration the save names (``saving checkpoint at iteration N``, ``checkpoint-N``,
``global_stepN``).
"""

from __future__ import annotations

import random

from l4spark.simulate.behaviours import Format
from l4spark.simulate.formats import RankLog

CUDA = ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed")
ALL = CUDA + ("mindspeed",)

# kind -> (fault class, frameworks, possible stages)
EXTRA_KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "straggler": ("slowdown", ("megatron", "mindspeed", "megatron_deepspeed"), ("training",)),
    "host_oom_kill": ("node", ALL, ("training",)),
    "nic_down_init": ("network", CUDA, ("init",)),
    "dataloader_bus_error": ("node", ALL, ("data_loading", "training")),
    "dataset_read_failure": ("storage", ALL, ("data_loading",)),
    "ckpt_save_shared_fs": ("storage", ALL, ("checkpoint_saving",)),
}

FORMATS: dict[str, Format] = {
    "timers_all_head": Format("times across ranks (ms):",
                              "NVIDIA/Megatron-LM megatron/core/timers.py _get_all_ranks_time_string (--timing-log-option all)"),
    "timers_all_name": Format("  {name}:", "NVIDIA/Megatron-LM megatron/core/timers.py _get_all_ranks_time_string"),
    "timers_all_rank": Format("     rank {rank:2d}: {ms:.2f}", "NVIDIA/Megatron-LM megatron/core/timers.py _get_all_ranks_time_string"),
    "straggler_detector": Format(
        " | MnRtt/Slo: {a}ms/{sr} | MxRtt/Fst: {b}ms/{fr} | MnPwr/Slo: {pa}W/{sr} | MxPwr/Fst: {pb}W/{fr} | MnTmp/Slo: {ta}C/{sr} | MxTmp/Fst: {tb}C/{fr}",
        "NVIDIA/Megatron-LM megatron/training/training.py + megatron/core/utils.py StragglerDetector report (--log-straggler); same format as faults.slow_lines"),
    "oom_invoked": Format(
        "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
        "Linux mm/oom_kill.c dump_header (kernel log of the OOM killer)"),
    "oom_constraint": Format(
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg={memcg},task=python3,pid={pid},uid=0",
        "https://github.com/0jc1/py-autovod/issues/7 (Linux mm/oom_kill.c)"),
    "oom_killed": Format(
        "Out of memory: Killed process {pid} (python3) total-vm:{vm}kB, anon-rss:{rss}kB, file-rss:{frss}kB, shmem-rss:{shm}kB, UID:0 pgtables:{pgt}kB oom_score_adj:0",
        "https://github.com/0jc1/py-autovod/issues/7, https://github.com/openbmc/openbmc/issues/1887 (Linux mm/oom_kill.c)"),
    # Slurm's task/cgroup plugin, at the end of a step on the node whose cgroup counted OOM kills
    # (slurmstepd's error() goes to the step's output); an older release's wording, then a later one's
    "slurm_oom_step_old": Format(
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId={job}.0 cgroup. Some of your processes may have been killed by the cgroup out-of-memory handler.",
        "https://github.com/hafs-community/HAFS/issues/101, https://github.com/ArjunaCluster/ArjunaUsers/issues/52 (src/plugins/task/cgroup)"),
    "slurm_oom_step": Format(
        "slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0. Some of the step tasks have been OOM Killed.",
        "https://github.com/chrisknewman/tusas/issues/149, https://github.com/nextflow-io/nextflow/issues/5932 (src/plugins/task/cgroup)"),
    # srun, for a task whose status the node's stepd reported as OOM-killed
    "srun_task_oom": Format(
        "srun: error: {host}: task {r}: Out Of Memory",
        "https://github.com/hafs-community/HAFS/issues/101, https://github.com/snakemake/snakemake-executor-plugin-slurm/pull/371 (src/srun)"),
    "ibv_modify_qp": Format("Call to ibv_modify_qp failed with error {err}",
                            "https://github.com/NVIDIA/nccl-tests/issues/185, https://github.com/NVIDIA/nccl/issues/925 (misc/ibvwrap.cc)"),
    "nccl_trace2": Format("{src} -> 2", "NCCL call-trace lines (https://github.com/NVIDIA/nccl/issues/302)"),
    "nccl_unhandled_system": Format(
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{line}, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version {v}",
        "https://github.com/NVIDIA/nccl/issues/1657 (torch c10d NCCLUtils C10D_NCCL_CHECK)"),
    "nccl_system_error": Format(
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclErrorDetailStr"),
    "link_down": Format("mlx5_core 0000:{b}.0 ibp{n}s0: Link down", "Linux mlx5_core port state change (as faults.nic_link_down)"),
    "bus_error_worker": Format(
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "https://github.com/pytorch/pytorch/issues/5040, https://github.com/msr-fiddle/pipedream/issues/28 (torch/csrc/DataLoader.cpp SIGBUS handler)"),
    "bus_error_raised": Format(
        "RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
        "https://github.com/pytorch/pytorch/issues/108861, https://github.com/hkchengrex/STCN/issues/132 (torch/utils/data/_utils/signal_handling.py)"),
    # storage errors of the data and checkpoint stages (Python's OSError text: strerror of the errno)
    "stale_handle": Format("OSError: [Errno 116] Stale file handle: '{path}'",
                           "https://github.com/hiyouga/LlamaFactory/issues/3388 (HF datasets cache on NFS), "
                           "https://github.com/modelscope/ms-swift/issues/6695 (datasets/arrow_dataset.py), "
                           "issue #18 (stale NFS handle on one node during a checkpoint save)"),
    "disk_quota": Format("OSError: [Errno 122] Disk quota exceeded: '{path}'",
                         "Linux EDQUOT strerror as Python raises it (torch.save / open on a quota-limited project directory)"),
    "rename_race": Format("FileNotFoundError: [Errno 2] No such file or directory: '{src}' -> '{dst}'",
                          "https://github.com/huggingface/transformers/issues/27925, https://github.com/axolotl-ai-cloud/axolotl/issues/948 "
                          "(trainer.py _save_checkpoint os.rename(staging_output_dir, output_dir) on a shared file system); "
                          "torch/distributed/checkpoint/filesystem.py FileSystemWriter.finish (rename of .metadata.tmp)"),
    # HF datasets reloading a processed dataset from its cache (DeepSpeed scripts and HF Trainer)
    "found_cached": Format("Found cached dataset {name} ({dir})",
                           "huggingface/datasets src/datasets/builder.py download_and_prepare (logger.info)"),
    "loading_cached": Format("Loading cached processed dataset at {file}",
                             "huggingface/datasets src/datasets/arrow_dataset.py map (logger.info)"),
}

# frames below the data stage's call when HF datasets reads its cache, and below torch.save
_ARROW_FRAMES = (("/usr/local/lib/python3.10/dist-packages/datasets/arrow_dataset.py", 3161, "map",
                  "return Dataset.from_file(cache_file_name, info=info, split=self.split)"),
                 ("/usr/local/lib/python3.10/dist-packages/datasets/table.py", 51, "_memory_mapped_record_batch_reader_from_file",
                  "memory_mapped_stream = pa.memory_map(filename)"))
_SAVE_FRAMES = (("/usr/local/lib/python3.10/dist-packages/torch/serialization.py", 651, "save",
                 "with _open_zipfile_writer(f) as opened_zipfile:"),)


def cached_dataset_lines(r: RankLog, spec, t: float, comm_id: int) -> None:
    """HF datasets reloading the tokenized dataset from its cache (groups with ``cached_dataset``)."""
    cache = dataset_cache_dir(spec, comm_id)
    m, _ = FORMATS["found_cached"].fill(name="json", dir=cache)
    r.plain(t, m)
    m, _ = FORMATS["loading_cached"].fill(file="%s/cache-%08x.arrow" % (cache, comm_id % 0xFFFFFFFF))
    r.plain(t + 1, m)


def dataset_cache_dir(spec, comm_id: int) -> str:
    return "/mnt/hf_cache/datasets/json/default-%016x/0.0.0/%s" % (comm_id, spec.data_path.rsplit("/", 1)[-1])

# per-rank timers printed with --timing-log-option all: compute timers grow on a straggler,
# the gradient sync absorbs the others' wait
_RANK_TIMERS = (("forward-compute", 0.30), ("backward-compute", 0.55), ("all-grads-sync", 0.10))


def rank_timers_block(r: RankLog, spec, it: int, t: float, ms: float) -> None:
    """Megatron's ``times across ranks (ms):`` block for one logged iteration (logging rank only).

    ``ms`` is the iteration's elapsed time; with a straggler (``spec.fault_params['straggler']``)
    from its onset its compute timers are ``factor`` times the others', whose sync time holds the wait.
    """
    rng = random.Random(spec.seed * 31 + it)
    world = spec.layout.world
    strag = spec.fault_params.get("straggler")
    slow_rank, factor, mult = -1, 1.0, 1.0
    if strag and it >= strag["from"]:
        slow_rank, factor, mult = strag["rank"], strag["factor"], strag["mult"]
    nominal = ms / mult
    lines = [FORMATS["timers_all_head"].pattern]
    rank_fmt = FORMATS["timers_all_rank"].pattern
    for name, share in _RANK_TIMERS:
        lines.append(FORMATS["timers_all_name"].pattern.format(name=name))
        for rank in range(world):
            noise = 1 + 0.02 * rng.uniform(-1, 1)
            if name == "all-grads-sync":
                wait = 0.0 if rank == slow_rank else (factor - 1) * 0.85 * nominal
                v = nominal * share * noise + wait
            else:
                v = nominal * share * noise * (factor if rank == slow_rank else 1.0)
            lines.append(rank_fmt.format(rank=rank, ms=v))
    for line in lines:
        r.plain(t, line)


def rank_timers_bytes(world: int, ms: float = 1234.56) -> int:
    """About the bytes of one ``rank_timers_block`` of a job of ``world`` ranks (newlines included),
    from the same formats: what the fleet's size estimate counts per logged iteration."""
    head = len(FORMATS["timers_all_head"].pattern) + 1
    names = sum(len(FORMATS["timers_all_name"].pattern.format(name=name)) + 1 for name, _ in _RANK_TIMERS)
    rank_line = len(FORMATS["timers_all_rank"].pattern.format(rank=10, ms=ms)) + 1
    return head + names + len(_RANK_TIMERS) * world * rank_line


class ExtraKinds:
    """``_prep_`` / ``_root_`` / ``_kernel_`` methods of the kinds in ``EXTRA_KINDS``."""

    # -- storage: reading the dataset, writing the checkpoint ---------------------------------
    def _storage_ranks(self, node: int, share: float) -> None:
        R = self.lay.ranks_per_node
        ranks = [node * R + l for l in range(R)]
        self.root_ranks = {r: self.t_root + self.rng.uniform(0, 3) for r in ranks[: max(1, int(round(R * share)))]}

    def _prep_dataset_read_failure(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self._storage_ranks(node, self.rng.choice((0.5, 1.0)))
        self.description = "data loading: %s's NFS client held a stale handle to the dataset ([Errno 116] Stale file handle)" % self.lay.nodes[node]

    def _root_dataset_read_failure(self, r: RankLog, rng: random.Random, t: float) -> None:
        spec = self.spec
        if spec.framework in ("megatron", "mindspeed", "megatron_deepspeed"):
            path, extra = spec.data_path + ".bin", ()
        elif spec.settings.get("cached_dataset"):
            cache = dataset_cache_dir(spec, self.ctx.comm_ids[1])
            path, extra = "%s/cache-%08x.arrow" % (cache, self.ctx.comm_ids[1] % 0xFFFFFFFF), _ARROW_FRAMES
        else:
            path, extra = "%s/train-%05d-of-00064.arrow" % (spec.data_path, rng.randrange(64)), _ARROW_FRAMES[1:]
        ex, ex_t = FORMATS["stale_handle"].fill(path=path)
        self._py_exception(r, rng, t, [ex], {0: ex_t}, extra=extra)

    def _prep_ckpt_save_shared_fs(self) -> None:
        lay, spec, rng = self.lay, self.spec, self.rng
        variants = ["stale_handle", "disk_quota"] + (["rename_race"] if spec.framework not in ("deepspeed", "megatron_deepspeed") else [])
        self.save_error = rng.choice(variants)
        if self.save_error == "rename_race":
            # HF Trainer: another node's local rank 0 renamed tmp-checkpoint-N first; torch DCP: the
            # coordinator (rank 0) renames .metadata.tmp at the end of the save
            node = self._pick_node(avoid_master=True) if spec.framework == "hf_trainer" else 0
            self.faulty = [node]
            self.t_root = self.tl.end_of(self.save_iter) + 0.5 + self.tl.save_seconds * rng.uniform(0.82, 0.95)
            self.root_ranks = {node * lay.ranks_per_node: self.t_root + rng.uniform(0, 0.5)}
        else:
            node = self._pick_node()
            self.faulty = [node]
            self._storage_ranks(node, rng.choice((0.25, 0.5, 1.0)))
        what = {"stale_handle": "a stale NFS handle on %s", "disk_quota": "the project's disk quota ran out (first hit on %s)",
                "rename_race": "a rename race on the shared file system (%s lost)"}[self.save_error]
        self.description = ("checkpoint save of iteration %d failed: " % self.save_iter) + what % lay.nodes[node]

    def _root_ckpt_save_shared_fs(self, r: RankLog, rng: random.Random, t: float) -> None:
        spec, it = self.spec, self.save_iter
        if spec.framework in ("megatron", "mindspeed"):
            folder = "%s/iter_%07d" % (spec.ckpt_dir, it)
            path, src, dst = "%s/__%d_0.distcp" % (folder, r.rank), folder + "/.metadata.tmp", folder + "/.metadata"
        elif spec.framework in ("deepspeed", "megatron_deepspeed"):
            path = "%s/global_step%d/zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (spec.ckpt_dir, it, r.rank)
            src = dst = path
        else:
            path = "%s/checkpoint-%d/optimizer.pt" % (spec.ckpt_dir, it)
            src, dst = "%s/tmp-checkpoint-%d" % (spec.ckpt_dir, it), "%s/checkpoint-%d" % (spec.ckpt_dir, it)
        if self.save_error == "rename_race":
            ex, ex_t = FORMATS["rename_race"].fill(src=src, dst=dst)
            self._py_exception(r, rng, t, [ex], {0: ex_t})
        else:
            ex, ex_t = FORMATS[self.save_error].fill(path=path)
            self._py_exception(r, rng, t, [ex], {0: ex_t}, extra=_SAVE_FRAMES)

    # -- straggler --------------------------------------------------------------------------
    def _prep_straggler(self) -> None:
        import numpy as np
        tl, rng, lay = self.tl, self.rng, self.lay
        rank = rng.randrange(lay.world)
        self.faulty = [lay.node_of(rank)]
        self.propagation = "slow"
        factor = rng.uniform(1.25, 1.8)
        mult = 1 + (factor - 1) * 0.85  # compute is ~85% of an iteration
        k = self.iteration - int(tl.iters[0])
        grow = np.ones(len(tl.iters))
        grow[k:] = mult
        tl.iter_s = tl.iter_s * grow
        tl.finalize()
        self.straggler_rank = rank
        self.spec.fault_params["straggler"] = {"rank": rank, "from": self.iteration, "factor": factor, "mult": mult}
        self.iteration_end = min(int(tl.iters[-1]), self.iteration + rng.randint(30, 400))
        self.t_stop = tl.end_of(self.iteration_end) + 0.5
        self.root_ranks = {}
        self.description = "GPU of rank %d on %s computes %.2fx slower from iteration %d (no error); every iteration waits for it until the job was cancelled" % (
            rank, lay.nodes[self.faulty[0]], factor, self.iteration)

    def straggler_lines(self, r: RankLog, rng: random.Random) -> None:
        """Megatron's straggler detector (when enabled) names the slow rank on rank 0."""
        if r.rank != 0 or not self.spec.settings.get("log_straggler"):
            return
        L = self.spec.log_interval
        base = self.spec.iter_seconds * 1000
        fmt = FORMATS["straggler_detector"]
        for it in range(self.iteration - self.iteration % L + L, int(self.tl.iters[-1]) + 1, L):
            tt = self.tl.end_of(it)
            if tt >= self.t_stop:
                break
            slow = float(self.tl.iter_s[it - int(self.tl.iters[0])]) * 1000
            m, tm = fmt.fill(a="%.2f" % (base * 0.97), sr=self.straggler_rank, b="%.2f" % slow, fr=rng.randrange(self.lay.world),
                             pa=rng.randint(280, 350), pb=rng.randint(600, 700), ta=rng.randint(60, 75), tb=rng.randint(60, 75))
            self._add(tt + 0.01, r.plain, m, tmpl=tm, level=None)

    # -- host OOM killer -------------------------------------------------------------------
    def _prep_host_oom_kill(self) -> None:
        self._one_rank_dies(lag=0.05)
        self.root_signal = 9
        self.description = "the kernel OOM killer SIGKILLed rank %d on %s (host memory exhausted)" % (
            next(iter(self.root_ranks)), self.lay.nodes[self.faulty[0]])

    def _root_host_oom_kill(self, r: RankLog, rng: random.Random, t: float) -> None:
        return None  # SIGKILL: the process writes nothing

    def _kernel_host_oom_kill(self, r: RankLog, rng: random.Random) -> None:
        rank = next(iter(self.root_ranks))
        pid = r.pid + rank % self.lay.ranks_per_node
        t = self.t_root
        for i, (key, kw) in enumerate((("oom_invoked", {}),
                                       ("oom_constraint", dict(memcg=self._memcg(rng.getrandbits(32)), pid=pid)),
                                       ("oom_killed", dict(pid=pid, vm=rng.randint(10**8, 4 * 10**8), rss=rng.randint(9 * 10**7, 2 * 10**8),
                                                           frss=rng.randint(10**4, 10**6), shm=rng.randint(10**5, 10**7), pgt=rng.randint(10**5, 10**6))))):
            m, tm = FORMATS[key].fill(**kw)
            self._add(t + i * 0.001, r.kern, m, tmpl=tm)

    def _memcg(self, pod: int) -> str:
        """The killed task's memory cgroup: its pod's under Kubernetes, its step's under Slurm."""
        if self.spec.launcher == "srun":
            return "/slurm/uid_0/job_%d/step_0" % self.spec.settings["slurm_job_id"]
        return "/kubepods/pod%08x" % pod

    def slurm_step_oom(self, r: RankLog) -> None:
        """The faulty node's slurmstepd, when the step's cgroup counted the kernel's OOM kill
        (a Slurm job, ``launcher = srun``): one wording by the Slurm release the job's number
        picks, so the plan's generator is not drawn."""
        job = self.spec.settings["slurm_job_id"]
        key = "slurm_oom_step" if job % 2 else "slurm_oom_step_old"
        m, tm = FORMATS[key].fill(job=job)
        r.lplain(self.end[next(iter(self.root_ranks))] + 0.3, m, True, tmpl=tm, level="ERROR")

    # -- NIC down at init ------------------------------------------------------------------
    def _prep_nic_down_init(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self.nic = self.rng.randrange(min(8, self.lay.ranks_per_node))
        R = self.lay.ranks_per_node
        users = [node * R + l for l in range(R) if l // 2 == self.nic // 2]
        self.root_ranks = {r: self.t_root + self.rng.uniform(0.1, 2) for r in users}
        self.init_error = self.rng.choice(("Network is unreachable", "No such device"))
        self.description = "IB port of mlx5_%d on %s was down at start; its ranks failed NCCL init (%s)" % (
            self.nic, self.lay.nodes[node], self.init_error)

    def _root_nic_down_init(self, r: RankLog, rng: random.Random, t: float) -> None:
        tid = r.pid + 60 + r.local
        m, tm = FORMATS["ibv_modify_qp"].fill(err=self.init_error)
        self._add(t, r.nccl_warn, "misc/ibvwrap.cc:187", m, tid, tmpl=tm)
        # NCCL's back trace of the error code (NCCLCHECK): where it passed, not labelled
        for i, src in enumerate(("transport/net_ib.cc:1043", "transport/net.cc:690", "init.cc:1341")):
            self._add(t + 1e-4 * (i + 1), r.nccl, FORMATS["nccl_trace2"].fill(src=src)[0], tid)
        ex, ex_t = FORMATS["nccl_unhandled_system"].fill(line=1970, v=self.nccl_version)
        sys_line = FORMATS["nccl_system_error"].pattern
        self._py_exception(r, rng, t + 0.05, [ex, sys_line, "Last error:", m], {0: ex_t, 3: tm}, stage="init")

    def _kernel_nic_down_init(self, r: RankLog, rng: random.Random) -> None:
        m, tm = FORMATS["link_down"].fill(b="%02x:00" % (0x1a + 0x20 * self.nic), n=26 + 32 * self.nic)
        self._add(self.t_root - rng.uniform(5, 60), r.kern, m, tmpl=tm)

    # -- DataLoader worker bus error ---------------------------------------------------------
    def _prep_dataloader_bus_error(self) -> None:
        rank = self._one_rank_dies(lag=0.3)
        self.description = "a DataLoader worker of rank %d on %s died of SIGBUS: /dev/shm of that node's container is too small" % (
            rank, self.lay.nodes[self.faulty[0]])

    def _root_dataloader_bus_error(self, r: RankLog, rng: random.Random, t: float) -> None:
        m, tm = FORMATS["bus_error_worker"].fill()
        for i in range(rng.randint(1, 3)):  # one per worker that hit the limit
            self._add(t - 0.2 + i * 0.003, r.plain, m, True, tmpl=tm, level=None)
        ex, ex_t = FORMATS["bus_error_raised"].fill(pid=r.pid + 1000 + rng.randint(1, 400))
        self._py_exception(r, rng, t, [ex], {0: ex_t})
