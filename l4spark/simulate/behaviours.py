"""Real behaviours of failing distributed jobs that blur *where* a fault is (issue #18).

Each behaviour is switched on per job, in a share of jobs, from a generator of its own
(``behaviour_rng``), so the draws of the rest of the simulator are untouched: with every
behaviour off and only the original fault kinds, a seed gives byte-identical files to the
simulator before these were added.

* ``store_host_retry``: the c10d TCPStore lives with rank 0 (MASTER_ADDR, the first node).
  Once that node's processes exit, *every* surviving rank's store client names the store
  host while it retries, whatever node the fault was on.
* ``neighbour_cascade``: NCCL errors name the peer of each connection. When a ring neighbour
  of the faulty node aborts, *its* neighbours report errors naming it (blame spreads one hop
  further), and the faulty process itself reports flushed work requests naming its neighbours.
* ``peers_time_out_first``: a stalled node's own watchdog starts later (its collective was
  enqueued later) or its process is stuck in the driver, so healthy peers log their watchdog
  timeouts first and the first error in time is not on the faulty node.
* ``wide_clock_skew``: the job's nodes are not NTP-synchronised; clocks disagree by seconds.
* ``subgroup_collectives`` (Megatron-LM, MindSpeed-LLM): the collective that fails runs in the
  data-parallel group, not the default one, and every rank number a process-group line prints is
  the rank *within that group*: PyTorch's ``[PG ID 3 PG GUID 9(DATA_PARALLEL_GROUP) Rank 2]``
  prefix and ``[Rank 2] Watchdog caught ...``, HCCL's ``remote rank [2]``. A number read as a
  global rank then points at the wrong node.
* ``hccl_heartbeat`` (Ascend): when the faulty NPU's process exited or its node dropped off the
  network, HCCL's heartbeat reports the lost device inside every peer's EI0002 text, by the
  server address the rank table gives it (``there are(is) 1 abnormal device(s):`` then
  ``serverId[<ip>], deviceId[<d>], Heartbeat Lost Occurred, ...``, or CANN 8's ``Cluster
  Exception Location[IP/ID]:[<ip>/<d>], ..., Discoverer:[<ip>/<d>], ...``, the discoverer
  being the device that missed the heartbeat first).
* ``dump_signal_from_peer`` (CUDA, PyTorch 2.3+): the first rank whose NCCL watchdog times out
  signals a flight-recorder dump to every rank through the store. The ranks of some nodes see
  that signal before their own watchdog fires, and their dump line names the signalling rank:
  ``Received a dump signal due to a collective timeout from  rank 63`` instead of ``from this
  local rank``. The named rank is a healthy peer that timed out first, on another node.
* ``hccl_group_information`` (Ascend): EI0002 in the wording of CANN's current error table
  (``remote rank: [r]. base information: [...]. task information: [...]. group information:
  [group:[...], ..., rankSize[n], rankId[i], peerRankId[r]]``): the line states the size of the
  communicator whose ranks it numbers. Whatever the wording, the tag of an HCCL task names the
  communicator it ran in (``tag[AllReduce_<identifier>]``), and each communicator has an
  identifier of its own: under ``subgroup_collectives`` the data-parallel group's, not the world's.

Every message format used here is in ``FORMATS`` with where it was seen.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from l4spark.simulate.formats import RankLog, template_of

INF = float("inf")


@dataclass(frozen=True)
class Format:
    """A message pattern (``str.format``) and the public place it was seen."""

    pattern: str
    source: str

    def fill(self, **kw) -> tuple[str, str]:
        """(message, simulator template) of the pattern."""
        return self.pattern.format(**kw), template_of(self.pattern)


FORMATS: dict[str, Format] = {
    # torch >= 2.4: the heartbeat monitor's store check, then the TCPStore client's read error
    "store_should_dump": Format(
        '[PG ID 0 PG GUID 0(default_pg) Rank {r}] Failed to check the "should dump" flag on TCPStore, '
        "(maybe TCPStore server has shut down too early), with error: Connection reset by peer",
        "https://github.com/sgl-project/sglang/issues/20859 (ProcessGroupNCCL.cpp heartbeat monitor)"),
    "store_recv_failed": Format(
        "[c10d] recvValue failed on SocketImpl(fd={fd}, addr=[{host}]:{port}, remote=[{master}]:29500): Connection reset by peer",
        "https://github.com/sgl-project/sglang/issues/20859, https://github.com/pytorch/pytorch/pull/129985 (TCPStore.cpp:125)"),
    "store_recv_exception": Format(
        "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:{line} (most recent call first):",
        "https://github.com/sgl-project/sglang/issues/20859 (c10d/Utils.hpp recvBytes)"),
    "store_client_retry": Format(
        "[c10d] TCP client failed to connect/validate to host {master}:29500 - retrying (try={n}, timeout=1800000ms, delay={d}ms): Connection reset by peer",
        "https://github.com/TheTom/vllm-swift/issues/9 (TCPStore.cpp:347, torch >= 2.4 connect retry)"),
    "store_socket_refused": Format(
        "[c10d] The client socket has failed to connect to [{master}]:29500 (errno: 111 - Connection refused).",
        "pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp (already in faults._master_unreachable)"),
    # NCCL: a peer's connection closed (socket transport / bootstrap) and flushed IB work requests
    "socket_closed": Format(
        "socketProgress: Connection closed by remote peer {host}<{port}>",
        "https://github.com/NVIDIA/nccl/issues/1232, https://github.com/NVIDIA/nccl-tests/issues/166 (misc/socket.cc:49)"),
    "socket_trace": Format("misc/socket.cc:{line} -> 6",
                           "https://github.com/NVIDIA/nccl-tests/issues/166"),
    "socket_poll_failed": Format(
        "Socket recv failed while polling for opId=0x{op}",
        "https://github.com/NVIDIA/nccl-tests/issues/166 (proxy.cc:1143)"),
    # NCCL's IB completion-error warning (transport/net_ib.cc) up to 2.19; ``ib_completion`` picks by version
    "ib_completion": Format(
        "NET/IB : Got completion from peer {ip}<{port}> with error {err}, opcode {opc}, len {ln}, vendor err {verr} ({dir}) localGid ::ffff:{mine} remoteGid ::ffff:{ip}",
        "NCCL transport/net_ib.cc, tags v2.16.2-1 to v2.19.4-1 (https://github.com/NVIDIA/nccl-tests/issues/252)"),
    # from NCCL 2.20 (tag v2.20.3-1 on): "status=" and the remote GID run on after "remoteGids"
    "ib_completion_status": Format(
        "NET/IB : Got completion from peer {ip}<{port}> with status={err} opcode={opc} len={ln} vendor err {verr} ({dir}) localGid ::ffff:{mine} remoteGids::ffff:{ip}",
        "NCCL transport/net_ib.cc, tags v2.20.3-1 to v2.28.9-1; seen in https://github.com/NVIDIA/nccl/issues/1814 "
        "(status=12 then status=5 vendor err 249) and https://github.com/NVIDIA/nccl/issues/1405, #1664"),
    # ProcessGroupNCCL::createLogPrefix (torch >= 2.4; ``[PG <name> (<desc>) Rank <r>]`` in 2.3 and
    # torch_npu's ProcessGroupHCCL): ``Rank`` is ``rank_``, the rank within the process group.
    # Megatron-LM names its groups (megatron/core/parallel_state.py: ``create_group(ranks, ...,
    # group_desc='DATA_PARALLEL_GROUP')``, MindSpeed-LLM the same through Megatron core).
    "pg_prefix_subgroup": Format(
        "[PG ID {pg} PG GUID {guid}(DATA_PARALLEL_GROUP) Rank {{r}}]",
        "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp createLogPrefix; NVIDIA/Megatron-LM "
        "megatron/core/parallel_state.py group_desc='DATA_PARALLEL_GROUP'"),
    # HCCL's heartbeat report inside EI0002's task information (CANN's hcomm; CANN 7 as MindSpore's
    # error-analysis guide prints it, CANN 8 as Ascend's EI0002 troubleshooting case prints it)
    "hccl_abnormal_head": Format(
        "there are(is) {n} abnormal device(s):",
        "mindspore-ai/docs tutorials/source_en/debug/error_analysis/cann_error_cases.md; Ascend CANN EI0002 case "
        "(hiascend.com atlaserrorcode_15_0242)"),
    # PyTorch's dump line on a rank that saw another rank's signal (``from  rank N``, with the
    # message's own double space) rather than its own timeout (``from this local rank``)
    "dump_signal_from_peer": Format(
        " rank {rank}",
        "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp getNCCLWatchdogTimeoutErrorMsg(c10::str("
        "\" rank \", timeOutRank)); NVIDIA Megatron-Bridge debugging notes: ranks 32-39 of node 4 'Received a dump "
        "signal due to a collective timeout from rank 63'; public logs '... from  rank 7 and we will try our best'"),
    "hccl_heartbeat_lost": Format(
        "        serverId[{ip}], deviceId[{d}], Heartbeat Lost Occurred, Possible Reason: 1. Process has exited, "
        "2. Network Disconnected",
        "mindspore-ai/docs tutorials/source_en/debug/error_analysis/cann_error_cases.md (CANN 7)"),
    "hccl_cluster_exception": Format(
        "    Cluster Exception Location[IP/ID]:[{ip}/{d}], Arrival Time:[{when}], Discoverer:[{dip}/{dd}], "
        "ExceptionType:[Heartbeat Lost Occurred], Possible Reason:1. Process has exited, 2. Network Disconnected",
        "Ascend's HCCL-timeout case (EI0002, CANN 8: 'Cluster Exception Location[IP/ID]:[90.90.92.240/1], Arrival "
        "Time:[Thu Nov 28 11:56:34 2024], Discoverer:[90.90.92.240/0], ExceptionType:[Heartbeat Lost Occurred]')"),
    # EI0002 as CANN's current error table words it, with the communicator's group information
    # (hicann/hcomm: the error table's EI0002 "... remote rank: [%s]. base information: [%s]. task
    # information: [%s]. group information: [%s]"; TaskExceptionHandler::DealExceptionGroupRank
    # writes the group part: "group:[<g>], user define information[<u>], rankSize[<n>], rankId[<i>],
    # peerRankId[<p>]"; hiascend.com atlaserrorcode_15_0242)
    "hccl_notify_group": Format(
        "The wait execution of the Notify register times out. Reason: The Notify register has not received the "
        "Notify record from remote rank: [{rr}]. base information: [streamID:[{sid}], taskID[{tid}], taskType[Notify "
        "Wait], tag[{tag}]]. task information: [notify id:[0x{nid:016x}], stage:[ffffffff], remote rank:[{rr}]]. group information: [group:[{group}], user define information[], "
        "rankSize[{size}], rankId[{me}], peerRankId[{rr}]]",
        "hicann/hcomm error table (EI0002) and task_exception_handler.cc DealExceptionGroupRank; "
        "hiascend.com CANNCommunityEdition atlaserrorcode_15_0242"),
    # Ascend, a link whose peer process or node is gone once the links are up: the RoCE driver's
    # plog line, then torch_npu's watchdog, which polls HcclGetCommAsyncError and throws
    # std::runtime_error("HCCL error: " + getHcclErrorDetailStr(HCCL_E_REMOTE))
    "roce_error_cqe": Format(
        "hns_roce_lite_handle_error_cqe(630) : error cqe status: 0x{status:x}",
        "Ascend HCCL user guide, ERROR CQE (EI0013) case (hiascend.com CANN 8.5 hcclug_000061: '[ERROR] "
        "ROCE(2040034,alltoall_test):2025-09-15-08:38:12.776.612 [hns_roce_lite.c:630]hns_roce_lite_handle_error_cqe(630) "
        ": error cqe status: 0x15'; the peer process exiting first is its second cause)"),
    "hccl_e_remote": Format(
        "HCCL error: HCCL_E_REMOTE: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "Ascend/pytorch torch_npu/csrc/distributed/ProcessGroupHCCL.cpp checkForHCCLErrorsInternal and "
        "HCCLUtils.cpp getHcclErrorDetailStr"),
}
# status 5 = IBV_WC_WR_FLUSH_ERR with vendor_err 0xf9 (https://github.com/accelio/accelio/issues/181,
# https://github.com/spdk/spdk/issues/298): outstanding work flushed when the local QP goes to error
IB_FLUSHED = dict(err=5, opc=0, ln=0, verr=249, dir="Recv")


def ib_completion(nccl_version: str) -> Format:
    """NCCL's IB completion-error warning as the job's NCCL version prints it (``2.20.5``: status=)."""
    major, minor = (int(part) for part in nccl_version.split("+")[0].split(".")[:2])
    return FORMATS["ib_completion_status" if (major, minor) >= (2, 20) else "ib_completion"]

# behaviour -> share of jobs in which it is on
SHARES: dict[str, float] = {
    "store_host_retry": 0.5,
    "neighbour_cascade": 0.5,
    "peers_time_out_first": 0.5,
    "wide_clock_skew": 0.3,
    "subgroup_collectives": 0.5,
    "hccl_heartbeat": 0.5,  # new ones last: the draws of the behaviours above are unchanged
    "hccl_group_information": 0.5,
    "dump_signal_from_peer": 0.5,  # session 52
}
# per job, in the shares above; plus a settings-group trait: Megatron's per-rank timers
# (``--timing-log-option all``, ``kinds_extra.rank_timers_block``) in 35% of Megatron/MindSpeed groups
PER_RANK_TIMERS = "per_rank_timers"
# and in 50% of DeepSpeed / HF Trainer groups: the dataset reloaded from the HF datasets cache
# (``Found cached dataset``, ``Loading cached processed dataset at``; ``kinds_extra.cached_dataset_lines``)
CACHED_DATASET = "cached_dataset"
BEHAVIOURS: tuple[str, ...] = tuple(SHARES) + (PER_RANK_TIMERS, CACHED_DATASET)

# the process-group prefix of the default group, as the original kinds print it
DEFAULT_PG_PREFIX = "[PG ID 0 PG GUID 0(default_pg) Rank {r}]"
# frameworks whose collectives run in Megatron core's named sub-groups
_SUBGROUP_FRAMEWORKS = ("megatron", "mindspeed")

# kinds whose faulty process can stall (driver hang, stuck collective) instead of failing at once
_STALLING_KINDS = ("nccl_timeout", "hccl_timeout", "gpu_fallen_off_bus")
# kinds whose faulty process dies on the root cause while its NCCL connections are open
_DYING_KINDS = ("gpu_ecc_error", "gpu_fallen_off_bus", "kernel_exec_failure", "oom", "host_oom_kill")


def behaviour_rng(seed: int, salt: int = 0) -> random.Random:
    """The generator of the behaviours of one job (independent of every other draw)."""
    return random.Random((seed * 0x9E3779B1 + 0xB3 + salt * 7919) & 0xFFFFFFFFFFFF)


def draw_behaviours(seed: int, enabled: tuple[str, ...] | None) -> frozenset[str]:
    """The behaviours on in one job: each enabled one with its share (``None``: all enabled)."""
    rng = behaviour_rng(seed)
    on = {name for name in SHARES if rng.random() < SHARES[name]}  # one draw per behaviour, always
    allowed = set(BEHAVIOURS if enabled is None else enabled)
    return frozenset(on & allowed)


def widen_skews(skews: list[float], seed: int) -> list[float]:
    """Clocks of a job without NTP: every node off by a few seconds (sigma 4 s) on top."""
    rng = behaviour_rng(seed, 1)
    return [s + rng.gauss(0, 4.0) for s in skews]


def insert_kinds(order: list[str], extra: list[str], seed: int) -> list[str]:
    """Insert new fault kinds into an already shuffled kind order, from a generator of their own."""
    rng = random.Random(seed * 1_000_033 + 0xA11)
    out = list(order)
    for kind in extra:
        out.insert(rng.randint(0, len(out)), kind)
    return out


class BehaviourMixin:
    """FaultPlan hooks for the behaviours (mixed into ``faults.FaultPlan``)."""

    behaviours: frozenset[str] = frozenset()

    # -- which process group the failing collective runs in -----------------------------------
    def _subgroup(self) -> tuple[int, int] | None:
        """(PG ID, PG GUID) of the data-parallel group the job's failing collectives run in
        (``subgroup_collectives``), or None: the default group, whose ranks are the global ones."""
        lay = self.lay
        if ("subgroup_collectives" not in self.behaviours or self.spec.framework not in _SUBGROUP_FRAMEWORKS
                or lay.dp in (1, lay.world)):
            return None
        rng = behaviour_rng(self.spec.seed, 5)
        pg = rng.randint(2, 12)
        return pg, pg + rng.choice((0, 0, 3, 7))

    def group_rank(self, rank: int) -> int:
        """The number a process-group line prints for global ``rank``: its rank within the group."""
        return rank if self._subgroup() is None else self.lay.coords(rank)[1]

    def hccl_communicator(self, rank: int) -> tuple[str, int]:
        """(identifier, size) of the HCCL communicator the failing collective of global ``rank`` runs in.

        An identifier is the communicator's root (rank 0) host address and NIC, port, device and
        a number of its own (HcclGetRootInfo): the world's is the one every rank's
        ``hcclCommInitInfo`` line prints; under ``subgroup_collectives`` it is the rank's
        data-parallel group's, rooted at the group's first member."""
        lay = self.lay
        world = "%s%%enp189s0f0_60000_0_%d" % (self.ctx.master_ip, self.ctx.comm_ids[0] % 10**10)
        if self._subgroup() is None:
            return world, lay.world
        tp_rank, _, pp_rank = lay.coords(rank)
        root = pp_rank * lay.tp * lay.dp + tp_rank
        number = (self.ctx.comm_ids[2] + 1 + tp_rank + lay.tp * pp_rank) % 10**10
        return "%s%%enp189s0f0_60000_%d_%d" % (lay.ips[lay.node_of(root)], root % lay.ranks_per_node, number), lay.dp

    def in_group(self, pattern: str) -> str:
        """``pattern`` with the default group's prefix replaced by the failing group's (same ``{r}``)."""
        sub = self._subgroup()
        if sub is None:
            return pattern
        return pattern.replace(DEFAULT_PG_PREFIX, FORMATS["pg_prefix_subgroup"].pattern.format(pg=sub[0], guid=sub[1]))

    def heartbeat_lines(self, r: RankLog, t: float) -> None:
        """A peer's EI0002 goes on with HCCL's heartbeat report of the lost devices (``hccl_heartbeat``):
        the faulty node's NPUs whose process exited or whose node dropped off the network."""
        if ("hccl_heartbeat" not in self.behaviours or self.spec.accelerator != "ascend"
                or self.propagation not in ("death", "network", "silent") or not self.faulty):
            return
        lay = self.lay
        fnode = self.faulty[0]
        lost = range(lay.ranks_per_node) if self.propagation == "silent" else \
            sorted({x % lay.ranks_per_node for x in self.root_ranks} or {0})
        rng = behaviour_rng(self.spec.seed, 6)
        cann8 = rng.random() < 0.5  # the two public wordings, per job
        found = (sorted(self.neighbours) or [(fnode + 1) % lay.n_nodes])[0]
        lines = [FORMATS["hccl_abnormal_head"].fill(n=len(lost))]
        for d in lost:
            if cann8:  # the arrival time as the printing node's clock reads it
                when = r.clock.dmesg(self.t_root + r.skew)
                lines.append(FORMATS["hccl_cluster_exception"].fill(ip=lay.ips[fnode], d=d, when=when,
                                                                     dip=lay.ips[found], dd=d))
            else:
                lines.append(FORMATS["hccl_heartbeat_lost"].fill(ip=lay.ips[fnode], d=d))
        lines.append(("]", None))
        for i, (line, tmpl) in enumerate(lines):
            self._add(t + 1e-6 * (i + 1), r.plain, line, True, tmpl=tmpl)

    def dump_source(self, r: RankLog) -> str:
        """Whom a timed-out rank's dump line names as the signal's source: ``this local rank``, or
        under ``dump_signal_from_peer``, on about half the nodes (drawn per node), the rank whose
        watchdog timed out first when that rank is on another node."""
        own = "this local rank"
        if "dump_signal_from_peer" not in self.behaviours:
            return own
        timed_out = [(t, rank) for rank, (t, cause) in enumerate(zip(self.natural, self.cause)) if cause == "wd"]
        if not timed_out:
            return own
        first = min(timed_out)[1]
        node = self.lay.node_of(r.rank)
        if self.lay.node_of(first) == node or behaviour_rng(self.spec.seed, 1000 + node).random() >= 0.5:
            return own
        return FORMATS["dump_signal_from_peer"].pattern.format(rank=first)

    # -- before the schedule: when the faulty process reports --------------------------------
    def _apply_peers_first(self) -> None:
        """Stalled faulty ranks report after the healthy peers' watchdogs, before their agent kills them.

        Peers' watchdogs fire at ``t_root + Timeout + 5..90 ms``; the faulty node's agent reacts
        ``monitor`` seconds after its first rank ends, so the faulty rank reports in between.
        """
        if "peers_time_out_first" not in self.behaviours or self.kind not in _STALLING_KINDS or not self.root_ranks:
            return
        rng = behaviour_rng(self.spec.seed, 2)
        tmo = self.spec.timeout_ms / 1000.0
        for r in self.root_ranks:
            self.root_ranks[r] = self.t_root + tmo + 0.095 + rng.random() * (self.monitor - 0.1)
        self.peers_first = True

    # -- in the schedule: who dies of a network error naming whom -----------------------------
    def _cascade_causes(self) -> None:
        """Ranks on nodes one hop beyond the faulty node's neighbours die of errors naming a neighbour."""
        self.blamed: dict[int, int] = {}
        if ("neighbour_cascade" not in self.behaviours or self.spec.accelerator != "cuda"
                or self.propagation not in ("death", "network", "silent") or not self.faulty):
            return
        lay = self.lay
        R = lay.ranks_per_node
        rng = behaviour_rng(self.spec.seed, 3)
        first = set(self.neighbours)
        for node in range(lay.n_nodes):
            if node in first or node in self.faulty:
                continue
            via = [nb for nb in lay.ring_neighbours(node) if nb in first]
            if not via:
                continue
            nb = via[0]
            t_nb = min((self.natural[x] for x in range(nb * R, nb * R + R) if self.cause[x] == "net"), default=INF)
            if t_nb == INF:
                continue
            delay = rng.uniform(0.5, 20)
            for x in range(node * R, node * R + R):
                t = t_nb + delay + rng.uniform(0, 2)
                if t < self.natural[x] and self.cause[x] not in ("root", "hung"):
                    self.natural[x], self.cause[x] = t, "net2"
                    self.blamed[x] = nb

    def _store_host_leaves(self) -> None:
        """The store host's agent shuts its workers (and the store) down soon after the first failure.

        torchrun's c10d rendezvous store and the NCCL TCPStore live on the first node; once the
        platform tears that node's launcher down (1-10 s after the first worker exits anywhere),
        every surviving rank's store client fails against it until the rank itself ends.
        """
        if "store_host_retry" not in self.behaviours or 0 in self.faulty or self.propagation == "slow":
            return
        firsts = [e for e in self.end if e < INF]
        if not firsts:
            return
        t_gone = min(firsts) + self.monitor + behaviour_rng(self.spec.seed, 4).uniform(1, 10)
        for x in range(self.lay.ranks_per_node):
            if self.end[x] > t_gone:
                self.end[x], self.killed[x] = t_gone, True

    # -- lines ---------------------------------------------------------------------------------
    def second_hop_error(self, r: RankLog, t: float) -> None:
        """A rank beyond the neighbours: errors naming the neighbour that aborted, then the abort."""
        rng = behaviour_rng(self.spec.seed, 1000 + r.rank)
        nb = self.blamed[r.rank]
        if rng.random() < 0.35:  # connections over the socket transport (or the bootstrap ring)
            msg, tm = FORMATS["socket_closed"].fill(host=self.lay.nodes[nb], port=rng.randint(32768, 60999))
            tid = r.pid + 240 + r.local
            self._add(t, r.nccl_warn, "misc/socket.cc:49", msg, tid, tmpl=tm)
            # NCCL's back trace of the error code (NCCLCHECK): where it passed, not labelled
            self._add(t + 1e-4, r.nccl, FORMATS["socket_trace"].fill(line=749)[0], tid)
            m3, t3 = FORMATS["socket_poll_failed"].fill(op="%012x" % rng.getrandbits(44))
            self._add(t + 2e-4, r.nccl_warn, "proxy.cc:1143", m3, tid, tmpl=t3)
            self._nccl_exception(r, rng, t + rng.uniform(0.05, 1.0), msg, tm)
        else:
            self.peer_network_error(r, rng, t, peer_node=nb)

    def faulty_names_neighbours(self, r: RankLog, t: float) -> None:
        """The dying faulty process's proxy reports flushed work requests naming its ring neighbours."""
        if ("neighbour_cascade" not in self.behaviours or self.kind not in _DYING_KINDS
                or self.spec.accelerator != "cuda" or not self.neighbours):
            return
        rng = behaviour_rng(self.spec.seed, 2000 + r.rank)
        tid = r.pid + 240 + r.local
        for i, nb in enumerate(sorted(self.neighbours)[:3]):
            msg, tm = ib_completion(self.nccl_version).fill(ip=self.lay.ips[nb], port=rng.randint(32768, 60999), mine=r.ip,
                                                             **IB_FLUSHED)
            self._add(t + 0.02 + i * 0.001, r.nccl_warn, "transport/net_ib.cc:1696", msg, tid, tmpl=tm)

    def store_host_lines(self, r: RankLog, node: int) -> None:
        """The store host (node 0) is gone though the fault is elsewhere: every survivor names it."""
        if "store_host_retry" not in self.behaviours or 0 in self.faulty or node == 0 or self.propagation == "slow":
            return
        R = self.lay.ranks_per_node
        gone = min(self.end[:R])
        if gone == INF:
            return
        rng = behaviour_rng(self.spec.seed, 3000 + r.rank)
        master = self.lay.nodes[0]
        end = self.end[r.rank]
        t = gone + rng.uniform(0.2, 1.5)
        if t >= end:
            return
        step = max(1.0, (end - t) / 300.0)  # the heartbeat monitor polls the store about once a second
        if self.spec.c10_style >= 3:
            dump, dump_t = FORMATS["store_should_dump"].fill(r=r.rank)
            recv, recv_t = FORMATS["store_recv_failed"].fill(fd=rng.randint(40, 180), host=r.host, port=rng.randint(32768, 60999), master=master)
            exc = FORMATS["store_recv_exception"].fill(line=679)[0]
            while t < end:
                self._add(t, r.c10, "W", "ProcessGroupNCCL.cpp:1771", dump, tmpl=dump_t)
                self._add(t + 1e-4, r.c10, "W", "TCPStore.cpp:125", recv, tmpl=recv_t)
                self._add(t + 2e-4, r.plain, exc, True)
                t += step
            if r.local == 0 and self.spec.launcher == "torchrun":  # the agent's store client backs off
                retry_t, n, delay = gone + rng.uniform(0.5, 3), 1, rng.uniform(800, 1500)
                while retry_t < end:
                    msg, tm = FORMATS["store_client_retry"].fill(master=master, n=n, d=int(delay))
                    self._add(retry_t, r.glog_plain, "W", "TCPStore.cpp:347", msg, tmpl=tm)
                    retry_t += delay / 1000.0
                    n, delay = n + 1, min(delay * rng.uniform(1.3, 2.0), 30000)
        elif r.local == 0 and self.spec.launcher == "torchrun":
            msg, tm = FORMATS["store_socket_refused"].fill(master=master)
            while t < end:
                self._add(t, r.glog_plain, "W", "socket.cpp:697", msg, tmpl=tm)
                t += step * rng.uniform(0.5, 1.5)
