"""Spatial comparison (L4 step 3), the Spark side: long-form inputs, one grouped pandas call per job, outputs.

Per failed job, every unit (a node by default, a process rank on request) is described by
small long-form tables made here in the JVM (event counts and first times, what its lines
name, how long and how loudly it logged, its per-rank timer reports: ``pace.timer_readings``); ``score.rank_units``
then ranks one job's units in pandas (``cogroup().applyInPandas``), so Python only ever
holds one job's small unit x event tables. The signals are in ``signals.py``, their sum and
the order in ``score.py``; both import without pyspark.

The baselines (``baseline_rankings``): Error_time ranks units by their first ERROR/FATAL line,
Error_count by their number of ERROR/FATAL lines (units without one come last, by name).
"""

from __future__ import annotations

import logging
from typing import Iterable

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from l4spark.config import StorageConfig
from l4spark.regexcolumns import any_rlike, extract_all, replace_all
from l4spark.spatial.config import SpatialConfig
from l4spark.spatial.pace import timer_readings
from l4spark.spatial.score import DIAGNOSIS_NODES_COLUMNS, rank_units
from l4spark.temporal.lines import stated_times
from l4spark.io.storage import write_job_rows
from l4spark.io.tables import DIAGNOSIS_NODES

log = logging.getLogger(__name__)

ERROR_LEVELS = ("ERROR", "FATAL")
QUIET_LEVELS = ("INFO", "DEBUG", "TRACE")  # other levels, and lines without one, are loud

# What a line may name another unit by. Host names need a digit (cluster names do; it keeps
# ordinary words out), ranks are the number after the word "rank" (not local_rank / localRank).
# HCCL's bracketed ``rank[N]`` / ``remote rank [N]`` numbers a member of a communicator the line
# does not name (a sub-group's members are numbered from 0); read as a global rank it is right
# for the world group only. Not reading them was measured and left (session 29, docs/spatial.md,
# "Rank numbers within a process group"): the simulator's world-group HCCL texts lost more than
# its sub-group ones gained.
IPV4_PATTERN = r"\b(?:\d{1,3}\.){3}\d{1,3}\b"
HOST_PATTERN = r"\b[A-Za-z][A-Za-z0-9_.-]*[0-9][A-Za-z0-9_.-]*\b"
# a rank number, not the address HCCL prints after "rank [" (``crimer rank [10.0.0.1/3]``: rank 10 before session 52)
RANK_PATTERN = r"(?i)\brank\W{0,3}(\d++)(?!\.\d)"
# A rank number a process-group line prints in its own prefix is the printing rank's, and within
# its process group (``rank_``): PyTorch's ProcessGroupNCCL (createLogPrefix) ``[PG ID 3 PG GUID
# 9(DATA_PARALLEL_GROUP) Rank 2]`` (2.4+), ``[PG 1 Rank 2]`` (2.3), the work's ``[PG GUID 9(...) Rank
# 2]``, torch_npu's ProcessGroupHCCL ``[PG 1 (desc) Rank 2]``; before 2.3 the messages' ``[Rank 2]``
# (``[Rank 2] Watchdog caught collective operation timeout``); DeepSpeed's ``[Rank 2]`` too. Megatron
# runs most collectives in named sub-groups (``group_desc='DATA_PARALLEL_GROUP'``), where rank 2 is
# the group's third member, not global rank 2: it names nobody, so it is removed before ranks are read.
SELF_RANK_PREFIX = r"\[(?:PG [^\]]*?)?Rank \d+\]"
# The communicator a line numbers its ranks in, and its size. HCCL's task tag names the
# communicator the task ran in, ``tag[AllReduce_<identifier>]`` (torch_npu: the root's
# ``<ip>%<nic>_<port>_<device>_<number>``, HcclGetRootInfo; MindSpore ``tag[HcomAllReduce_<hash>_0]``);
# each communicator has an identifier of its own. The simulator's ``hcclCommInitInfo success, rank[r]
# rankSize[n] commId[<identifier>]`` (not a verified CANN text) states one with its size, and CANN's current EI0002 wording states
# the size of the one it numbers (``group information: [group:[...], ..., rankSize[n], rankId[i],
# peerRankId[p]]``, hicann/hcomm task_exception_handler.cc), as do CANN's run logs of each
# communicator (``[Communicator Key Info]identifier[<identifier>] rankSize[n] ...``;
# ``Entry-HcclCommInitRootInfoConfigInner:ranks[n], rank[r], ... identifier[<name>]``, hcomm's
# troubleshooting guide). A tag may run on past the identifier (``..._1779783710697217ringAllReduce
# MeshSmallCountExecutor_device``). A rank number of a communicator smaller than the job is a member
# of a sub-group (Megatron's data-parallel group), not a global rank. ``ranks[n]`` counts only in a
# line that names an ``identifier[...]``: alone it is any code's list index (``src = ranks[0]`` in a
# traceback's source line) and would make its event a communicator of one.
COMM_TAG_PATTERN = r"\btag\[[A-Za-z]+_([^\]\s]+)\]"
COMM_SIZE_PATTERN = r"\b(?:rankSize|ranks(?=\[\d+\].*\bidentifier\[))\[(\d+)\]"
COMM_ID_PATTERN = r"\b(?:commId|identifier)\[([^\]\s]+)\]"
# The whole of a communicator's identifier where a line writes one (its task tag, EI0002's
# ``group information: [group:[...], ...]``, ``commId[...]``, ``identifier[...]``): torch_npu names a
# communicator after its root's address (``tag[AllReduce_90.90.92.240%enp189s0f0_60000_0_1732766162316022]``
# in every rank's EI0002), which names the communicator, not a node that failed
# (``SpatialConfig.communicator_ids_name_nobody``).
COMM_NAME_PATTERN = r"\b(?:tag\[[A-Za-z]+_|group:\[|commId\[|identifier\[)[^\]\s]+\]"
# Megatron's straggler detector names the slowest rank: `` | MnRtt/Slo: 1234.56ms/17 | ...``
SLOW_RANK_PATTERN = r"MnRtt/Slo: [0-9.]+ms/(\d+)"
# How far a rank got in a process group's collectives, as PyTorch's NCCL watchdog prints it
# (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp). The collective that timed out, by its
# sequence number: ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18308,
# OpType=...``; since 2.2 ``Timeout at NCCL work: 18308, last enqueued NCCL work: ...``; 2.3-2.5
# ``Exception (either an error or timeout) detected by watchdog at work: 18308, ...``; 2.6+
# ``failure detected by watchdog at work sequence id: 18308 PG status: ...``. And the last
# collective a rank enqueued, which every rank prints once a peer's timeout signals a dump
# (2.3+: ``Received a dump signal due to a collective timeout from rank 7 ... Last enqueued NCCL
# work: 18307, last completed NCCL work: 18307.``; the timeout lines above print it too, at or
# past the timed-out one): a rank that never enqueued the collective its peers time out in is
# stuck outside it, a hang that prints no timeout of its own.
TIMEOUT_SEQ_PATTERNS = (r"WorkNCCL\(SeqNum=(\d+)", r"Timeout at NCCL work: (\d+)",
                        r"detected by watchdog at work(?: sequence id)?: (\d+)")
