"""The fault-pattern library: confirmed faults, their signatures, and matching (pure, no Spark).

A pattern is a known fault with a root cause and a remedy; its signature is a list of regexes
over log messages. A job matches a pattern when each signature regex finds at least one of the
job's failure-indicating events (its template or its sample line); the confidence is the share
of the signature found, so a partial match is still reported, below the full ones.

The seed library ships in ``l4spark/conf/fault_patterns.toml``; patterns that users add or
confirm live in the ``fault_patterns`` table (see ``pattern_io``). User regexes are validated
before they are stored: they must compile, must not be able to match the empty string, must
pass the catastrophic-backtracking rules of ``regexsafety``, and are matched against at most
``MAX_MATCH_CHARS`` characters of a message.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Iterable, Sequence

from l4spark.errors import L4SparkError
from l4spark.regexsafety import UnsafeRegexError, check_regex

MAX_MATCH_CHARS = 4096
MAX_REGEX_CHARS = 2000
STAGES = ("init", "data_loading", "model_loading", "training", "checkpoint_saving", "finished")


class PatternError(L4SparkError):
    """A fault pattern is invalid (the message says which field and why)."""


@dataclass(frozen=True)
class FaultPattern:
    pattern_id: str
    name: str
    fault_class: str
    root_cause: str
    remedy: str
    signature: tuple[str, ...]
    stage: str | None = None
    created_at: str | None = None
    source_job_id: str | None = None

    def __post_init__(self) -> None:
        validate_pattern(self)


@dataclass(frozen=True)
class PatternMatch:
    pattern_id: str
    name: str
    fault_class: str
    confidence: float
    matched_event_ids: tuple[str, ...]
    missing: tuple[str, ...] = field(default=())


# A known fault that no log line names: the straggler. Its signature is matched against the
# signals of the job's first-ranked unit (``diagnosis_nodes.signals``), where the node ranking
# writes "slow: the others wait for it (slowness S)" for a unit every other unit waits for
# (per-rank timers, progress lines, Megatron's straggler detector: docs/spatial.md, "Pace"), not
# against log events. ``scoring.with_unit_fault`` adds it (``diagnosis.slow_unit_fault``).
SLOW_UNIT_PATTERN_ID = "straggler-unit"


def slow_unit_pattern() -> "FaultPattern":
    return FaultPattern(
        pattern_id=SLOW_UNIT_PATTERN_ID, name="Straggler: the unit every other unit waits for",
        fault_class="slowdown",
        root_cause=("One node or rank ran its steps slower than its peers (a throttled or degraded GPU, a slow NIC, "
                    "a loaded host); every synchronous collective waited for it, so the job slowed down or timed out."),
        remedy=("Check that unit's GPU clocks, temperature and power (nvidia-smi -q -d PERFORMANCE,CLOCK,TEMPERATURE), "
                "its NIC counters and host load; drain it and restart the job without it."),
        signature=(r"^slow: the others wait for it",))


# A known fault no log line names either: the hang. The ranking writes "behind, outside NCCL: ..."
# (``spatial.score.BEHIND_OUTSIDE_TEXT``) for a unit whose ranks never enqueued the collective its
# peers' watchdogs timed out in (PyTorch's "Last enqueued NCCL work" of the dump-signal line is
# older than the collective every other rank waits in; or, session 45, its ranks alone never said
# they timed out waiting: ``spatial.signals.collective_absentees``): the rank everyone waits for is
# stuck outside NCCL. ``scoring.with_unit_fault`` adds it (``diagnosis.hung_unit_fault``).
HUNG_UNIT_PATTERN_ID = "hang-unit"


def hung_unit_pattern() -> "FaultPattern":
    return FaultPattern(
        pattern_id=HUNG_UNIT_PATTERN_ID, name="Hang: a rank stopped outside NCCL; every peer waits for it",
        fault_class="hang",
        root_cause=("A rank stopped making progress outside the collectives (a Python deadlock, a stuck data loader "
                    "or file read, a host problem, or work of its own such as writing a checkpoint that outlasted the "
                    "collective timeout): it never enqueued the collective every other rank waits in, so their "
                    "watchdogs timed out and the job was taken down."),
        remedy=("Read that rank's Python stacks (py-spy dump, the flight recorder's dump, faulthandler) and its "
                "host's kernel log and file systems; if its last lines are a checkpoint save, raise the process "
                "group timeout above the save's duration (init_process_group(timeout=...), Megatron's "
                "--distributed-timeout-minutes, HF Trainer's ddp_timeout) or save asynchronously; restart the job "
                "from the last checkpoint, without the node if it hangs again."),
        signature=(r"^behind, outside NCCL: ",))


# The hang of a rank that was writing a checkpoint (session 46): the same signal as the hang, in a
# job whose failure stage is the checkpoint save (``temporal``: the save's marker, Megatron's
# "saving checkpoint at iteration N", HF Trainer's "Saving model checkpoint to", DeepSpeed's
# "Checkpoint ... is about to be saved!", is the last the job printed). The writing rank (most
# often rank 0, or one rank per data-parallel group) is in ``torch.save`` outside any collective
# while every other rank waits in the next one, and their watchdogs fire when the save outlasts
# the process group timeout: the timeout is too short for this storage (HF Trainer's ddp_timeout
# issues, "Watchdog caught collective operation timeout" during save_model). Its class is the
# setting's. ``scoring.with_unit_faults`` puts it in the hang's place
# (``diagnosis.save_hang_unit_fault``).
SAVE_HANG_PATTERN_ID = "save-outlasted-timeout-unit"


def save_hang_pattern() -> "FaultPattern":
    return FaultPattern(
        pattern_id=SAVE_HANG_PATTERN_ID,
        name="Checkpoint save outlasted the collective timeout: the writing rank never joined its peers' collective",
        fault_class="configuration",
        root_cause=("A rank was still writing a checkpoint when every other rank's collective timed out waiting for "
                    "it: the process group timeout is shorter than a save takes on this storage, so the watchdogs "
                    "took the job down in the middle of the save."),
        remedy=("Raise the process group timeout above the longest save (init_process_group(timeout=...), Megatron's "
                "--distributed-timeout-minutes, HF Trainer's ddp_timeout, DeepSpeed's timeout, HCCL_EXEC_TIMEOUT) or "
                "save asynchronously (Megatron's --async-save, torch.distributed.checkpoint.async_save); if the save "
                "never finishes, check the checkpoint file system from that rank's node; restart from the last "
                "complete checkpoint."),
        signature=(r"^behind, outside NCCL: ",), stage="checkpoint_saving")


# A known fault no log line names, the third: the node that died. The ranking writes "silent:
# stopped N s before its peers, ..." (``spatial.score``) for a unit whose lines end before any
# other unit's own failure began (``spatial.stop_before_onsets``): a node that lost power, panicked,
# hung in its kernel or had its processes taken by the host's OOM killer writes nothing after its
# last buffered line, and its peers then report what they saw of it (NCCL's IB completion errors
# naming its address once their retry budget is spent, closed sockets, watchdog timeouts), which
# the library matches as a network fault. ``scoring.with_unit_fault`` adds it
# (``diagnosis.dead_unit_fault``); it does not overtake a job's first match when that says why
# the node went quiet better than its silence does: one of a node-local known class
# (``diagnosis.known_fault_classes``: an uncorrectable ECC error, a GPU fallen off the bus) or one
# the node printed itself (a NaN assertion before it exited): ``scoring.with_unit_faults``.
# Session 44: also "silent: no end of its own ..." (``spatial.unended_is_silent``, session 42), the
# unit that printed no failure summary and no notice to stop where its peers did: only a node
# that went down with its launcher prints neither. Before, the ranking found such a node first
# and the job's class stayed its peers' network timeouts (6 node_down jobs of twelve dumps).
DEAD_UNIT_PATTERN_ID = "node-down-unit"


def dead_unit_pattern() -> "FaultPattern":
    return FaultPattern(
        pattern_id=DEAD_UNIT_PATTERN_ID, name="Node down: the unit stopped logging before any peer failed",
        fault_class="node",
        root_cause=("A node stopped (power loss, kernel panic or hang, a host OOM kill of its processes, its "
                    "network cut): its logs end before any other node's failure began, or with no failure summary and "
                    "no notice to stop where its peers printed theirs, and the network errors and timeouts its peers "
                    "printed after name it."),
        remedy=("Check the node's BMC/IPMI event log, its kernel log from before its last line (panic, MCE, OOM "
                "killer, NIC link) and the scheduler's node state (sinfo -R, kubectl describe node); drain it and "
                "restart the job from the last checkpoint without it."),
        signature=(r"^silent: (stopped |no end of its own)",))


def unit_fault_patterns(slow: bool = True, hung: bool = True, dead: bool = True,
                        save_hang: bool = True) -> list["FaultPattern"]:
    """The built-in faults matched against the first-ranked unit's signals, in the order they are
    applied (the last that matches is the job's first): the dead node, the straggler, then the
    hang (a unit stuck outside NCCL also stops logging: the hang says more), and the hang of a
    checkpoint save, which takes the hang's place in jobs that failed saving (``save_hang``, with
    ``hung``)."""
    return [p for p, on in ((dead_unit_pattern(), dead), (slow_unit_pattern(), slow), (hung_unit_pattern(), hung),
                            (save_hang_pattern(), hung and save_hang)) if on]


def validate_pattern(pattern: FaultPattern) -> None:
    """Raise PatternError when a pattern could not be matched safely or means nothing."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", pattern.pattern_id or ""):
        raise PatternError(f"pattern_id must be 1-100 letters, digits, '_', '.', '-'; found {pattern.pattern_id!r}")
    for name in ("name", "fault_class", "root_cause", "remedy"):
        if not str(getattr(pattern, name) or "").strip():
            raise PatternError(f"pattern {pattern.pattern_id}: {name} is empty")
    if pattern.stage is not None and pattern.stage not in STAGES:
        raise PatternError(f"pattern {pattern.pattern_id}: stage must be one of {STAGES}, found {pattern.stage!r}")
    if not pattern.signature:
        raise PatternError(f"pattern {pattern.pattern_id}: the signature is empty; give at least one regex")
    for regex in pattern.signature:
        check_signature_regex(regex, pattern.pattern_id)


