"""Settings of the diagnosis assembly: the conf's ``[diagnosis]`` table, typed (no Spark here).

``l4spark.config.load_config`` builds it and refuses an unknown key, a wrong type, a value out of
range or an unsafe regex by name, before any Spark session starts. docs/diagnosis.md explains
each knob.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from l4spark.crossjob.reasons import EVIDENCE_REASONS, NEW_VARIANT, NOT_IN_POOL, RATE_ABOVE_NORMAL
from l4spark.errors import ConfigError
from l4spark.regexsafety import UnsafeRegexError, check_regex

SOURCES = ("cross_job", "spatial", "temporal", "pattern")
# The framing of a C++ exception, the native counterpart of Python's "Traceback (most recent call
# last):": libstdc++'s terminate handler names the uncaught exception's type ("terminate called
# after throwing an instance of 'c10::DistBackendError'") and PyTorch's c10::Error heads its native
# backtrace with "Exception raised from <function> at <file>:<line> (most recent call first):".
# The "  what():  ..." line between them carries the error and is not matched; nor is an older
# c10 line that has the message after the location ("Exception raised from f at x.cpp:1: msg").
NATIVE_FRAMING_PATTERNS = (
    r"^\s*terminate called (after throwing an instance of |without an active exception|recursively)",
    r"^\s*Exception raised from \S+ at \S+ \(most recent call first\):\s*$",
)
# NCCL's back trace of an error code as it returns up the call chain: every NCCLCHECK and
# NCCLCHECKGOTO on the way logs ``INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, res)`` (with
# `` (%s)`` and strerror in SYSCHECK's forms), commented "Print the back trace" in NCCL's
# src/include/checks.h: where the error passed, as a stack frame is; the WARN line before it
# (or the library's exception) says what went wrong
NCCL_BACKTRACE_PATTERN = r"(^|\s)[\w./-]+\.(cc|cu|cpp|c|h):[0-9]+ -> [0-9]+( \([^)]*\))?( \[[A-Za-z ]+\])?\s*$"
# A Python warning as the warnings module prints it (warnings._formatwarnmsg_impl, CPython 3.x):
# "path/to/module.py:N: Category: message" and then, indented by two spaces, the source line of
# the call that warned ("  warnings.warn("), as a traceback prints a frame's source line. The
# structure step keeps only "Category: message" of a line its python-warning header matched; the
# path form stays matched where another header took the line (logging.captureWarnings' py.warnings
# logger, a "[rankN]: " prefix). The warning line carries the news and is never matched itself.
WARNING_LINE_PATTERN = (r"^\s*(\S*\.py:[0-9]+: )?[A-Za-z_][A-Za-z0-9_]*Warning: "
                        r"|\s\S*\.py:[0-9]+: [A-Za-z_][A-Za-z0-9_]*Warning: ")
INDENTED_PATTERN = r"^\s+\S"
# A configuration echo line: Megatron-LM's _print_args ("  {arg} {dots} {value}", dots = '.' * (48 -
# len(arg)), between "---- arguments ----" and "---- end of arguments ----"; MindSpeed and many
# Megatron forks copy it) and DeepSpeed's DeepSpeedConfig.print ("  {arg} {dots} {value}", 29 - len).
# A key, a run of dots, a value: the job's settings as it started, printed by every job, whose
# values differ from the history's whenever the settings do (a misconfigured job's above all).
CONFIG_ECHO_PATTERN = r"^\s{1,4}[A-Za-z_][A-Za-z0-9_.]* \.{2,} "


@dataclass(frozen=True)
class DiagnosisConfig:
    """Knobs of the assembly (TOML section ``[diagnosis]``); docs/diagnosis.md explains each."""

    use_normal_pool: bool = True  # False: no cross-job filter (every job compared as if without history)
    # Spark's adaptive query execution during a batch's diagnosis: off, a 19-job batch runs 50
    # Spark jobs instead of 120 (AQE runs every shuffle stage as a job and re-plans the query after
    # it) and 10% less CPU, but every shuffle keeps spark.shuffle_partitions tasks; results are the
    # same either way (docs/capacity.md, session 14)
    adaptive_execution: bool = False
    # a batch of at most this many lines (the jobs table's n_lines) runs without Spark's code
    # generation (interpreted): compiling its many small queries cost more CPU than it saved on
    # 112k lines (0.3x small-files fleet: 17-28% less CPU). Above it, compiled; 0: always compiled
    interpreted_max_lines: int = 1_000_000
    min_score: float = 0.5  # an event is flagged when its score reaches this
    max_events: int = 200  # flagged events kept per job (best first)
    pattern_min_confidence: float = 0.5  # a pattern is reported from this share of its signature
    # ids of library patterns (seed or table) that are not matched: a site switches off a pattern it
    # does not trust, and an ablation measures what a pattern adds (docs/diagnosis.md)
    disabled_patterns: tuple = ()
    onset_margin_s: float = 60.0  # an event first seen this long before the failure onset still counts as late
    setup_onset_margin_s: float = 5.0  # ...before the first error line, in a job that never logged progress
    generic_share: float = 0.5  # in at least this share of the other failed jobs: failure boilerplate...
    generic_min_jobs: int = 20  # ...once the warehouse knows this many failed jobs
    # stack-frame lines (Python and C++ tracebacks) and the source line after a Python frame:
    # they say where the program was, not what went wrong
    frame_patterns: tuple = (r'^\s*File ".*", line [0-9]+', r"^\s*frame #[0-9]+:",
                             r"^\s*Trace[Bb]ack \(most recent call last\):")
    source_after: str = r'^\s*File ".*", line [0-9]+, in '
    # C++ exception framing (NATIVE_FRAMING_PATTERNS) counts as stack frames too; false: only
    # frame_patterns (sessions 17 and before). On 2-3-node jobs it was half the false events
    # (docs/diagnosis.md, "Native exception framing")
    native_exception_framing: bool = True
    # NCCL's back-trace lines (NCCL_BACKTRACE_PATTERN, ``transport/net.cc:1302 -> 6``) count as
    # stack frames too; false: sessions 58 and before (docs/diagnosis.md, "Exit reports yield to a
    # cause; NCCL's back trace is a frame")
    nccl_backtrace_frames: bool = True
    # the indented source line printed under a Python warning (WARNING_LINE_PATTERN) of the same
    # file and rank counts as a stack frame, as source_after's line under a traceback frame;
    # false: sessions 18 and before (docs/diagnosis.md, "Python warnings' source lines")
    warning_source_lines: bool = True
    # a configuration echo line (CONFIG_ECHO_PATTERN) is boilerplate, as a stack frame: the settings,
    # not what went wrong; false: sessions 24 and before (docs/diagnosis.md, "Configuration echo")
    config_echo_lines: bool = True
    # a launcher's line naming its own failed worker and its exit status: torch elastic's agent logs
    # "failed (exitcode: N) local_rank: N (pid: N) of binary: B" for the first failed worker of its
    # node (multiprocessing/api.py, SubprocessContext._poll), DeepSpeed's launcher "<cmd> exits with
    # return code = N" (launcher/launch.py, sigkill_handler). Every node whose worker died prints
    # one, the faulty node and the peers that died after it alike, so in a fleet where most
    # failures are torchrun's the event is failure boilerplate by generic_share. The line is a
    # statement about the node that printed it: with suspect_exit_lines = true (default) such an
    # event is not boilerplate in a job whose first-ranked unit printed it (the launcher reporting
    # the suspect's own worker); printed by other nodes only, it stays boilerplate when generic.
    # false: sessions 19 and before (docs/diagnosis.md, "The suspect's own exit line")
    suspect_exit_lines: bool = True
    # Session 43: an event is late by a file's untimed tail (``tail``: a line with no timestamp at
    # or below it in its file, which may have been written at the end) only when none of its lines
    # is shown to have been written before the failure onset (``seen_by_t``: the least timestamp
    # at or below one of its lines). NCCL's init lines sit in the untimed tail of every rank file
    # whose only timestamps are the launcher's start-up lines, yet rank 0's copy of them has a
    # timestamp below it from the same day: they are no news of the failure (fresh 36049's Megatron
    # host OOM kill: 19 init and warning events flagged). false: any line in a tail makes it late.
    bounded_lines_not_late: bool = True
    # the order of a job's pattern matches after their confidence: true (default), the match whose
    # events the nodes the ranking blames printed (scoring.match_locality), then the first in time;
    # false: by time alone, sessions 24 and before (docs/diagnosis.md, "Which match names the fault")
    locate_matches: bool = True
    # Session 44: then the first in time by when their lines are shown to have been written (an
    # untimed line by the next timestamp below it in its file; none below: last), not by the
    # timestamp above it (scoring.rank_matches). NCCL's untimed IB errors, dated by their file's
    # last timestamp a minute earlier, came before the kernel's timed OOM kill they followed
    # (3 host OOM kills of twelve dumps, none lost). false: by that earliest possible time.
    matches_by_shown_time: bool = True
    # a job whose first-ranked unit is the one the others wait for (its signals say "slow: ...")
    # matches the straggler fault first (patterns.slow_unit_pattern, class slowdown); false:
    # sessions 24 and before, such jobs kept what their peers' timeouts matched, or nothing
    slow_unit_fault: bool = True
    # a job whose first-ranked unit never enqueued the collective its peers timed out in (its
    # signals say "behind, outside NCCL: ...") matches the hang fault first (patterns.hung_unit_pattern,
    # class hang); false: session 26 and before, such jobs kept what their peers' timeouts matched
    hung_unit_fault: bool = True
    # Session 46: in a job whose failure stage is the checkpoint save, the hang's unit is the rank
    # that was writing it, and the fault a process group timeout shorter than the save
    # (patterns.save_hang_pattern, class configuration), in the hang's place. Needs hung_unit_fault.
    # False: sessions 45 and before (docs/diagnosis.md, "A hang while saving").
    save_hang_unit_fault: bool = True
    # a job whose first-ranked unit stopped logging before any other unit's own failure began (its
    # signals say "silent: stopped ...") matches the dead node (patterns.dead_unit_pattern, class
    # node) first, unless its first match is of a node-local known class (known_fault_classes) or
    # one that unit's node printed itself;
    # false: session 32 and before, such jobs kept what their peers' network errors matched
    dead_unit_fault: bool = True
    # Session 48: a match of the slow unit's class (slowdown: a CPU's thermal throttling) is no
    # cause of a dead or hung unit, even where that unit's node printed it: a throttled CPU still
    # runs and logs, so it says why a unit was slow, not why it stopped logging or never joined the
    # collective; the dead node's or the hang's fault comes first. False: sessions 47 and before,
    # where a node's own throttling lines came first (docs/diagnosis.md, "Throttling explains
    # slowness, not a stop").
    slowness_explains_only_slowness: bool = True
    # Session 48: a match that only claims slowness (slowdown class: a CPU's thermal throttling)
    # comes after the job's other matches where nothing measured slowness: the iterations did not
    # slow (the temporal step's slowdown) and no unit is the straggler (scoring.with_unborne_claims_last;
    # docs/diagnosis.md, "A claim of slowness the timeline does not bear out"). False: sessions 47
    # and before, where the lone printer's throttling came before a timeout every node printed.
    slowness_needs_measuring: bool = True
    # Session 36: each of those unit faults (dead node, straggler, hang) goes after a job's first
    # library match whose class is not one of waiting_classes, what peers print while they wait
    # for a unit (timeouts, closed connections: network): a NaN loss, a bug in the training code,
    # a bad setting are causes of their own, and a unit that stopped or lagged there followed
    # them (docs/diagnosis.md, "Unit faults after a cause"). False: sessions 35 and before (the
    # dead node alone yielded, to a node-local known class or a match of its own node).
    unit_faults_after_causes: bool = True
    waiting_classes: tuple = ("network",)
    # Session 37: the cross-job filter's keep reasons that are cross-job evidence (weights.cross_job):
    # what healthy jobs have never written (the event, its masked form, its rate). Not an event
    # the group's own healthy jobs wrote now and then (rare_in_pool), nor one that is normal in
    # another group's healthy jobs (not_in_group, normal_pool.known_elsewhere): the fleet knows
    # both as healthy output (docs/diagnosis.md, "Output the fleet knows"). Sessions 36 and
    # before: every keep reason of a job with history ("not_in_pool", "rare_in_pool",
    # "rate_above_normal", "new_variant").
    cross_job_reasons: tuple = (NOT_IN_POOL, RATE_ABOVE_NORMAL, NEW_VARIANT)
    # the node ranking's one score gains known_fault_weight for the units of the only node that
    # printed a known fault of a node-local class (known_fault_classes): a GPU's ECC error, the
    # kernel's OOM kill, a stale handle on its mount are that node's own words; 0: off, sessions 24
    # and before (docs/diagnosis.md, "A known fault printed by one node"); slowdown since session 26
    # (the kernel's thermal throttling of one node's CPUs, cpu-thermal-throttle)
    known_fault_weight: float = 0.5
    known_fault_classes: tuple = ("accelerator", "node", "out_of_memory", "storage", "software_incompatibility",
                                  "slowdown")
    # Session 57: known faults of another class whose lines only the node whose part failed prints,
    # by pattern id: they count as node-local too. NCCL prints its HCA's port error in every process
    # of that node alone (ib-port-error, class network), while the completion errors and timeouts
    # of the same link flap are its peers' (docs/diagnosis.md, "A network fault only its node
    # prints"). (): by class alone, as before.
    known_fault_local_patterns: tuple = ("ib-port-error",)
    # Session 36: the node that printed at least this share of a job's lines of its known faults
    # of those classes counts as their printer, not only a node that printed them alone: a
    # throttled node's 1,410 thermal lines beside a healthy peer's two brief ones (a CPU that
    # touched its threshold once) are that node's fault (docs/diagnosis.md, "Most of a known
    # fault's lines"). In (0.5, 1]; 1.0: the only printer, as before.
    known_fault_share: float = 0.8
    # Session 44: each known fault has its own printer (scoring.known_fault_printers), not the
    # job's known faults of those classes pooled: the thermal throttling three nodes printed had
    # hidden the one node that printed the kernel's OOM kill (36057, a host OOM kill under Slurm).
    # Faults of different printers lift nobody, as pooled. false: pooled, sessions 25-43.
    known_fault_per_pattern: bool = True
    # Session 41: a known fault that only claims its node was slow (class slowdown: a CPU's thermal
    # throttling) lifts nobody where the ranking measured a unit of another node as the one every
    # other unit waits for (the straggler's signal; since session 45 also the hang's: a rank that
    # never joined the collective the others timed out in): the measurement outranks the claim
    # (scoring.unmeasured_claims; docs/diagnosis.md, "A claim of slowness against a measured
    # straggler"). False: sessions 40 and before.
    measured_slowness_overrules: bool = True
    # Session 48: a unit measured as stopped (the dead node's signature: it stopped logging before
    # any peer failed, or printed no end of its own) is measured too: a claim of slowness printed
    # by another node lifts nobody against it (scoring.unmeasured_claims(stopped=True);
    # docs/diagnosis.md, "A claim of slowness against a dead node"). Needs measured_slowness_overrules.
    # False: sessions 47 and before, the straggler's and the hang's signatures only.
    dead_unit_overrules_slowness: bool = True
    # Session 46: a known fault whose signature finds a matched event's first line but not its
    # template (drain3 merged torchrun's "failed (exitcode: -9)" of the OOM-killed worker with the
    # "failed (exitcode: 1)" of its peers) is printed by the nodes whose lines the signature
    # finds, not by every node that printed the template: where its match is (rank_matches) and
    # its lone printer (known_fault_printers). scoring.with_signature_printers; docs/diagnosis.md,
    # "A merged template's printers". False: sessions 45 and before.
    printers_from_matched_lines: bool = True
    # a communication library's report of a failed call with its result code: NCCL's back trace,
    # one line per function the code returned through ("file.cc:N -> code", NCCLCHECK in
    # include/checks.h, "Print the back trace"; NCCL's docs: "NCCL_DEBUG=INFO will print the back
    # trace which led to the error"), Ascend HCCL's ("[func]call trace: hcclRet -> code", CANN
    # hcomm's CHK_RET) and torch_npu's exception for a failed HCCL call ("OPS function error:
    # HcclAllreduce, error code is 6", "HCCL function error: HcclCommInitRootInfo(...), error code
    # is 1"; vllm-project/vllm-ascend#486, #3196). Such a line exists only when a call failed and
    # carries its code; every network or peer-death failure prints it, so in a fleet where such
    # failures were half the failed jobs generic_share made it boilerplate and in one where they
    # were fewer it did not. With failed_call_lines = true (default) such an event is not failure
    # boilerplate: how common a cause is in tonight's fleet is not a reason to drop its evidence.
    # false: sessions 32 and before (docs/diagnosis.md, "Failed calls and their codes")
    failed_call_lines: bool = True
    # a line saying a peer failed (spatial.remote_patterns: NCCL's "remote process exited or there
    # was a network error", a socket closed by the remote peer, a collective that timed out waiting,
    # HCCL's heartbeat lost) is the failure reaching this rank. Every multi-node failure prints one,
    # so in a fleet of one framework family (a cluster's usual night) generic_share made the peers'
    # reports boilerplate, and in a mixed fleet it did not: fresh 36113 (Megatron-DeepSpeed only,
    # 25 failed jobs) lost 26 of its 177 labelled events that way, event F1 0.870. With
    # peer_failure_lines = true (default) such an event is not failure boilerplate, as failed calls
    # are not. false: sessions 49 and before (docs/diagnosis.md, "Peers' reports of a failure")
    peer_failure_lines: bool = True
    # a line printing a metric as not a number or infinite (temporal.nonfinite_rules: HF Trainer's
    # "{'loss': 0.0, 'grad_norm': nan, ...}", Megatron's "lm loss: NAN") is the divergence itself,
    # but its template is the log dict every job of the framework prints, normal values and nan
    # alike, so generic_share made it boilerplate. With nonfinite_lines = true (default) an event
    # with such a line in the job is not failure boilerplate, and its sample is its first such line.
    # false: sessions 34 and before (docs/diagnosis.md, "Metrics that turn nan")
    nonfinite_lines: bool = True
    # (the file's last name character, not the whole path: ``[A-Za-z0-9_./-]+\.cc`` searched from
    # every position of a long path-like run is quadratic, 0.15-0.2 s of the regex trial's 0.5 s
    # on this machine, and over it when the machine is busy: the default config then failed to load)
    failed_call_patterns: tuple = (r"[A-Za-z0-9_]\.(?:cc|cpp|cu|c|h|hpp):[0-9]+ -> -?[0-9]+\b",
                                   r"call trace: hcclRet -> -?[0-9]+\b",
                                   r"(?:OPS|HCCL) function error: [Hh]ccl.*, error code is [0-9]+",
                                   # session 50: torch_npu's failed stream synchronisation with its ACL
                                   # code, "ACL stream synchronize failed, error code:507035" (AT_ERROR in
                                   # its copy kernels; vllm-project/vllm-ascend#5661) and, in newer
                                   # releases, "NPU function error: c10_npu::acl::
                                   # AclrtSynchronizeStreamWithTimeout(stream()), error code is 507011"
                                   # (vllm-ascend#7676, #2800): every rank of a failed Ascend job prints
                                   # it, so on a MindSpeed-only night generic_share dropped it
                                   r"NPU function error: c10_npu::acl::Aclrt[A-Za-z]+\(.*\), error code is [0-9]+",
                                   r"ACL stream synchronize failed, error code:[0-9]+",
                                   # session 55: a transfer whose completion came back with an error
                                   # status (an RDMA work request is the call, its completion status
                                   # the code): NCCL's "NET/IB : Got completion from peer <ip><port>
                                   # with error 12" / "with status=12" (transport/net_ib.cc), the
                                   # Ascend RoCE driver's "hns_roce_lite_handle_error_cqe(630) : error
                                   # cqe status: 0x15" and HCCL's EI0013 "An error CQE occurred during
                                   # operator execution" (CANN 8.5's HCCL guide, ERROR CQE case). Every
                                   # neighbour of a dead rank prints them once its links are up
                                   r"Got completion from peer .* with (?:error |status=)[0-9]+",
                                   r"error cqe status: 0x[0-9a-fA-F]+",
                                   r"An error CQE occurred during operator execution")
    # Session 37: a Python exception line ("RuntimeError: ...", "torch.distributed.DistBackendError:
    # NCCL error in: ...", the last line of a traceback, printed to stderr without a log level) is an
    # error (weights.error) whatever level the parser found: lines the parser found no level in have
    # severity 0. false: only the level counts (sessions 36 and before; docs/diagnosis.md, "Output
    # the fleet knows").
    exception_lines: bool = True
    exception_line_patterns: tuple = (r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(?:Error|Exception)(?:\[[^\]]*\])?: ",)
    exit_line_patterns: tuple = (r"failed \(exitcode: -?[0-9]+\) local_rank: [0-9]+",
                                 r"exits with return code = -?[0-9]+\s*$")
    # Session 59: a launcher's report that a process ended says who went down, not why. Where the
    # job printed a cause (a flagged error line that is neither such a report nor a peer's report
    # that the failure reached it, ``spatial.remote_patterns``), the reports are not flagged; where
    # they are all there is (a worker the kernel killed without a word), they stay. The reports:
    # ``exit_line_patterns`` above (torch elastic's agent, DeepSpeed's launcher) and
    # ``launcher_exit_patterns``, the launchers whose line names no worker of a node: srun's task
    # exits (``srun: error: <node>: task N: Exited with exit code N``, ``...: Terminated``,
    # ``...: Killed``: the signals a teardown sends; a task's ``Out Of Memory`` or ``Segmentation
    # fault`` names a cause and is not here) and pdsh's remote command (``pdsh@<host>: <host>: ssh
    # exited with exit code N``). false: sessions 58 and before (docs/diagnosis.md, "Exit reports
    # yield to a cause")
    exit_lines_yield_to_causes: bool = True
    launcher_exit_patterns: tuple = (r"\btasks? [0-9][0-9,\-\[\]]*: (?:Exited with exit code [0-9]+|Terminated|Killed)\s*$",
                                     r"\bssh exited with exit code [0-9]+")
    # consequence and advice lines: the launcher tearing the other processes down after one failed,
    # and the fixed hints printed under an error; they say the job is going down or how to debug,
    # not what went wrong (the agent's line naming the failed process and its exit code is not here)
    consequence_patterns: tuple = (
        r"closing signal SIG[A-Z]+",  # torch elastic: Sending process N closing signal SIGTERM
        r"\bdeath signal\b|SignalException: Process [0-9]+ got signal",  # agent shutting down on a signal
        r"^\s*Killing subprocess [0-9]+",  # deepspeed launcher
        r"^\s*\S+ FAILED\s*$",  # torchrun's failure summary header ("train.py FAILED")
        r"^\s*traceback\s*:\s*To enable traceback see",  # ...and its hint line
        # ...and the framing of its error summary
        r"^\s*(Failures|Root Cause \(first observed failure\)):\s*$|^\s*<NO_OTHER_FAILURES>\s*$",
        r"^\s*error_file\s*:|^\s*time\s*:\s*[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{2}:[0-9]{2}:[0-9]{2}\s*$",
        # ...and its per-failure lines (torch.distributed.elastic's _FAILURE_FORMAT_TEMPLATE): host, rank and
        # exit code restate the agent's "failed (exitcode: N) local_rank: N (pid: N)" line above them, which
        # stays; a "traceback : Signal N (SIGABRT) ..." line the signal of that exit code
        r"^\s*host\s*:\s*\S+\s*$|^\s*rank\s*:\s*[0-9]+ \(local_rank: [0-9]+\)\s*$",
        r"^\s*exitcode\s*:\s*-?[0-9]+ \(pid: [0-9]+\)\s*$|^\s*traceback\s*:\s*Signal [0-9]+ \([A-Z]+\) received by PID",
        r"^\s*(torch\.distributed\.elastic\.multiprocessing\.errors\.)?ChildFailedError:\s*$",
        r"CUDA kernel errors might be asynchronously reported|CUDA_LAUNCH_BLOCKING=|TORCH_USE_CUDA_DSA",
        r"To avoid data inconsistency, we are taking the entire process down",  # NCCL watchdog's closing words
        r"Some NCCL operations have failed or timed out\. Due to the asynchronous nature",
        r"^\s*Last error:\s*$",  # NCCL: the header above the last warning (which is the news)
        r"^\s*nccl(RemoteError|SystemError|InternalError|UnhandledCudaError|InvalidUsage|InvalidArgument): ",  # NCCL's text for its error code
        r"^\s*Solution: ",  # Ascend (CANN/HCCL) error codes' remedy text
        # ...and their fixed list of causes it may have (EI0002's "Possible Cause: 1. An exception
        # occurs during the execution on some NPUs in the cluster. ...", public CANN logs), session 57
        r"^\s*Possible Cause: ",
        # CPython's separators between chained tracebacks (traceback.py's _cause_message and
        # _context_message): framing, the exceptions around them are the news (session 57)
        r"^\s*The above exception was the direct cause of the following exception:\s*$",
        r"^\s*During handling of the above exception, another exception occurred:\s*$",
        r"\*\*\* (STEP|JOB) \S+ ON \S+ CANCELLED AT|^\s*srun: Job step aborted|^\s*srun: error: .*: Killed\s*$",  # Slurm
        # NCCL's proxy service thread when a local rank's process closes its connection: the
        # processes of the node going down one by one (session 59)
        r"\[Service thread\] Connection closed by localRank [0-9]+",
    )
    weights: dict = field(default_factory=lambda: {
        "cross_job": 0.3, "spatial": 0.3, "temporal": 0.3, "pattern": 0.5, "late": 0.4, "error": 0.2})

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 10.0:
            raise ConfigError(f"diagnosis.min_score: expected a number in [0, 10], found {self.min_score!r}")
        if self.interpreted_max_lines < 0:
            raise ConfigError("diagnosis.interpreted_max_lines: expected an integer >= 0, found "
                              f"{self.interpreted_max_lines!r}")
        if not (isinstance(self.known_fault_share, (int, float)) and 0.5 < self.known_fault_share <= 1.0):
            raise ConfigError("diagnosis.known_fault_share: expected a share in (0.5, 1] (one node's share of the "
                              f"lines), found {self.known_fault_share!r}")
        if not 0.0 <= self.known_fault_weight <= 5.0:
            raise ConfigError(f"diagnosis.known_fault_weight: expected a number in [0, 5], found {self.known_fault_weight!r}")
        if not all(isinstance(c, str) and c.strip() for c in self.waiting_classes):
            raise ConfigError("diagnosis.waiting_classes: expected a list of fault class names, found "
                              f"{list(self.waiting_classes)!r}")
        unknown = [r for r in self.cross_job_reasons if r not in EVIDENCE_REASONS]
        if unknown:
            raise ConfigError(f"diagnosis.cross_job_reasons: expected a list of the cross-job filter's keep reasons of "
                              f"a job with history {list(EVIDENCE_REASONS)}, found {self.cross_job_reasons!r}")
        if not all(isinstance(c, str) and c.strip() for c in self.known_fault_local_patterns):
            raise ConfigError("diagnosis.known_fault_local_patterns: expected a list of pattern ids, found "
                              f"{list(self.known_fault_local_patterns)!r}")
        if not all(isinstance(c, str) and c.strip() for c in self.known_fault_classes):
            raise ConfigError("diagnosis.known_fault_classes: expected a list of fault class names, found "
                              f"{list(self.known_fault_classes)!r}")
        if self.max_events < 1:
            raise ConfigError(f"diagnosis.max_events: expected an integer >= 1, found {self.max_events!r}")
        if not 0.0 < self.generic_share <= 1.0:
            raise ConfigError(f"diagnosis.generic_share: expected a share in (0, 1], found {self.generic_share!r}")
        for regex in (*self.frame_patterns, self.source_after):
            _check_java_regex(regex, "diagnosis.frame_patterns")
        for regex in NATIVE_FRAMING_PATTERNS:
            _check_java_regex(regex, "diagnosis.native_exception_framing")
        _check_java_regex(NCCL_BACKTRACE_PATTERN, "diagnosis.nccl_backtrace_frames")
        for regex in (WARNING_LINE_PATTERN, INDENTED_PATTERN):
            _check_java_regex(regex, "diagnosis.warning_source_lines")
        _check_java_regex(CONFIG_ECHO_PATTERN, "diagnosis.config_echo_lines")
        for regex in self.consequence_patterns:
            _check_java_regex(regex, "diagnosis.consequence_patterns")
        for regex in self.exit_line_patterns:
            _check_java_regex(regex, "diagnosis.exit_line_patterns")
        for regex in self.launcher_exit_patterns:
            _check_java_regex(regex, "diagnosis.launcher_exit_patterns")
        for regex in self.failed_call_patterns:
            _check_java_regex(regex, "diagnosis.failed_call_patterns")
        for regex in self.exception_line_patterns:
            _check_java_regex(regex, "diagnosis.exception_line_patterns")
        unknown = sorted(set(self.weights) - set(SOURCES) - {"late", "error"})
        if unknown:
            raise ConfigError(f"diagnosis.weights: unknown evidence {unknown}; known: {list(SOURCES) + ['late', 'error']}")

    @property
    def line_frame_patterns(self) -> tuple:
        """The stack-frame regexes a line is matched against: ``frame_patterns``, plus the C++
        exception framing when ``native_exception_framing`` and NCCL's back trace when
        ``nccl_backtrace_frames``."""
        native = NATIVE_FRAMING_PATTERNS if self.native_exception_framing else ()
        nccl = (NCCL_BACKTRACE_PATTERN,) if self.nccl_backtrace_frames else ()
        return (*self.frame_patterns, *native, *nccl)


def _check_java_regex(regex: str, key: str) -> None:
    try:
        check_regex(regex)
    except UnsafeRegexError as exc:
        raise ConfigError(f"{key}: {exc}") from exc