ENQUEUED_SEQ_PATTERNS = (r"[Ll]ast enqueued (?:[A-Z]+ )?work: (\d+)",)
# each process group numbers its collectives apart; PyTorch 2.3+ prefixes the lines with it:
# ``[PG ID 1 PG GUID 1 Rank 4]`` (2.4+), ``[PG 1 Rank 4]`` (2.3); older lines name none
PROCESS_GROUP_PATTERN = r"\[PG (?:ID )?(\d+)\b"


# Long-form per-job input of rank_units: one row per unit x event (token null) with its line
# count and first timestamp, and one row per unit x event x token a line of it names.
UNIT_FACTS_COLUMNS = ["job_id", "node", "process_rank", "event_id", "token", "n_lines", "n_loud", "first_s",
                      "candidate", "remote"]
UNIT_FACTS_SCHEMA = ("job_id string, node string, process_rank int, event_id string, token string, "
                     "n_lines long, n_loud long, first_s double, candidate boolean, remote boolean")


# ---- Spark: long-form inputs -------------------------------------------------------------


def _unit_columns(granularity: str) -> list:
    rank = F.col("rank").cast("int") if granularity == "rank" else F.lit(None).cast("int")
    return [F.col("node"), rank.alias("process_rank")]


def _fresh(frame: DataFrame, columns: list[str]) -> DataFrame:
    # fresh column ids: both sides of rank_nodes' cogroup derive from the same events, and a
    # shared grouping column id would be ambiguous there
    return frame.select(*[F.col(c).alias(c) for c in columns])


def _seconds() -> F.Column:
    return F.col("ts").cast("double")


def _is_loud() -> F.Column:
    return ~F.coalesce(F.upper(F.col("level")), F.lit("")).isin(*QUIET_LEVELS)


def _candidate_flags(candidates: DataFrame) -> DataFrame:
    """job_id, event_id, candidate (true): one row per candidate event."""
    return candidates.select("job_id", "event_id").distinct().withColumn("candidate", F.lit(True))


def _flag_candidates(frame: DataFrame, candidates: DataFrame | None) -> DataFrame:
    if candidates is None:
        return frame.withColumn("candidate", F.lit(True))
    return (frame.join(_candidate_flags(candidates), on=["job_id", "event_id"], how="left")
            .withColumn("candidate", F.coalesce(F.col("candidate"), F.lit(False))))


