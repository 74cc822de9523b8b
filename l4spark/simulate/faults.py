"""Fault kinds: where they strike, what the faulty node logs, and how the failure propagates.

A ``FaultPlan`` is decided per failed job before any rank is written. It fixes the stage, the
iteration, the true time of the root cause and the faulty nodes, and computes for every rank
when it would die on its own (root cause, a network error from a dead peer, a watchdog
timeout) and when the launcher or the scheduler kills it instead. Writing a rank then means:
healthy lines until the root cause, then the rank's own failure lines, then (on local rank 0)
the launcher's teardown lines.

Propagation follows the real mechanics: a dead or cut-off node makes its ring/pipeline
neighbours' NCCL proxies fail with IB completion errors naming its address after the IB retry
timeout; every other rank stays blocked in its collective until the watchdog fires
(``Timeout(ms)``), unless the scheduler tears the job down first; torchrun's agent SIGTERMs the
surviving local workers when one dies. So the faulty node is often *not* the node with the most
error lines, and with per-node clock skew not always the first to log one.
"""

from __future__ import annotations

import random

from l4spark.simulate.behaviours import FORMATS as BEHAVIOUR_FORMATS
from l4spark.simulate.behaviours import DEFAULT_PG_PREFIX, BehaviourMixin, ib_completion
from l4spark.simulate.formats import RankLog, template_of
from l4spark.simulate.kinds_extra import EXTRA_KINDS, ExtraKinds
from l4spark.simulate.kinds_extra import FORMATS as EXTRA_FORMATS
from l4spark.simulate.lifecycle import Ctx, rank_rng
from l4spark.simulate.tracebacks import cpp_frames, python_traceback

CUDA = ("megatron", "deepspeed", "hf_trainer", "megatron_deepspeed")
ASCEND = ("mindspeed",)
ALL = CUDA + ASCEND

# kind -> (fault class, frameworks, possible stages)
_KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "nic_link_down": ("network", CUDA, ("training",)),
    "ib_completion_error": ("network", CUDA, ("training",)),
    "nccl_timeout": ("network", CUDA, ("training",)),
    "hccl_timeout": ("network", ASCEND, ("training",)),
    "gpu_ecc_error": ("accelerator", CUDA, ("training",)),
    "gpu_fallen_off_bus": ("accelerator", CUDA, ("training", "checkpoint_saving")),
    "kernel_exec_failure": ("accelerator", ALL, ("training",)),
    "node_down": ("node", ALL, ("training", "checkpoint_saving")),
    "ckpt_load_failure": ("storage", ALL, ("model_loading",)),
    "ckpt_save_failure": ("storage", ALL, ("checkpoint_saving",)),
    "invalid_rank_table": ("configuration", ASCEND, ("init",)),
    "parallel_size_mismatch": ("configuration", ("megatron", "deepspeed", "mindspeed", "megatron_deepspeed"), ("init",)),
    "timeout_too_low": ("configuration", CUDA, ("checkpoint_saving",)),
    "driver_mismatch": ("software_incompatibility", CUDA, ("init",)),
    "program_bug": ("program_bug", ALL, ("training", "data_loading")),
    "oom": ("out_of_memory", ALL, ("training",)),
    "hang": ("hang", ALL, ("training",)),
    "slowdown": ("slowdown", ALL, ("training",)),
    "loss_nan": ("loss_divergence", ALL, ("training",)),
}

BASE_KINDS: tuple[str, ...] = tuple(_KINDS)  # the kinds before issue #18 (their draws stay as they were)
_KINDS.update(EXTRA_KINDS)
FAULT_KINDS: list[str] = list(_KINDS)
FAULT_CLASSES: dict[str, str] = {k: v[0] for k, v in _KINDS.items()}
FAULT_FRAMEWORKS: dict[str, tuple[str, ...]] = {k: v[1] for k, v in _KINDS.items()}
FAULT_STAGES: dict[str, tuple[str, ...]] = {k: v[2] for k, v in _KINDS.items()}
INF = float("inf")
NATURAL_CAUSES = ("root", "net", "net2", "wd")  # a rank that ends by itself, not killed

# templates of the indicating messages (str.format patterns; <*> in labels)
T_WATCHDOG = "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={n}, NumelOut={n2}, Timeout(ms)={tmo}) ran for {ran} milliseconds before timing out."
T_WATCHDOG_OLD = "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, Timeout(ms)={tmo}) ran for {ran} milliseconds before timing out."
T_LAST_WORK = "[PG ID 0 PG GUID 0(default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {enq}, last completed NCCL work: {done}."
# PyTorch 2.3+ (ProcessGroupNCCL.cpp, getNCCLWatchdogTimeoutErrorMsg): every rank's heartbeat
# monitor prints it once a timeout signals a dump, "from this local rank" on a rank that timed out
# itself, "from  rank N" (two spaces, as printed) on one that learned it from the store; seen in
# public logs, e.g. "[rank6]:[E703 21:51:54 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID
# 0(default_pg) Rank 6] Received a dump signal due to a collective timeout from  rank 7 ..."
T_DUMP = ("[PG ID 0 PG GUID 0(default_pg) Rank {r}] Received a dump signal due to a collective timeout from {src} and we will "
          "try our best to dump the debug info. Last enqueued NCCL work: {enq}, last completed NCCL work: {done}.This is most "
          "likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is "
          "not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by "
          "GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc. ")
T_NET_TRACE = "transport/net.cc:{line} -> {code}"
T_PROXY_TRACE = "proxy.cc:{line} -> {code} [Proxy Thread]"
T_NCCL_REMOTE = "[PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version {v}"
T_NCCL_REMOTE_OLD = "[Rank {r}] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version {v}"
T_AGENT_FAILED = "failed (exitcode: {code}) local_rank: {lr} (pid: {pid}) of binary: /usr/bin/python3"
T_DS_EXIT = "['/usr/bin/python', '-u', 'train.py', '--local_rank={lr}', '--deepspeed_config', 'ds_config.json'] exits with return code = {code}"
# Megatron-DeepSpeed's scripts pass the DeepSpeed config among Megatron's arguments
T_DS_EXIT_MDS = "['/usr/bin/python', '-u', 'pretrain_gpt.py', '--local_rank={lr}', '--deepspeed', '--deepspeed_config', 'ds_config.json'] exits with return code = {code}"
T_SRUN_TASK = "srun: error: {host}: task {r}: Exited with exit code {code}"
# Ascend HCCL's error-code messages (CANN's hcomm error table, github.com/hicann/hcomm, "hcomm_g_msg"):
# EI0002 as printed by CANN 7-8 (InternLM/lmdeploy#3354, vllm-project/vllm-ascend#1443, mindspore-ai/docs
# tutorials/source_en/debug/error_analysis/cann_error_cases.md): a rank waited for a remote rank's notify
T_HCCL_NOTIFY = "The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank [{rr}].base information: [streamID:[{sid}], taskID[{tid}], taskType[Notify Wait], tag[{tag}]] task information: "
# EI0002's suggestion lines, as the error table and InternLM/lmdeploy#3354 print them
T_HCCL_NOTIFY_SOLUTION = ("        Solution: 1. If this error is reported on part of these ranks, check other ranks to see whether other errors have been reported earlier."
                          "2. If this error is reported for all ranks, check whether the error reporting time is consistent (the maximum difference must not exceed 1800s). "
                          "If not, locate the cause or adjust the locate the cause or set the HCCL_EXEC_TIMEOUT environment variable to a larger value."
                          "3. Check whether the completion queue element (CQE) of the error exists in the plog(grep -rn 'error cqe'). If so, check the network connection status. "
                          "4. Ensure that the number of training samples of each NPU is consistent.")
# EI0013: the side whose RoCE link failed sees an error CQE naming its peer (the hcomm table's
# Execution_Error_ROCE_CQE: "server" is the rank table's server id, the host address)
T_HCCL_CQE = ("An error CQE occurred during operator execution. Local information: server {sip}, device ID {d}, device IP {dip}. "
              "Peer information: server {pip}, device ID {pd}, device IP {pdip}.")
# HCCL waits this long to establish a link (HCCL_CONNECT_TIMEOUT's default, in seconds): its
# "wait socket establish timeout ... timeout[120]" comes that long after the wait began
# (vllm-project/vllm-ascend#1955: "listen ... fail" at 03:47:57.070, the timeout at 03:49:57.177)
HCCL_CONNECT_TIMEOUT = 120
T_CUDA_ERR = "RuntimeError: CUDA error: {what}"
T_NCCL_CUDA_FAIL = "Cuda failure '{what}'"


def fill(pattern: str, **kw) -> tuple[str, str]:
    """(message, template) of a pattern."""
    return pattern.format(**kw), template_of(pattern)


