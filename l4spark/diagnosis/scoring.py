"""Event scoring and pattern ranking of the assembly: pure pandas, per job, no Spark.

``score_events`` turns the per-(job, event) evidence that the Spark side aggregated into a score
and a rank; ``job_patterns`` / ``rank_matches`` match the fault-pattern library and order the
matches. docs/diagnosis.md explains the evidence and the weights.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Collection, Sequence

import pandas as pd

from l4spark.crossjob.reasons import NO_HISTORY
from l4spark.diagnosis.config import SOURCES, DiagnosisConfig
from l4spark.diagnosis.patterns import (DEAD_UNIT_PATTERN_ID, HUNG_UNIT_PATTERN_ID, MAX_MATCH_CHARS,
                                       SAVE_HANG_PATTERN_ID, FaultPattern, PatternMatch, dead_unit_pattern,
                                       hung_unit_pattern, match_patterns, slow_unit_pattern, unit_fault_patterns)
from l4spark.spatial.config import SpatialConfig
from l4spark.spatial.score import order_units, suspect_flags, unit_key

# the ``DiagnosisConfig`` settings ``score_events`` reads: with its inputs kept, an event table is
# scored again under other values of these without Spark (``evaluation.rescore``); a test holds
# this list to what it reads
SCORE_SETTINGS = ("onset_margin_s", "setup_onset_margin_s", "exception_lines", "exception_line_patterns",
                  "cross_job_reasons", "suspect_exit_lines", "failed_call_lines", "failed_call_patterns",
                  "nonfinite_lines", "generic_min_jobs", "generic_share", "consequence_patterns", "weights",
                  "min_score", "max_events", "bounded_lines_not_late", "peer_failure_lines",
                  "exit_lines_yield_to_causes", "exit_line_patterns", "launcher_exit_patterns")

SEVERITY = {"FATAL": 4, "CRITICAL": 4, "ERROR": 3, "WARN": 2, "WARNING": 2, "INFO": 1, "DEBUG": 0}


def score_events(evidence: pd.DataFrame, timing: pd.DataFrame, spatial: pd.DataFrame, temporal: pd.DataFrame,
                 pattern_hits: pd.DataFrame, shares: pd.DataFrame, conf: DiagnosisConfig,
                 nodes: pd.DataFrame | None = None, peer_failure_patterns: tuple = ()) -> pd.DataFrame:
    """Evidence, score and rank of every candidate event.

    Inputs (pandas): ``evidence`` (``event_evidence`` columns plus history; ``exit_nodes`` may be
    absent or null: no exit line), ``timing`` (``job_timing``), ``spatial`` / ``temporal``
    (job_id, event_id, score), ``pattern_hits`` (job_id, event_id, confidence), ``shares``
    (``failed_event_shares``), ``nodes`` (the node ranking: job_id, node, rank; None: no ranking),
    ``peer_failure_patterns`` (``SpatialConfig.remote_patterns``: a line saying a peer failed; read
    with ``DiagnosisConfig.peer_failure_lines``).
    Output: the evidence columns plus late, error, generic, suspect_exit, frame, consequence,
    cross_job, spatial, temporal, pattern (booleans), sources (list), score, flagged, rank (1 =
    most indicative among the flagged; null otherwise).
    """
    frame = evidence.merge(timing[["job_id", "start_t", "last_progress_t"]], on="job_id", how="left")
    # failure onset: where progress stopped; a job that never logged progress (it died during
    # setup) has its first error line instead, so the configuration it echoed before is not late
    first_error = frame["first_t"].where(frame["severity"].fillna(0) >= SEVERITY["ERROR"]).groupby(frame["job_id"]).transform("min")
    progress_t, start_t = (pd.to_numeric(frame[c], errors="coerce") for c in ("last_progress_t", "start_t"))
    onset = ((progress_t - conf.onset_margin_s)
             .fillna(first_error - conf.setup_onset_margin_s)
             .fillna(start_t - conf.onset_margin_s))
    tail = frame["tail"].fillna(False).astype(bool) if "tail" in frame.columns else False
    if conf.bounded_lines_not_late and "seen_by_t" in frame.columns:
        # an event with a line written before the onset (a timestamp at or below it says so) was
        # there before the failure, whatever lines of it other files leave untimed at their end
        tail = tail & ~(pd.to_numeric(frame["seen_by_t"], errors="coerce") < onset).fillna(False).astype(bool)
    frame["late"] = (frame["first_t"] >= onset).fillna(False).astype(bool) | frame["first_t"].isna() & onset.isna() | tail
    # a Python exception line is an error whatever level the parser found (DiagnosisConfig.exception_lines)
    exception = (_matches_any(frame["sample"], conf.exception_line_patterns) if conf.exception_lines
                 else pd.Series(False, index=frame.index))
    frame["error"] = (frame["severity"].fillna(0) >= SEVERITY["ERROR"]) | exception
    frame["warning"] = (frame["severity"].fillna(0) == SEVERITY["WARN"]) & ~exception
    # what healthy jobs never wrote (DiagnosisConfig.cross_job_reasons): not what the group's own
    # healthy jobs wrote now and then, nor another group's normal output
    frame["cross_job"] = ((frame["history"].fillna(NO_HISTORY) != NO_HISTORY)
                          & frame["keep_reason"].isin(list(conf.cross_job_reasons)))
    keys = list(zip(frame["job_id"], frame["event_id"]))
    for name, table in (("spatial", spatial), ("temporal_it", temporal), ("pattern", pattern_hits)):
        present = set(zip(table["job_id"], table["event_id"])) if len(table) else set()
        frame[name] = [key in present for key in keys]
    frame["temporal"] = frame["temporal_it"] | frame["late"]
    n_failed_jobs = int(shares.attrs.get("n_failed_jobs", 0))
    in_failed = frame["event_id"].map(shares.set_index("event_id")["n_failed"]).fillna(0)
    # this job's own occurrence taken out: the share of the *other* failed jobs that print it
    other_share = (in_failed - 1).clip(lower=0) / max(1, n_failed_jobs - 1)
    frame["suspect_exit"] = _suspect_exit(frame, nodes) if conf.suspect_exit_lines else False
    # the launcher's report of the first-ranked unit's own failed worker is about this failure,
    # however many failures print the same template (DiagnosisConfig.suspect_exit_lines)
    # nor is a communication library's report of a failed call with its result code
    # (DiagnosisConfig.failed_call_lines)
    failed_call = (_matches_any(frame["sample"], conf.failed_call_patterns) if conf.failed_call_lines
                   else pd.Series(False, index=frame.index))
    # nor is an event whose lines here print a metric as nan or inf: the template is every job's
    # log dict, the values are this failure's (DiagnosisConfig.nonfinite_lines)
    nonfinite = (frame["nonfinite"].fillna(False).astype(bool) if conf.nonfinite_lines and "nonfinite" in frame.columns
                 else pd.Series(False, index=frame.index))
    # nor is a peer's report that the failure reached it (DiagnosisConfig.peer_failure_lines)
    peer_failure = (_matches_any(frame["sample"], peer_failure_patterns) if conf.peer_failure_lines
                    else pd.Series(False, index=frame.index))
    frame["generic"] = ((n_failed_jobs >= conf.generic_min_jobs) & (other_share >= conf.generic_share)
                        & ~frame["pattern"] & ~frame["suspect_exit"] & ~failed_call & ~nonfinite & ~peer_failure)
    # stack frames, and lines without a letter (blank lines, ==== / ---- separators): structure, not content
    no_words = ~frame["sample"].fillna("").astype(str).str.contains(r"[^\W\d_]", regex=True)
    frame["frame"] = ((frame["frame_share"].fillna(0) >= 0.5) | no_words) & ~frame["pattern"]
    # even when a fault pattern's keywords occur in it (advice text names the error it explains)
    frame["consequence"] = _matches_any(frame["sample"], conf.consequence_patterns)
    weights = conf.weights
    frame["score"] = (weights["cross_job"] * frame["cross_job"] + weights["spatial"] * frame["spatial"]
                      + weights["temporal"] * frame["temporal_it"] + weights["pattern"] * frame["pattern"]
                      + weights["late"] * frame["late"] + weights["error"] * (frame["error"] + 0.5 * frame["warning"]))
    frame["score"] = frame["score"].astype(float).round(4)
    frame["flagged"] = (frame["score"] >= conf.min_score) & ~frame["generic"] & ~frame["frame"] & ~frame["consequence"]
    if conf.exit_lines_yield_to_causes:
        frame["flagged"] &= ~_exit_reports_with_a_cause(frame, conf, peer_failure_patterns)
    frame["sources"] = [[s for s in SOURCES if row[s]] for row in frame[list(SOURCES)].to_dict("records")]
    frame = frame.sort_values(["job_id", "flagged", "score", "first_t", "event_id"],
                              ascending=[True, False, False, True, True], kind="stable", na_position="last")
    frame["rank"] = frame.groupby("job_id").cumcount() + 1
    frame.loc[~frame["flagged"], "rank"] = pd.NA
    frame = frame[frame["rank"].isna() | (frame["rank"] <= conf.max_events)]
    return frame.drop(columns=["temporal_it", "warning"]).reset_index(drop=True)


def _exit_reports_with_a_cause(frame: pd.DataFrame, conf: DiagnosisConfig, peer_failure_patterns: Sequence[str]) -> pd.Series:
    """True on the flagged launcher exit reports (``exit_line_patterns``, ``launcher_exit_patterns``)
    of a job that also flagged a cause: an error line that is no exit report and no peer's report
    that the failure reached it (``peer_failure_patterns``)."""
    report = _matches_any(frame["sample"], (*conf.exit_line_patterns, *conf.launcher_exit_patterns))
    cause = frame["flagged"] & frame["error"] & ~report & ~_matches_any(frame["sample"], peer_failure_patterns)
    has_cause = cause.groupby(frame["job_id"]).transform("any").astype(bool)
    return frame["flagged"] & report & has_cause


def _suspect_exit(frame: pd.DataFrame, nodes: pd.DataFrame | None) -> pd.Series:
    """True where the job's first-ranked unit (its node) printed one of the event's exit lines
    (``exit_nodes``); False without a ranking or without exit lines."""
    if nodes is None or not len(nodes) or "exit_nodes" not in frame.columns:
        return pd.Series(False, index=frame.index)
    first = nodes[nodes["rank"] == 1].drop_duplicates("job_id").set_index("job_id")["node"].to_dict()
    return pd.Series([first.get(job_id) in set(printed) if printed is not None else False
                      for job_id, printed in zip(frame["job_id"], frame["exit_nodes"])], index=frame.index, dtype=bool)


def _matches_any(texts: pd.Series, patterns: Sequence[str]) -> pd.Series:
    if not patterns or texts.empty:
        return pd.Series(False, index=texts.index)
    # a pattern's leading (?i) scoped to it: Python refuses global flags inside an alternation
    regex = re.compile("|".join(f"(?i:{p[4:]})" if p.startswith("(?i)") else f"(?:{p})" for p in patterns))
    return texts.fillna("").astype(str).map(lambda text: regex.search(text) is not None).astype(bool)


def job_patterns(evidence: pd.DataFrame, templates: dict[str, str], library: Sequence[FaultPattern],
                 min_confidence: float) -> dict[str, list[PatternMatch]]:
    """The library's matches per job, over every candidate event (template and first line). A
    match lists its events by signature entry, then by event id: not in the order the evidence
    rows came from Spark, which depends on the query plan."""
    matches = {}
    for job_id, group in evidence.groupby("job_id", sort=True):
        triples = [(r.event_id, templates.get(r.event_id, ""), r.sample or "")
                   for r in group.sort_values("event_id", kind="stable").itertuples()]
        matches[job_id] = match_patterns(library, triples, min_confidence)
    return matches


def sample_only_signatures(matches: dict[str, list[PatternMatch]], evidence: pd.DataFrame,
                           templates: dict[str, str], library: Sequence[FaultPattern]) -> pd.DataFrame:
    """job_id, event_id, signature: each signature entry of a matched pattern that found a matched
    event in its first line (``sample``) but not in its template. The template is the common form of
    lines that say different things: drain3 merges torchrun's ``failed (exitcode: -9)`` of the
    OOM-killed worker with the ``failed (exitcode: 1)`` its peers exit with, so the nodes that
    printed the event are not the nodes that printed what the signature names
    (``with_signature_printers``)."""
    by_id = {p.pattern_id: p for p in library}
    samples = {(r.job_id, r.event_id): (r.sample or "")[:MAX_MATCH_CHARS] for r in evidence.itertuples()}
    rows = set()
    for job_id, found in matches.items():
        for match in found:
            pattern = by_id.get(match.pattern_id)
            for event_id in match.matched_event_ids if pattern is not None else ():
                template = (templates.get(event_id) or "")[:MAX_MATCH_CHARS]
                sample = samples.get((job_id, event_id), "")
                rows.update((job_id, event_id, regex) for regex in pattern.signature
                            if re.search(regex, sample) and not re.search(regex, template))
    return pd.DataFrame(sorted(rows), columns=["job_id", "event_id", "signature"])


def with_signature_printers(evidence: pd.DataFrame, signatures: pd.DataFrame, lines: pd.DataFrame) -> pd.DataFrame:
    """``evidence`` whose ``nodes`` and ``node_lines`` (who printed a matched event: where its match
    is, ``rank_matches``, and its lone printer, ``known_fault_printers``) count, for each event of
    ``signatures`` (``sample_only_signatures``), only its lines that one of its signature entries
    finds. ``lines``: job_id, event_id, node, message, n_lines (the event's candidate lines,
    distinct per node). An event none of whose lines the entry finds (its sample was cut
    short) keeps its printers."""
    if signatures.empty or lines.empty:
        return evidence
    wanted = signatures.groupby(["job_id", "event_id"])["signature"].agg(list).to_dict()
    counted: dict[tuple[str, str], dict[str, int]] = {}
    for r in lines.itertuples():
        regexes = wanted.get((r.job_id, r.event_id), ())
        message = (r.message or "")[:MAX_MATCH_CHARS]
        if r.node is not None and any(re.search(regex, message) for regex in regexes):
            per_node = counted.setdefault((r.job_id, r.event_id), {})
            per_node[r.node] = per_node.get(r.node, 0) + int(r.n_lines)
    if not counted:
        return evidence
    out = evidence.copy()
    keys = list(zip(out["job_id"], out["event_id"]))
    out["nodes"] = [sorted(counted[k]) if k in counted else v for k, v in zip(keys, out["nodes"])]
    out["node_lines"] = [[counted[k][n] for n in sorted(counted[k])] if k in counted else v
                         for k, v in zip(keys, out["node_lines"])]
    return out


def rank_matches(matches: dict[str, list[PatternMatch]], scored: pd.DataFrame,
                 nodes: pd.DataFrame | None = None, shown_time: bool = False) -> dict[str, list[PatternMatch]]:
    """Matches of each job, best first: the most complete signature; then, with the node ranking
    ``nodes`` (job_id, node, rank), the match printed where the ranking points (``match_locality``);
    then the one whose events came first (the root cause precedes what it causes on peers: an
    OOM'd rank is followed by its peers' network errors); then the pattern id. Boilerplate events
    (``generic``) neither place nor date a match while it has others. ``scored``: job_id,
    event_id, first_t, generic, and nodes (the nodes that printed the event) when ``nodes`` is given.

    ``shown_time`` (with a ``seen_by_t`` column): an event is dated by the time its lines are shown
    to have been written by (``seen_by_t``: the least timestamp at or below one of its lines), not
    by ``first_t``, which dates an untimed line by the timestamp above it, its earliest possible
    time; an event whose lines have no timestamp below them could have come at any time after and
    comes last. NCCL's untimed WARN lines were dated a minute before the kernel's timed OOM kill
    they followed.
    """
    if shown_time and "seen_by_t" in scored.columns:
        scored = scored.assign(first_t=scored["seen_by_t"].astype(float).fillna(math.inf))
    first_t = {(r.job_id, r.event_id): r.first_t for r in scored.itertuples()
               if not r.generic and r.first_t == r.first_t}
    generic = {(r.job_id, r.event_id) for r in scored.itertuples() if r.generic}
    printed_by = ({(r.job_id, r.event_id): r.nodes for r in scored.itertuples()}
                  if nodes is not None and "nodes" in scored.columns else {})
    node_rank = (nodes.groupby(["job_id", "node"])["rank"].min().to_dict()
                 if nodes is not None and len(nodes) else {})
    ranked = {}
    for job_id, found in matches.items():
        def key(m: PatternMatch) -> tuple:
            events = [e for e in m.matched_event_ids if (job_id, e) not in generic] or list(m.matched_event_ids)
            locality = max((match_locality([node_rank.get((job_id, n)) for n in _listed(printed_by.get((job_id, e)))])
                            for e in events), default=0.0)
            times = [first_t[(job_id, e)] for e in events if (job_id, e) in first_t]
            return (-m.confidence, -locality, min(times) if times else math.inf, m.pattern_id)
        ranked[job_id] = sorted(found, key=key)
    return ranked


def match_locality(printer_ranks: Sequence) -> float:
    """How squarely an event sits on the units the node ranking blames: the mean reciprocal rank
    of the nodes that printed it (a node's best unit rank; unranked: 0). 1.0 when only the
    first-ranked node printed it; an event that every node prints scores about ln(n)/n, and a
    peer's report of the suspect (an IB completion error naming it, printed by its neighbours)
    scores what its printers' ranks give, below the suspect's own line. 0.0 without printers."""
    reciprocal = [1.0 / rank if rank is not None and rank == rank and rank > 0 else 0.0 for rank in printer_ranks]
    return round(sum(reciprocal) / len(reciprocal), 6) if reciprocal else 0.0


def _listed(value) -> list:
    return [] if value is None or (isinstance(value, float) and value != value) else list(value)


def known_fault_printers(matches: dict[str, list[PatternMatch]], evidence: pd.DataFrame,
                         classes: Sequence[str], share: float = 1.0,
                         per_pattern: bool = False,
                         local_patterns: Collection[str] = ()) -> dict[str, tuple[str, list[str], float]]:
    """job -> (node, pattern ids, its share of the lines) for every job where one node printed
    at least ``share`` of the lines of its matched known faults of a node-local class
    (``classes``; each matched event counted once). ``matches``: ``job_patterns`` per job; ``evidence``: job_id, event_id, nodes
    (the nodes that printed the event) and optionally node_lines (their lines, in the order of
    ``nodes``: ``assemble.event_evidence``). Without node_lines, or with ``share`` 1.0, the node
    must have printed them alone.

    ``per_pattern``: each known fault has its printer, not the job's known faults pooled: a
    fault several nodes printed (the thermal throttling every busy node touches now and then)
    then no longer hides the one node that printed another (its kernel's OOM kill). Faults whose
    printers are different nodes say nothing about one of them: nobody is lifted, as pooled
    (a stale handle on one node's mount beside another node's thermal lines). The printer's
    share is the least of its faults'.

    ``local_patterns``: ids of known faults that are node-local whatever their class (NCCL's
    HCA port error, class network: ``DiagnosisConfig.known_fault_local_patterns``)."""
    counted = "node_lines" in evidence.columns
    printed_by = {(r.job_id, r.event_id): dict(zip(_listed(r.nodes), _listed(r.node_lines) if counted
                                                   else [1] * len(_listed(r.nodes))))
                  for r in evidence.itertuples()} if "nodes" in evidence.columns else {}
    classes = set(classes)

    def printer(job_id: str, found: list[PatternMatch]) -> tuple[str, float] | None:
        # (node, its share of the lines) of the node that printed enough of found's lines
        lines: dict[str, float] = {}
        for event in {e for m in found for e in m.matched_event_ids}:
            for node, n in printed_by.get((job_id, event), {}).items():
                lines[node] = lines.get(node, 0) + float(n)
        if not lines:
            return None
        top = min(lines, key=lambda node: (-lines[node], node))
        printed = lines[top] / sum(lines.values())
        return (top, printed) if len(lines) == 1 or (counted and printed >= share) else None

    lifted = {}
    local_patterns = set(local_patterns)
    for job_id, found in matches.items():
        local = [m for m in found if m.fault_class in classes or m.pattern_id in local_patterns]
        if not per_pattern:
            got = printer(job_id, local)
            if got is not None:
                lifted[job_id] = (got[0], sorted({m.pattern_id for m in local}), got[1])
            continue
        printed = [(m.pattern_id, *got) for m in local if (got := printer(job_id, [m])) is not None]
        if len({node for _, node, _ in printed}) == 1:
            lifted[job_id] = (printed[0][1], sorted({p for p, _, _ in printed}), min(s for _, _, s in printed))
    return lifted


def slowness_claims(library: Sequence[FaultPattern]) -> frozenset[str]:
    """The ids of ``library``'s patterns that explain slowness and nothing else: those of the
    class the straggler belongs to (``patterns.slow_unit_pattern``: slowdown, a CPU's thermal
    throttling)."""
    return frozenset(p.pattern_id for p in library if p.fault_class == slow_unit_pattern().fault_class)


def unmeasured_claims(nodes: pd.DataFrame, lifted: dict[str, tuple], claims: Collection[str],
                      stopped: bool = False) -> dict[str, tuple]:
    """``lifted`` (``known_fault_printers``) without the jobs where a printer's known faults only
    claim its node was slow (every pattern id in ``claims``: ``slowness_claims``) while the ranking
    measured a unit of another node as the one every other unit waits for (its ``signals`` carry
    the straggler's signature, ``patterns.slow_unit_pattern``, or since session 45 the hang's,
    ``patterns.hung_unit_pattern``: a rank that never joined the collective the others timed out
    in; a slow CPU delays a rank, it does not keep it away). The measurement outranks the claim:
    healthy CPUs cross their thermal threshold for milliseconds under normal load, and the kernel
    prints "temperature above threshold" then "temperature/speed normal" (the reason Linux 5.5
    stopped logging each crossing: linux-edac, "x86/mce/therm_throt: Optimize notifications of
    thermal throttle", 2019); such a pair on one node says nothing about a straggler measured on
    another. ``stopped`` (session 48, ``diagnosis.dead_unit_overrules_slowness``): a unit measured
    as stopped (the dead node's signature, ``patterns.dead_unit_pattern``: it stopped logging before
    any peer failed) is measured too: the others waited for it in vain. ``nodes``: job_id, node, signals."""
    if not lifted or not claims or nodes is None or not len(nodes):
        return lifted
    measures = (slow_unit_pattern(), hung_unit_pattern(), *((dead_unit_pattern(),) if stopped else ()))
    claims = set(claims)
    claimed = {job_id for job_id, (_, pattern_ids, _) in lifted.items() if set(pattern_ids) <= claims}
    measured = _measured_nodes(nodes[nodes["job_id"].isin(claimed)], measures)
    return {job_id: lift for job_id, lift in lifted.items() if not measured.get(job_id, set()) - {lift[0]}}


def _measured_nodes(nodes: pd.DataFrame | None, patterns: Sequence[FaultPattern]) -> dict[str, set]:
    """job -> the nodes with a unit whose ranking ``signals`` carry the whole signature of one of
    the built-in unit faults ``patterns`` (the straggler, the hang, the dead node)."""
    signatures = [[re.compile(regex) for regex in pattern.signature] for pattern in patterns]
    measured: dict[str, set] = {}
    for row in (nodes.itertuples() if nodes is not None else ()):
        signals = [str(s) for s in _listed(row.signals)]
        if any(all(any(regex.search(s) for s in signals) for regex in signature) for signature in signatures):
            measured.setdefault(row.job_id, set()).add(row.node)
    return measured


def slowed_jobs(iterations: pd.DataFrame) -> set[str]:
    """The jobs whose timeline shows a slowdown: an iteration the temporal step flagged as where
    the job began to slow until it was stopped (``reason`` ``slowdown``: ``slowdown_from``).
    ``iterations``: the temporal step's iteration rows (job_id, reason)."""
    if iterations is None or not len(iterations) or "reason" not in iterations.columns:
        return set()
    return set(iterations.loc[iterations["reason"] == "slowdown", "job_id"])


def with_unborne_claims_last(matches: dict[str, list[PatternMatch]], claims: Collection[str],
                             slowed: Collection[str], nodes: pd.DataFrame | None) -> dict[str, list[PatternMatch]]:
    """Each job's matches with those that only claim slowness (``claims``: ``slowness_claims``, a
    CPU's thermal throttling) after its other matches, in the jobs where nothing measured slowness:
    the iterations did not slow (``slowed``: ``slowed_jobs``) and no unit is the one the others
    wait for (the straggler's signature, ``patterns.slow_unit_pattern``, in ``nodes``' signals).

    Healthy CPUs cross their thermal threshold under load and the kernel says so (session 41);
    a job that failed on an HCCL or NCCL timeout without getting slower was not failed by such
    a line, however squarely the first-ranked node printed it (``rank_matches``' locality puts a
    lone printer's match before a timeout every node printed). Where the job did slow down, or a
    straggler was measured, the claim keeps its place. Built-in unit faults are added later
    (``with_unit_faults``)."""
    claims = set(claims)
    if not claims:
        return matches
    borne = set(slowed) | set(_measured_nodes(nodes, (slow_unit_pattern(),)))
    out = {}
    for job_id, found in matches.items():
        if job_id in borne:
            out[job_id] = found
        else:
            out[job_id] = ([m for m in found if m.pattern_id not in claims]
                           + [m for m in found if m.pattern_id in claims])
    return out


def with_known_fault_printers(nodes: pd.DataFrame, matches: dict[str, list[PatternMatch]], evidence: pd.DataFrame,
                              weight: float, classes: Sequence[str], spatial: SpatialConfig,
                              share: float = 1.0, claims: Collection[str] = (),
                              per_pattern: bool = False, stopped: bool = False,
                              local_patterns: Collection[str] = ()) -> pd.DataFrame:
    """The node ranking with one more term in its one score: a job's units on the node that
    printed a known fault of a node-local class (``classes``: a GPU's ECC error, the kernel's OOM
    kill, a stale handle on that node's mount) alone, or at least ``share`` of its lines
    (``known_fault_printers``), gain ``weight`` in ``combined_score``; the units are
    then ordered again by that score alone (``spatial.score.order_units``) and ``suspect`` is
    recomputed (``spatial.score.suspect_flags`` with ``spatial``). A fault several nodes print
    (a shared file system down for all) says nothing about one of them and changes nothing, nor
    does a claim of slowness (``claims``) where the ranking measured another node's unit as the
    straggler (``unmeasured_claims``; ``stopped``: or as the dead node). ``per_pattern``: each known
    fault has its own printer (``known_fault_printers``).

    ``nodes``: the ranking (job_id, node, process_rank, rank, combined_score, suspect, signals, ...);
    ``matches``: ``job_patterns`` per job; ``evidence``: job_id, event_id, nodes (the nodes that
    printed the event). Output: ``nodes``' columns, re-ranked; a lifted unit's signals say why.
    """
    if nodes is None or not len(nodes) or weight <= 0:
        return nodes
    lifted = unmeasured_claims(nodes, known_fault_printers(matches, evidence, classes, share, per_pattern,
                                                           local_patterns), claims, stopped)
    return lift_printers(nodes, lifted, weight, spatial)


def lift_printers(nodes: pd.DataFrame, lifted: dict[str, tuple], weight: float,
                  spatial: SpatialConfig) -> pd.DataFrame:
    """``nodes`` with ``weight`` added to the score of the units on each job's printer
    (``known_fault_printers``: node, pattern ids, its share of the lines), each lifted job
    ordered again and its suspects recomputed."""
    if not lifted or nodes is None or not len(nodes) or weight <= 0:
        return nodes
    parts = []
    for job_id, job in nodes.groupby("job_id", sort=False):
        if job_id not in lifted:
            parts.append(job)
            continue
        node, pattern_ids, printed = lifted[job_id]
        why = "prints a known fault alone" if printed >= 1.0 else f"prints {int(printed * 100)}% of a known fault's lines"
        job = job.copy()
        on_node = job["node"] == node
        job.loc[on_node, "combined_score"] = (job.loc[on_node, "combined_score"].astype(float) + weight).round(6)
        job.loc[on_node, "signals"] = pd.Series(
            [[*_listed(sig), f"{why}: {', '.join(pattern_ids)}"] for sig in job.loc[on_node, "signals"]],
            index=job.index[on_node], dtype=object)
        keys = unit_key(job)
        order = order_units(pd.Series(job["combined_score"].astype(float).to_numpy(), index=keys.to_numpy()))
        job = job.set_index(keys.to_numpy()).loc[order].reset_index(drop=True)
        job["rank"] = range(1, len(job) + 1)
        job["suspect"] = suspect_flags(job["rank"], job["combined_score"].astype(float), spatial)
        parts.append(job)
    return pd.concat(parts, ignore_index=True)[list(nodes.columns)]


# a built-in unit fault that, where it applies, takes the place of the more general one it refines
REFINES = {SAVE_HANG_PATTERN_ID: (HUNG_UNIT_PATTERN_ID,)}


def with_unit_fault(matches: dict[str, list[PatternMatch]], nodes: pd.DataFrame, pattern: FaultPattern,
                    yields_to: Callable[[str, str, PatternMatch], bool] | None = None,
                    stages: dict[str, str] | None = None, replaces: Collection[str] = ()) -> dict[str, list[PatternMatch]]:
    """A built-in fault of the first-ranked unit (``patterns.unit_fault_patterns``: the dead node,
    the straggler, the hang) first for every job whose first-ranked unit's ``signals`` match its
    signature: the ranking found the unit the others wait for, which prints no error of its own;
    whatever its peers printed when they timed out came after it. Second, after the job's first
    match, where ``yields_to(job_id, first-ranked node, that match)`` holds. ``nodes``: job_id,
    node, rank, signals (a list of strings, or null). No matched events. A pattern with a
    ``stage`` is the fault of the jobs whose failure stage (``stages``: job -> stage) is that
    stage only, and in them takes the place of the unit faults it refines (``replaces``: ids)."""
    regexes = [re.compile(regex) for regex in pattern.signature]
    out = {job_id: list(found) for job_id, found in matches.items()}
    if nodes is None or not len(nodes):
        return out
    for row in nodes[nodes["rank"] == 1].drop_duplicates("job_id").itertuples():
        if pattern.stage is not None and (stages or {}).get(row.job_id) != pattern.stage:
            continue
        signals = [str(s) for s in _listed(row.signals)]
        if all(any(regex.search(s) for s in signals) for regex in regexes):
            unit = PatternMatch(pattern.pattern_id, pattern.name, pattern.fault_class, 1.0, ())
            others = [m for m in out.get(row.job_id, []) if m.pattern_id not in {pattern.pattern_id, *replaces}]
            at = 1 if others and yields_to is not None and yields_to(row.job_id, row.node, others[0]) else 0
            out[row.job_id] = others[:at] + [unit] + others[at:]
    return out


def with_unit_faults(matches: dict[str, list[PatternMatch]], nodes: pd.DataFrame, conf: DiagnosisConfig,
                     scored: pd.DataFrame | None = None, claims: Collection[str] = (),
                     stages: dict[str, str] | None = None) -> dict[str, list[PatternMatch]]:
    """``with_unit_fault`` for each built-in unit fault ``conf`` switches on, in order. The dead
    node comes after a first match that says why the node went quiet: one of a node-local known
    class (``known_fault_classes``) or one the first-ranked node printed itself (``scored``:
    job_id, event_id, nodes, the nodes that printed each event). With
    ``unit_faults_after_causes`` every unit fault also comes after a first library match whose
    class is none of ``waiting_classes`` (what peers print while they wait for a unit): a cause
    of its own, which the unit's stop or lag followed. A match whose pattern only claims slowness
    (``claims``: ``slowness_claims``, with ``measured_slowness_overrules``) that the unit's node did
    not print is neither such a cause nor why the dead node went quiet (session 45): another node's
    CPU throttling neither stops nor slows this unit's ranks, as it lifts nobody in the ranking
    against a unit measured there (``unmeasured_claims``). With ``slowness_explains_only_slowness``
    (session 48), a match of the slow unit's class (``slow_unit_pattern``: a CPU's thermal
    throttling), whoever printed it, is no cause of a dead or hung unit: it explains slowness, and
    a node that stopped logging or a rank that never joined the collective is more than slow.
    ``stages``: each job's failure stage
    (``temporal``), for the hang of a checkpoint save (``save_hang_unit_fault``), which takes the
    hang's place in the jobs that failed saving (without ``stages``, none did)."""
    printed_by = ({(r.job_id, r.event_id): set(_listed(r.nodes)) for r in scored.itertuples()}
                  if scored is not None and "nodes" in scored.columns else {})
    waiting, claims = set(conf.waiting_classes), set(claims)

    def printed(job_id: str, node: str, match: PatternMatch) -> bool:
        return any(node in printed_by.get((job_id, e), ()) for e in match.matched_event_ids)

    def elsewhere(job_id: str, node: str, match: PatternMatch) -> bool:
        # a claim of slowness the unit's node did not print says nothing of this unit
        return match.pattern_id in claims and not printed(job_id, node, match)

    def cause(job_id: str, node: str, match: PatternMatch) -> bool:
        # a library match (built-in unit faults match no event) of a class waiting peers do not print
        return (conf.unit_faults_after_causes and bool(match.matched_event_ids) and match.fault_class not in waiting
                and not elsewhere(job_id, node, match))

    def explains(job_id: str, node: str, match: PatternMatch) -> bool:
        return not elsewhere(job_id, node, match) and (match.fault_class in set(conf.known_fault_classes)
                                                       or match.pattern_id in set(conf.known_fault_local_patterns)
                                                       or cause(job_id, node, match) or printed(job_id, node, match))

    slow_class = slow_unit_pattern().fault_class

    def only_slowness(match: PatternMatch) -> bool:
        # session 48: a claim of slowness (a CPU's thermal throttling) says why a unit is slow, not
        # why it stopped logging or never joined the collective: a throttled CPU still runs and logs
        return conf.slowness_explains_only_slowness and match.fault_class == slow_class

    def yields_to(pattern: FaultPattern) -> Callable[[str, str, PatternMatch], bool]:
        check = explains if pattern.pattern_id == DEAD_UNIT_PATTERN_ID else cause
        if pattern.fault_class == slow_class:
            return check  # the straggler yields to its own node's throttling: why it was slow
        return lambda job_id, node, match: not only_slowness(match) and check(job_id, node, match)

    for pattern in unit_fault_patterns(conf.slow_unit_fault, conf.hung_unit_fault, conf.dead_unit_fault,
                                       conf.save_hang_unit_fault):
        matches = with_unit_fault(matches, nodes, pattern, yields_to(pattern), stages,
                                  REFINES.get(pattern.pattern_id, ()))
    return matches


def pattern_hit_rows(matches: dict[str, list[PatternMatch]]) -> pd.DataFrame:
    rows = [(job_id, event_id, m.confidence) for job_id, found in matches.items() for m in found
            for event_id in m.matched_event_ids]
    return pd.DataFrame(rows, columns=["job_id", "event_id", "confidence"]).drop_duplicates(["job_id", "event_id"])