def unit_event_facts(events: DataFrame, granularity: str = "node",
                     candidates: DataFrame | None = None, remote_patterns: Iterable[str] = ()) -> DataFrame:
    """Per unit and event over *all* events: lines, loud lines, first timestamp, candidate flag,
    and ``remote``: whether the event's text says the failure is at a peer (one of
    ``remote_patterns``, Java regexes, matched on the unit's first line of the event in sort
    order; false without a message column).

    Input: ``events`` (job_id, node, rank, ts, level, event_id, message); ``candidates``
    (job_id, event_id) from cross-job filtering, or None for every event. Output:
    UNIT_FACTS_COLUMNS with a null token; lines with a null event_id are not counted. Every
    event is kept (clock alignment needs the routine ones); ``candidate`` tells which ones the
    count vectors use.
    """
    patterns = list(remote_patterns) if "message" in events.columns else []
    sample = [F.min("message").alias("sample")] if patterns else []
    facts = (
        events.where(F.col("event_id").isNotNull())
        .groupBy(F.col("job_id"), *_unit_columns(granularity), F.col("event_id"))
        .agg(F.count(F.lit(1)).alias("n_lines"), F.count(F.when(_is_loud(), 1)).alias("n_loud"),
             F.min(_seconds()).alias("first_s"), *sample)
        .withColumn("token", F.lit(None).cast("string"))
    )
    facts = facts.withColumn("remote", any_rlike("sample", patterns))
    return _fresh(_flag_candidates(facts, candidates), UNIT_FACTS_COLUMNS)


def unit_mentions(events: DataFrame, granularity: str = "node",
                  candidates: DataFrame | None = None, store_patterns: Iterable[str] = (),
                  self_address_patterns: Iterable[str] = (), unnamed_ids: bool = False,
                  timeout_patterns: Iterable[str] = (), reporter_patterns: Iterable[str] = ()) -> DataFrame:
    """What each unit's lines name: IPv4 addresses (all lines: identity lines are INFO), and in
    loud lines global rank numbers and host names of the job's own nodes, and the host a c10d
    store client connects to (``store:<host or address>``, group 1 of ``store_patterns``:
    ``SpatialConfig.store_client_patterns``), as written.

    Input: ``events`` (job_id, node, rank, ts, level, event_id, message; without a message
    column nothing is named). Output: UNIT_FACTS_COLUMNS with token = ``ip:<a.b.c.d>``,
    ``rank:<n>`` (not the printing rank's own process-group prefix, ``SELF_RANK_PREFIX``), ``host:<node>``, ``store:<host>``, ``slow:<n>`` (the rank a straggler-detector line names) or
    ``seq:<pg>:<n>`` (the sequence number of the collective a loud NCCL watchdog line says timed
    out, ``TIMEOUT_SEQ_PATTERNS``, in process group ``<pg>``: ``PROCESS_GROUP_PATTERN``, empty when
    the line names none), ``enq:<pg>:<n>`` (the last collective it says the rank enqueued,
    ``ENQUEUED_SEQ_PATTERNS``), ``comm:<identifier>`` (the HCCL communicator a line's task tag names,
    ``COMM_TAG_PATTERN``; all lines), ``commsize:<identifier>:<n>`` (the size of a communicator a line states,
    ``COMM_SIZE_PATTERN``, with the identifier of its ``commId[...]`` when it names one, else empty; all
    lines), ``self:<a.b.c.d>`` (an address the line states as its own node's,
    group 1 of ``self_address_patterns``: ``SpatialConfig.self_address_patterns``; all lines),
    ``waited:<rank>`` (the printing rank says it timed out waiting for its peers in a collective:
    a loud line matching one of ``timeout_patterns``, ``SpatialConfig.collective_timeout_patterns``);
    n_lines / n_loud: lines / loud lines naming it; first_s:
    the first timestamp of a loud line naming it. ``unnamed_ids``: no ``ip:`` token from within a
    communicator's identifier (``COMM_NAME_PATTERN``); no ``ip:`` or ``rank:`` token from a text
    matching one of ``reporter_patterns`` (``SpatialConfig.reporter_patterns``: the unit that
    discovered a failure, as HCCL's ``Discoverer:[<address>/<device>]``, or signalled it, as
    PyTorch's ``... collective timeout from rank N``). Token extraction is JVM regex, no Python.
    """
    if "message" not in events.columns:
        return events.sparkSession.createDataFrame([], UNIT_FACTS_SCHEMA)
    loud = _is_loud()
    empty = F.array().cast("array<string>")

    def tagged(kind: str, pattern: str, group: int, only_loud: bool, group_of: str | None = None,
               text: F.Column | str = "message") -> F.Column:
        # group_of: a regex whose group 1 qualifies the value (``<kind>:<qualifier>:<value>``; empty when absent)
        prefix = F.lit(kind + ":") if group_of is None else \
            F.concat(F.lit(kind + ":"), F.regexp_extract(F.col("message"), group_of, 1), F.lit(":"))
        found = F.transform(extract_all(text, pattern, group),
                            lambda value: F.concat(prefix, value))
        return F.when(loud, found).otherwise(empty) if only_loud else found

    stores = [tagged("store", regex, 1, True) for regex in store_patterns]
    own = [tagged("self", regex, 1, False) for regex in self_address_patterns]
    unnamed = ([COMM_NAME_PATTERN] if unnamed_ids else []) + list(reporter_patterns)
    ip_text = replace_all("message", "|".join(f"(?:{p})" for p in unnamed), "") if unnamed else F.col("message")
    rank_text = replace_all("message", "|".join(f"(?:{p})" for p in (SELF_RANK_PREFIX, *reporter_patterns)), "")
    timeouts = list(timeout_patterns)
    # which rank printed the line, not what it names: the rank that never says so is the one missing
    waited = F.when(loud & F.col("rank").isNotNull() & any_rlike("message", timeouts),
                    F.array(F.concat(F.lit("waited:"), F.col("rank").cast("int").cast("string")))
                    ).otherwise(empty) if timeouts else empty
    lines = (
        events.where(F.col("event_id").isNotNull() & F.col("message").isNotNull())
        .select("job_id", *_unit_columns(granularity), "event_id", _seconds().alias("t"), loud.alias("loud"),
                F.explode(F.array_distinct(F.concat(tagged("ip", IPV4_PATTERN, 0, False, text=ip_text),
                                                    tagged("rank", RANK_PATTERN, 1, True, text=rank_text),
                                                    tagged("slow", SLOW_RANK_PATTERN, 1, False),
                                                    tagged("comm", COMM_TAG_PATTERN, 1, False),
                                                    tagged("commsize", COMM_SIZE_PATTERN, 1, False,
                                                           group_of=COMM_ID_PATTERN),
                                                    *(tagged("seq", regex, 1, True, group_of=PROCESS_GROUP_PATTERN)
                                                      for regex in TIMEOUT_SEQ_PATTERNS),
                                                    *(tagged("enq", regex, 1, True, group_of=PROCESS_GROUP_PATTERN)
                                                      for regex in ENQUEUED_SEQ_PATTERNS),
                                                    tagged("host", HOST_PATTERN, 0, True), *stores, *own,
                                                    waited))).alias("token"))
    )
    # a host token counts only when it is one of the job's node names (or their first label)
    nodes = events.select("job_id", F.col("node").alias("named")).distinct()
    hosts = (
        lines.where(F.col("token").startswith("host:"))
        .withColumn("name", F.substring(F.col("token"), 6, 1_000_000))
        .withColumn("named", F.explode(F.array_distinct(F.array(F.col("name"), F.substring_index("name", ".", 1)))))
        .join(nodes, on=["job_id", "named"], how="inner")
        .withColumn("token", F.concat(F.lit("host:"), F.col("named")))
        .select(*lines.columns)
    )
    named = lines.where(~F.col("token").startswith("host:")).unionByName(hosts)
    mentions = (
        named.groupBy("job_id", "node", "process_rank", "event_id", "token")
        .agg(F.count(F.lit(1)).alias("n_lines"), F.count(F.when(F.col("loud"), 1)).alias("n_loud"),
             F.min(F.when(F.col("loud"), F.col("t"))).alias("first_s"))
        .withColumn("remote", F.lit(None).cast("boolean"))
    )
    return _fresh(_flag_candidates(mentions, candidates), UNIT_FACTS_COLUMNS)