def check_signature_regex(regex: str, where: str = "pattern") -> re.Pattern[str]:
    if not isinstance(regex, str) or not regex.strip():
        raise PatternError(f"{where}: a signature regex is empty")
    if len(regex) > MAX_REGEX_CHARS:
        raise PatternError(f"{where}: signature regex longer than {MAX_REGEX_CHARS} characters")
    try:
        check_regex(regex)
        compiled = re.compile(regex)
    except (UnsafeRegexError, re.error) as exc:
        raise PatternError(f"{where}: signature {exc}") from exc
    if compiled.search(""):
        raise PatternError(f"{where}: signature regex {regex!r} matches the empty string, so it matches every job")
    return compiled


def seed_patterns() -> list[FaultPattern]:
    """The library shipped with l4spark."""
    text = resources.files("l4spark").joinpath("conf/fault_patterns.toml").read_text("utf-8")
    return [pattern_from_dict(item) for item in tomllib.loads(text)["pattern"]]


def pattern_from_dict(item: dict) -> FaultPattern:
    signature = item.get("signature")
    if isinstance(signature, str):
        signature = [signature]
    try:
        return FaultPattern(
            pattern_id=item.get("pattern_id", ""), name=item.get("name", ""),
            fault_class=item.get("fault_class", ""), root_cause=item.get("root_cause", ""),
            remedy=item.get("remedy", ""), signature=tuple(signature or ()), stage=item.get("stage"),
            created_at=item.get("created_at"), source_job_id=item.get("source_job_id"),
        )
    except TypeError as exc:
        raise PatternError(f"pattern {item.get('pattern_id')!r}: {exc}") from exc


