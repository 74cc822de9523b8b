"""Healthy lifecycle of a rank, per framework: launch, init, data, model, iterations, saves, exit.

Each framework class writes the lines its real counterpart prints, on the ranks that print
them: Megatron prints iteration and timer lines on the last rank only, saves on rank 0, memory
reports on data-parallel rank 0; DeepSpeed's ``log_dist`` prints on rank 0 while checkpoint
shards are logged by every rank; HF Trainer logs from the world's process zero. Lines after a
rank's ``until`` time (set by the fault) are dropped by ``RankLog.put``.
"""

from __future__ import annotations

import bisect
import random

from l4spark.simulate import noise
from l4spark.simulate.formats import RankLog
from l4spark.simulate.kinds_extra import cached_dataset_lines, rank_timers_block
from l4spark.simulate.spec import JobSpec, Timeline

_ARGS = [
    "accumulate_allreduce_grads_in_fp32", "adam_beta1", "adam_beta2", "adam_eps", "attention_dropout",
    "attention_softmax_in_fp32", "bf16", "bias_swiglu_fusion", "clip_grad", "context_parallel_size",
    "data_path", "distributed_backend", "distributed_timeout_minutes", "eval_interval", "eval_iters",
    "ffn_hidden_size", "global_batch_size", "group_query_attention", "hidden_dropout", "hidden_size",
    "init_method_std", "load", "log_interval", "lr", "lr_decay_style", "lr_warmup_iters", "make_vocab_size_divisible_by",
    "micro_batch_size", "min_lr", "normalization", "num_attention_heads", "num_layers", "num_query_groups",
    "optimizer", "overlap_grad_reduce", "pipeline_model_parallel_size", "position_embedding_type", "save",
    "save_interval", "seed", "seq_length", "sequence_parallel", "swiglu", "tensor_model_parallel_size",
    "tokenizer_type", "train_iters", "transformer_impl", "untie_embeddings_and_output_weights",
    "use_distributed_optimizer", "use_flash_attn", "use_mcore_models", "weight_decay", "world_size",
]


PARAMS = {"llama2-7b": 6_738_415_616, "llama2-13b": 13_015_864_320, "llama3-8b": 8_030_261_248,
          "llama3-70b": 70_553_706_496, "gpt3-175b": 174_591_676_416, "mixtral-8x7b": 46_702_792_704,
          "qwen2-72b": 72_706_203_648, "deepseek-67b": 67_413_958_656}


class Ctx:
    """Per-job facts shared by all ranks while a job is written."""

    def __init__(self, spec: JobSpec, tl: Timeline) -> None:
        self.spec = spec
        self.tl = tl
        lay = spec.layout
        self.master = lay.nodes[0]
        self.master_ip = lay.ips[0]
        self.n_params = PARAMS.get(spec.model, 7_000_000_000)
        self.comm_ids = [random.Random(spec.seed + i).getrandbits(64) for i in range(4)]
        self.local_counts: dict[tuple, int] = {}
        # the checkout's short hash and the node's /dev/shm, from a stream of their own (the
        # draws of every other line stay as they were)
        own = random.Random(spec.seed ^ 0x6D5D5)
        self.git_hash = "%07x" % own.getrandbits(28)
        self.shm_gb = own.choice((503.77, 1007.78, 251.53))


def rank_rng(spec: JobSpec, rank: int, salt: int = 0) -> random.Random:
    return random.Random(spec.seed * 1_000_003 + rank * 7919 + salt)


def engine_config_lines(r: RankLog, t: float, items) -> None:
    """DeepSpeed's ``DeepSpeedEngine configuration:`` block (runtime/config.py ``print``): one
    ``  key .... value`` line per (key, value), a value's further lines as they are."""
    r.pylog(t, "INFO", "config.py:997:print", "DeepSpeedEngine configuration:")
    for key, val in items:
        lines = val.split("\n")
        r.pylog(t, "INFO", "config.py:1001:print", "  %s %s" % (key.ljust(30), lines[0]))
        for extra in lines[1:]:
            r.plain(t, extra)


def engine_load_lines(r: RankLog, spec: JobSpec, loading: float, loaded: float, t1: float, parts: int) -> None:
    """DeepSpeed's ``engine.load_checkpoint`` of step ``spec.start_iter``: rank 0 reads the model
    states (``loading`` to ``loaded``), every rank its ``parts`` ZeRO partitions before ``t1``; on
    a fresh start (no step) rank 0's warning that no ``latest`` file exists, at ``loading``."""
    if spec.start_iter:
        tag = "global_step%d" % spec.start_iter
        if r.rank == 0:
            r.pylog(loading, "INFO", "torch_checkpoint_engine.py:27:load", "[Torch] Loading checkpoint from %s/%s/mp_rank_00_model_states.pt..." % (spec.ckpt_dir, tag))
            r.pylog(loaded, "INFO", "torch_checkpoint_engine.py:29:load", "[Torch] Loaded checkpoint from %s/%s/mp_rank_00_model_states.pt." % (spec.ckpt_dir, tag))
        r.pylog(t1 - 8 + 0.002 * r.rank, "INFO", "engine.py:3014:_get_all_zero_checkpoint_state_dicts", "successfully read %d ZeRO state_dicts for rank %d" % (parts, r.rank))
        r.pylog(t1 - 6 + 0.002 * r.rank, "INFO", "engine.py:2964:_load_zero_checkpoint", "loading %d zero partition checkpoints for rank %d" % (parts, r.rank))
    elif r.rank == 0:
        r.pylog(loading, "WARNING", "engine.py:2760:load_checkpoint", "Unable to find latest file at %s/latest, if trying to load latest checkpoint please ensure this file exists or pass an explicit checkpoint tag when loading a checkpoint." % spec.ckpt_dir)


def zero_shard_save_lines(r: RankLog, saving: float, saved: float, ready: float, shard: str, tag: str) -> None:
    """A rank's ZeRO shard written by DeepSpeed's torch checkpoint engine, and the tag committed."""
    r.pylog(saving, "INFO", "torch_checkpoint_engine.py:21:save", "[Torch] Saving %s..." % shard)
    r.pylog(saved, "INFO", "torch_checkpoint_engine.py:23:save", "[Torch] Saved %s." % shard)
    r.pylog(saved, "INFO", "engine.py:3536:_save_zero_checkpoint", "zero checkpoint saved %s" % shard)
    r.pylog(ready, "INFO", "torch_checkpoint_engine.py:33:commit", "[Torch] Checkpoint %s is ready now!" % tag)