def unit_activity(events: DataFrame, granularity: str = "node", dated: bool = True,
                  candidates: DataFrame | None = None, notices: Iterable[str] = (),
                  ends: Iterable[str] = ()) -> DataFrame:
    """Per unit, over all its lines: how much and until when it logged, and its error lines.

    Input: ``events`` (job_id, node, rank, ts, level, event_id; line_no optional). Output:
    job_id, node, process_rank, min_rank, max_rank (global ranks the unit holds), ranks (all of
    them, sorted), n_files (distinct ranks), n_lines, n_error (ERROR/FATAL lines),
    first_error_s, last_error_s, first_s, last_s (epoch seconds; null when the unit has no
    timestamped / error line), ts_cover (the largest share, over the unit's rank files, of a
    file's lines up to its last timestamped line: 1.0 when its last line has a timestamp; null
    without line numbers), last_error_by_s (the latest its last error line can have been
    written, as its lines date it: in each rank file, the first timestamp at or after the file's
    last error line, line numbers ordering the lines; the latest over its files; null when it
    has no error line, or when a file's last error line has no timestamped line at or after it
    (an untimed error after the last timed line may have been written at the very end);
    without line numbers, last_error_s). ``dated`` False (``untimed_errors_dated`` off, the
    baselines): last_error_by_s is last_error_s, and the files' last error lines that date
    untimed errors are not looked up. n_candidate_error, last_candidate_error_s and
    last_candidate_error_by_s are n_error, last_error_s and last_error_by_s over the error lines
    of ``candidates``' events (job_id, event_id: what the cross-job filter kept) alone; without
    ``candidates``, of every error line. undated_notice: a file of the unit has a line matching
    one of ``notices`` (Java regexes: the unit was told to stop, ``SpatialConfig.termination_patterns``)
    after its last timestamped line (false without line numbers, a message column or notices).
    reported_end: a line of the unit matches one of ``notices`` or ``ends`` (Java regexes: its
    launcher's failure summary, ``SpatialConfig.stated_time_patterns``); null without a message
    column or either.
    """
    is_error = F.col("level").isin(*ERROR_LEVELS)
    seconds = _seconds()
    file_columns = [F.col("job_id"), *_unit_columns(granularity), F.col("rank")]
    if "line_no" in events.columns:
        last_line, last_timed = F.max("line_no"), F.max(F.when(F.col("ts").isNotNull(), F.col("line_no")))
    else:
        last_line = last_timed = F.lit(None).cast("long")
    notices, ends = (list(notices), list(ends)) if "message" in events.columns else ([], [])
    if notices:
        # each line's notice match once, for both its place and the end it reports
        events = events.withColumn("_notice", any_rlike("message", notices))
    last_notice = F.max(F.when(F.col("_notice"), F.col("line_no"))) if notices and "line_no" in events.columns \
        else F.lit(None).cast("long")
    notice = F.col("_notice") if notices else F.lit(False)
    ended = notice | any_rlike("message", ends) if ends else notice
    file_ended = F.max(ended) if notices or ends else F.lit(None).cast("boolean")
    # which error lines are of a candidate event: the error lines alone (few rows) are joined with
    # the candidates, and their per-file figures are broadcast back to the file's lines
    file_keys = ["job_id", "node", "rank"]
    dated = dated and "line_no" in events.columns
    is_candidate = F.lit(True) if candidates is None else F.coalesce(F.col("candidate"), F.lit(False))
    if dated or candidates is not None:
        errors = events.where(is_error)
        if candidates is not None:
            errors = errors.join(F.broadcast(_candidate_flags(candidates)), on=["job_id", "event_id"], how="left")
        per_file_errors = errors.groupBy(*file_keys).agg(
            F.count(F.when(is_candidate, 1)).alias("file_candidate_errors"),
            F.max(F.when(is_candidate, seconds)).alias("file_candidate_error_s"),
            *([F.max("line_no").alias("last_error_line"),
               F.max(F.when(is_candidate, F.col("line_no"))).alias("last_candidate_line")] if dated else []))
        events = events.join(F.broadcast(per_file_errors), on=file_keys, how="left")
        n_candidate = F.coalesce(F.max("file_candidate_errors"), F.lit(0))
        candidate_s = F.max("file_candidate_error_s")
    else:
        n_candidate = F.count(F.when(is_error, 1))
        candidate_s = F.max(F.when(is_error, seconds))
    if dated:
        # an untimed error line was written no later than the next timestamped line of its file:
        # each file's last error line (a row per file with an error line, broadcast) joined back
        # to the file's lines, instead of a window that shuffles and sorts every line of the batch
        error_by = F.min(F.when(F.col("line_no") >= F.col("last_error_line"), seconds))
        candidate_by = F.min(F.when(F.col("line_no") >= F.col("last_candidate_line"), seconds))
        undated = F.count(F.when((F.col("n_error") > 0) & F.col("error_by_s").isNull(), 1)) > 0
        candidate_undated = F.count(F.when((F.col("n_candidate_error") > 0)
                                           & F.col("candidate_error_by_s").isNull(), 1)) > 0
    else:
        # no line order (or not asked for): the timestamped error lines alone date the last error
        error_by = F.max(F.when(is_error, seconds))
        candidate_by = candidate_s
        undated = candidate_undated = F.lit(False)
    per_file = (
        events.groupBy(*file_columns)
        .agg(F.count(F.lit(1)).alias("n_lines"), F.count(F.when(is_error, 1)).alias("n_error"),
             F.min(F.when(is_error, seconds)).alias("first_error_s"),
             F.max(F.when(is_error, seconds)).alias("last_error_s"), F.min(seconds).alias("first_s"),
             F.max(seconds).alias("last_s"), last_line.alias("last_line"), last_timed.alias("last_timed"),
             error_by.alias("error_by_s"), n_candidate.alias("n_candidate_error"),
             candidate_s.alias("candidate_error_s"), candidate_by.alias("candidate_error_by_s"),
             last_notice.alias("last_notice"), file_ended.alias("file_ended"))
    )
    cover = F.coalesce(F.col("last_timed"), F.lit(0)) / F.col("last_line")
    activity = (
        per_file.groupBy("job_id", "node", "process_rank")
        .agg(F.min("rank").cast("int").alias("min_rank"), F.max("rank").cast("int").alias("max_rank"),
             F.array_sort(F.collect_list(F.col("rank").cast("int"))).alias("ranks"),
             F.count("rank").cast("int").alias("n_files"), F.sum("n_lines").alias("n_lines"),
             F.sum("n_error").alias("n_error"), F.min("first_error_s").alias("first_error_s"),
             F.max("last_error_s").alias("last_error_s"), F.min("first_s").alias("first_s"),
             F.max("last_s").alias("last_s"), F.max(cover).alias("ts_cover"),
             F.when(~undated, F.max("error_by_s")).alias("last_error_by_s"),
             F.sum("n_candidate_error").alias("n_candidate_error"),
             F.max("candidate_error_s").alias("last_candidate_error_s"),
             F.when(~candidate_undated, F.max("candidate_error_by_s")).alias("last_candidate_error_by_s"),
             F.max(F.coalesce(F.col("last_notice") > F.coalesce(F.col("last_timed"), F.lit(0)),
                              F.lit(False))).alias("undated_notice"),
             F.max("file_ended").alias("reported_end"))
    )
    return _fresh(activity, ["job_id", "node", "process_rank", "min_rank", "max_rank", "ranks", "n_files", "n_lines",
                             "n_error", "first_error_s", "last_error_s", "first_s", "last_s", "ts_cover",
                             "last_error_by_s", "n_candidate_error", "last_candidate_error_s",
                             "last_candidate_error_by_s", "undated_notice", "reported_end"])