class FaultPlan(ExtraKinds, BehaviourMixin):
    """The fault of one failed job, decided before its ranks are written."""

    def __init__(self, ctx: Ctx, rng: random.Random) -> None:
        spec, tl = ctx.spec, ctx.tl
        self.ctx, self.spec, self.tl = ctx, spec, tl
        self.kind = spec.fault_kind
        self.fault_class = FAULT_CLASSES[self.kind]
        self.rng = rng
        lay = spec.layout
        self.lay = lay
        stages = _KINDS[self.kind][2]
        self.stage = spec.fault_params.get("stage") or rng.choice(stages)
        if self.stage == "checkpoint_saving" and not self._save_candidates():
            self.stage = "training" if "training" in stages else self.stage
        self.faulty: list[int] = []
        self.root_ranks: dict[int, float] = {}  # rank -> true time it dies/hangs of the root cause
        self.propagation = "death"  # death | network | hang | silent | all_raise | slow
        self.kill_mode = spec.fault_params.get("kill_mode") or rng.choice(("scheduler", "timeout"))
        if spec.launcher == "srun":
            self.kill_mode = "scheduler"
        self.kill_delay = rng.uniform(8, 90)
        self.net_delay = rng.uniform(1.5, 45)
        self.monitor = rng.choice((0.1, 0.1, 5.0)) + rng.uniform(0, 0.3)
        self.root_exit = 1
        self.iteration: int | None = None
        self.description = ""
        self.behaviours = spec.behaviours
        self.blamed: dict[int, int] = {}
        self.nccl_version = spec.settings.get("nccl_version", "2.20.5+cuda12.4").split("+")[0]
        self._choose_time()
        getattr(self, "_prep_" + self.kind)()
        self._apply_peers_first()
        self._schedule()

    # -- when ------------------------------------------------------------------------------
    def _save_candidates(self) -> list[int]:
        return [s for s in self.tl.save_iters if s < int(self.tl.iters[-1])] if len(self.tl.iters) else []

    def _choose_time(self) -> None:
        tl, rng = self.tl, self.rng
        if self.stage == "training":
            n = len(tl.iters)
            k = rng.randint(max(1, n // 4), max(1, n - 1)) if n > 2 else 0
            it = int(tl.iters[0]) + k
            self.iteration = it
            start = tl.end_of(it - 1) if k else tl.t_train0
            self.t_root = start + (tl.end_of(it) - start) * rng.uniform(0.15, 0.85)
        elif self.stage == "checkpoint_saving":
            s = rng.choice(self._save_candidates())
            self.save_iter = s
            self.t_root = tl.end_of(s) + 0.3 + tl.save_seconds * rng.uniform(0.2, 0.8)
        else:
            t0, t1 = tl.phase[self.stage]
            self.t_root = t0 + (t1 - t0) * rng.uniform(0.3, 0.8)

    def _pick_node(self, avoid_master: bool = False) -> int:
        n = self.lay.n_nodes
        if avoid_master and n > 1:
            return self.rng.randrange(1, n)
        return self.rng.randrange(n)

    def _ranks_of(self, node: int) -> list[int]:
        R = self.lay.ranks_per_node
        return list(range(node * R, node * R + R))

    # -- kinds: who is faulty and what the timeline looks like -------------------------------
    def _one_rank_dies(self, avoid_master: bool = False, lag: float = 0.4) -> int:
        node = self._pick_node(avoid_master)
        self.faulty = [node]
        rank = self.rng.choice(self._ranks_of(node))
        self.root_ranks = {rank: self.t_root + lag}
        return rank

    def _prep_nic_link_down(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self.propagation = "network"
        self.nic = self.rng.randrange(min(8, self.lay.ranks_per_node))
        # ranks using the dead HCA fail first: one NIC serves a pair of GPUs on many systems
        R = self.lay.ranks_per_node
        users = [node * R + l for l in range(R) if l % min(8, R) == self.nic or l // 2 == self.nic // 2]
        self.root_ranks = {r: self.t_root + self.rng.uniform(3, 12) for r in users}
        self.root_exit = -6
        gen = random.Random(self.spec.seed + 99)
        self.flaps = [self.t_root - 0.5]
        for _ in range(gen.randint(2, 40)):
            self.flaps.append(self.flaps[-1] + gen.uniform(0.3, 2.5))
        self.description = "IB port of mlx5_%d went down on %s; NCCL proxies on it and on its ring neighbours hit retry-exceeded completion errors" % (self.nic, self.lay.nodes[node])

    def _prep_ib_completion_error(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self.propagation = "network"
        R = self.lay.ranks_per_node
        users = self.rng.sample(self._ranks_of(node), max(1, R // 4))
        self.root_ranks = {r: self.t_root + self.rng.uniform(0.1, 2) for r in users}
        self.root_exit = -6
        self.description = "faulty HCA on %s: local protection errors on its QPs, peers see transport retry counter exceeded" % self.lay.nodes[node]

    def _prep_nccl_timeout(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self.propagation = "hang"
        tmo = self.spec.timeout_ms / 1000.0
        early = self.rng.uniform(0.5, 3.0)
        self.root_ranks = {r: self.t_root - early + tmo + self.rng.uniform(0, 0.05) for r in self._ranks_of(node)}
        self.description = "RoCE transmit queue timeouts on %s stalled its collectives; every rank's NCCL watchdog fired after %d ms" % (self.lay.nodes[node], self.spec.timeout_ms)

    def _prep_hccl_timeout(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self.propagation = "hang"
        tmo = self.spec.timeout_ms / 1000.0
        self.root_ranks = {r: self.t_root - self.rng.uniform(0.5, 3.0) + tmo for r in self._ranks_of(node)}
        self.description = "RoCE link of the NPUs on %s flapped; peers' HCCL Notify waits timed out naming its ranks" % self.lay.nodes[node]

    def _prep_gpu_ecc_error(self) -> None:
        self._one_rank_dies(lag=0.3)
        self.xid = self.rng.choice((48, 94))
        self.description = "uncorrectable ECC error (Xid %d) on a GPU of %s" % (self.xid, self.lay.nodes[self.faulty[0]])

    def _prep_gpu_fallen_off_bus(self) -> None:
        self._one_rank_dies(lag=1.5)
        self.description = "GPU fell off the bus (Xid 79) on %s" % self.lay.nodes[self.faulty[0]]

    def _prep_kernel_exec_failure(self) -> None:
        self._one_rank_dies(lag=0.2)
        self.xid = self.rng.choice((13, 31))
        self.description = "kernel execution failure on %s (%s)" % (
            self.lay.nodes[self.faulty[0]], "AI Core exception" if self.spec.accelerator == "ascend" else "Xid %d, illegal memory access" % self.xid)

    def _prep_node_down(self) -> None:
        node = self._pick_node() if self.rng.random() < 0.5 else 0
        self.faulty = [node]
        self.propagation = "silent"
        self.root_ranks = {r: self.t_root for r in self._ranks_of(node)}
        self.kill_delay = self.rng.uniform(90, 700)  # node-failure detection by the scheduler
        self.description = "%s went down (kernel panic / power loss) without logging; peers timed out on it" % self.lay.nodes[node]

    def _prep_ckpt_load_failure(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        R = self.lay.ranks_per_node
        self.root_ranks = {r: self.t_root + self.rng.uniform(0, 4) for r in self._ranks_of(node)[: max(1, R // 2)]}
        self.errno = self.rng.choice(((116, "Stale file handle"), (5, "Input/output error")))
        self.description = "checkpoint read failed on %s ([Errno %d] %s on its parallel-filesystem mount)" % (self.lay.nodes[node], *self.errno)

    def _prep_ckpt_save_failure(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        R = self.lay.ranks_per_node
        self.root_ranks = {r: self.t_root + self.rng.uniform(0, 6) for r in self._ranks_of(node)[: max(1, R // 2)]}
        self.errno = self.rng.choice(((28, "No space left on device"), (5, "Input/output error")))
        self.description = "checkpoint write failed on %s ([Errno %d] %s on its local staging NVMe)" % (self.lay.nodes[node], *self.errno)

    def _prep_invalid_rank_table(self) -> None:
        node = self._pick_node(avoid_master=True)
        self.faulty = [node]
        self.root_ranks = {r: self.t_root + self.rng.uniform(0.1, 1) for r in self._ranks_of(node)}
        self.kill_mode = "timeout"
        self.description = "rank table lists a wrong device_ip for server %s; its ranks failed HCCL init, the others timed out connecting" % self.lay.ips[node]

    def _prep_parallel_size_mismatch(self) -> None:
        self.propagation = "all_raise"
        lay = self.lay
        self.bad_pp = next(p for p in (3, 5, 6, 7, 9, 12) if lay.world % (lay.tp * p))
        self.root_ranks = {r: self.t_root + self.rng.uniform(0, 2) for r in range(lay.world)}
        self.description = "launch configuration asks for pipeline parallel size %d, which does not divide world size %d / tensor parallel %d" % (self.bad_pp, lay.world, lay.tp)

    def _prep_timeout_too_low(self) -> None:
        self.propagation = "hang"
        self.root_ranks = {}
        self.t_root = self.tl.end_of(self.save_iter) + 0.5 + self.spec.timeout_ms / 1000.0
        self.description = "collective timeout set to %d ms, shorter than a checkpoint save (%.0f s); non-writing ranks' watchdogs fired during the save" % (self.spec.timeout_ms, self.tl.save_seconds)

    def _prep_driver_mismatch(self) -> None:
        node = self._pick_node()
        self.faulty = [node]
        self.root_ranks = {r: self.t_root + self.rng.uniform(0, 1.5) for r in self._ranks_of(node)}
        self.found_driver = self.rng.choice((11040, 12000, 12020))
        self.description = "%s runs an older NVIDIA driver (CUDA %d.%d) than the image's toolkit needs" % (self.lay.nodes[node], self.found_driver // 1000, self.found_driver % 1000 // 10)

    def _prep_program_bug(self) -> None:
        lay = self.lay
        bugs = [("IndexError: index %d is out of bounds for dimension 0 with size %d" % (128256, 128256), None),
                ("KeyError: 'attention_mask'", None),
                ("RuntimeError: shape '[%d, %d, 32, 128]' is invalid for input of size %d" % (self.spec.micro_batch, self.spec.seq_len, self.spec.micro_batch * self.spec.seq_len * 4096 + 4096), None),
                ("TypeError: unsupported operand type(s) for /: 'NoneType' and 'int'", None)]
        self.bug = self.rng.choice(bugs)[0]
        if self.rng.random() < 0.5:
            self.propagation = "all_raise"
            self.root_ranks = {r: self.t_root + self.rng.uniform(0, 1) for r in range(lay.world)}
        else:  # a data-dependent bug hits the ranks of one data-parallel replica
            dp = self.rng.randrange(lay.dp)
            self.root_ranks = {r: self.t_root + self.rng.uniform(0, 0.5) for r in range(lay.world) if lay.coords(r)[1] == dp}
        self.description = "program bug: %s" % self.bug

    def _prep_oom(self) -> None:
        lay = self.lay
        first_stage = [r for r in range(lay.world) if lay.coords(r)[2] == 0]
        rank = self.rng.choice(first_stage)
        self.faulty = [lay.node_of(rank)]
        self.root_ranks = {rank: self.t_root + 0.05}
        self.description = "out of memory on rank %d (%s)" % (rank, lay.nodes[self.faulty[0]])

    def _prep_hang(self) -> None:
        rank = self.rng.randrange(self.lay.world)
        self.faulty = [self.lay.node_of(rank)]
        self.propagation = "hang"
        self.root_ranks = {rank: INF}
        self.hung_rank = rank
        self.description = "rank %d on %s stopped making progress (stuck outside NCCL); the others waited in the next collective until the watchdog fired" % (rank, self.lay.nodes[self.faulty[0]])

    def _prep_slowdown(self) -> None:
        tl = self.tl
        node = self._pick_node()
        self.faulty = [node]
        self.propagation = "slow"
        k = self.iteration - int(tl.iters[0])
        n = len(tl.iters)
        ramp = min(n - k, max(5, (n - k) // 3))
        factor = self.rng.uniform(2.0, 4.5)
        import numpy as np
        grow = np.ones(n)
        grow[k:k + ramp] = np.linspace(1.15, factor, ramp)
        grow[k + ramp:] = factor
        tl.iter_s = tl.iter_s * grow
        tl.finalize()
        self.slow_factor = factor
        self.iteration_end = min(int(tl.iters[-1]), self.iteration + ramp + self.rng.randint(20, 400))
        self.t_stop = tl.end_of(self.iteration_end) + 0.5
        self.root_ranks = {}
        self.description = "%s throttled (thermal): iteration time grew %.1fx from iteration %d until the job was cancelled" % (self.lay.nodes[node], factor, self.iteration)

    def _prep_loss_nan(self) -> None:
        fw = self.spec.framework
        tl = self.tl
        k = self.iteration - int(tl.iters[0])
        n = len(tl.iters)
        spike = min(k, 8)
        tl.loss[k - spike:k] = tl.loss[k - spike:k] * (1 + 0.4 * (1 + self._arange(spike)))
        tl.grad_norm[k - spike:k] = tl.grad_norm[k - spike:k] * (5 + 10 * self._arange(spike))
        if fw in ("megatron", "mindspeed") and self.rng.random() < 0.6:
            rank = self.rng.randrange(self.lay.world)
            self.faulty = [self.lay.node_of(rank)]
            self.root_ranks = {rank: self.t_root + 0.1}
            self.nan_mode = "assert"
            self.description = "NaN in the local grad norm on rank %d (%s): silent data corruption suspected" % (rank, self.lay.nodes[self.faulty[0]])
        else:
            self.nan_mode = "diverge"
            tl.nan_from = self.iteration
            run = min(n - k - 1, self.rng.randint(20, 400))
            self.iteration_end = self.iteration + max(0, run)
            self.t_stop = tl.end_of(self.iteration_end) + 0.5
            self.propagation = "slow"
            self.root_ranks = {}
            self.description = "training diverged: loss became NaN at iteration %d" % self.iteration

    @staticmethod
    def _arange(n: int):
        import numpy as np
        return np.arange(n) / max(1, n)

    # -- propagation schedule ----------------------------------------------------------------
    def _schedule(self) -> None:
        lay, spec, rng = self.lay, self.spec, self.rng
        W = lay.world
        tmo = spec.timeout_ms / 1000.0
        self.natural: list[float] = [INF] * W
        self.cause: list[str] = ["none"] * W
        self.neighbours: set[int] = set()
        for n in self.faulty:
            self.neighbours.update(lay.ring_neighbours(n))
        self.neighbours.difference_update(self.faulty)
        if self.propagation in ("slow",):
            t_end = getattr(self, "t_stop", None)
            if t_end is None:
                t_end = self.tl.end_of(int(self.tl.iters[-1])) + 1.0
            self.t_stop = t_end
            self.t_kill = t_end + rng.uniform(1, 5)
            self.kill_mode = "scheduler"
            self.end = [self.t_kill] * W
            self.killed = [True] * W
            self.node_first = [INF] * lay.n_nodes
            return
        t_block = self.t_root
        if self.kind == "timeout_too_low":
            t_block = self.tl.end_of(self.save_iter) + 0.5
        for r in range(W):
            jr = rank_rng(spec, r, 17)
            if r in self.root_ranks:
                self.natural[r] = self.root_ranks[r]
                self.cause[r] = "root" if self.root_ranks[r] < INF else "hung"
                continue
            node = lay.node_of(r)
            t_wd = t_block + tmo + jr.uniform(0.005, 0.09)
            t_net = INF
            if node in self.neighbours and self.propagation in ("death", "network", "silent"):
                t_net = min(self.root_ranks.values(), default=self.t_root) + self.net_delay + jr.uniform(0, 3)
                if self._hccl_links_pending():
                    # the link's wait began about when the peer was lost; it ends HCCL_CONNECT_TIMEOUT later
                    t_net = min(self.root_ranks.values(), default=self.t_root) + HCCL_CONNECT_TIMEOUT - jr.uniform(0, 20)
            if self.propagation == "all_raise" or (self.kind == "timeout_too_low" and r == 0):
                t_wd = INF
                if self.kind == "timeout_too_low":
                    continue
            if self.kind in ("invalid_rank_table",):
                t_wd = self.t_root + HCCL_CONNECT_TIMEOUT + jr.uniform(0, 2)
            if self.kind == "driver_mismatch":
                t_wd = self.t_root + tmo + jr.uniform(0, 2)
            if t_net < t_wd:
                self.natural[r], self.cause[r] = t_net, "net"
            elif t_wd < INF:
                self.natural[r], self.cause[r] = t_wd, "wd"
        self._cascade_causes()
        R = lay.ranks_per_node
        self.node_first = [min(self.natural[n * R:(n + 1) * R]) for n in range(lay.n_nodes)]
        if self.propagation == "silent":
            for n in self.faulty:
                self.node_first[n] = INF  # the node's agent died with it
        first = min(self.node_first + [min(self.root_ranks.values(), default=INF)])
        if self.propagation == "silent":
            first = self.t_root
        self.t_kill = first + self.kill_delay if self.kill_mode == "scheduler" else INF
        self.end = [INF] * W
        self.killed = [False] * W
        for r in range(W):
            node = r // R
            agent_kill = self.node_first[node] + self.monitor if self.natural[r] > self.node_first[node] else INF
            if self.propagation == "silent" and node in self.faulty:
                self.end[r] = self.t_root
                continue
            e = min(self.natural[r], agent_kill, self.t_kill)
            self.end[r] = e
            self.killed[r] = e < self.natural[r]
        self._store_host_leaves()
        self.t_last = max(e for e in self.end if e < INF) if any(e < INF for e in self.end) else self.t_root

    # -- per-rank interface ------------------------------------------------------------------
    def until(self, rank: int) -> float:
        if self.propagation == "slow":
            return self.t_stop
        if self.propagation == "all_raise":
            return self.root_ranks.get(rank, self.t_root)
        if self.kind == "timeout_too_low":
            return self.end[rank]
        return self.t_root

    def emit(self, r: RankLog, rng: random.Random) -> None:
        """Write the rank's failure lines (its healthy lines are already written)."""
        r.until = INF
        rank = r.rank
        node = self.lay.node_of(rank)
        events: list[tuple[float, int, object, tuple, dict]] = []
        self._ev = events
        if r.local == 0 and node in self.faulty:
            self.kernel_lines(r, rng)
        if r.local == 0 and self.propagation == "silent":
            self._master_unreachable(r, rng, node)
        held: list[str] = []
        if not self.spec.unbuffered and self.cause[rank] == "root" and not self.killed[rank] and r.out:
            # stdout is block-buffered: its tail is flushed at exit, after the stderr traceback
            k = min(len(r.out), rng.randint(1, 4))
            held, r.out[-k:] = r.out[-k:], []
        scan_from = 0 if r.marked else len(r.out)
        self._store_gone(r, rng, node)
        self.store_host_lines(r, node)
        if self.kind == "nic_link_down" and node in self.faulty and self.cause[rank] != "root":
            self._port_events(r, rng, self.end[rank])
        if self.propagation == "slow":
            self.slow_lines(r, rng)
        elif self.end[rank] < INF or self.cause[rank] == "hung":
            if not self.killed[rank]:
                cause = self.cause[rank]
                if cause == "root":
                    self.faulty_names_neighbours(r, self.natural[rank])
                    getattr(self, "_root_" + self.kind)(r, rng, self.natural[rank])
                elif cause == "net":
                    self.peer_network_error(r, rng, self.natural[rank])
                elif cause == "net2":
                    self.second_hop_error(r, self.natural[rank])
                elif cause == "wd":
                    self.watchdog(r, rng, self.natural[rank])
            if self.cause[rank] == "hung":
                self._dump_signal(r, rng)
        events.sort(key=lambda e: (e[0], e[1]))
        for _, _, fn, args, kw in events:
            fn(*args, **kw)
        r.out.extend(held)
        if r.local == 0:
            self.launcher_lines(r, rng, node)
        r.truth.scan(r, scan_from)

    def _add(self, t: float, fn, *args, **kw) -> None:
        self._ev.append((t, len(self._ev), fn, (t,) + args, kw))

    # -- shared building blocks ----------------------------------------------------------------
    def _seq(self) -> int:
        it = self.iteration or (getattr(self, "save_iter", None) or int(self.tl.iters[0]) if len(self.tl.iters) else 1)
        return 20 + it * self.spec.settings.get("colls_per_iter", 48)

    def watchdog(self, r: RankLog, rng: random.Random, t: float, seq: int | None = None, op: str | None = None) -> None:
        """NCCL watchdog timeout and abort (CUDA) or HCCL Notify-wait timeout (Ascend)."""
        if self.spec.accelerator == "ascend":
            return self._hccl_timeout_peer(r, rng, t)
        spec = self.spec
        seq = seq or self._seq()
        op = op or spec.settings.get("timeout_op", "ALLREDUCE")
        tmo = spec.timeout_ms
        ran = tmo + rng.randint(3, 90)
        numel = spec.settings.get("timeout_numel", 1)
        st = spec.c10_style
        g = self.group_rank(r.rank)  # the rank within the group of the collective (``subgroup_collectives``)
        if st >= 2:
            wd, wd_t = fill(T_WATCHDOG, r=g, seq=seq, op=op, n=numel, n2=numel, tmo=tmo, ran=ran)
        else:
            wd, wd_t = fill(T_WATCHDOG_OLD, r=g, seq=seq, op=op, tmo=tmo, ran=ran)
        src = {3: "ProcessGroupNCCL.cpp:616", 2: "ProcessGroupNCCL.cpp:523", 1: "ProcessGroupNCCL.cpp:475"}[min(st, 3)]
        self._add(t, r.c10, "E", src, wd, tmpl=wd_t)
        pg = self.in_group(DEFAULT_PG_PREFIX).format(r=g) if st >= 3 else "[Rank %d]" % g
        if st >= 3:
            # the rank may have enqueued a few more collectives behind the one that timed out
            enq = seq + rank_rng(spec, r.rank, 31).choice((0, 0, 1, 2, 4))
            lw, lw_t = fill(self.in_group(T_LAST_WORK), r=g, seq=seq, enq=enq, done=seq - 1)
            self._add(t + 0.0004, r.c10, "E", "ProcessGroupNCCL.cpp:1785", lw, tmpl=lw_t)
            self._add(t + 0.0005, r.c10, "E", "ProcessGroupNCCL.cpp:1834", "%s Timeout at NCCL work: %d, last enqueued NCCL work: %d, last completed NCCL work: %d." % (pg, seq, enq, seq - 1))
            self._add(t + 0.0006, r.c10, "E", "ProcessGroupNCCL.cpp:630", "%s Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data." % pg)
            self._add(t + 0.0007, r.c10, "E", "ProcessGroupNCCL.cpp:636", "%s To avoid data inconsistency, we are taking the entire process down." % pg)
            term = "%s Process group watchdog thread terminated with exception: %s" % (pg, wd)
            self._add(t + 0.0008, r.c10, "E", "ProcessGroupNCCL.cpp:1595", term, tmpl=wd_t, mark=wd)
            if spec.accelerator == "cuda":  # its own timeout signalled the dump (TORCH_NCCL_DUMP_ON_TIMEOUT)
                dump, dump_t = fill(self.in_group(T_DUMP), r=g, src=self.dump_source(r), enq=enq, done=seq - 1)
                self._add(t + 0.0009, r.c10, "E", "ProcessGroupNCCL.cpp:1664", dump, tmpl=dump_t)
        else:
            self._add(t + 0.0005, r.c10, "E", "ProcessGroupNCCL.cpp:489", "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.")
            self._add(t + 0.0006, r.c10, "E", "ProcessGroupNCCL.cpp:495", "To avoid data inconsistency, we are taking the entire process down.")
            term = "%s NCCL watchdog thread terminated with exception: %s" % (pg, wd)
        self._abort(r, rng, t + 0.001, term, wd, wd_t, "ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1601")

    def _abort(self, r: RankLog, rng: random.Random, t: float, what: str, mark: str | None, mark_t: str | None, origin: str,
               extra: list[str] = (), exc: str | None = None) -> None:
        """``terminate called after throwing ...`` with the C++ frames of a c10 error (the process
        aborts: -6); ``exc``: a standard exception's class, which carries no frames."""
        frames = [] if exc else cpp_frames(rng, origin)
        exc = exc or ("c10::DistBackendError" if self.spec.c10_style >= 2 else "std::runtime_error")
        lines = ["terminate called after throwing an instance of '%s'" % exc, "  what():  " + what] + list(extra) + frames
        for i, line in enumerate(lines):
            if i == 1 and mark:
                self._add(t + i * 1e-5, r.plain, line, True, tmpl=mark_t, level=None, mark=mark)
            else:
                self._add(t + i * 1e-5, r.plain, line, True)

    def peer_network_error(self, r: RankLog, rng: random.Random, t: float, peer_node: int | None = None) -> None:
        """A neighbour of the faulty node (or of ``peer_node``): IB completion errors naming it, then the abort."""
        if self.spec.accelerator == "ascend":
            fnode = self.faulty[0] if peer_node is None else peer_node
            if self._hccl_links_pending():
                return self._hccl_socket_peer(r, rng, t, fnode)
            return self._hccl_cqe_peer(r, rng, t, fnode)
        lay = self.lay
        fnode = self.faulty[0] if peer_node is None else peer_node
        if self.kind == "nic_down_init":  # NCCL init: the bootstrap sockets of the failed ranks close
            msg, tm = BEHAVIOUR_FORMATS["socket_closed"].fill(host=lay.nodes[fnode], port=rng.randint(32768, 60999))
            self._add(t, r.nccl_warn, "misc/socket.cc:49", msg, r.pid + 60 + r.local, tmpl=tm)
            return self._nccl_exception(r, rng, t + rng.uniform(0.05, 1.0), msg, tm)
        fip = lay.ips[fnode]
        tid = r.pid + 240 + r.local
        nerr = rng.randint(1, 4)
        msgs = []
        for i in range(nerr):
            msg, tm = ib_completion(self.nccl_version).fill(ip=fip, port=rng.randint(32768, 60999), err=12, opc=0, ln=0,
                                                             verr=129, dir=rng.choice(("Recv", "Send")), mine=r.ip)
            msgs.append((msg, tm))
            tt = t + i * rng.uniform(0.001, 0.05)
            self._add(tt, r.nccl_warn, "transport/net_ib.cc:1696", msg, tid + i, tmpl=tm)
        # every connection of the proxy thread that fails reports its call trace: NCCL's back
        # trace of the error code (NCCLCHECK), where it passed, not what went wrong: not labelled
        m2 = fill(T_NET_TRACE, line=1134, code=6)[0]
        m3 = fill(T_PROXY_TRACE, line=858, code=6)[0]
        for c in range(min(self.spec.n_channels, 32)):
            tt = t + 0.06 + c * 0.0007
            self._add(tt, r.nccl, m2, tid)
            self._add(tt + 0.0001, r.nccl, m3, tid)
        self._nccl_exception(r, rng, t + rng.uniform(0.05, 1.5), msgs[0][0], msgs[0][1])

    def _nccl_exception(self, r: RankLog, rng: random.Random, t: float, last_error: str, last_error_t: str) -> None:
        st = self.spec.c10_style
        g = self.group_rank(r.rank)
        if st >= 3:
            head, head_t = fill(self.in_group(T_NCCL_REMOTE), r=g, v=self.nccl_version)
        else:
            head, head_t = fill(T_NCCL_REMOTE_OLD, r=g, v=self.nccl_version)
        self._add(t, r.c10, "E", "ProcessGroupNCCL.cpp:1595" if st >= 3 else "ProcessGroupNCCL.cpp:1182", head, tmpl=head_t)
        cont = ["ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.", "Last error:", last_error]
        for i, line in enumerate(cont):
            self._add(t + 1e-5 * (i + 1), r.plain, line, True, tmpl=last_error_t if i == 2 else None, level="WARN")
        self._abort(r, rng, t + 0.0002, head, head, head_t, "checkForNCCLErrorsInternal at ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275", cont)

    def _hccl_timeout_peer(self, r: RankLog, rng: random.Random, t: float, remote: int | None = None) -> None:
        """Ascend: a peer's HCCL Notify wait times out naming a remote rank on the faulty node."""
        fnode = self.faulty[0] if self.faulty else 0
        rr = self.group_rank(remote if remote is not None else fnode * self.lay.ranks_per_node + r.local)
        comm, size = self.hccl_communicator(r.rank)
        tag, sid, tid = "AllReduce_" + comm, rng.randint(2, 9), rng.randint(1, 60000)
        if "hccl_group_information" in self.behaviours:
            msg, tm = BEHAVIOUR_FORMATS["hccl_notify_group"].fill(rr=rr, sid=sid, tid=tid, tag=tag, group=comm, size=size,
                                                                  me=self.group_rank(r.rank), nid=rng.getrandbits(40))
        else:
            msg, tm = fill(T_HCCL_NOTIFY, rr=rr, sid=sid, tid=tid, tag=tag)
        self._add(t, r.npu_code, "EI0002", msg, tmpl=tm)
        self.heartbeat_lines(r, t)
        for i, line in enumerate((T_HCCL_NOTIFY_SOLUTION, "        TraceBack (most recent call last):")):
            self._add(t + 1e-5 * (i + 1), r.plain, line, True)
        ex, ex_t = fill("RuntimeError: ACL stream synchronize failed, error code:{code}", code=507048)
        self._py_exception(r, rng, t + 0.2, [ex], {0: ex_t})

    def _error_cqe(self, r: RankLog, node: int) -> tuple[str, str]:
        """EI0013 of rank ``r``'s link to the same device of ``node`` (a device's address: its
        host's with 100 + the device's number as the last byte)."""
        device_ip = lambda ip: "%s.%d" % (ip.rsplit(".", 1)[0], 100 + r.local)
        peer = self.lay.ips[node]
        return fill(T_HCCL_CQE, sip=r.ip, d=r.local, dip=device_ip(r.ip), pip=peer, pd=r.local, pdip=device_ip(peer))

    def _hccl_links_pending(self) -> bool:
        """Ascend: the job failed before HCCL had set up the links between its ranks. HCCL sets up a
        link when a communicator is first used, so a fault at ``init`` finds its peers waiting to
        establish one; later ones find the links up."""
        return self.spec.accelerator == "ascend" and self.stage == "init"

    def _hccl_socket_peer(self, r: RankLog, rng: random.Random, t: float, fnode: int) -> None:
        """Ascend, before the links are up: a neighbour waited to establish a link with the lost
        node's rank, and gives up HCCL_CONNECT_TIMEOUT after its wait began (``t``, the schedule's)."""
        rr = self.group_rank(fnode * self.lay.ranks_per_node + r.local)
        msg, tm = fill("[Wait][LinkEstablish]wait socket establish timeout, role[{role}] rank[{rr}] timeout[{tmo}]",
                       role=rng.randint(0, 1), rr=rr, tmo=HCCL_CONNECT_TIMEOUT)
        self._add(t, r.cann, "ERROR", "HCCL", "hccl_socket_manager.cc:778", msg, r.pid + 31, tmpl=tm)
        msg2, tm2 = fill("Getting socket times out. Reason: Remote Rank did not send the data in time. Please check the reason for the rank being stuck", )
        self._add(t + 0.01, r.npu_code, "EI0006", msg2, tmpl=tm2)
        ex, ex_t = fill("RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:{line} OPS function error: HcclAllreduce, error code is {code}", line=281, code=6)
        self._py_exception(r, rng, t + 0.3, [ex], {0: ex_t})

    def _hccl_cqe_peer(self, r: RankLog, rng: random.Random, t: float, fnode: int) -> None:
        """Ascend, once the links are up: RoCE gives up retransmitting to the lost node's NPU. The
        RoCE driver reports the error CQE in the plog, HCCL's EI0013 names both ends of the link,
        and torch_npu's watchdog, polling ``HcclGetCommAsyncError``, ends the process with
        ``HCCL_E_REMOTE``."""
        cqe, cqe_t = BEHAVIOUR_FORMATS["roce_error_cqe"].fill(status=0x15)
        self._add(t, r.cann, "ERROR", "ROCE", "hns_roce_lite.c:630", cqe, r.pid + 33, tmpl=cqe_t)
        m, tm = self._error_cqe(r, fnode)
        self._add(t + rng.uniform(0.01, 0.5), r.npu_code, "EI0013", m, tmpl=tm)
        what, what_t = BEHAVIOUR_FORMATS["hccl_e_remote"].fill()
        self._abort(r, rng, t + rng.uniform(0.6, 2.0), what, what, what_t, "", exc="std::runtime_error")

    def _py_exception(self, r: RankLog, rng: random.Random, t: float, exception_lines: list[str],
                      marks: dict[int, str], level: str | None = None, stage: str | None = None,
                      extra: tuple = ()) -> None:
        """A Python traceback of the rank's main thread; ``marks``: exception-line index -> template;
        ``extra``: frames below the stage's own (path, line, function, code)."""
        lines = python_traceback(self.spec.framework, stage or self.stage, exception_lines, extra)
        offset = len(lines) - len(exception_lines)
        pre = r.tb_pre
        for i, line in enumerate(lines):
            k = i - offset
            if k in marks:
                self._add(t + i * 2e-5, r.plain, pre + line, True, tmpl=marks[k], level=level, mark=line)
            else:
                self._add(t + i * 2e-5, r.plain, pre + line, True)

    def _dump_signal(self, r: RankLog, rng: random.Random) -> None:
        """The hung rank's watchdog receives the dump signal: its enqueued count is one behind."""
        if self.spec.c10_style < 3 or self.spec.accelerator != "cuda":
            return
        first_wd = min((t for t, c in zip(self.natural, self.cause) if c == "wd"), default=INF)
        t = first_wd + rng.uniform(0.001, 0.05)
        if t >= self.end[r.rank]:
            return
        seq = self._seq() - 1
        msg, tm = fill(T_DUMP, r=r.rank, src=" rank %d" % self.natural.index(first_wd), enq=seq, done=seq)
        self._add(t, r.c10, "E", "ProcessGroupNCCL.cpp:1664", msg, tmpl=tm)

    def _root_nccl_timeout(self, r, rng, t):
        self.watchdog(r, rng, t, seq=self._seq() - 1, op="_ALLGATHER_BASE")

    def _root_hccl_timeout(self, r, rng, t):
        lay = self.lay
        node = lay.node_of(r.rank)
        nb = (sorted(self.neighbours) or [node])[0]
        rr = nb * lay.ranks_per_node + r.local
        m, tm = self._error_cqe(r, nb)
        tl = self.t_root + rng.uniform(0.1, 2)
        self._add(tl, r.npu_code, "EI0013", m, tmpl=tm)
        self._hccl_timeout_peer(r, rng, t, remote=rr)

    def _store_gone(self, r: RankLog, rng: random.Random, node: int) -> None:
        """Rank 0 hosted the TCPStore; once its node's processes are gone, every surviving rank's
        heartbeat monitor fails to read the store about once a second until the rank ends."""
        if self.spec.c10_style < 3 or self.spec.accelerator != "cuda" or node == 0 or 0 not in self.faulty:
            return
        R = self.lay.ranks_per_node
        gone = min(self.end[:R])
        if gone == INF or self.propagation == "slow":
            return
        err = "Connection reset by peer" if self.propagation != "silent" else "Connection refused"
        msg, tm = fill('[PG ID 0 PG GUID 0(default_pg) Rank {r}] Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: {e}', r=r.rank, e=err)
        t = gone + rng.uniform(0.5, 1.5)
        end = self.end[r.rank] if self.cause[r.rank] != "hung" else self.end[r.rank]
        step = max(1.0, (end - t) / 1800.0)
        while t < end:
            self._add(t, r.c10, "W", "ProcessGroupNCCL.cpp:1294", msg, tmpl=tm)
            t += step

    def _master_unreachable(self, r: RankLog, rng: random.Random, node: int) -> None:
        """The store host died: the agent's store client retries, thousands of times."""
        if self.spec.launcher != "torchrun" or 0 not in self.faulty or node in self.faulty:
            return
        R = self.lay.ranks_per_node
        t_end = min(self.end[node * R:(node + 1) * R])
        msg, tm = fill("[c10d] The client socket has failed to connect to [{host}]:29500 (errno: 111 - Connection refused).", host=self.lay.nodes[0])
        t = self.t_root + rng.uniform(3, 30)
        step = rng.uniform(0.5, 1.5)
        while t < t_end:
            self._add(t, r.glog_plain, "W", "socket.cpp:697", msg, tmpl=tm)
            t += step

    # -- root causes ---------------------------------------------------------------------------
    def kernel_lines(self, r: RankLog, rng: random.Random) -> None:
        """dmesg lines of the faulty node (present only when the job collects kernel logs)."""
        k, t = self.kind, self.t_root
        extra = getattr(self, "_kernel_" + k, None)
        if extra is not None:
            return extra(r, rng)
        lay = self.lay
        R = lay.ranks_per_node
        bus = lambda l: "0000:%02x:00" % (0x18 + 0x11 * l)
        root = sorted(self.root_ranks)[:1]
        local = root[0] % R if root else 0
        pid = r.pid + local
        marks = []
        if k == "gpu_ecc_error":
            if self.xid == 48:
                marks.append(("NVRM: Xid (PCI:{b}): 48, pid={pid}, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition {p}, subpartition {s}.", dict(b=bus(local), pid=pid, p=rng.randint(0, 7), s=rng.randint(0, 1))))
                marks.append(("NVRM: Xid (PCI:{b}): 63, pid={pid}, name=python3, Row Remapper: New row (0x{row}) marked for remapping, reset gpu to activate.", dict(b=bus(local), pid=pid, row="%09x" % rng.getrandbits(32))))
            else:
                marks.append(("NVRM: Xid (PCI:{b}): 94, pid={pid}, name=python3, Contained: SM (0x{sm}). RST: No, D-RST: No", dict(b=bus(local), pid=pid, sm=rng.randint(1, 8))))
        elif k == "gpu_fallen_off_bus":
            marks.append(("NVRM: GPU at PCI:{b}: GPU-{uuid}", dict(b=bus(local), uuid="%08x-%04x-%04x-%04x-%012x" % (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(48)))))
            marks.append(("NVRM: Xid (PCI:{b}): 79, pid={pid}, name=python3, GPU has fallen off the bus.", dict(b=bus(local), pid=pid)))
            marks.append(("NVRM: GPU {b}.0: GPU has fallen off the bus.", dict(b=bus(local))))
        elif k == "kernel_exec_failure" and self.spec.accelerator == "cuda":
            if self.xid == 13:
                marks.append(("NVRM: Xid (PCI:{b}): 13, pid={pid}, name=python3, Graphics SM Warp Exception on (GPC {g}, TPC {tpc}, SM {sm}): Out Of Range Address", dict(b=bus(local), pid=pid, g=rng.randint(0, 7), tpc=rng.randint(0, 8), sm=rng.randint(0, 1))))
            else:
                marks.append(("NVRM: Xid (PCI:{b}): 31, pid={pid}, name=python3, Ch 0000{ch}, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_{c} faulted @ 0x7f{a}_{b2}. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ", dict(b=bus(local), pid=pid, ch="%04x" % rng.randint(8, 0xff), c=rng.randint(0, 15), a="%02x" % rng.randint(0, 255), b2="%08x" % rng.getrandbits(32))))
        elif k == "nic_link_down":
            for i, tt in enumerate(self.flaps):
                for pat, kw in (("mlx5_core 0000:{b}.0 ibp{n}s0: Link down", dict(b="%02x:00" % (0x1a + 0x20 * self.nic), n=26 + 32 * self.nic)),
                                ("mlx5_core 0000:{b}.0 ibp{n}s0: Link up", dict(b="%02x:00" % (0x1a + 0x20 * self.nic), n=26 + 32 * self.nic))):
                    msg, tm = fill(pat, **kw)
                    self._add(tt, r.kern, msg, tmpl=tm)
                    tt += 0.2
            return
        elif k == "ib_completion_error":
            for i in range(rng.randint(2, 12)):
                msg, tm = fill("infiniband mlx5_{n}: mlx5_handle_error_cqe:332:(pid {pid}): WC error: 4, Message: local protection error", n=rng.randrange(min(8, R)), pid=r.pid + 240 + i)
                self._add(t - 0.01 + i * 0.003, r.kern, msg, tmpl=tm)
            return
        elif k == "nccl_timeout":
            for i in range(rng.randint(1, 6)):
                msg, tm = fill("NETDEV WATCHDOG: ens{n}f0np0 (mlx5_core): transmit queue {q} timed out {ms} ms", n=rng.choice((1, 2, 3)), q=rng.randint(0, 63), ms=rng.randint(5000, 9000))
                self._add(t + i * rng.uniform(1, 30), r.kern, msg, tmpl=tm)
            return
        elif k == "ckpt_load_failure":
            msg, tm = fill("LustreError: 11-0: lustre-OST{o}-osc-ffff{h}: operation ost_read to node {ip}@o2ib failed: rc = -107", o="%04x" % rng.randint(0, 64), h="%012x" % rng.getrandbits(48), ip="10.0.0.%d" % rng.randint(2, 40))
            self._add(t - 2, r.kern, msg, tmpl=tm)
            return
        elif k == "ckpt_save_failure":
            for i in range(rng.randint(2, 30)):
                msg, tm = fill("blk_update_request: I/O error, dev nvme{d}n1, sector {s} op 0x1:(WRITE) flags 0x800 phys_seg {p} prio class 0", d=rng.randint(0, 3), s=rng.randint(10**6, 10**9), p=rng.randint(1, 64))
                self._add(t - 1 + i * 0.01, r.kern, msg, tmpl=tm)
            return
        elif k == "slowdown":
            return
        for i, (pat, kw) in enumerate(marks):
            msg, tm = fill(pat, **kw)
            self._add(t - 0.3 + i * 0.0001, r.kern, msg, tmpl=tm)

    def _cuda_error(self, r: RankLog, rng: random.Random, t: float, what: str, xid_note: bool = True) -> None:
        """A CUDA error surfaced through NCCL and the Python main thread."""
        tid = r.pid + 240 + r.local
        m, tm = fill(T_NCCL_CUDA_FAIL, what=what)
        # the proxy thread's warning lands in the middle of the main thread's traceback
        tw = t + 0.01 + rng.randint(2, 14) * 2e-5 + 1e-6
        self._add(tw, r.nccl_warn, "proxy.cc:1497", m, tid, tmpl=tm)
        self._add(tw + 1e-6, r.nccl, fill(T_PROXY_TRACE, line=1661, code=1)[0], tid)  # back trace: not labelled
        ex, ex_t = fill(T_CUDA_ERR, what=what)
        tail = ["CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", ""]
        self._py_exception(r, rng, t + 0.01, [ex] + tail, {0: ex_t})

    def _root_gpu_ecc_error(self, r, rng, t):
        self._cuda_error(r, rng, t, "uncorrectable ECC error encountered")

    def _root_gpu_fallen_off_bus(self, r, rng, t):
        self._cuda_error(r, rng, t, "unknown error")

    def _root_kernel_exec_failure(self, r, rng, t):
        if self.spec.accelerator == "ascend":
            m, tm = fill("The error from device(chipId:{c}, dieId:0), serial number is {sn}, there is an aicore error exception, core id is {core}, error code = 0x800000, dump info: pc start: 0x{pc}, current: 0x{cur}, vec error info: 0x{v}, mte error info: 0x{mte}, ifu error info: 0x2bf7f2ff8c0, ccu error info: 0x0, cube error info: 0, biu error info: 0, aic error mask: 0x6500020bd000288, para base: 0x{pb}.",
                         c=r.local, sn=rng.randint(1, 99), core=rng.randint(0, 23), pc="%012x" % rng.getrandbits(44), cur="%012x" % rng.getrandbits(44), v="%08x" % rng.getrandbits(32), mte="%08x" % rng.getrandbits(32), pb="%012x" % rng.getrandbits(44))
            self._add(t, r.npu_code, "EZ9999", "Inner Error!")
            self._add(t + 1e-4, r.npu_code, "EZ9999", m, tmpl=tm)
            ex, ex_t = fill("RuntimeError: ACL stream synchronize failed, error code:{code}", code=507015)
            self._py_exception(r, rng, t + 0.05, [ex], {0: ex_t})
        else:
            self._cuda_error(r, rng, t, "an illegal memory access was encountered")

    def _port_events(self, r: RankLog, rng: random.Random, until: float) -> None:
        """Every process with the HCA open gets the port-error async event of every flap."""
        m, tm = fill("NET/IB : mlx5_{n}:1 Got async event : port error", n=self.nic)
        for tt in self.flaps:
            if tt < until:
                self._add(tt + rng.uniform(0.0005, 0.01), r.nccl_warn, "transport/net_ib.cc:103", m, r.pid + 201, tmpl=tm)

    def _root_nic_link_down(self, r, rng, t):
        self._port_events(r, rng, t)
        self._own_completion_errors(r, rng, t, err=12, verr=129)

    def _root_ib_completion_error(self, r, rng, t):
        self._own_completion_errors(r, rng, t, err=4, verr=81)

    def _own_completion_errors(self, r: RankLog, rng: random.Random, t: float, err: int, verr: int) -> None:
        nbrs = sorted(self.neighbours) or [self.lay.node_of(r.rank)]
        tid = r.pid + 240 + r.local
        msgs = []
        for i in range(rng.randint(1, 3)):
            peer = self.lay.ips[rng.choice(nbrs)]
            m, tm = ib_completion(self.nccl_version).fill(ip=peer, port=rng.randint(32768, 60999), err=err, opc=0, ln=0,
                                                           verr=verr, dir="Send", mine=r.ip)
            msgs.append((m, tm))
            self._add(t + i * 0.002, r.nccl_warn, "transport/net_ib.cc:1696", m, tid, tmpl=tm)
            self._add(t + i * 0.002 + 1e-4, r.nccl, fill(T_NET_TRACE, line=1134, code=6)[0], tid)  # back trace: not labelled
        self._nccl_exception(r, rng, t + rng.uniform(0.01, 0.5), msgs[0][0], msgs[0][1])

    def _root_node_down(self, r, rng, t):
        return None  # a dead node logs nothing

    def _root_ckpt_load_failure(self, r, rng, t):
        spec = self.spec
        errno, text = self.errno
        path = "%s/iter_%07d/__%d_0.distcp" % (spec.ckpt_dir, spec.start_iter, r.rank) if spec.framework in ("megatron", "mindspeed") else \
            "%s/global_step%d/zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (spec.ckpt_dir, spec.start_iter or 1000, r.rank)
        ex, ex_t = fill("OSError: [Errno {e}] {txt}: '{p}'", e=errno, txt=text, p=path)
        self._py_exception(r, rng, t, [ex], {0: ex_t})

    def _root_ckpt_save_failure(self, r, rng, t):
        spec = self.spec
        errno, text = self.errno
        path = "/local_nvme/ckpt_staging/iter_%07d/__%d_0.distcp" % (self.save_iter, r.rank)
        ex, ex_t = fill("OSError: [Errno {e}] {txt}: '{p}'", e=errno, txt=text, p=path)
        if spec.framework in ("deepspeed", "megatron_deepspeed"):
            m, tm = fill("[Torch] Failed to save {p}: [Errno {e}] {txt}", p=path, e=errno, txt=text)
            self._add(t - 0.01, r.pylog, "ERROR", "torch_checkpoint_engine.py:25:save", m, tmpl=tm)
        self._py_exception(r, rng, t, [ex], {0: ex_t})

    def _root_invalid_rank_table(self, r, rng, t):
        lay = self.lay
        node = lay.node_of(r.rank)
        bad_ip = "%s.%d" % (lay.ips[node].rsplit(".", 1)[0], 200 + r.local)
        m, tm = fill("[Check][RankTable]device_ip[{dip}] of rank[{rk}] in rank table does not match the device ip of devicePhyId[{d}] on server[{sip}], please check the ranktable file[{f}]",
                     dip=bad_ip, rk=r.rank, d=r.local, sip=lay.ips[node], f="/user/config/jobstart_hccl.json")
        self._add(t, r.cann, "ERROR", "HCCL", "topoinfo_ranktableParser_pub.cc:590", m, r.pid, tmpl=tm)
        m2, tm2 = fill("[Init][Result]hcom init failed, rankTable[{f}] rank[{rk}] ret[{ret}]", f="/user/config/jobstart_hccl.json", rk=r.rank, ret=1)
        self._add(t + 0.001, r.cann, "ERROR", "HCCL", "hcom.cc:170", m2, r.pid, tmpl=tm2)
        ex, ex_t = fill("RuntimeError: InnerRunOpApi:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:{line} HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm), error code is {code}", line=1827, code=1)
        self._py_exception(r, rng, t + 0.1, [ex], {0: ex_t})

    def _root_parallel_size_mismatch(self, r, rng, t):
        lay = self.lay
        if self.spec.framework == "deepspeed":
            gas = max(1, self.spec.global_batch // (self.spec.micro_batch * lay.world)) + 1
            ex, ex_t = fill("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size {a} != {b} * {c} * {w}",
                            a=self.spec.global_batch, b=self.spec.micro_batch, c=gas, w=lay.world)
        else:
            ex, ex_t = fill("AssertionError: world size ({w}) is not divisible by tensor model parallel size ({tp}) times pipeline model parallel size ({pp})", w=lay.world, tp=lay.tp, pp=self.bad_pp)
        self._py_exception(r, rng, t, [ex], {0: ex_t}, stage="init")

    def _root_driver_mismatch(self, r, rng, t):
        found = self.found_driver
        warn, warn_t = fill("/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version {v}). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)", v=found)
        self._add(t - 0.5, r.plain, warn, True, tmpl=warn_t, level="WARN")
        self._add(t - 0.5, r.plain, "  return torch._C._cuda_getDeviceCount() > 0", True)
        ex, ex_t = fill("RuntimeError: The NVIDIA driver on your system is too old (found version {v}). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.", v=found)
        self._py_exception(r, rng, t, [ex], {0: ex_t}, stage="init")

    def _root_program_bug(self, r, rng, t):
        ex = self.bug
        tm = template_of(_bug_pattern(ex))
        self._py_exception(r, rng, t, [ex], {0: tm})

    def _root_oom(self, r, rng, t):
        spec = self.spec
        if spec.accelerator == "ascend":
            ex, ex_t = fill("RuntimeError: NPU out of memory. Tried to allocate {a} GiB (NPU {d}; {tot} GiB total capacity; {al} GiB already allocated; {cur} GiB current active; {fr} MiB free; {res} GiB reserved in total by PyTorch)",
                            a="%.2f" % rng.choice((1.0, 2.0, 3.5, 4.0)), d=r.local, tot="60.97", al="%.2f" % rng.uniform(55, 58), cur="%.2f" % rng.uniform(55, 58), fr="%.2f" % rng.uniform(100, 900), res="%.2f" % rng.uniform(58, 60))
            self._py_exception(r, rng, t, [ex], {0: ex_t})
            return
        a = rng.choice((1.0, 2.0, 3.91, 7.83))
        free = rng.uniform(0.2, 1.5)
        ex, ex_t = fill("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {a} GiB. GPU {d} has a total capacity of 79.11 GiB of which {free} MiB is free. Process {pid} has {used} GiB memory in use. Of the allocated memory {al} GiB is allocated by PyTorch, and {res} MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                        a="%.2f" % a, d=r.local, free="%.2f" % (free * 1024), pid=r.pid, used="%.2f" % (79.11 - free), al="%.2f" % (79.11 - free - 1.2), res="%.2f" % rng.uniform(200, 900))
        self._py_exception(r, rng, t, [ex], {0: ex_t})

    def _root_loss_nan(self, r, rng, t):
        lay = self.lay
        ex, ex_t = fill("AssertionError: Rank {r}: found NaN in local grad norm in backward pass before data-parallel communication collective. Device: {d}, node: {node}",
                        r=r.rank, d=r.local, node=r.host)
        self._py_exception(r, rng, t, [ex], {0: ex_t})

    # -- slow-type faults (slowdown, divergence) -------------------------------------------------
    def slow_lines(self, r: RankLog, rng: random.Random) -> None:
        lay = self.lay
        node = lay.node_of(r.rank)
        if self.kind == "slowdown":
            t0 = self.t_root
            if r.local == 0 and node in self.faulty:
                cpu = rng.randint(0, 95)
                n = 0
                t = t0
                while t < self.t_stop:
                    n += rng.randint(1, 40)
                    m, tm = fill("mce: CPU{c}: Package temperature above threshold, cpu clock throttled (total events = {n})", c=cpu, n=n)
                    self._add(t, r.kern, m, tmpl=tm)
                    m2, tm2 = fill("mce: CPU{c}: Package temperature/speed normal", c=cpu)
                    self._add(t + rng.uniform(1, 20), r.kern, m2, tmpl=tm2)
                    t += rng.uniform(30, 300)
            if r.rank == 0 and self.spec.settings.get("log_straggler"):
                slow_rank = node_rank = self.faulty[0] * lay.ranks_per_node + rng.randrange(lay.ranks_per_node)
                L = self.spec.log_interval
                base = self.spec.iter_seconds * 1000
                for it in range(self.iteration - self.iteration % L + L, int(self.tl.iters[-1]) + 1, L):
                    tt = self.tl.end_of(it)
                    if tt >= self.t_stop:
                        break
                    k = it - int(self.tl.iters[0])
                    slow = float(self.tl.iter_s[k]) * 1000
                    m, tm = fill(" | MnRtt/Slo: {a}ms/{sr} | MxRtt/Fst: {b}ms/{fr} | MnPwr/Slo: {pa}W/{sr} | MxPwr/Fst: {pb}W/{fr} | MnTmp/Slo: {ta}C/{sr} | MxTmp/Fst: {tb}C/{fr}",
                                 a="%.2f" % (base * 0.97), sr=node_rank, b="%.2f" % slow, fr=rng.randrange(lay.world), pa=rng.randint(280, 350), pb=rng.randint(600, 700), ta=rng.randint(88, 95), tb=rng.randint(60, 75))
                    self._add(tt + 0.01, r.plain, m, tmpl=tm, level=None)
        elif self.kind == "straggler":
            self.straggler_lines(r, rng)
        elif self.kind == "loss_nan" and self.spec.framework == "hf_trainer" and r.rank == 0:
            ex, ex_t = fill("RuntimeError: Loss is NaN at step {s}; stopping training (grad_norm=nan)", s=self.iteration_end)
            self._py_exception(r, rng, self.t_stop - 0.3, [ex], {0: ex_t})
        elif self.kind == "loss_nan" and self.spec.framework == "deepspeed":
            ex, ex_t = fill("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.")
            self._py_exception(r, rng, self.t_stop - 0.3 + 0.001 * r.local, [ex], {0: ex_t})
        elif self.kind == "loss_nan" and r.rank == 0:
            m, tm = fill("Detected NaN loss for {n} consecutive iterations at iteration {it}, exiting.", n=self.iteration_end - self.iteration + 1, it=self.iteration_end)
            self._add(self.t_stop - 0.3, r.plain, m, True, tmpl=tm, level=None)
        self._ev.sort(key=lambda e: (e[0], e[1]))

    # -- launcher teardown -----------------------------------------------------------------------
    def launcher_lines(self, r: RankLog, rng: random.Random, node: int) -> None:
        spec, lay = self.spec, self.lay
        R = lay.ranks_per_node
        ranks = list(range(node * R, node * R + R))
        if self.propagation == "silent" and node in self.faulty:
            return
        ends = [self.end[x] for x in ranks]
        if all(e == INF for e in ends):
            return
        t_first = min(ends)
        first_rank = ranks[ends.index(t_first)]
        natural_first = not self.killed[first_rank] and self.cause[first_rank] in NATURAL_CAUSES
        label = node in self.faulty
        code = self._exit_code(first_rank)
        t = t_first + self.monitor
        if spec.launcher == "srun":
            if self.kind == "host_oom_kill" and node in self.faulty:
                self.slurm_step_oom(r)
            stamp = r.clock.sec(self.t_kill + r.skew).replace(" ", "T")
            self._emit_now(r.lplain, self.t_kill + 0.5, "slurmstepd: error: *** STEP %d.0 ON %s CANCELLED AT %s ***" % (spec.settings["slurm_job_id"], r.host, stamp))
            if r.rank == 0:
                self._srun_summary(r, rng)
            return
        if spec.launcher == "deepspeed":
            if natural_first:
                # launch.py prints ``cmd``, its spawn loop's variable: the last local rank's command
                # whichever process failed, so the line names no local rank
                m, tm = fill(T_DS_EXIT_MDS if spec.framework == "megatron_deepspeed" else T_DS_EXIT, lr=R - 1, code=code)
                for x in ranks:
                    self._emit_now(r.pylog, t, "INFO", "launch.py:316:sigkill_handler", "Killing subprocess %d" % (r.pid + x % R))
                # the same text is printed on other nodes too, so it cannot single out this one: not labelled
                self._emit_now(r.pylog, t + 0.01, "ERROR", "launch.py:321:sigkill_handler", m)
            else:
                for x in ranks:
                    self._emit_now(r.pylog, min(ends) + 0.01, "INFO", "launch.py:316:sigkill_handler", "Killing subprocess %d" % (r.pid + x % R))
            return
        api = "torch/distributed/elastic/multiprocessing/api.py"
        logger = "torch.distributed.elastic.multiprocessing.api"
        if natural_first:
            for x in ranks:
                if x != first_rank:
                    self._emit_now(r.agent, t, "W", api + ":897", logger, "Sending process %d closing signal SIGTERM" % (r.pid + x % R))
            m, tm = fill(T_AGENT_FAILED, code=code, lr=first_rank % R, pid=r.pid + first_rank % R)
            self._emit_now(r.agent, t + 0.8, "E", api + ":869", logger, m, tmpl=tm if label else None)
            self._child_failed(r, rng, t + 0.9, first_rank, code)
        else:
            tk = min(ends)
            self._emit_now(r.agent, tk, "W", "torch/distributed/elastic/agent/server/api.py:704", "torch.distributed.elastic.agent.server.api", "Received Signals.SIGTERM death signal, shutting down workers")
            for x in ranks:
                self._emit_now(r.agent, tk + 0.001, "W", api + ":897", logger, "Sending process %d closing signal SIGTERM" % (r.pid + x % R))
            lines = ["Traceback (most recent call last):",
                     '  File "/usr/local/bin/torchrun", line 8, in <module>', "    sys.exit(main())",
                     '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/agent/server/api.py", line 864, in _invoke_run',
                     "    time.sleep(monitor_interval)",
                     '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler',
                     "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)",
                     "torch.distributed.elastic.multiprocessing.api.SignalException: Process %d got signal: 15" % (r.pid - 7)]
            for i, line in enumerate(lines):
                self._emit_now(r.lplain, tk + 0.5 + i * 1e-5, line)

    def _emit_now(self, fn, t, *args, **kw) -> None:
        fn(t, *args, **kw)

    def _exit_code(self, rank: int) -> int:
        cause = self.cause[rank]
        if cause in ("net", "net2", "wd"):
            return -6
        if cause == "root" and getattr(self, "root_signal", None):
            return -self.root_signal
        if self.kind in ("nic_link_down", "ib_completion_error"):
            return -6
        return 1

    def _child_failed(self, r: RankLog, rng: random.Random, t: float, first_rank: int, code: int) -> None:
        R = self.lay.ranks_per_node
        when = r.clock.sec(self.end[first_rank] + r.skew).replace(" ", "_")
        signals = {-6: "SIGABRT", -9: "SIGKILL"}
        sig = "Signal %d (%s) received by PID %d" % (-code, signals[code], r.pid + first_rank % R) if code in signals else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        lines = ["Traceback (most recent call last):",
                 '  File "/usr/local/bin/torchrun", line 8, in <module>', "    sys.exit(main())",
                 '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 355, in wrapper',
                 "    return f(*args, **kwargs)",
                 '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent',
                 "    raise ChildFailedError(",
                 "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                 "============================================================",
                 "%s FAILED" % self.spec.settings.get("entrypoint", "train.py"),
                 "------------------------------------------------------------",
                 "Failures:", "  <NO_OTHER_FAILURES>",
                 "------------------------------------------------------------",
                 "Root Cause (first observed failure):", "[0]:",
                 "  time      : %s" % when, "  host      : %s" % r.host,
                 "  rank      : %d (local_rank: %d)" % (first_rank, first_rank % R),
                 "  exitcode  : %d (pid: %d)" % (code, r.pid + first_rank % R),
                 "  error_file: <N/A>", "  traceback : %s" % sig,
                 "============================================================"]
        for i, line in enumerate(lines):
            r.lplain(t + i * 1e-5, line)

    def _srun_summary(self, r: RankLog, rng: random.Random) -> None:
        lay = self.lay
        R = lay.ranks_per_node
        t = self.t_kill + 1
        for x in range(lay.world):
            if not self.killed[x] and self.cause[x] in NATURAL_CAUSES:
                node = lay.node_of(x)
                if self.kind == "host_oom_kill" and self.cause[x] == "root":
                    m, tm = EXTRA_FORMATS["srun_task_oom"].fill(host=lay.nodes[node], r=x)
                else:
                    m, tm = fill(T_SRUN_TASK, host=lay.nodes[node], r=x, code=self._exit_code(x) & 0xFF if self._exit_code(x) > 0 else 134)
                r.lplain(max(t, self.end[x] + 0.2), m, True, tmpl=tm if node in self.faulty else None, level="ERROR")
        r.lplain(t + 0.1, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", True)
        if self.propagation == "silent":
            for n in self.faulty:
                m, tm = fill("srun: error: Node failure on {host}", host=lay.nodes[n])
                r.lplain(t + 0.2, m, True, tmpl=tm, level="ERROR")
        for n in range(lay.n_nodes):
            if n in self.faulty and self.propagation == "silent":
                continue
            r.lplain(t + 2 + 0.001 * n, "srun: error: %s: tasks %d-%d: Killed" % (lay.nodes[n], n * R, n * R + R - 1), True)


def _bug_pattern(exception_line: str) -> str:
    """Template pattern of a program-bug exception line: numbers are the variable parts."""
    import re
    return re.sub(r"\d+", "{n}", exception_line.replace("{", "{{").replace("}", "}}"))