class Framework:
    """Lines common to the CUDA frameworks; subclasses add their own phases."""

    ckpt_phase_name = "model_loading"

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.spec = ctx.spec
        self.tl = ctx.tl

    # -- roles --------------------------------------------------------------------------------
    def logs_iterations(self, rank: int) -> bool:
        return rank == 0

    def run(self, r: RankLog, rng: random.Random, healthy_end: bool) -> None:
        spec, tl = self.spec, self.tl
        if r.local == 0:
            self.preamble(r, rng)
        for name, (t0, t1) in tl.phase.items():
            getattr(self, "phase_" + name)(r, rng, t0, t1)
            noise.emit_phase(self.ctx, r, rng, name, t0, t1)
        self.train(r, rng)
        if healthy_end:
            self.shutdown(r, rng)

    # -- launcher -----------------------------------------------------------------------------
    def preamble(self, r: RankLog, rng: random.Random) -> None:
        spec, t = self.spec, self.tl.t_launch
        pre, r.pre = r.pre, r.pre_launcher
        noise.emit_phase(self.ctx, r, rng, "preamble", t, self.tl.t_preamble_end)
        r.pre = pre
        t = self.tl.t_preamble_end - 2.0
        lay = spec.layout
        if spec.launcher == "torchrun":
            if spec.agent_style >= 3:
                r.agent(t, "W", "torch/distributed/run.py:793", "torch.distributed.run", "")
                r.agent(t, "W", "torch/distributed/run.py:793", "torch.distributed.run", "*****************************************")
                r.agent(t, "W", "torch/distributed/run.py:793", "torch.distributed.run",
                        "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ")
                r.agent(t, "W", "torch/distributed/run.py:793", "torch.distributed.run", "*****************************************")
            else:
                r.agent(t, "W", "run.py:757", "torch.distributed.run", "")
                r.lplain(t, "*****************************************")
                r.lplain(t, "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ")
                r.lplain(t, "*****************************************")
        elif spec.launcher == "deepspeed":
            hosts = ", ".join("'%s': [%s]" % (n, ", ".join(str(i) for i in range(lay.ranks_per_node))) for n in lay.nodes[:64])
            r.pylog(t, "INFO", "launch.py:146:main", "WORLD INFO DICT: {%s}" % hosts)
            r.pylog(t, "INFO", "launch.py:152:main", "nnodes=%d, num_local_procs=%d, node_rank=%d" % (lay.n_nodes, lay.ranks_per_node, r.rank // lay.ranks_per_node))
            r.pylog(t, "INFO", "launch.py:164:main", "dist_world_size=%d" % lay.world)
            r.pylog(t, "INFO", "launch.py:166:main", "Setting CUDA_VISIBLE_DEVICES=%s" % ",".join(str(i) for i in range(lay.ranks_per_node)))
            for i in range(lay.ranks_per_node):
                r.pylog(t + 0.01 * i, "INFO", "launch.py:256:main",
                        "process %d spawned with command: %s" % (r.pid + i, self.spawn_command(i)))

    def spawn_command(self, local: int) -> str:
        """The command the deepspeed launcher spawns for a local rank (launch.py ``cmd``)."""
        if self.spec.framework == "megatron_deepspeed":
            return "['/usr/bin/python', '-u', 'pretrain_gpt.py', '--local_rank=%d', '--deepspeed', '--deepspeed_config', 'ds_config.json']" % local
        return "['/usr/bin/python', '-u', 'train.py', '--local_rank=%d', '--deepspeed_config', 'ds_config.json']" % local

    # -- NCCL ---------------------------------------------------------------------------------
    def nccl_init(self, r: RankLog, rng: random.Random, t: float, t1: float) -> None:
        spec = self.spec
        if spec.nccl_debug != "INFO":
            return
        lay = spec.layout
        pid = r.pid
        tid = pid + 180 + r.local
        dev = r.local
        r.nccl(t, "Bootstrap : Using eth0:%s<0>" % r.ip, pid)
        r.nccl(t, "NET/Plugin: No plugin found (libnccl-net.so)", pid)
        r.nccl(t, "NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so", pid)
        r.nccl(t, "NET/Plugin: Using internal network plugin.", pid)
        r.nccl(t, "cudaDriverVersion %s" % spec.settings.get("cuda_driver", "12040"), pid)
        if r.rank == 0:
            r.nccl(t, "NCCL version %s" % spec.settings["nccl_version"], pid)
        for env in spec.settings.get("nccl_env", ()):
            r.nccl(t, "%s set by environment to %s" % env, tid)
        hcas = " ".join("[%d]mlx5_%d:1/%s" % (i, i, spec.settings["fabric"]) for i in range(min(8, lay.ranks_per_node)))
        r.nccl(t, "NET/IB : Using %s ; OOB eth0:%s<0>" % (hcas, r.ip), tid)
        r.nccl(t, "Using non-device net plugin version 0", tid)
        r.nccl(t, "Using network IB", tid)
        tp, dp, pp = lay.coords(r.rank)
        groups = [("world", list(range(lay.world)))]
        if lay.tp > 1:
            base = r.rank - tp
            groups.append(("tp", list(range(base, base + lay.tp))))
        if lay.dp > 1:
            groups.append(("dp", [pp * lay.tp * lay.dp + d * lay.tp + tp for d in range(lay.dp)]))
        if lay.pp > 1:
            groups.append(("pp", [p * lay.tp * lay.dp + dp * lay.tp + tp for p in range(lay.pp)]))
        ch = spec.n_channels
        span = (t1 - t) / (len(groups) + 1)
        R = lay.ranks_per_node
        node = r.rank // R
        head = "%s:%d:%d [%d] NCCL INFO " % (r.host, pid, tid, dev)
        nvls = "H100" in spec.cluster.gpu or "H800" in spec.cluster.gpu
        for gi, (gname, members) in enumerate(groups):
            tc = t + span * (gi + 1)
            n = len(members)
            me = r.rank if gname == "world" else members.index(r.rank)
            comm = "0x%x" % (0x55d4a0000000 + (r.pid * 977 + gi * 4099) % 0xfffffff)
            cid = "0x%016x" % self.ctx.comm_ids[gi % 4]
            start = "comm %s rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId %s" % (comm, me, n, dev, dev, 0x18 + 0x11 * dev, cid)
            key = (gname, node, members[0])
            local_members = self.ctx.local_counts.get(key)
            if local_members is None:
                local_members = self.ctx.local_counts[key] = sum(1 for m in members if m // R == node)
            msgs = [start + " - Init START", "Setting affinity for GPU %d to ffffffff,00000000,ffffffff" % dev]
            if nvls:
                msgs.append("NVLS multicast support is not available on dev %d" % dev)
            msgs.append("comm %s rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0" % (
                comm, me, n, max(1, n // max(1, local_members)), local_members, me % max(1, local_members)))
            nch = ch if n > 1 else 1
            if me == 0:
                ring = "".join("%4d" % i for i in range(n))
                msgs.extend(["Channel %02d/%02d : %s" % (c, nch, ring) for c in range(nch)])
            prev_, next_ = members[me - 1], members[(me + 1) % n]
            msgs.append("Trees " + " ".join("[%d] %d/-1/-1->%d->%d" % (c, (me + 1) % n, me, (me - 1) if me else -1) for c in range(min(nch, 4))))
            msgs.append("P2P Chunksize set to 131072")
            via_p = "via P2P/IPC" if prev_ // R == node else "[receive] via NET/IB/%d/GDRDMA" % (dev % 8)
            via_n = "via P2P/IPC" if next_ // R == node else "[send] via NET/IB/%d/GDRDMA" % (dev % 8)
            recv = "/0 : %d[%d] -> %d[%d] %s" % ((me - 1) % n, prev_ % R, me, dev, via_p)
            send = "/0 : %d[%d] -> %d[%d] %s" % (me, dev, (me + 1) % n, next_ % R, via_n)
            for c in range(nch):
                msgs.append("Channel %02d%s" % (c, recv))
                msgs.append("Channel %02d%s" % (c, send))
            msgs += ["Connected all rings", "Connected all trees",
                     "threadThresholds 8/8/64 | %d/8/64 | 512 | 512" % (8 * n),
                     "%d coll channels, %d collnet channels, 0 nvls channels, %d p2p channels, %d p2p channels per peer" % (nch, nch, nch, max(1, nch // 4)),
                     start + " - Init COMPLETE"]
            r.bulk(tc, head, msgs)

    # -- training loop --------------------------------------------------------------------------
    def event_iterations(self, r: RankLog, rng: random.Random) -> dict[int, list]:
        """Iterations (absolute) at which this rank writes something, with what."""
        return {}

    def train(self, r: RankLog, rng: random.Random) -> None:
        """Iteration lines merged in time order with saves, evaluations and noise."""
        tl = self.tl
        if not len(tl.iters):
            return
        until_k = bisect.bisect_left(tl.t_end_list, r.until)  # iterations fully before until
        first = int(tl.iters[0])
        last_iter = first + until_k - 1
        events: list[tuple[float, int, object]] = []
        for it in tl.save_iters:
            if it > last_iter + 1:
                break
            events.append((tl.end_of(it) + 0.3, len(events), lambda r, rng, it=it: self.save_lines(r, rng, it)))
        for it in tl.eval_iters:
            if it > last_iter:
                break
            events.append((tl.end_of(it) + tl.eval_seconds * 0.5, len(events), lambda r, rng, it=it: self.eval_lines(r, rng, it)))
        t_end, i0, n_end, rnd = tl.t_end_list, first, len(tl.t_end_list) - 1, rng.random
        for it, fn in noise.train_events(self.ctx, r, rng, first, last_iter):
            t = t_end[min(it - i0, n_end)] + 0.05 + 0.45 * rnd()
            events.append((t, len(events), lambda r, rng, fn=fn, t=t: fn(r, rng, t)))
        self.extra_events(r, rng, first, last_iter, events)
        events.sort(key=lambda e: (e[0], e[1]))
        self._events = events
        self._next = 0
        self.iteration_lines(r, rng, first, last_iter)
        self.flush(r, rng, float("inf"))

    def extra_events(self, r: RankLog, rng: random.Random, first: int, last: int, events: list) -> None:
        return None

    def flush(self, r: RankLog, rng: random.Random, t: float) -> float:
        """Write the pending events due before t; return the time of the next one."""
        events, i = self._events, self._next
        while i < len(events) and events[i][0] < t:
            events[i][2](r, rng)
            i += 1
        self._next = i
        return events[i][0] if i < len(events) else float("inf")

    def iteration_lines(self, r: RankLog, rng: random.Random, first: int, last: int) -> None:
        raise NotImplementedError

    def save_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        raise NotImplementedError

    def eval_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        return None

    def shutdown(self, r: RankLog, rng: random.Random) -> None:
        tl, spec = self.tl, self.spec
        t = tl.t_finish
        noise.emit_phase(self.ctx, r, rng, "end", tl.t_train_end, t)
        if spec.c10_style >= 3 and spec.accelerator == "cuda":
            r.c10(t + rng.uniform(0.1, 2), "W", "ProcessGroupNCCL.cpp:1250",
                  "Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only recently been added. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())")
        if r.local == 0:
            t += 3
            if spec.launcher == "torchrun":
                r.agent(t, "I", "torch/distributed/elastic/agent/server/api.py:879", "torch.distributed.elastic.agent.server.api",
                        "[default] worker group successfully finished. Waiting 300 seconds for other agents to finish.")
                r.agent(t + 0.2, "I", "torch/distributed/elastic/agent/server/api.py:932", "torch.distributed.elastic.agent.server.api",
                        "Local worker group finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish")
                r.agent(t + 1.5, "I", "torch/distributed/elastic/agent/server/api.py:946", "torch.distributed.elastic.agent.server.api",
                        "Done waiting for other agents. Elapsed: %.7f seconds" % rng.uniform(0.001, 1.5))
            elif spec.launcher == "deepspeed":
                for i in range(spec.layout.ranks_per_node):
                    r.pylog(t + 0.05 * i, "INFO", "launch.py:351:main", "Process %d exits successfully." % (r.pid + i))


def _hms(sec: int) -> str:
    """tqdm's elapsed/remaining format."""
    return "%d:%02d:%02d" % (sec // 3600, sec // 60 % 60, sec % 60) if sec >= 3600 else "%02d:%02d" % (sec // 60, sec % 60)


def _dots(name: str, width: int = 48) -> str:
    return "%s %s" % (name, "." * max(2, width - len(name)))


class Megatron(Framework):
    """Megatron-LM (and MindSpeed, its Ascend port)."""

    helpers_dir = "/workspace/Megatron-LM/megatron/core/datasets"  # where ``make`` builds the dataset helpers

    def logs_iterations(self, rank: int) -> bool:
        return rank == self.spec.layout.world - 1

    def phase_init(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec, lay = self.spec, self.spec.layout
        if r.rank == 0:
            r.plain(t0, "using world size: %d, data-parallel size: %d, context-parallel size: 1, tensor-model-parallel size: %d, pipeline-model-parallel size: %d " % (lay.world, lay.dp, lay.tp, lay.pp))
            r.plain(t0, "using torch.bfloat16 for parameters ...")
            r.plain(t0, "------------------------ arguments ------------------------")
            values = {"world_size": lay.world, "tensor_model_parallel_size": lay.tp, "pipeline_model_parallel_size": lay.pp,
                      "global_batch_size": spec.global_batch, "micro_batch_size": spec.micro_batch, "seq_length": spec.seq_len,
                      "lr": spec.lr_max, "train_iters": spec.train_iters, "save_interval": spec.save_interval,
                      "eval_interval": spec.eval_interval, "log_interval": spec.log_interval, "load": spec.ckpt_dir,
                      "save": spec.ckpt_dir, "data_path": "['%s']" % spec.data_path,
                      "distributed_timeout_minutes": spec.timeout_ms // 60000}
            for name in _ARGS:
                r.plain(t0, "  %s %s" % (_dots(name), values.get(name, rng.choice(("True", "False", "None", "1e-05", "0.0", "0.02", "4096", "cosine", "transformer_engine")))))
            r.plain(t0, "-------------------- end of arguments ---------------------")
            r.plain(t0, "setting number of micro-batches to constant %d" % max(1, spec.global_batch // (spec.micro_batch * lay.dp)))
            r.plain(t0, "> building HuggingFaceTokenizer tokenizer ...")
            r.plain(t0, " > padded vocab (size: 128000) with 256 dummy tokens (new size: 128256)")
            r.plain(t0 + 1, "> initializing torch distributed ...")
        if spec.accelerator == "cuda":
            self.nccl_init(r, rng, t0 + 2, t0 + (t1 - t0) * 0.6)
        if r.rank == 0:
            tm = t0 + (t1 - t0) * 0.6
            r.plain(tm, "> initialized tensor model parallel with size %d" % lay.tp)
            r.plain(tm, "> initialized pipeline model parallel with size %d" % lay.pp)
            r.plain(tm, "> setting random seeds to 1234 ...")
            r.plain(tm, "> compiling dataset index builder ...")
            r.plain(tm, "make: Entering directory '%s'" % self.helpers_dir)
            r.plain(tm, "make: Nothing to be done for 'default'.")
            r.plain(tm, "make: Leaving directory '%s'" % self.helpers_dir)
            r.plain(tm, ">>> done with dataset index builder. Compilation time: %.3f seconds" % rng.uniform(0.03, 0.2))
            r.plain(tm, "> compiling and loading fused kernels ...")
            r.plain(tm + 3, ">>> done with compiling and loading fused kernels. Compilation time: %.3f seconds" % rng.uniform(1, 9))
            r.plain(t1 - 0.5, "time to initialize megatron (seconds): %.3f" % (t1 - self.tl.t_launch))
            r.plain(t1 - 0.5, "[after megatron is initialized] datetime: %s " % r.clock.sec(t1 + r.skew))

    def model_build_lines(self, r: RankLog, t0: float) -> tuple[int, int, int]:
        """``building GPT model ...`` on rank 0, each model-parallel rank's parameter count on
        data-parallel rank 0; returns the rank's (tp, dp, pp) coordinates."""
        lay = self.spec.layout
        tp, dp, pp = lay.coords(r.rank)
        if r.rank == 0:
            r.plain(t0, "building GPT model ...")
        if dp == 0:
            r.plain(t0 + 1 + 0.01 * r.rank, " > number of parameters on (tensor, pipeline) model parallel rank (%d, %d): %d" % (tp, pp, self.ctx.n_params // (lay.tp * lay.pp) + 1024 * (pp == lay.pp - 1)))
        return tp, dp, pp

    def phase_model_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec, lay = self.spec, self.spec.layout
        tp, dp, pp = self.model_build_lines(r, t0)
        if r.rank == 0:
            r.basic(t0 + 2, "INFO", "megatron.core.distributed.distributed_data_parallel",
                    "Setting up DistributedDataParallel with config DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=True, overlap_param_gather=False, align_param_gather=False, use_distributed_optimizer=True, check_for_nan_in_grad=True, bucket_size=40000000, average_in_collective=False, fp8_param_gather=False)")
            r.basic(t0 + 2, "INFO", "megatron.core.distributed.param_and_grad_buffer", "Number of buckets for gradient all-reduce / reduce-scatter: %d" % rng.randint(4, 40))
            r.basic(t0 + 2, "INFO", "megatron.core.optimizer", "Setting up optimizer with config OptimizerConfig(optimizer='adam', lr=%g, min_lr=%g, decoupled_lr=None, decoupled_min_lr=None, weight_decay=0.1, fp16=False, bf16=True, params_dtype=torch.bfloat16, loss_scale=None, initial_loss_scale=4294967296, min_loss_scale=1.0, loss_scale_window=1000, hysteresis=2, adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-08, sgd_momentum=0.9, use_distributed_optimizer=True, overlap_param_gather_with_optimizer_step=False, clip_grad=1.0, log_num_zeros_in_grad=False, barrier_with_L1_time=True, timers=<megatron.core.timers.Timers object at 0x7f%010x>, config_logger_dir='')" % (spec.lr_max, spec.lr_max / 10, rng.getrandbits(36)))
            r.plain(t0 + 2, "> learning rate decay style: cosine")
            if spec.start_iter:
                r.plain(t0 + 3, " loading checkpoint from %s at iteration %d" % (spec.ckpt_dir, spec.start_iter))
                r.plain(t0 + 3, " checkpoint version 3.0")
                r.plain(t1 - 2, "  successfully loaded checkpoint from %s [ t %d/%d, p %d/%d ] at iteration %d" % (spec.ckpt_dir, tp + 1, lay.tp, pp + 1, lay.pp, spec.start_iter))
                r.plain(t1 - 2, "(min, max) time across ranks (ms):")
                r.plain(t1 - 2, "    load-checkpoint ................................: (%.2f, %.2f)" % ((t1 - t0 - 5) * 1000, (t1 - t0 - 4.9) * 1000))
            else:
                r.plain(t0 + 3, "WARNING: could not find the metadata file %s/latest_checkpointed_iteration.txt " % spec.ckpt_dir)
                r.plain(t0 + 3, "    will not load any checkpoints and will start from random")
            r.plain(t1 - 1, "[after model, optimizer, and learning rate scheduler are built] datetime: %s " % r.clock.sec(t1 + r.skew))

    def phase_data_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        if r.rank != 0:
            return
        total = spec.train_iters * spec.global_batch
        r.plain(t0, "> building train, validation, and test datasets ...")
        r.plain(t0, " > datasets target sizes (minimum size):")
        r.plain(t0, "    train:      %d" % total)
        r.plain(t0, "    validation: %d" % (total // spec.eval_interval * 10))
        r.plain(t0, "    test:       %d" % (spec.global_batch * 10))
        r.basic(t0, "INFO", "megatron.core.datasets.blended_megatron_dataset_config", "mock = False")
        r.basic(t0, "INFO", "megatron.core.datasets.blended_megatron_dataset_config", "Let split_matrix = [(0, 0.949), (0.949, 0.999), (0.999, 1.0)]")
        r.plain(t0 + 1, "> building train, validation, and test datasets for GPT ...")
        r.basic(t0 + 1, "INFO", "megatron.core.datasets.indexed_dataset", "Load the _IndexReader from %s.idx" % spec.data_path)
        for what in ("sequence lengths", "sequence pointers", "document indices"):
            r.basic(t0 + 2, "INFO", "megatron.core.datasets.indexed_dataset", "\tExtract the %s" % what)
        r.basic(t0 + 3, "INFO", "megatron.core.datasets.indexed_dataset", "> total number of sequences: %d" % (total // 3 + 12345))
        r.basic(t0 + 3, "INFO", "megatron.core.datasets.indexed_dataset", "> total number of documents: %d" % (total // 3 + 12345))
        digest = "%032x" % rng.getrandbits(128)
        for split in ("train", "valid", "test"):
            r.basic(t0 + 4, "INFO", "megatron.core.datasets.gpt_dataset", "Load the GPTDataset %s indices" % split)
            for idx in ("document", "sample", "shuffle"):
                r.basic(t0 + 4, "INFO", "megatron.core.datasets.gpt_dataset", "\tLoad the %s index from %s-GPTDataset-%s-%s_index.npy" % (idx, digest, split, idx))
            r.basic(t0 + 4, "INFO", "megatron.core.datasets.gpt_dataset", "> total number of samples: %d" % (total + rng.randint(0, 99999)))
        r.plain(t1 - 2, "> finished creating GPT datasets ...")
        r.plain(t1 - 1, "[after dataloaders are built] datetime: %s " % r.clock.sec(t1 + r.skew))
        r.plain(t1 - 1, "done with setup ...")
        r.plain(t1 - 1, "(min, max) time across ranks (ms):")
        r.plain(t1 - 1, "    model-and-optimizer-setup ......................: (%.2f, %.2f)" % (rng.uniform(2e4, 9e4), rng.uniform(9e4, 1e5)))
        r.plain(t1 - 1, "    train/valid/test-data-iterators-setup ..........: (%.2f, %.2f)" % (rng.uniform(1e3, 5e3), rng.uniform(5e3, 9e3)))
        r.plain(t1 - 0.5, "training ...")
        r.plain(self.tl.t_train0 - 0.5, "[before the start of training step] datetime: %s " % r.clock.sec(self.tl.t_train0 + r.skew))

    _ITER = (" [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f |"
             " throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d |"
             " lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | number of skipped iterations: %3d |"
             " number of nan iterations: %3d |")
    _ITER_NAN = (" [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f |"
                 " throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d |"
                 " lm loss: nan | loss scale: 1.0 | grad norm: nan | number of skipped iterations: %3d |"
                 " number of nan iterations: %3d |")
    _ITER_NAN_T = ("iteration <*>/<*> | consumed samples: <*> | elapsed time per iteration (ms): <*> |"
                   " throughput per GPU (TFLOP/s/GPU): <*> | learning rate: <*> | global batch size: <*> |"
                   " lm loss: nan | loss scale: 1.0 | grad norm: nan | number of skipped iterations: <*> |"
                   " number of nan iterations: <*> |")
    _TIMERS = ("forward-backward", "forward-compute", "backward-compute", "batch-generator", "layernorm-grads-all-reduce",
               "embedding-grads-all-reduce", "all-grads-sync", "params-all-gather", "optimizer-copy-to-main-grad",
               "optimizer-clip-main-grad", "optimizer-count-zeros", "optimizer-inner-step", "optimizer-copy-main-to-model-params", "optimizer")

    def extra_events(self, r: RankLog, rng: random.Random, first: int, last: int, events: list) -> None:
        lay = self.spec.layout
        L = self.spec.log_interval
        if lay.coords(r.rank)[1] == 0 and last >= first + L:
            it = (first // L + 1) * L
            alloc = rng.uniform(20000, 60000)
            line = "[Rank %d] (after %d iterations) memory (MB) | allocated: %s | max allocated: %s | reserved: %s | max reserved: %s" % (
                r.rank, it, repr(alloc), repr(alloc * 1.31), float(int(alloc * 1.4)), float(int(alloc * 1.45)))
            t = self.tl.end_of(it) + 0.01
            events.append((t, len(events), lambda r, rng: r.plain(t, line)))

    def iteration_lines(self, r: RankLog, rng: random.Random, first: int, last: int) -> None:
        spec, tl = self.spec, self.tl
        lay = spec.layout
        L = spec.log_interval
        if not self.logs_iterations(r.rank):
            return
        out = r.out
        pre = r.pre
        tsw = r.tsw
        sec = r.clock.sec
        skew = r.skew
        k0 = first - int(tl.iters[0])
        t_end, iter_s, lr, loss, gn = tl.t_end_list, tl.iter_s.tolist(), tl.lr.tolist(), tl.loss.tolist(), tl.grad_norm.tolist()
        gbs, total = spec.global_batch, spec.train_iters
        flops = 6.0 * self.ctx.n_params * gbs * spec.seq_len / lay.world / 1e12
        nan_from = tl.nan_from if tl.nan_from is not None else 1 << 62
        timers = self._TIMERS if spec.settings.get("log_timers") else ()
        all_ranks = spec.settings.get("timing_all_ranks")
        start = ((first + L - 1) // L) * L
        next_ev = self.flush(r, rng, t_end[k0])
        for it in range(start, last + 1, L):
            k = it - first + k0
            t = t_end[k]
            if t > next_ev:
                next_ev = self.flush(r, rng, t)
            ts = t + skew
            # Megatron-LM's training_log: the interval-time timer over the log interval divided by
            # its iterations, the interval's mean (not its last step's time)
            lo = max(k - L + 1, 0)
            mean_s = sum(iter_s[lo:k + 1]) / (k + 1 - lo)
            ms = mean_s * 1000.0
            if it >= nan_from:
                # Megatron counts skipped and NaN iterations per log interval (reset after each line)
                n_nan = min(L, it - nan_from + 1)
                line = self._ITER_NAN % (sec(ts), it, total, it * gbs, ms, flops / mean_s, lr[k], gbs, n_nan, n_nan)
                r.mark(t, line[line.index("] ") + 2:], self._ITER_NAN_T, None)
            else:
                line = self._ITER % (sec(ts), it, total, it * gbs, ms, flops / mean_s, lr[k], gbs, loss[k], gn[k], 0, 0)
            if tsw is None:
                out.append(pre + line)
            else:
                out.append(tsw(t + skew + 0.0004, False) + pre + line)
            self.timer_lines(r, rng, it, t, ms, timers, all_ranks)

    def timer_lines(self, r: RankLog, rng: random.Random, it: int, t: float, ms: float, timers: tuple, all_ranks: bool) -> None:
        """The timer blocks after the progress line of ``it`` (``ms``: its elapsed time per iteration)."""
        # Megatron-LM's training_log calls ``timers.log(timers_to_log, normalizer=args.log_interval)``
        # under the progress line's own ``iteration % args.log_interval == 0``: the per-rank
        # block follows every progress line (session 50; before, every tenth, so a straggler
        # that began less than ten log intervals before the job was stopped had no block after
        # it). The (min, max) block stays every tenth: it names no rank
        if all_ranks:
            rank_timers_block(r, self.spec, it, t, ms)
        if timers and it % (self.spec.log_interval * 10) == 0:
            r.plain(t, "(min, max) time across ranks (ms):")
            for name in timers:
                v = ms * (0.9 if name == "forward-backward" else rng.uniform(0.001, 0.3))
                r.plain(t, "    %s: (%.2f, %.2f)" % (_dots(name), v * 0.97, v))

    def save_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        spec, tl = self.spec, self.tl
        if r.rank != 0:
            return
        lay = spec.layout
        t = tl.end_of(it) + 0.3
        r.plain(t, "saving checkpoint at iteration %7d to %s in torch_dist format" % (it, spec.ckpt_dir))
        t2 = t + tl.save_seconds - 0.5
        r.plain(t2, "  successfully saved checkpoint from iteration %7d to %s [ t %d/%d, p %d/%d ]" % (it, spec.ckpt_dir, 1, lay.tp, 1, lay.pp))
        r.plain(t2, "(min, max) time across ranks (ms):")
        r.plain(t2, "    save-checkpoint ................................: (%.2f, %.2f)" % (tl.save_seconds * 990, tl.save_seconds * 1000))

    def eval_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        if not self.logs_iterations(r.rank):
            return
        tl = self.tl
        t = tl.end_of(it) + tl.eval_seconds
        k = it - int(tl.iters[0])
        v = tl.loss[k] + 0.05
        bar = "-" * 97
        r.plain(t, bar)
        r.plain(t, " validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E | " % (it, v, 2.718281828 ** v))
        r.plain(t, bar)

    def shutdown(self, r: RankLog, rng: random.Random) -> None:
        tl, spec = self.tl, self.spec
        if r.rank == 0:
            r.plain(tl.t_train_end, "[after training is done] datetime: %s " % r.clock.sec(tl.t_train_end + r.skew))
        if self.logs_iterations(r.rank):
            v = float(tl.loss[-1]) + 0.04
            bar = "-" * 109
            for what in ("validation", "test"):
                r.plain(tl.t_finish - 5, bar)
                r.plain(tl.t_finish - 5, " %s loss at iteration %d on %s set | lm loss value: %.6E | lm loss PPL: %.6E | " % (what, int(tl.iters[-1]), what, v, 2.718281828 ** v))
                r.plain(tl.t_finish - 5, bar)
        super().shutdown(r, rng)


class MindSpeed(Megatron):
    """MindSpeed-LLM on Ascend NPUs: Megatron lines plus torch_npu and CANN (HCCL) lines."""

    def phase_init(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        r.plain(t0, "/usr/local/python3.10/lib/python3.10/site-packages/torch_npu/utils/path_manager.py:82: UserWarning: Warning: The /usr/local/Ascend/ascend-toolkit/latest owner does not match the current user.", True)
        r.plain(t0, '  warnings.warn(f"Warning: The {path} owner does not match the current user.")', True)
        super().phase_init(r, rng, t0, t1)
        if self.spec.nccl_debug == "INFO":
            self.hccl_init(r, rng, t0 + (t1 - t0) * 0.4)
            tm = t0 + (t1 - t0) * 0.5
            lay = self.spec.layout
            r.cann(tm, "INFO", "HCCL", "hccl_comm.cc:102", "[Init][HcclComm]rank[%d] rankSize[%d] deviceLogicId[%d] server[%s]" % (r.rank, lay.world, r.local, r.ip))
            r.cann(tm, "INFO", "HCCL", "topoinfo_ranktableParser_pub.cc:361", "[Parse][RankTable]rank table parse success, serverNum[%d] deviceNum[%d]" % (lay.n_nodes, lay.world))
            r.cann(tm + 1, "INFO", "HCCL", "hccl_communicator.cc:1032", "[Init][Communicator]hcclCommInitInfo success, rank[%d] rankSize[%d] commId[%s]" % (r.rank, lay.world, "%s%%enp189s0f0_60000_0_%d" % (self.ctx.master_ip, self.ctx.comm_ids[0] % 10**10)))
            r.cann(tm + 1, "INFO", "HCCL", "hccl_impl.cc:628", "[Init][Impl]hccl_impl init success, devicePhyId[%d] nicDeployment[1]" % r.local)

    def hccl_init(self, r: RankLog, rng: random.Random, t: float) -> None:
        """CANN INFO logs of communicator setup (ASCEND_SLOG_PRINT_TO_STDOUT=1, ASCEND_GLOBAL_LOG_LEVEL=1)."""
        lay = self.spec.layout
        R = lay.ranks_per_node
        head = "[INFO] HCCL(%d,python):%s [%%s] [%d]" % (r.pid, r.clock.cann(t + r.skew), r.pid + 12)
        peers = [(r.rank + d) % lay.world for d in (1, -1, R, -R)]
        msgs = []
        for group, size in (("hccl_world_group", lay.world), ("tp", lay.tp), ("dp", lay.dp), ("pp", lay.pp)):
            if size < 2:
                continue
            msgs.append(("hccl_communicator.cc:183", "[Init][HcclCommunicator]group[%s] rank[%d] rankSize[%d] serverNum[%d] init start" % (group, r.rank, size, max(1, size // R))))
            msgs.append(("hccl_impl.cc:416", "[Init][Impl]devicePhyId[%d] deviceLogicId[%d] nicIp[%s.%d] nicDeploy[1]" % (r.local, r.local, r.ip.rsplit(".", 1)[0], 100 + r.local)))
            for p in peers:
                msgs.append(("transport_manager.cc:281", "[Create][Link]group[%s] localRank[%d] remoteRank[%d] linkType[%s] status[LINK_SUCCESS]" % (group, r.rank, p, "HCCS" if p // R == r.rank // R else "RDMA")))
            for alg in ("AllReduce", "AllGather", "ReduceScatter", "Broadcast"):
                msgs.append(("coll_alg_operator.cc:88", "[Select][Alg]group[%s] op[%s] algType[%s]" % (group, alg, rng.choice(("ring", "mesh", "hd", "NHR", "pipeline")))))
            msgs.append(("hccl_communicator.cc:240", "[Init][HcclCommunicator]group[%s] init success, take time [%d]us" % (group, rng.randint(20000, 900000))))
        r.bulk(t, "", [head % src + msg for src, msg in msgs])

    def iteration_lines(self, r: RankLog, rng: random.Random, first: int, last: int) -> None:
        if first <= last and r.local == 0 and self.spec.settings.get("npu_alloc_warn"):
            r.c10(self.tl.end_of(first), "W", "compiler_depend.ts:623", "Warning: expandable_segments currently defaults to false. You can enable this feature by `export PYTORCH_NPU_ALLOC_CONF = expandable_segments:True`. (function operator())")
        super().iteration_lines(r, rng, first, last)


class MegatronDeepSpeed(Megatron):
    """Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, the BigScience fork's successor): Megatron's
    arguments, data and progress lines driven by a DeepSpeed engine, launched by the deepspeed
    launcher. What differs from Megatron-LM (megatron/training.py, checkpointing.py, pretrain_gpt.py
    at f4157bea):

    - every rank runs ``ds_report`` before anything else (pretrain_gpt.py ``git_ds_info``) and
      prints ``**** Git info for Megatron: git_hash=<h> git_branch=<b> ****``;
    - the progress line carries no date (``training_log``: `` iteration N/ M | consumed samples:
      ... | consumed tokens: ... | elapsed time per iteration (ms): ... | learning rate: %.3E | ...
      | actual seqlen: ... | samples per second: ... | tokens per gpu per second (tgs): ... |
      TFLOPs: ... |``), and a loss that is not > 0 (NaN) is left out of it (``if avg > 0.0``);
      ``grad norm`` is there only under DeepSpeed's pipeline engine (``train_step``:
      ``get_global_grad_norm()``; without it ``grad_norm = None``), so a NaN shows as ``grad
      norm: nan`` and no loss (bigscience-workshop/Megatron-DeepSpeed#396) or as no loss alone
      (deepspeedai/Megatron-DeepSpeed#434), ``number of nan iterations`` staying 0 in both;
    - the DeepSpeed engine logs its own ``[Rank 0] step=N, skipped=..`` line every
      ``steps_per_print`` steps, on rank 0, dated by DeepSpeed's logger;
    - checkpoints are the engine's (``global_stepN/mp_rank_00_model_states.pt``, ZeRO shards per
      rank), between Megatron's ``saving checkpoint at iteration`` and ``successfully saved
      checkpoint at iteration`` lines, then the ``save-checkpoint`` timer.
    """

    helpers_dir = "/workspace/Megatron-DeepSpeed/megatron/data"

    def phase_init(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        r.pylog(t0, "INFO", "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)")
        self.ds_report(r, t0)
        r.plain(t0, "**** Git info for Megatron: git_hash=%s git_branch=main ****" % self.ctx.git_hash)
        super().phase_init(r, rng, t0, t1)
        r.pylog(t0 + 1, "INFO", "comm.py:637:init_distributed", "cdb=None")
        if r.rank == 0:
            r.pylog(t0 + 1, "INFO", "comm.py:668:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl")

    def ds_report(self, r: RankLog, t: float) -> None:
        """deepspeed/env_report.py as every rank prints it (seen in public issue threads, e.g.
        microsoft/DeepSpeed's bug reports: ``DeepSpeed general environment info:`` then
        ``torch install path ............... [...]`` and so on)."""
        spec = self.spec
        bar = "-" * 50
        lines = [bar, "DeepSpeed C++/CUDA extension op report", bar,
                 "NOTE: Ops not installed will be just-in-time (JIT) compiled at",
                 "      runtime if needed. Op compatibility means that your system",
                 "      meet the required dependencies to JIT install the op.", bar,
                 "JIT compiled ops requires ninja", "ninja .................. [OKAY]", bar,
                 "op name ................ installed .. compatible", bar]
        for op in ("async_io", "fused_adam", "cpu_adam", "cpu_adagrad", "fused_lamb", "quantizer", "random_ltd",
                   "transformer", "stochastic_transformer", "transformer_inference", "utils"):
            lines.append("%s %s [NO] ....... [OKAY]" % (op, "." * (22 - len(op))))
        cuda = spec.settings.get("nccl_version", "+cuda12.4").split("+cuda")[-1]
        torch_site = "/usr/local/lib/python3.10/dist-packages"
        lines += [bar, "DeepSpeed general environment info:",
                  "torch install path ............... ['%s/torch']" % torch_site,
                  "torch version .................... %s" % spec.torch_version,
                  "deepspeed install path ........... ['%s/deepspeed']" % torch_site,
                  "deepspeed info ................... %s, unknown, unknown" % spec.framework_version,
                  "torch cuda version ............... %s" % cuda, "torch hip version ................ None",
                  "nvcc version ..................... %s" % cuda,
                  "deepspeed wheel compiled w. ...... torch %s, cuda %s" % (".".join(spec.torch_version.split(".")[:2]), cuda),
                  "shared memory (/dev/shm) size .... %.2f GB" % self.ctx.shm_gb]
        for line in lines:
            r.plain(t, line)

    def phase_model_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec, lay = self.spec, self.spec.layout
        self.model_build_lines(r, t0)
        if r.rank == 0:
            r.plain(t0 + 2, "> learning rate decay style: cosine")
            r.plain(t0 + 2, "DeepSpeed is enabled.")
            r.pylog(t0 + 2, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed info: version=%s, git-hash=unknown, git-branch=unknown" % spec.framework_version)
            r.pylog(t0 + 3, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed Flops Profiler Enabled: False")
            r.pylog(t0 + 3, "INFO", "logging.py:96:log_dist", "[Rank 0] Using client Optimizer as basic optimizer")
            r.pylog(t0 + 3, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed Basic Optimizer = FusedAdam")
            r.pylog(t0 + 3, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed Final Optimizer = FusedAdam")
            r.pylog(t0 + 3, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed using client LR scheduler")
            engine_config_lines(r, t0 + 4, (("bfloat16_enabled", "True"), ("gradient_accumulation_steps", str(max(1, spec.global_batch // (spec.micro_batch * lay.dp)))),
                             ("gradient_clipping", "1.0"), ("pipeline", "{'stages': 'auto', 'partition': 'best', 'seed_layers': False, 'activation_checkpoint_interval': 0, 'pipe_partitioned': True, 'grad_partitioned': True}"),
                             ("steps_per_print", str(self.steps_per_print)), ("train_batch_size", str(spec.global_batch)),
                             ("train_micro_batch_size_per_gpu", str(spec.micro_batch)), ("wall_clock_breakdown", "False"),
                             ("zero_enabled", str(spec.settings["zero_stage"] > 0)), ("zero_optimization_stage", str(spec.settings["zero_stage"]))))
        engine_load_lines(r, spec, t0 + 5, t0 + 9, t1, lay.dp)
        if spec.start_iter and r.rank == 0:
            r.plain(t1 - 2, "  successfully loaded checkpoint from %s at iteration %d" % (spec.ckpt_dir, spec.start_iter))
        elif r.rank == 0:
            r.plain(t0 + 5, "WARNING: could not find the metadata file %s " % spec.ckpt_dir)
            r.plain(t0 + 5, "    will not load any checkpoints and will start from random")
        if r.rank == 0:
            r.plain(t1 - 1, "[after model, optimizer, and learning rate scheduler are built] datetime: %s " % r.clock.sec(t1 + r.skew))

    def phase_data_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        """megatron/data/gpt_dataset.py and indexed_dataset.py (the legacy dataset code) on rank 0."""
        spec = self.spec
        if r.rank != 0:
            return
        total = spec.train_iters * spec.global_batch
        docs = total // 3 + 12345
        r.plain(t0, "> building train, validation, and test datasets ...")
        r.plain(t0, " > datasets target sizes (minimum size):")
        r.plain(t0, "    train:      %d" % total)
        r.plain(t0, "    validation: %d" % (total // spec.eval_interval * 10))
        r.plain(t0, "    test:       %d" % (spec.global_batch * 10))
        r.plain(t0 + 1, "> building train, validation, and test datasets for GPT ...")
        r.plain(t0 + 1, "Single data path provided for train, valid & test")
        r.plain(t0 + 1, " > building dataset index ...")
        for what in ("reading sizes...", "reading pointers...", "reading document index...",
                     "creating numpy buffer of mmap...", "creating memory view of numpy buffer..."):
            r.plain(t0 + 1, "    " + what)
        r.plain(t0 + 2, " > finished creating indexed dataset in %.6f seconds" % rng.uniform(0.01, 0.5))
        r.plain(t0 + 2, "    number of documents: %d" % docs)
        r.plain(t0 + 2, " > dataset split:")
        bounds = (0, int(docs * 0.949), int(docs * 0.999), docs)
        for name, a, b in zip(("train", "validation", "test"), bounds, bounds[1:]):
            r.plain(t0 + 2, "    %s:" % name)
            r.plain(t0 + 2, "     document indices in [%d, %d) total of %d documents" % (a, b, b - a))
        digest = "%032x" % rng.getrandbits(128)
        for split in ("train", "valid", "test"):
            for idx in ("doc", "sample", "shuffle"):
                r.plain(t0 + 3, " > loading %s-idx mapping from %s/index-cache/%s_%s_%s_idx.npy" % (idx, spec.data_path.rsplit("/", 1)[0], digest, split, idx))
            r.plain(t0 + 3, "    loaded indexed file in %.3f seconds" % rng.uniform(0.001, 0.05))
            r.plain(t0 + 3, "    total number of samples: %d" % (total + rng.randint(0, 99999)))
            r.plain(t0 + 3, "    total number of epochs: 1")
        r.plain(t1 - 2, "> finished creating GPT datasets ...")
        r.plain(t1 - 1, "[after dataloaders are built] datetime: %s " % r.clock.sec(t1 + r.skew))
        r.plain(t1 - 1, "done with setup ...")
        r.plain(t1 - 0.5, "training ...")
        r.plain(self.tl.t_train0 - 0.5, "[before the start of training step] datetime: %s " % r.clock.sec(self.tl.t_train0 + r.skew))

    @property
    def steps_per_print(self) -> int:
        return self.spec.settings.get("steps_per_print", 10)

    _ITER = (" iteration %8d/%8d | consumed samples: %12d | consumed tokens: %12d | elapsed time per iteration (ms): %.1f |"
             " learning rate: %.3E | global batch size: %5d |%s loss scale: 1.0 |%s actual seqlen: %5d |"
             " number of skipped iterations: %3d | number of nan iterations: %3d | samples per second: %.3f |"
             " tokens per gpu per second (tgs): %.3f | TFLOPs: %.2f |")
    _ITER_NAN_T = ("iteration <*>/<*> | consumed samples: <*> | consumed tokens: <*> | elapsed time per iteration (ms): <*> |"
                   " learning rate: <*> | global batch size: <*> | loss scale: 1.0 |%s actual seqlen: <*> |"
                   " number of skipped iterations: <*> | number of nan iterations: <*> | samples per second: <*> |"
                   " tokens per gpu per second (tgs): <*> | TFLOPs: <*> |")
    _STEP = "[Rank 0] step=%d, skipped=0, lr=[%.17g], mom=[(0.9, 0.95)]"

    def iteration_lines(self, r: RankLog, rng: random.Random, first: int, last: int) -> None:
        spec, tl = self.spec, self.tl
        lay = spec.layout
        k0 = first - int(tl.iters[0])
        t_end, iter_s, lr, loss, gn = tl.t_end_list, tl.iter_s.tolist(), tl.lr.tolist(), tl.loss.tolist(), tl.grad_norm.tolist()
        # the engine's own step line on rank 0 (deepspeed/runtime/engine.py _take_model_step: every
        # ``steps_per_print`` steps, ``log_dist(..., ranks=[0])``), the progress line on the last rank
        P = self.steps_per_print if r.rank == 0 else 0
        L = spec.log_interval if self.logs_iterations(r.rank) else 0
        its = sorted({it for every in (P, L) if every for it in range(((first + every - 1) // every) * every, last + 1, every)})
        if not its:
            return
        out, pre, tsw, skew = r.out, r.pre, r.tsw, r.skew
        gbs, total, seq = spec.global_batch, spec.train_iters, spec.seq_len
        flops = 6.0 * self.ctx.n_params * gbs * seq / lay.world / 1e12
        nan_from = tl.nan_from if tl.nan_from is not None else 1 << 62
        timers = self._TIMERS if spec.settings.get("log_timers") else ()
        all_ranks = spec.settings.get("timing_all_ranks")
        pipeline = lay.pp > 1  # DeepSpeed's pipeline engine (its examples pass --no-pipeline-parallel at 1 stage)
        next_ev = self.flush(r, rng, t_end[k0])
        for it in its:
            k = it - first + k0
            t = t_end[k]
            if t > next_ev:
                next_ev = self.flush(r, rng, t)
            if P and it % P == 0:
                r.pylog(t - 0.05, "INFO", "logging.py:96:log_dist", self._STEP % (it, lr[k]))
            if not L or it % L:
                continue
            lo = max(k - L + 1, 0)
            mean_s = sum(iter_s[lo:k + 1]) / (k + 1 - lo)
            ms = mean_s * 1000.0
            nan = it >= nan_from
            # bf16: no skipped step, so no NaN iteration is counted; the NaN loss fails ``avg > 0.0``
            lm = "" if nan else " lm loss: %.6E |" % loss[k]
            norm = (" grad norm: nan |" if nan else " grad norm: %.3f |" % gn[k]) if pipeline else ""
            line = self._ITER % (it, total, it * gbs, it * gbs * seq, ms, lr[k], gbs, lm, norm, seq,
                                 0, 0, gbs / mean_s, gbs * seq / mean_s / lay.world, flops / mean_s)
            if nan:
                r.mark(t, line.strip(), self._ITER_NAN_T % (" grad norm: nan |" if pipeline else ""), None)
            out.append(pre + line if tsw is None else tsw(t + skew + 0.0004, False) + pre + line)
            self.timer_lines(r, rng, it, t, ms, timers, all_ranks)

    def save_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        spec, tl, lay = self.spec, self.tl, self.spec.layout
        t = tl.end_of(it) + 0.3
        tag = "global_step%d" % it
        if r.rank == 0:
            r.plain(t, "saving checkpoint at iteration %7d to %s" % (it, spec.ckpt_dir))
            r.pylog(t + 0.2, "INFO", "logging.py:96:log_dist", "[Rank 0] [Torch] Checkpoint %s is about to be saved!" % tag)
        tp, dp, pp = lay.coords(r.rank)
        if dp == 0:
            name = "%s/%s/layer_%02d-model_%02d-model_states.pt" % (spec.ckpt_dir, tag, pp, tp) if lay.pp > 1 else \
                "%s/%s/mp_rank_%02d_model_states.pt" % (spec.ckpt_dir, tag, tp)
            r.pylog(t + 0.3, "INFO", "logging.py:96:log_dist" if r.rank == 0 else "torch_checkpoint_engine.py:21:save",
                    ("[Rank 0] Saving model checkpoint: %s" if r.rank == 0 else "[Torch] Saving %s...") % name)
        shard = "%s/%s/bf16_zero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (spec.ckpt_dir, tag, dp, tp)
        zero_shard_save_lines(r, t + 1, t + tl.save_seconds * rng.uniform(0.5, 0.9), t + tl.save_seconds - 0.4, shard, tag)
        if r.rank == 0:
            t2 = t + tl.save_seconds - 0.2
            r.plain(t2, "  successfully saved checkpoint at iteration %7d to %s" % (it, spec.ckpt_dir))
            r.plain(t2, "(min, max) time across ranks (ms):")
            r.plain(t2, "    save-checkpoint ................................: (%.2f, %.2f)" % (tl.save_seconds * 990, tl.save_seconds * 1000))


class DeepSpeed(Framework):
    """A DeepSpeed ZeRO training script (deepspeed or torchrun launcher)."""

    def phase_init(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        r.pylog(t0, "INFO", "real_accelerator.py:203:get_accelerator", "Setting ds_accelerator to cuda (auto detect)")
        r.pylog(t0 + 1, "INFO", "comm.py:637:init_distributed", "cdb=None")
        if r.rank == 0:
            r.pylog(t0 + 1, "INFO", "comm.py:668:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl")
        self.nccl_init(r, rng, t0 + 3, t1 - 10)
        if r.rank == 0:
            r.pylog(t1 - 9, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed info: version=%s, git-hash=unknown, git-branch=unknown" % spec.framework_version)
            r.pylog(t1 - 9, "INFO", "config.py:733:__init__", "Config mesh_device None world_size = %d" % spec.layout.world)
            r.pylog(t1 - 8, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed Flops Profiler Enabled: False")
            r.pylog(t1 - 8, "INFO", "logging.py:96:log_dist", "[Rank 0] Using client Optimizer as basic optimizer")
            r.pylog(t1 - 8, "INFO", "logging.py:96:log_dist", "[Rank 0] DeepSpeed Basic Optimizer = FusedAdam")
            r.pylog(t1 - 8, "INFO", "logging.py:96:log_dist", "[Rank 0] Creating torch.bfloat16 ZeRO stage %d optimizer" % spec.settings["zero_stage"])
            engine_config_lines(r, t1 - 7, (("activation_checkpointing_config", '{\n    "partition_activations": false, \n    "contiguous_memory_optimization": false, \n    "cpu_checkpointing": false\n}'),
                             ("bfloat16_enabled", "True"), ("gradient_accumulation_steps", str(max(1, spec.global_batch // (spec.micro_batch * spec.layout.world)))),
                             ("gradient_clipping", "1.0"), ("steps_per_print", str(spec.log_interval)),
                             ("train_batch_size", str(spec.global_batch)), ("train_micro_batch_size_per_gpu", str(spec.micro_batch)),
                             ("wall_clock_breakdown", "False"), ("zero_enabled", "True"), ("zero_optimization_stage", str(spec.settings["zero_stage"]))))
        if r.rank == 0:
            r.pylog(t1 - 5, "INFO", "utils.py:781:see_memory_usage", "Before initializing optimizer states")
            r.pylog(t1 - 5, "INFO", "utils.py:782:see_memory_usage", "MA %.2f GB         Max_MA %.2f GB         CA %.2f GB         Max_CA %d GB " % (rng.uniform(10, 30), rng.uniform(30, 40), rng.uniform(30, 40), rng.randint(40, 60)))
            r.pylog(t1 - 5, "INFO", "utils.py:789:see_memory_usage", "CPU Virtual Memory:  used = %.2f GB, percent = %.1f%%" % (rng.uniform(100, 300), rng.uniform(5, 30)))

    def phase_data_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        if r.local == 0 and spec.settings.get("cached_dataset"):
            cached_dataset_lines(r, spec, t0 + 1, self.ctx.comm_ids[1])
        elif r.local == 0:
            r.plain(t0 + 1, "Loading dataset shards from %s ..." % spec.data_path)
            r.plain(t0 + 2, "Generating train split: %d examples [00:%02d, %.2f examples/s]" % (spec.train_iters * spec.global_batch, int(t1 - t0) % 60, rng.uniform(2e4, 9e4)))
        if r.rank == 0:
            r.plain(t1 - 1, "Total training samples: %d, micro batches per rank per step: %d" % (spec.train_iters * spec.global_batch, max(1, spec.global_batch // (spec.micro_batch * spec.layout.world))))

    def phase_model_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        engine_load_lines(r, self.spec, t0 + 1, t0 + 9, t1, self.spec.layout.world)

    _STEP = "[%s] [INFO] [logging.py:96:log_dist] [Rank 0] step=%d, skipped=%d, lr=[%.17g], mom=[(0.9, 0.95)]"
    _TIMER = "[%s] [INFO] [timer.py:260:stop] epoch=0/micro_step=%d/global_step=%d, RunningAvgSamplesPerSec=%.9f, CurrSamplesPerSec=%.9f, MemAllocated=%.2fGB, MaxMemAllocated=%.2fGB"
    _USER = "step %d | loss %.4f | lr %.3e | grad_norm %.4f | tokens/s %.0f | step_time %.3fs"
    _OVERFLOW = "[%s] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1"

    def iteration_lines(self, r: RankLog, rng: random.Random, first: int, last: int) -> None:
        if not self.logs_iterations(r.rank):
            return
        spec, tl = self.spec, self.tl
        out, pre, tsw, py, skew = r.out, r.pre, r.tsw, r.clock.py, r.skew
        k0 = first - int(tl.iters[0])
        t_end, iter_s, lr, loss, gn = tl.t_end_list, tl.iter_s.tolist(), tl.lr.tolist(), tl.loss.tolist(), tl.grad_norm.tolist()
        L = spec.log_interval
        gas = max(1, spec.global_batch // (spec.micro_batch * spec.layout.world))
        tokens = spec.global_batch * spec.seq_len
        nan_from = tl.nan_from if tl.nan_from is not None else 1 << 62
        mem = rng.uniform(10, 40)
        skipped = 0
        msg_overflow = "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1, reducing to 1"
        tmpl_overflow = "[deepspeed] OVERFLOW! Rank <*> Skipping step. Attempted loss scale: <*>, reducing to <*>"
        until = r.until
        next_ev = self.flush(r, rng, t_end[k0])
        for k in range(k0, k0 + last - first + 1):
            it = first + k - k0
            t = t_end[k]
            if t > next_ev:
                next_ev = self.flush(r, rng, t)
            if it >= nan_from:
                skipped += 1
                if t < until:
                    line = self._OVERFLOW % py(t + skew - 0.2)
                    out.append(pre + line if tsw is None else tsw(t + skew, False) + pre + line)
                    r.mark(t, msg_overflow, tmpl_overflow, "INFO")
            if it % L:
                continue
            sps = spec.global_batch / iter_s[k]
            lines = (self._STEP % (py(t + skew), it, skipped, lr[k]),
                     self._TIMER % (py(t + skew + 0.001), it * gas, it, sps * 1.01, sps, mem, mem * 1.4),
                     self._USER % (it, loss[k] if it < nan_from else float("nan"), lr[k], gn[k], tokens / iter_s[k], iter_s[k]))
            for line in lines:
                out.append(pre + line if tsw is None else tsw(t + skew, False) + pre + line)

    def save_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        spec, tl, lay = self.spec, self.tl, self.spec.layout
        t = tl.end_of(it) + 0.5
        tag = "global_step%d" % it
        if r.rank == 0:
            r.pylog(t, "INFO", "logging.py:96:log_dist", "[Rank 0] [Torch] Checkpoint %s is about to be saved!" % tag)
            r.pylog(t, "INFO", "logging.py:96:log_dist", "[Rank 0] Saving model checkpoint: %s/%s/mp_rank_00_model_states.pt" % (spec.ckpt_dir, tag))
            r.pylog(t, "INFO", "torch_checkpoint_engine.py:21:save", "[Torch] Saving %s/%s/mp_rank_00_model_states.pt..." % (spec.ckpt_dir, tag))
            r.pylog(t + 5, "INFO", "torch_checkpoint_engine.py:23:save", "[Torch] Saved %s/%s/mp_rank_00_model_states.pt." % (spec.ckpt_dir, tag))
        shard = "%s/%s/zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (spec.ckpt_dir, tag, r.rank)
        zero_shard_save_lines(r, t + 6, t + tl.save_seconds * rng.uniform(0.5, 0.95), t + tl.save_seconds - 0.2, shard, tag)


class HFTrainer(Framework):
    """transformers Trainer (FSDP or DeepSpeed backend) launched by torchrun or accelerate."""

    def phase_init(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        r.hf_main(t0, "WARNING", "__main__", "Process rank: %d, device: cuda:%d, n_gpu: 1, distributed training: True, 16-bits training: False" % (r.local, r.local))
        if r.rank == 0:
            r.hf_main(t0, "INFO", "__main__", "Training/evaluation parameters TrainingArguments(")
            for line in ("_n_gpu=1,", "bf16=True,", "ddp_timeout=%d," % (spec.timeout_ms // 1000), "learning_rate=%g," % spec.lr_max,
                         "logging_steps=%d," % spec.log_interval, "max_steps=%d," % spec.train_iters, "output_dir=%s," % spec.ckpt_dir,
                         "per_device_train_batch_size=%d," % spec.micro_batch, "save_steps=%d," % spec.save_interval, "seed=42,", ")"):
                r.plain(t0, line)
        self.nccl_init(r, rng, t0 + 2, t1 - 2)

    def phase_data_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        if spec.settings.get("cached_dataset"):
            if r.local == 0:
                cached_dataset_lines(r, spec, t0, self.ctx.comm_ids[1])
            return
        if r.rank == 0:
            r.hf_main(t0, "INFO", "datasets.builder", "Using custom data configuration default-%016x" % self.ctx.comm_ids[1])
            r.hf_main(t0, "INFO", "datasets.info", "Loading Dataset Infos from %s" % spec.data_path)
            r.plain(t0 + 5, "Generating train split: %d examples [00:%02d, %.2f examples/s]" % (spec.train_iters * spec.global_batch, int(t1 - t0) % 60, rng.uniform(1e4, 9e4)))
        if r.local == 0:
            r.plain(t1 - 3, "Running tokenizer on dataset (num_proc=32): 100%%|██████████| %d/%d [00:%02d<00:00, %.2f examples/s]" % (spec.global_batch * 100, spec.global_batch * 100, int(t1 - t0) % 60, rng.uniform(1e3, 9e3)))

    def phase_model_loading(self, r: RankLog, rng: random.Random, t0: float, t1: float) -> None:
        spec = self.spec
        model_dir = "/models/%s" % spec.model
        if r.rank == 0:
            r.hf(t0, "INFO", "configuration_utils.py:733", "loading configuration file %s/config.json" % model_dir)
            r.hf(t0, "INFO", "configuration_utils.py:800", "Model config LlamaConfig {")
            for line in ('  "architectures": [', '    "LlamaForCausalLM"', "  ],", '  "hidden_act": "silu",', '  "max_position_embeddings": %d,' % spec.seq_len,
                         '  "model_type": "llama",', '  "torch_dtype": "bfloat16",', '  "transformers_version": "%s",' % spec.framework_version, '  "vocab_size": 128256', "}", ""):
                r.plain(t0, line)
            r.hf(t0 + 1, "INFO", "modeling_utils.py:3553", "loading weights file %s/model.safetensors.index.json" % model_dir)
        n = rng.choice((4, 15, 30))
        r.plain(t1 - 3, "Loading checkpoint shards: 100%%|██████████| %d/%d [00:%02d<00:00, %.2fs/it]" % (n, n, int(t1 - t0 - 4) % 60, (t1 - t0 - 4) / n), True)
        if r.rank == 0:
            r.hf(t1 - 2, "INFO", "modeling_utils.py:4364", "All model checkpoint weights were used when initializing LlamaForCausalLM.")
            r.plain(t1 - 2, "")
            r.hf(t1 - 1, "INFO", "trainer.py:2128", "***** Running training *****")
            for text in ("  Num examples = {:,}".format(spec.train_iters * spec.global_batch), "  Num Epochs = 1",
                         "  Instantaneous batch size per device = %d" % spec.micro_batch,
                         "  Total train batch size (w. parallel, distributed & accumulation) = %d" % spec.global_batch,
                         "  Total optimization steps = {:,}".format(spec.train_iters),
                         "  Number of trainable parameters = {:,}".format(self.ctx.n_params)):
                r.hf(t1 - 1, "INFO", "trainer.py:2129", text)
            if spec.start_iter:
                r.hf(t1 - 1, "INFO", "trainer.py:2149", "  Continuing training from checkpoint, will skip to saved global_step")
                r.hf(t1 - 1, "INFO", "trainer.py:2151", "  Continuing training from global step %d" % spec.start_iter)

    _BAR = " %d%%|%s| %d/%d [%s<%s, %5.2fs/it]"
    _DICT = "{'loss': %.4f, 'grad_norm': %.16g, 'learning_rate': %.16g, 'epoch': %.2f}"
    _DICT_NAN = "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': %.16g, 'epoch': %.2f}"

    def iteration_lines(self, r: RankLog, rng: random.Random, first: int, last: int) -> None:
        if not self.logs_iterations(r.rank):
            return
        spec, tl = self.spec, self.tl
        out, pre, tsw, skew = r.out, r.pre, r.tsw, r.skew
        k0 = first - int(tl.iters[0])
        t_end, iter_s, lr, loss, gn = tl.t_end_list, tl.iter_s.tolist(), tl.lr.tolist(), tl.loss.tolist(), tl.grad_norm.tolist()
        total, L = spec.train_iters, spec.log_interval
        bars = spec.settings.get("tqdm_lines", False)
        nan_from = tl.nan_from if tl.nan_from is not None else 1 << 62
        t_start = tl.t_train0
        next_ev = self.flush(r, rng, t_end[k0])
        for k in range(k0, k0 + last - first + 1):
            it = first + k - k0
            t = t_end[k]
            if t > next_ev:
                next_ev = self.flush(r, rng, t)
            lines = []
            if bars:
                pct = it * 100 // total
                el = int(t - t_start)
                rem = int(iter_s[k] * (total - it))
                fill = "█" * (pct // 10) + " " * (10 - pct // 10)
                lines.append(self._BAR % (pct, fill, it, total, _hms(el), _hms(rem), iter_s[k]))
            if it % L == 0:
                if it >= nan_from:
                    lines.append(self._DICT_NAN % (lr[k], it / total))
                    r.mark(t, lines[-1], "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': <*>, 'epoch': <*>}", None)
                else:
                    lines.append(self._DICT % (loss[k], gn[k], lr[k], it / total))
            for line in lines:
                out.append(pre + line if tsw is None else tsw(t + skew, False) + pre + line)

    def save_lines(self, r: RankLog, rng: random.Random, it: int) -> None:
        if r.rank != 0:
            return
        spec, tl = self.spec, self.tl
        t = tl.end_of(it) + 0.5
        d = "%s/checkpoint-%d" % (spec.ckpt_dir, it)
        r.hf(t, "INFO", "trainer.py:3503", "Saving model checkpoint to %s" % d)
        r.hf(t + 1, "INFO", "configuration_utils.py:472", "Configuration saved in %s/config.json" % d)
        r.hf(t + 1, "INFO", "configuration_utils.py:807", "Configuration saved in %s/generation_config.json" % d)
        r.hf(t + tl.save_seconds * 0.8, "INFO", "modeling_utils.py:2778", "The model is bigger than the maximum size per checkpoint (5GB) and is going to be split in 3 checkpoint shards. You can find where each parameters has been saved in the index located at %s/model.safetensors.index.json." % d)
        r.hf(t + tl.save_seconds * 0.8, "INFO", "tokenization_utils_base.py:2684", "tokenizer config file saved in %s/tokenizer_config.json" % d)
        r.hf(t + tl.save_seconds * 0.8, "INFO", "tokenization_utils_base.py:2693", "Special tokens file saved in %s/special_tokens_map.json" % d)

    def shutdown(self, r: RankLog, rng: random.Random) -> None:
        tl = self.tl
        if r.rank == 0:
            t = tl.t_train_end
            r.hf(t, "INFO", "trainer.py:2383", "")
            r.plain(t, "")
            r.plain(t, "Training completed. Do not forget to share your model on huggingface.co/models =)")
            r.plain(t, "")
            r.plain(t, "")
            r.plain(t, "{'train_runtime': %.4f, 'train_samples_per_second': %.3f, 'train_steps_per_second': %.3f, 'train_loss': %.16g, 'epoch': 1.0}" % (
                t - tl.t_train0, self.spec.global_batch / tl.iter_s.mean(), 1 / tl.iter_s.mean(), float(tl.loss.mean())))
            r.plain(t, "***** train metrics *****")
            r.plain(t, "  epoch                    =        1.0")
            r.plain(t, "  train_loss               =     %.4f" % float(tl.loss.mean()))
        super().shutdown(r, rng)


FRAMEWORKS = {"megatron": Megatron, "deepspeed": DeepSpeed, "hf_trainer": HFTrainer, "mindspeed": MindSpeed,
              "megatron_deepspeed": MegatronDeepSpeed}