# ---- pure per-job logic --------------------------------------------------------------------


def unit_slowness(events: DataFrame, granularity: str = "node", timers: DataFrame | None = None) -> DataFrame:
    """Per unit, how far its ranks' per-rank timers stay above the other ranks' (a straggler).

    Input: ``events`` (job_id, node, rank, line_no, message; without message or line_no: no
    row). Megatron's ``--timing-log-option all`` prints, on the logging rank, a block
    ``times across ranks (ms):`` then for each timer ``  <name>:`` and ``     rank  N: <ms>``
    lines. Within one block and timer, each rank's value becomes a robust z against the ranks
    of that block (median; spread 1.4826 MAD, floored at 1% of the median: smaller differences
    are noise); a rank's reading is its *second* highest z over the blocks (one report is not
    sustained) or its z in the reporter's *last* block, whichever is higher (the state the job
    ended in: a straggler that began shortly before the job was stopped has one report after
    its onset, as timers are printed every few log intervals), the largest over the timers.
    Output: job_id, node, process_rank (the unit
    holding the named rank), slow_z (the largest over the unit's ranks). Jobs without such
    blocks have no row. ``timers``: ``pace.timer_readings`` of ``events`` when the caller has
    them already (the diagnosis shares one computation with ``pace.unit_pace``); its
    ``iteration`` column is not used, so readings made with or without a temporal config serve.
    """
    if "message" not in events.columns or "line_no" not in events.columns:
        return events.sparkSession.createDataFrame([], "job_id string, node string, process_rank int, slow_z double")
    reports = (timer_readings(events) if timers is None else timers).drop("iteration")
    block = ["job_id", "reporter", "reporter_rank", "block", "timer"]
    median = reports.groupBy(*block).agg(F.percentile_approx("ms", 0.5).alias("median"))
    reports = reports.join(median, on=block, how="inner").withColumn("dev", F.abs(F.col("ms") - F.col("median")))
    mad = reports.groupBy(*block).agg(F.percentile_approx("dev", 0.5).alias("mad"))
    spread = F.greatest(1.4826 * F.col("mad"), 0.01 * F.col("median"), F.lit(1e-9))
    last_block = F.max("block").over(Window.partitionBy("job_id", "reporter", "reporter_rank"))
    per_rank = (
        reports.join(mad, on=block, how="inner")
        .withColumn("z", (F.col("ms") - F.col("median")) / spread)
        .withColumn("last_z", F.when(F.col("block") == last_block, F.col("z")))
        .groupBy("job_id", "timer", "named_rank")
        .agg(F.sort_array(F.collect_list("z"), asc=False).alias("zs"), F.max("last_z").alias("last_z"))
        .where(F.size("zs") >= 2)
        .groupBy("job_id", "named_rank").agg(F.max(F.greatest(F.col("zs")[1], F.col("last_z"))).alias("slow_z"))
    )
    holders = events.select("job_id", "node", F.col("rank").cast("int").alias("named_rank")).distinct()
    process_rank = F.col("named_rank") if granularity == "rank" else F.lit(None).cast("int")
    slow = (
        per_rank.join(holders, on=["job_id", "named_rank"], how="inner")
        .groupBy("job_id", "node", process_rank.alias("process_rank")).agg(F.max("slow_z").alias("slow_z"))
    )
    return _fresh(slow, ["job_id", "node", "process_rank", "slow_z"])


