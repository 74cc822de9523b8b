"""Settings of the spatial comparison: the conf's ``[spatial]`` table, typed (no Spark here).

``l4spark.config.load_config`` builds it and refuses an unknown key, a wrong type or a value out
of range by name, before any Spark session starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from l4spark.errors import ConfigError
from l4spark.regexsafety import UnsafeRegexError, check_regex

NORMALISATIONS = ("raw", "log", "share", "role")
GRANULARITIES = ("node", "rank")


@dataclass(frozen=True)
class SpatialConfig:
    """Knobs of the spatial comparison (defaults in code; the TOML section is ``[spatial]``)."""

    granularity: str = "node"  # "node" or "rank"
    normalisation: str = "role"
    top_k: int = 8
    threshold: float = 0.55  # minimum combined score of a non-silent suspect
    n_estimators: int = 200
    seed: int = 20250325
    max_evidence: int = 10
    silent_min_gap_s: float = 30.0  # a silent unit stops at least this long before its peers (60 s until session 26)...
    silent_z: float = 5.0  # ...and this many robust spreads (1.4826 MAD) below their median
    truncated_share: float = 0.5  # fewer lines than this share of the peers' median: truncated
    evidence_required: bool = True  # isolation above 0.5 counts only for a unit with evidence
    blame_weight: float = 0.8  # combined score added when every other unit names it (a share; names discounted by design)
    blame_discount: bool = True  # discount a name by how many units give it (the store host is named by all by design)
    # Session 43: the discount counts from the second naming unit: one name of the store host's
    # unit is whole, k of the n - 1 others carry 1 - (k - 1) / (n - 1) each (``signals.peer_mentions``).
    # False: 1 - k / n (one name of it in a two-unit job weighed half).
    first_name_whole: bool = True
    silence_weight: float = 0.25  # combined score added for stopping early without an error line / missing rank files
    slowness_weight: float = 0.5  # combined score added for being the unit every other unit waits for (a straggler)
    # Session 26: combined score added when the unit's NCCL watchdog timed out in an older
    # collective (SeqNum) than another unit's, or (session 27) one of its ranks never enqueued
    # the collective the others timed out in: stuck behind, the others wait for it
    # (signals.collectives_behind; docs/spatial.md, "Stuck a collective behind")
    behind_weight: float = 0.5
    # Session 45: the texts in which a rank says it timed out waiting for its peers in a collective
    # (Java regexes, read on loud lines; the ``waited:<rank>`` tokens of ``ranking.unit_mentions``).
    # PyTorch's NCCL watchdog ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(...)
    # ran for N milliseconds before timing out", torch 1.x "Caught collective operation timeout";
    # 2.2+ also "Timeout at NCCL work: N, last enqueued NCCL work: N", ProcessGroupNCCL.cpp), Ascend
    # HCCL's EI0002 ("The wait execution of the Notify register times out. Reason: The Notify
    # register has not received the Notify record from remote rank: [r]", CANN's error table) and
    # Gloo's ("Timed out waiting 1800000ms for recv operation to complete", gloo/transport/tcp/pair.cc).
    collective_timeout_patterns: tuple = (
        r"[Cc]aught collective operation timeout",
        r"Timeout at NCCL work: [0-9]+",
        r"The wait execution of the Notify register times out",
        r"Timed out waiting [0-9]+ms for (?:recv|send) operation to complete",
    )
    # Session 45: a collective's missing member is behind too (``signals.collective_absentees``):
    # when the ranks that never said they timed out waiting (``collective_timeout_patterns``),
    # while at least two others did, all sit on one node, and at least as many of that node's ranks
    # did say so, the units holding them never enqueued the collective everyone else waits in
    # (PyTorch before 2.2 prints nothing else of a rank stuck outside NCCL). false: only the
    # collective numbers the lines state say who is behind (sessions 26-44).
    absent_member_behind: bool = True
    slow_z_min: float = 6.0  # a per-rank timer this many robust spreads above the others starts to count as slow
    truncated_bonus: float = 0.1  # combined score added for far fewer lines than the peers (role can explain it)
    # Session 53: far fewer lines than the peers counts (``truncated_bonus``, "silent: far fewer
    # lines") only for a unit that logs no event more than its peers (no isolation evidence). A
    # unit with evidence ended on what it logged: a ring neighbour of a dead node that waited for
    # it, timed out and crashed before the others were torn down is short because it crashed
    # first, and its errors count already as isolation. 36149's MindSpeed node_down of the store
    # host (node011, no end of its own, 0.75) came second behind that neighbour (0.718 isolation
    # + 0.1). Rerank of 55 fleets (1,305 jobs): +1, none lost; truncated_bonus = 0 instead: +1,
    # -1 (36045's quiet host_oom_kill node lost the bonus it needs). false: every truncated unit.
    truncated_needs_quiet: bool = True
    timing_weight: float = 0.3  # combined score added for the earliest failure onset...
    timing_scale_s: float = 2.0  # ...decaying by e for every this many seconds behind it
    terminal_share: float = 0.1  # failure onset: events new to a unit in this last share of its life...
    burst_gap_s: float = 10.0  # ...in the first burst of them (a quieter gap than this splits bursts)...
    burst_events: int = 2  # ...with at least this many events (a lone new line is not a failure yet)
    timestamp_cover: float = 0.9  # onset only for units with a file timestamped to this share of its lines
    min_timed_units: int = 3  # no timing signal with fewer units having an onset...
    small_job_timing: bool = True  # ...but of a job with fewer units than that (a pair), every unit having one is enough
    mention_window_s: float = 60.0  # mentions this long before the first failure onset are not blame
    # Rules of session 15 (docs/spatial.md, "Two-unit jobs: what the survivor says"); false leaves
    # one out, for the ablation of ``spatial_eval --compare`` (``remote_patterns = []`` the third).
    pair_quiet_for_nobody: bool = True  # of two units, an own event with quiet (INFO and below) lines only counts for neither
    pair_silence: bool = True  # of two units, the one that stopped silent_min_gap_s first is silent; neither is truncated
    silent_despite_errors: bool = True  # errors that are no candidates or end silent_min_gap_s before the unit: can be silent
    # Session 17: of two units, a failure that begins with a remote event (below) is a reaction to
    # the other unit's: it starts no failure onset (docs/spatial.md, "A pair's onsets").
    pair_onset_without_remote: bool = True
    # Session 18: a name written before the named unit's failure began (aligned onsets) is the
    # namer's own failure report (NCCL's IB completion error names the far end), not blame, unless
    # its text says a peer failed (remote_patterns): docs/spatial.md, "Blame follows the order of failure".
    blame_follows_onsets: bool = True
    # Session 20: of two units, how much of pair_isolation's distance from 0.5 counts (1.0: session
    # 14's 0.25-0.75). Both units are roles of one and their own events are mostly role output
    # (Megatron's print_rank_0 / print_rank_last): docs/spatial.md, "A pair's isolation weighs less".
    pair_isolation_weight: float = 0.4
    # Session 21: a name of the host that a c10d store client connects to (the rendezvous,
    # MASTER_ADDR:MASTER_PORT), written by that client's own lines, is the store endpoint, not
    # blame: every live rank prints them once the store goes away, whoever failed (docs/spatial.md,
    # "Store-client lines name the store, not the fault"). Session 21: +10 of 408 development jobs,
    # -1 net held out (it lost the store host's own node_down), left off. Session 22, with
    # untimed_errors_dated: 401 -> 413 of 477 development jobs, fresh 23011 and 23013 +1 each, no
    # loss: on. False: discounted as before.
    store_client_not_blame: bool = True
    # Session 22: a unit's last error is dated by what its lines can date: an untimed error line
    # was written no later than the next timestamped line of its file, and one after the file's
    # last timestamped line may be the last thing written (``ranking.unit_activity``'s
    # last_error_by_s). False: only timestamped error lines date it, and a unit with untimed
    # errors alone is never silent despite errors (docs/spatial.md, "A dead store host is
    # silent: untimed errors dated by their file").
    untimed_errors_dated: bool = True
    # Session 22: a unit of a group of three or more is judged silent against the others of its
    # group (their median last line and spread), not against a median and spread that include
    # its own early stop: 22013's job-20261105-0029, a store host down 104 s before two peers,
    # needed 386 s with itself in a four-unit MAD. False: the group's own median and spread.
    # Off: net 0 with store_client_not_blame on (+1 there, -1 of f17005's four-unit jobs), -2 without.
    # Session 30, again net 0: +1 of 376 development jobs (26003, a DeepSpeed node_down), -1 on fresh
    # 31003 (a MindSpeed host_oom_kill where two of four nodes stopped together: without itself,
    # each early one is silent against the two late ones, and the healthy one ranked first).
    # Session 32: on, with ``stop_before_onsets`` and ``silence_needs_cover`` (docs/spatial.md,
    # "Silence, session 32"): a dead node's own stop widened the spread it was judged by.
    silence_without_self: bool = True
    # Session 30: of a unit's error lines, only those of candidate events (what the cross-job
    # filter kept) keep it from being silent: a dead node whose last error lines are routine noise
    # (a checkpoint upload retried, a corrupted sample skipped, both in normal jobs too) went down
    # without a word about it (docs/spatial.md, "Routine errors do not make a unit loud"): 360 ->
    # 361 of 376 development jobs, 30909 0.867 -> 0.900, fresh 31001-31005 unchanged, none lost.
    # False: every error line counts, as before.
    routine_errors_quiet: bool = True
    # Session 26: a unit that stopped early without an error line (``silence``'s stopped) and has
    # no failure onset of its own failed when it stopped: its last line is its onset, so a dead
    # node is the first to fail, not the first peer whose watchdog reported it (docs/spatial.md,
    # "A dead node failed when it stopped"). False: such a unit has no onset, as before.
    stop_is_onset: bool = True
    # Session 32: a unit is stopped (silent by time) only when it stopped before the failure
    # onset of every other unit that has one of its own (clocks aligned): a dead node stops first
    # and its peers time out on it after; a unit that stopped after another began to fail was
    # taken down with the job (a launcher killing its ranks, a communicator's abort) and its quiet
    # end says nothing about it (docs/spatial.md, "Stopped before anyone failed"). False: any
    # early stop counts, as before.
    stop_before_onsets: bool = True
    # Session 32: silent by time only for a unit whose files are timestamped to their end
    # (``ts_cover`` at least ``timestamp_cover``): its last timestamp before untimed lines is no
    # stop (Megatron's rank 0, MindSpeed print iteration lines untimed), and so no onset either.
    # False: every unit's last timestamp is its stop, as before.
    silence_needs_cover: bool = True
    # Session 32: a unit of three or more that stopped silent_min_gap_s before every other unit's
    # last line is stopped by time, whatever the spread of the others' ends: in a failing job
    # those are two crowds (the loud crashes, the ranks that hung until killed) whose MAD hid a
    # dead node 76 s ahead of both (fresh 33001's HF Trainer node_down). False: the spread test alone.
    silent_first_alone: bool = True
    # Session 31: a unit whose files stop being timestamped before their end (``ts_cover`` under
    # ``timestamp_cover``) counts as timed, still without an onset, when its timed onset is later
    # than the first onset of the covered units: its untimed tail was written after its timed
    # lines, so that onset is the earliest it can have failed, and later than another's it says
    # the unit did not fail first. A small job with such a unit is then timed at all, when at least
    # two units have onsets of their own (docs/spatial.md, "Uncovered units that failed later"):
    # development 361 -> 363 of 376, fresh 32001-32005 88 -> 90 of 100, none lost. False: such a
    # unit does not count (sessions 30 and before).
    uncovered_later_onsets: bool = True
    # Session 31: a role of one member (the node of rank 0 or of the last rank; every node of a
    # three-node job) is compared with the others on the candidate events only it logs too, when
    # the cross-job filter ran on the job (some of its events are no candidates): zeroing them
    # was for the role's routine output, which the filter removes. Measured and left off: development
    # 363 -> 358 of 376 (+3, -8: stragglers, slowdowns and hangs of Megatron and HF Trainer, where
    # rank 0's node prints what a slow or stuck job makes it print by role), fresh 32001-32005 -1
    # (docs/spatial.md, "A role of one keeps its own events: measured, left off"). False: zeroed.
    lone_roles_own_events: bool = False
    # Session 36: of two units, the own events ``pair_isolation`` counts are those the event
    # scoring weighs (the unit facts' ``scored`` flag: candidates of the cross-job filter), not
    # every event the spatial step sees: failure-path boilerplate and the argument lines that
    # rank 0 alone prints (a Megatron job's args with values no normal job had) made rank 0's node
    # the one with own events while the faulty node had one, its error CQE (fresh 36001;
    # docs/spatial.md, "A pair's own events are scored events"). Inputs without the flag: as before.
    pair_scored_events: bool = True
    # Session 31: a rank number below the ranks per node names that rank too when its event names
    # a rank of the job at or above the ranks per node somewhere in the job: such an event numbers
    # the job's ranks (HCCL's "remote rank [N]" of the world group), not a node's, and the first
    # node's ranks could never be named (docs/spatial.md, "Small rank numbers of an event that
    # numbers the job's ranks"): development 363 -> 365 of 376 (MindSpeed), none lost. False:
    # numbers below the ranks per node are never read (sessions 30 and before).
    global_small_ranks: bool = True
    # Session 40: the rank numbers of an event that numbers the ranks of a communicator smaller
    # than the job (HCCL's task tag names a data-parallel group's communicator, or EI0002's group
    # information states its rankSize) are the group's, not global ranks, and name nobody
    # (``signals.sub_communicator_events``; docs/spatial.md, "Ranks of a smaller communicator").
    # False: read as global ranks (sessions 39 and before).
    group_ranks_by_communicator: bool = True
    # Session 49: so are the rank numbers of an event whose task tags name two communicators or
    # more when no line states their sizes: a job has one world communicator, and the
    # data-parallel groups of a tensor-parallel job are one each (torch_npu's HCCL names each after
    # its root, tag[AllReduce_<ip>%<nic>_<port>_<device>_<number>]). Fresh 36089's MindSpeed hang
    # (tensor parallel 4) tagged four, and its "remote rank [10]" blamed the node of global rank 10
    # (docs/spatial.md, "Several communicators in one event"). False: as in session 48.
    several_communicators_are_groups: bool = True
    # Session 49: clock offsets are read from the early events every unit logs, when there are
    # any (``signals.clock_offsets``): every rank runs the same start-up, while an event only some
    # nodes log is printed when it happened there (fresh 36087: a throttle notice four nodes
    # printed hours apart made a 34 s "skew" of a node 0.06 s off; docs/spatial.md, "Clocks read
    # from the events every unit logs"). False: from the events at least half the units log.
    offsets_from_every_unit: bool = True
    # Session 41: a unit's event naming every unit of the other nodes is a listing, not blame
    # (srun's "srun: error: <host>: tasks 4-7: Killed" for each node when a step is torn down;
    # ``signals.peer_mentions``; docs/spatial.md, "A listing of every node names nobody"). False:
    # each name blames (sessions 40 and before).
    roll_calls_not_blame: bool = True
    # The c10d TCPStore client's texts that state the endpoint it connects to (Java regexes; group 1
    # is the store's host or address): pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp
    # ("TCP client failed to connect/validate to host {host}:{port} - retrying|timed out (...)"),
    # socket.cpp ("The client socket has failed to connect to [{host}]:{port} (errno: ...)", "...
    # has timed out after {n}ms while trying to connect to ({host}, {port})", "... to any network
    # address of ({host}, {port})") and the SocketImpl of its reads and writes ("recvValue failed on
    # SocketImpl(fd=N, addr=[own]:p, remote=[{host}]:{port}): Connection reset by peer", pytorch#129985).
    store_client_patterns: tuple = (
        r"connect/validate to host \[?([^\]\s:]+)\]?:[0-9]+",
        r"client socket has (?:failed|timed out after [0-9]+ms while trying) to connect to "
        r"(?:any network address of )?[\[(]([^\]),\s]+)",
        r"SocketImpl\(fd=[0-9]+, addr=[^,]*, remote=\[([^\]\s]+)\]:[0-9]+",
    )
    # Session 28: texts in which a node states its own IPv4 address (Java regexes; group 1 is the
    # address), read on every line: the address book (``signals.address_book``) learns a node's
    # address from them even where no identity line exists (NCCL_DEBUG below INFO prints none),
    # so a peer's error naming that address blames the node. NCCL's IB completion error names its
    # own RoCE GID, IPv4-mapped (``... (Recv) localGid ::ffff:10.0.0.1 remoteGid(s)::ffff:10.0.0.2``,
    # transport/net_ib.cc; public logs of NCCL 2.19-2.27: NVIDIA/nccl issues, sgl-project/sglang,
    # Google Cloud's gIB guide); c10d's socket errors name their own end first
    # (``SocketImpl(fd=N, addr=[own]:p, remote=[peer]:p)``, pytorch#129985); Ascend HCCL's error
    # CQE (EI0013, CANN's error table and hcomm: ``Local information: server <own server id>,
    # device ID d, device IP <NPU address>. Peer information: server ...``). Not the NPU's
    # device IP: it lives on the NPUs' own RoCE network, which no other line names the node by.
    self_address_patterns: tuple = (
        r"localGid ::ffff:([0-9]{1,3}(?:\.[0-9]{1,3}){3})\b",
        r"SocketImpl\(fd=[0-9]+, addr=\[(?:::ffff:)?([0-9]{1,3}(?:\.[0-9]{1,3}){3})\]:[0-9]+",
        r"Local information: server ([0-9]{1,3}(?:\.[0-9]{1,3}){3}),",
    )
    # Session 42: texts that state the time they report on a line without a timestamp of its own
    # (Java regexes; group 1 is the time: yyyy-MM-dd, then ``_``, ``T`` or a space, then HH:mm:ss).
    # torchrun's failure summary prints each failed process's ``time      : 2026-11-05_04:19:12``
    # (``ProcessFailure.timestamp``, the moment the agent saw it fail;
    # torch/distributed/elastic/multiprocessing/errors/__init__.py), and slurmstepd prints
    # ``*** STEP 4800521.0 ON <host> CANCELLED AT 2026-11-04T19:26:23 ***`` on every node of a
    # cancelled step. Such a line is timed in the ranking's unit activity (the unit's last line,
    # its timestamp cover, the dating of untimed error lines before it): on a DeepSpeed job whose
    # ranks log with a time only at checkpoint saves, every survivor's file ends in a summary timed
    # half an hour after the dead node's last line (docs/spatial.md, "Times a line states").
    # [] : header and wrapper timestamps alone (sessions 41 and before).
    stated_time_patterns: tuple = (
        r"^\s*time\s*:\s*([0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{2}:[0-9]{2}:[0-9]{2})\s*$",
        r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})",
    )
    # Session 52: a launcher's lines at its end that state no time (Java regexes), read like
    # ``stated_time_patterns``' summaries as the unit reporting its own end (``unended_is_silent``).
    # DeepSpeed's launcher (deepspeed/launcher/launch.py, ``sigkill_handler``) logs ``Killing
    # subprocess <pid>`` for each worker when one of them failed or when it was told to stop
    # (SIGTERM, SIGINT), then, when a worker failed, ``['/usr/bin/python', '-u', 'train.py', ...]
    # exits with return code = 1`` (public logs in microsoft/DeepSpeed#4181, deepseek-ai/
    # DeepSeek-Coder#55). A node that went down with its launcher prints neither: 36135's dead store
    # host, whose peers all printed them, was ranked 4th. [] : torchrun's and Slurm's ends alone.
    end_patterns: tuple = (
        r"\] exits with return code = -?[0-9]+",
        # at a word's start: after the launcher's ``[launch.py:N:sigkill_handler]`` or a line
        # wrapper's prefix (pdsh's ``host: ``) when the parse's format kept them in the message
        r"\bKilling subprocess [0-9]+$",
    )
    # Session 42: texts in which a unit says it was told to stop from outside (Java regexes):
    # torchrun's agent, ``Received Signals.SIGTERM death signal, shutting down workers`` (also
    # ``Received 15 death signal``, ``Received 1 death signal`` for SIGHUP;
    # torch/distributed/elastic/agent/server/api.py) and the exception it ends with,
    # ``SignalException: Process N got signal: 15`` (multiprocessing/api.py); slurmstepd's
    # ``*** STEP ... CANCELLED AT ...``. A unit that printed one was alive when the job was torn
    # down; when the notice has no time (read above), it came after the unit's last timestamp,
    # and that timestamp is no stop (``notices_undate_stops``).
    termination_patterns: tuple = (
        r"Received \S+ death signal",
        r"SignalException: Process [0-9]+ got signal",
        r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT",
    )
    # Session 42: a unit with a termination notice after its last timestamp (in any of its files)
    # is not silent by time: it was alive until a teardown whose time its lines do not say, like a
    # last timestamp followed by untimed lines (``silence_needs_cover``), which the best-covered of
    # its files hid. The store host's agent, shut down soon after another node failed, printed its
    # untimed SIGTERM notice; its last timestamp was from its start-up, 125 s before the others
    # stopped, and it was ranked first (36031's MindSpeed invalid rank table). False: as before.
    notices_undate_stops: bool = True
    # Session 42: an address written within a communicator's identifier names the communicator,
    # not a node: torch_npu's HCCL names each communicator after its root's address, and every
    # rank's EI0002 timeout prints it in its task tag (``tag[AllReduce_90.90.92.240%enp189s0f0_60000_0_
    # 1732766162316022]``, in public CANN logs; CANN's guide calls the tag the operator's
    # identifier, ``identifier[...]`` the communicator's name). As a name it blamed rank 0's node
    # for every HCCL timeout of the job (36031's invalid rank table: named by 10 peers, through the
    # communicator's name in EI0002's ``group:[...]``). False: as before.
    communicator_ids_name_nobody: bool = True
    # Session 52: texts that name the unit that discovered a failure, not the one that failed (Java
    # regexes; their addresses name nobody). Ascend HCCL's heartbeat spreads each failure to every
    # rank, which prints ``Cluster Exception Location[IP/ID]:[<failed>/d], Arrival Time:[...],
    # Discoverer:[<informer>/d], ExceptionType:[Heartbeat Lost Occurred]`` (hccl heartbeat.cc,
    # ``headStr + crimerStr + ... + ", Discoverer:[" + informerStr + "]"``) and in its run log
    # ``crimer rank [a/d] status[LOST] by informer rank [b/d]`` (older: ``by rank [b/d]``). Every
    # rank's copy named the informer, a neighbour of the dead node, so it was named by all (36139's
    # dead store host, ranked 2nd behind its informer). PyTorch's ProcessGroupNCCL: a rank whose
    # watchdog timed out first signals the others through the store, and each of them prints
    # ``Received a dump signal due to a collective timeout from  rank 63 and we will try our best
    # to dump the debug info`` (``getNCCLWatchdogTimeoutErrorMsg``; public logs name one healthy
    # rank from every other node: the peers' watchdogs fire first). Their rank numbers name nobody
    # either. [] : every address and rank number of a line names.
    reporter_patterns: tuple = (
        r"Discoverer:\[[^\]]*\]",
        r"\bby (?:informer )?rank \[[^\]]*\]",
        r"collective timeout from\s+rank\s*[0-9]+",
    )
    # Session 42: a unit that reported no end of its own (no line of ``termination_patterns`` or
    # ``stated_time_patterns``: no failure summary, no notice of a teardown) where at least
    # ``end_share`` of the job's units, two at least, reported theirs is silent: a launcher prints
    # its summary when its workers fail and its notice when it is told to stop, and only a node
    # that went down with its launcher prints neither. It needs no timestamp: the dead node of an
    # HF Trainer job, whose files are untimed after start-up, is found by it (docs/spatial.md,
    # "Times a line states, and notices of a teardown"). False: as before.
    unended_is_silent: bool = True
    # Session 42: timing is the lead of the first failure onset over every other unit's
    # (``signals.lead_scores``: 1 - e^(-lead / timing_scale_s) for the first unit, 0 for the rest
    # and for units tied first), not each unit's lag behind the first (``timing_scores``, which
    # gave full weight to two units 0.0 s apart and most of it to every unit near the first). A
    # node that hangs or dies has no onset of its own while its peers' watchdogs fire within a
    # second of each other: those onsets, a tie, lifted every peer over it. Reranked on 20 dumps
    # of ten fleets: +5 jobs, none lost (docs/spatial.md, "Timing is a lead"). False: by lag.
    timing_by_lead: bool = True
    end_share: float = 0.75
    # Session 43: ``end_share`` is of the *other* units, one at least: of two units, the one
    # without an end is silent when the other reported its end. False: of the job's units, two at least.
    unended_among_others: bool = True
    # Session 43: a notice that the unit was told to stop (``termination_patterns``) is a reaction,
    # as a line saying a peer failed is (its facts' ``remote`` flag): a launcher's agent is sent
    # SIGTERM, and slurmstepd cancels a step, because the job is being torn down, whoever failed.
    # Of two units, a failure that begins with such a notice is then no onset of the unit's own
    # (``pair_onset_without_remote``), and a notice only one unit printed counts for the other
    # (``pair_isolation``). Written on 36045's two-node HF Trainer NCCL timeout: the store host's
    # timed SIGTERM notice opened the only onset of the pair, while the faulty node's watchdog
    # timeouts, 6 s earlier, were reactions. False: as before.
    notices_are_reactions: bool = True
    # Messages that say the failure is at a peer, not here (Java regexes, matched on one sample
    # line per unit and event): with one peer they can only mean the other unit (``pair_isolation``).
    remote_patterns: tuple = (
        # NCCL's ncclRemoteError text, and PyTorch ProcessGroupNCCL's words for it
        r"remote process exit|A call failed possibly due to a network error or a remote process",
        # NCCL sockets ("socketProgress: Connection closed by remote peer h<port>", NVIDIA/nccl#1232,
        # #795), Gloo ("Connection closed by peer [a]:p"), c10d's TCPStore ("Connection reset by peer")
        r"(?i)closed by (the )?(remote )?peer|reset by peer",
        # c10d: the store server went away ("maybe TCPStore server has shut down too early")
        r"TCPStore server has shut down",
        # PyTorch's NCCL watchdog: a collective waited for peers that never joined it
        r"Watchdog caught collective operation timeout|ran for [0-9]+ milliseconds before timing out",
        # Ascend HCCL, a rank that waited for a remote rank (CANN's hcomm error table, github.com/hicann/hcomm):
        # EI0002 "The Notify register has not received the Notify record from remote rank [r]"
        # (InternLM/lmdeploy#3354, vllm-project/vllm-ascend#1443; the table's advice: "check other
        # ranks to see whether other errors have been reported earlier"); its cluster report of the
        # lost peer, "serverId[ip], deviceId[d], Heartbeat Lost Occurred" (mindspore-ai/docs,
        # cann_error_cases.md) / "ExceptionType:[Heartbeat Lost Occurred]" (CANN 8); EI0006
        # "Getting socket times out. Reason: Remote Rank did not send the data in time"
        # (vllm-project/vllm-ascend#486, hiyouga/LlamaFactory#5071) and the plog line before it,
        # "[Wait][LinkEstablish]wait socket establish timeout, role[1] rank[12]" (vllm-ascend#1955).
        # Not here: EI0013 "An error CQE occurred ... Peer information: server <ip>" (the side whose
        # link failed prints it too, as NCCL's IB completion error) and torch_npu's HCCL watchdog,
        # "WorkHCCL(...) ran for N milliseconds before timing out" (vllm-ascend#382): matched above.
        r"has not received the Notify record from remote rank|Heartbeat Lost Occurred",
        r"Getting socket times out|wait socket establish timeout",
    )

    def _patterns(self, name: str, group_1: str | None = None) -> None:
        """Setting ``name`` as a tuple of safe regexes; with ``group_1`` (what it holds) each needs a group 1."""
        object.__setattr__(self, name, tuple(str(p) for p in getattr(self, name)))
        for regex in getattr(self, name):
            try:
                compiled = check_regex(regex)
            except UnsafeRegexError as exc:
                raise ConfigError(f"spatial.{name}: {exc}") from exc
            if group_1 is not None and compiled.groups < 1:
                raise ConfigError(f"spatial.{name}: {regex!r} needs a group ({group_1})")

    def __post_init__(self) -> None:
        self._patterns("remote_patterns")
        self._patterns("store_client_patterns", "the store's host")
        self._patterns("self_address_patterns", "the node's own address")
        self._patterns("stated_time_patterns", "the time")
        self._patterns("termination_patterns")
        self._patterns("end_patterns")
        self._patterns("reporter_patterns")
        self._patterns("collective_timeout_patterns")
        for key in ("evidence_required", "blame_discount", "pair_quiet_for_nobody", "pair_silence",
                    "silent_despite_errors", "small_job_timing", "pair_onset_without_remote",
                    "blame_follows_onsets", "store_client_not_blame", "untimed_errors_dated",
                    "silence_without_self", "stop_is_onset", "stop_before_onsets", "silence_needs_cover",
                    "silent_first_alone", "routine_errors_quiet",
                    "uncovered_later_onsets", "lone_roles_own_events", "global_small_ranks",
                    "pair_scored_events", "group_ranks_by_communicator", "several_communicators_are_groups",
                    "offsets_from_every_unit", "roll_calls_not_blame",
                    "notices_undate_stops", "communicator_ids_name_nobody", "unended_is_silent",
                    "timing_by_lead", "notices_are_reactions", "unended_among_others", "first_name_whole",
                    "absent_member_behind"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"spatial.{key}: expected true or false, found {getattr(self, key)!r}")
        if self.granularity not in GRANULARITIES:
            raise ConfigError(f"spatial.granularity: expected one of {GRANULARITIES}, found {self.granularity!r}")
        if self.normalisation not in NORMALISATIONS:
            raise ConfigError(f"spatial.normalisation: expected one of {NORMALISATIONS}, found {self.normalisation!r}")
        for key in ("top_k", "n_estimators", "max_evidence", "min_timed_units", "burst_events"):
            if getattr(self, key) < 1:
                raise ConfigError(f"spatial.{key}: expected an integer >= 1, found {getattr(self, key)!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"spatial.threshold: expected a score in [0, 1], found {self.threshold!r}")
        for key in ("blame_weight", "timing_weight", "mention_window_s", "truncated_bonus", "silence_weight",
                    "slowness_weight", "pair_isolation_weight", "behind_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"spatial.{key}: expected a number >= 0, found {getattr(self, key)!r}")
        for key in ("timing_scale_s", "burst_gap_s", "slow_z_min"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"spatial.{key}: expected seconds > 0, found {getattr(self, key)!r}")
        for key in ("terminal_share", "timestamp_cover", "end_share"):
            if not 0.0 < getattr(self, key) <= 1.0:
                raise ConfigError(f"spatial.{key}: expected a share in (0, 1], found {getattr(self, key)!r}")