def match_patterns(patterns: Iterable[FaultPattern], events: Sequence[tuple[str, str, str]],
                   min_confidence: float = 0.5) -> list[PatternMatch]:
    """Match a job's indicating events against the library.

    ``events``: (event_id, template, sample message) of the job's failure-indicating events.
    Returns the matches with confidence >= ``min_confidence``, best first (confidence, then
    the number of matched events, then pattern id for a stable order).
    """
    texts = [(event_id, (template or "")[:MAX_MATCH_CHARS], (sample or "")[:MAX_MATCH_CHARS])
             for event_id, template, sample in events]
    matches = []
    for pattern in patterns:
        found: list[str] = []
        missing: list[str] = []
        for regex in pattern.signature:
            compiled = re.compile(regex)
            hits = [event_id for event_id, template, sample in texts
                    if compiled.search(sample) or compiled.search(template)]
            (found.extend(hits) if hits else missing.append(regex))
        confidence = 1.0 - len(missing) / len(pattern.signature)
        if confidence >= min_confidence and found:
            matches.append(PatternMatch(pattern.pattern_id, pattern.name, pattern.fault_class, round(confidence, 3),
                                        tuple(dict.fromkeys(found)), tuple(missing)))
    return sorted(matches, key=lambda m: (-m.confidence, -len(m.matched_event_ids), m.pattern_id))