# ---- Spark: per-job ranking, baselines, outputs --------------------------------------------


def unit_inputs(events: DataFrame, granularity: str = "node", candidates: DataFrame | None = None,
                timers: DataFrame | None = None, remote_patterns: Iterable[str] = (),
                store_patterns: Iterable[str] = (), dated: bool = True,
                self_address_patterns: Iterable[str] = (), stated_time_patterns: Iterable[str] = (),
                termination_patterns: Iterable[str] = (), unnamed_ids: bool = False,
                timeout_patterns: Iterable[str] = (), end_patterns: Iterable[str] = (),
                reporter_patterns: Iterable[str] = ()) -> tuple[DataFrame, DataFrame]:
    """The two long-form inputs of ``rank_units`` for every job of ``events``: the unit facts
    and mentions (UNIT_FACTS_COLUMNS) and the unit activity (``unit_activity`` with
    ``unit_slowness``'s slow_z, null where no timer names the unit). Built once, they
    can be ranked under several configurations (``rank_unit_inputs``; the evaluation does).
    ``timers``: see ``unit_slowness``; ``remote_patterns``: see ``unit_event_facts``; ``store_patterns``:
    see ``unit_mentions``; ``dated``: see ``unit_activity``; ``self_address_patterns``: see
    ``unit_mentions``; ``stated_time_patterns``: see ``stated_times`` (the activity's times
    alone: facts and mentions date events by their own timestamps); ``termination_patterns``: see
    ``unit_activity``'s notices; ``end_patterns``: a launcher's lines at its end that state no time,
    read as ``unit_activity``'s ends beside ``stated_time_patterns``; ``unnamed_ids``, ``timeout_patterns``
    and ``reporter_patterns``: see ``unit_mentions``."""
    facts = unit_event_facts(events, granularity, candidates, remote_patterns).unionByName(
        unit_mentions(events, granularity, candidates, store_patterns, self_address_patterns, unnamed_ids,
                      timeout_patterns, reporter_patterns))
    activity = unit_activity(stated_times(events, stated_time_patterns), granularity, dated, candidates,
                             termination_patterns, (*stated_time_patterns, *end_patterns))
    slow = unit_slowness(events, granularity, timers).withColumnRenamed("job_id", "s_job").withColumnRenamed(
        "node", "s_node").withColumnRenamed("process_rank", "s_rank")
    same_unit = ((activity["job_id"] == slow["s_job"]) & (activity["node"] == slow["s_node"])
                 & activity["process_rank"].eqNullSafe(slow["s_rank"]))
    activity = activity.join(slow, on=same_unit, how="left").drop("s_job", "s_node", "s_rank")
    return facts, activity


def with_scored_events(facts: DataFrame, scored: DataFrame) -> DataFrame:
    """``unit_inputs``' facts with ``scored``: the event is one the event scoring weighs
    (``scored``: job_id, event_id, the cross-job filter's candidates; a small frame, broadcast),
    read by ``SpatialConfig.pair_scored_events``."""
    flags = scored.select("job_id", "event_id").distinct().withColumn("scored", F.lit(True))
    return (facts.join(F.broadcast(flags), on=["job_id", "event_id"], how="left")
            .withColumn("scored", F.coalesce(F.col("scored"), F.lit(False))))


def rank_job(job_facts: pd.DataFrame, job_activity: pd.DataFrame, config: SpatialConfig) -> pd.DataFrame:
    """One job's ``diagnosis_nodes`` rows (DIAGNOSIS_NODES_COLUMNS) from its rows of ``unit_inputs``
    (both with job_id): ``rank_units``; no row without activity. The per-job step of
    ``rank_unit_inputs`` in Spark, and of ``evaluation.rerank`` offline: one ranking for both."""
    if job_activity.empty:
        return pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
    job_id = str(job_activity["job_id"].iloc[0])
    return rank_units(job_id, job_facts.drop(columns=["job_id"]), job_activity.drop(columns=["job_id"]), config)


def rank_unit_inputs(facts: DataFrame, activity: DataFrame, config: SpatialConfig = SpatialConfig()) -> DataFrame:
    """``diagnosis_nodes`` rows from ``unit_inputs`` (made with ``config.granularity``): one
    grouped pandas call per job (``cogroup().applyInPandas(rank_job)``)."""
    return (
        facts.groupBy("job_id").cogroup(activity.groupBy("job_id"))
        .applyInPandas(lambda job_facts, job_activity: rank_job(job_facts, job_activity, config),
                       schema=DIAGNOSIS_NODES.schema)
        .select(*DIAGNOSIS_NODES_COLUMNS)
    )


def rank_nodes(events: DataFrame, config: SpatialConfig = SpatialConfig(),
               candidates: DataFrame | None = None, timers: DataFrame | None = None) -> DataFrame:
    """``diagnosis_nodes`` rows for every job in ``events`` (filter it to the failed jobs first).

    Input: ``events`` (job_id, node, rank, ts, level, event_id; message and line_no are used
    when present: peer mentions, timestamp cover); ``candidates`` (job_id, event_id) from
    cross-job filtering, or None to compare over every event. A job whose candidate set is
    empty still gets its units ranked by silence (all scores 0.5). Output
    (DIAGNOSIS_NODES.schema): one row per unit; process_rank is null at node granularity.
    ``timers``: ``pace.timer_readings`` of ``events``, when already computed (``unit_slowness``).
    """
    return rank_unit_inputs(*configured_unit_inputs(events, config, candidates, timers), config)


# the settings ``configured_unit_inputs`` reads: they shape the inputs, so inputs once built fix
# them (``evaluation.rerank`` refuses to change one); a test holds this list to what it reads
UNIT_INPUT_SETTINGS = ("granularity", "remote_patterns", "store_client_not_blame", "store_client_patterns",
                       "untimed_errors_dated", "self_address_patterns", "stated_time_patterns",
                       "termination_patterns", "communicator_ids_name_nobody", "notices_are_reactions",
                       "collective_timeout_patterns", "end_patterns", "reporter_patterns")


def configured_unit_inputs(events: DataFrame, config: SpatialConfig = SpatialConfig(),
                           candidates: DataFrame | None = None,
                           timers: DataFrame | None = None) -> tuple[DataFrame, DataFrame]:
    """``unit_inputs`` built as ``rank_nodes`` builds them under ``config`` (the settings that
    shape the inputs, ``UNIT_INPUT_SETTINGS``: granularity, remote and store-client patterns, dating)."""
    # the store-client tokens are only read when the switch is on: no extra regexes per line otherwise
    stores = config.store_client_patterns if config.store_client_not_blame else ()
    # a notice to stop is a reaction too (``notices_are_reactions``): the facts' remote flag
    remote = (*config.remote_patterns, *config.termination_patterns) if config.notices_are_reactions \
        else config.remote_patterns
    return unit_inputs(events, config.granularity, candidates, timers, remote,
                       stores, config.untimed_errors_dated, config.self_address_patterns,
                       config.stated_time_patterns, config.termination_patterns,
                       config.communicator_ids_name_nobody, config.collective_timeout_patterns,
                       config.end_patterns, config.reporter_patterns)


def baseline_rankings(events: DataFrame, granularity: str = "node") -> DataFrame:
    """The two baselines of the paper as rankings of every unit.

    Input: ``events`` (job_id, node, rank, ts, level). Output: job_id, node, process_rank,
    method (``error_time``: earliest ERROR/FATAL line first; ``error_count``: most ERROR/FATAL
    lines first), rank (1 = most suspect). Units without an error line (or, for error_time,
    without a timestamped one) come after the others, by name.
    """
    activity = unit_activity(events, granularity, dated=False)  # the baselines read no last_error_by_s
    by_time = Window.partitionBy("job_id").orderBy(F.col("first_error_s").asc_nulls_last(), "node",
                                                   F.col("process_rank").asc_nulls_first())
    by_count = Window.partitionBy("job_id").orderBy(F.col("n_error").desc(), "node",
                                                    F.col("process_rank").asc_nulls_first())
    columns = ["job_id", "node", "process_rank"]
    return (
        activity.select(*columns, F.lit("error_time").alias("method"), F.row_number().over(by_time).alias("rank"))
        .unionByName(activity.select(*columns, F.lit("error_count").alias("method"),
                                     F.row_number().over(by_count).alias("rank")))
    )


def spatial_events(node_rows: pd.DataFrame) -> pd.DataFrame:
    """The spatially indicating events of each job: the evidence of its suspect units.

    Input: ``diagnosis_nodes`` rows as pandas (the diagnosis collects them anyway; one Spark
    job fewer than deriving this in Spark). Output: job_id, event_id, score (the largest
    deviation of a suspect unit on the event), n_nodes (suspect units it is evidence for),
    nodes (sorted), source (``spatial``). Jobs without a suspect have no row.
    """
    columns = ["job_id", "event_id", "score", "n_nodes", "nodes", "source"]
    suspects = node_rows[node_rows["suspect"].fillna(False).astype(bool)] if len(node_rows) else node_rows
    items = pd.DataFrame(
        [(job_id, event_id, score, node)
         for job_id, node, events, scores in zip(suspects.get("job_id", []), suspects.get("node", []),
                                                 suspects.get("evidence", []), suspects.get("evidence_scores", []))
         for event_id, score in zip(_items(events), _items(scores)) if event_id is not None],
        columns=["job_id", "event_id", "score", "node"])
    if items.empty:
        return pd.DataFrame(columns=columns)
    return (items.groupby(["job_id", "event_id"], sort=True)
            .agg(score=("score", "max"), n_nodes=("node", "nunique"),
                 nodes=("node", lambda n: sorted(set(n))))
            .reset_index().assign(source="spatial")[columns])


def _items(values) -> list:
    """An array cell of a collected frame as a list (None: empty)."""
    return [] if values is None else list(values)


def write_diagnosis_nodes(node_rows: DataFrame, storage: StorageConfig, job_ids: Iterable[str]) -> None:
    """Replace the ``diagnosis_nodes`` rows of ``job_ids`` with ``node_rows`` (those jobs only)."""
    job_ids = sorted(set(job_ids))
    with_rows = {r.job_id for r in node_rows.select("job_id").distinct().collect()}
    write_job_rows(node_rows.select(*DIAGNOSIS_NODES_COLUMNS), storage, "diagnosis_nodes", job_ids, with_rows)
    log.info("diagnosis_nodes: wrote %d jobs (%d with rows)", len(job_ids), len(with_rows))


