"""The per-unit signals of the spatial comparison, pure pandas/numpy (no Spark; milliseconds to test).

Each function reads one job's small unit tables and returns one value per unit. ``score.py``
combines them into the one score that orders the units; ``ranking.py`` builds their inputs
in Spark. docs/spatial.md has what each signal means and its measured weight.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

import numpy as np
import pandas as pd

from l4spark.spatial.config import SpatialConfig

def roles(activity: pd.DataFrame) -> pd.Series:
    """Role of each unit from the global ranks it holds: ``first`` (holds the job's lowest
    rank), ``last`` (holds the highest), ``peer`` otherwise. Index: the activity's index."""
    role = pd.Series("peer", index=activity.index)
    if activity["max_rank"].notna().any():
        role[activity["max_rank"] == activity["max_rank"].max()] = "last"
    if activity["min_rank"].notna().any():
        role[activity["min_rank"] == activity["min_rank"].min()] = "first"
    return role


def size_factors(counts: pd.DataFrame) -> pd.Series:
    """How much each unit logs, robust to the few events that differ between units: the median
    over the events every unit logs of count / (geometric mean of the event's counts), as for
    sequencing depth (Anders & Huber's median of ratios). A unit that logs twice as much of
    everything gets 2, whatever its role-only or failure-only events. 1.0 for every unit when
    no event is on all units."""
    shared = counts.loc[:, (counts > 0).all(axis=0)]
    if shared.shape[1] == 0:
        return pd.Series(1.0, index=counts.index)
    logs = np.log(shared.astype(float))
    factors = np.exp((logs - logs.mean(axis=0)).median(axis=1))
    return factors.clip(lower=1e-6)


def normalised_features(matrix: pd.DataFrame, activity: pd.DataFrame, normalisation: str,
                        lone_roles_own_events: bool = False) -> pd.DataFrame:
    """The unit x event matrix transformed for comparison (see the module docstring).

    ``matrix``: counts (index = unit keys, columns = event ids); ``activity``: indexed by unit
    key, with min_rank and max_rank. Returns a float frame of the same rows; columns constant over the
    units are dropped (they cannot tell units apart). ``lone_roles_own_events`` (``role``): the
    events only a role of one member logs keep their value (the cross-job filter has removed the
    role's routine output); false: zeroed.
    """
    counts = matrix.astype(float)
    if normalisation == "raw":
        features = counts
    elif normalisation == "log":
        features = np.log1p(counts)
    else:
        features = np.log1p(counts.div(size_factors(counts), axis=0))
        if normalisation == "role":
            features = _relative_to_role(features, counts, activity.reindex(counts.index), lone_roles_own_events)
    varying = features.columns[features.nunique(axis=0) > 1]
    return features[varying]


def _relative_to_role(features: pd.DataFrame, counts: pd.DataFrame, activity: pd.DataFrame,
                      keep_own: bool = False) -> pd.DataFrame:
    role = roles(activity)
    out = features - features.median(axis=0)
    for name, members in role.groupby(role).groups.items():
        members = list(members)
        if len(members) > 1:
            out.loc[members] = features.loc[members] - features.loc[members].median(axis=0)
            continue
        # A role of one unit has no peer to compare with: compare it with everyone, except on
        # the events only it logs. One job cannot tell its role's output (rank 0's banners and
        # launcher lines, the last stage's iteration lines) from a fault there; cross-job
        # filtering removes the routine part upstream, and silence still shows a dead unit.
        # When it has (``keep_own``), what only the role logs is no routine output of it.
        if keep_own:
            continue
        others = [u for u in features.index if role[u] != name]
        own_only = (counts.loc[others] == 0).all(axis=0)
        out.loc[members, own_only[own_only].index] = 0.0
    return out


def isolation_scores(features: pd.DataFrame, config: SpatialConfig) -> pd.Series:
    """Isolation Forest anomaly score per unit in (0, 1] (0.5 is ordinary); 0.5 everywhere when
    fewer than 3 units or no varying feature (nothing to compare)."""
    if len(features) < 3 or features.shape[1] == 0:
        return pd.Series(0.5, index=features.index)
    import sklearn
    from sklearn.ensemble import IsolationForest

    values = features.to_numpy(dtype=float)
    if not np.isfinite(values).all():
        raise ValueError("isolation_scores: a unit's feature is not a finite number")
    # scikit-learn validates the parameters and checks the input of each of the forest's trees
    # again (a quarter of a small job's forest, issue #21); both are checked once here, and the
    # scores are the same numbers
    with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
        forest = IsolationForest(n_estimators=config.n_estimators, max_samples=min(256, len(features)),
                                 random_state=config.seed)
        forest.fit(values)
        return pd.Series(-forest.score_samples(values), index=features.index)


def pair_isolation(matrix: pd.DataFrame, limit: int, remote: Iterable[str] = (),
                   quiet: Iterable[str] = ()) -> tuple[pd.Series, dict]:
    """Isolation of the two units of a two-unit job, where a forest and a median have nothing to
    compare with (and role normalisation zeroes every event only one unit logs: each is a role
    of one). Before, both scored 0.5 and the name broke the tie (fresh seed 15017, 2-3 nodes
    per job: top-1 0.58, below Error_time's 0.67).

    ``matrix``: unit x candidate event line counts (two rows); ``remote``: the events whose
    text says the failure is at a peer (``remote_patterns``: a remote process exited, a
    connection closed by the peer, a collective timed out waiting); ``quiet``: the events with
    INFO/DEBUG/TRACE lines only. A unit's own events are the candidate events only it logs.
    Each counts for a unit: the unit's own, except a remote one, which with one peer can only
    mean the other unit (the survivor of a dead node logs its watchdog timeouts and
    ``ncclRemoteError`` alone; on fresh seed 15013 those outnumbered the dead node's few lines
    in 5 of 16 two-node jobs), and a quiet one, which counts for nobody: its logger says nothing
    went wrong, and rank 0's node prints most of them by role (HF Trainer's "Continuing
    training from checkpoint"). The score is 0.5 + 0.25 x (points - other's
    points) / (both points): 0.75 for the only unit with points, 0.5 for both when neither has
    any or both have as many; within the forest's range on larger jobs (faulty nodes 0.62 on
    average on fresh seed 15013, their peers 0.46), so it weighs as isolation does there.
    Returns (score per unit, its reasons: ``own``, its own events that are not remote, and
    ``peer_says``, the other unit's own remote events; each most lines first, ties by id, at
    most ``limit``). They are not deviations from peers, so they stay out of
    ``evidence`` and of the events the ranking marks as spatially indicating: rank 0's argument
    lines with a value no normal job had are candidates of its own too (on 15017 as evidence
    they added 55 false events and 7 true ones)."""
    remote, quiet = set(remote), set(quiet)
    own = {unit: matrix.loc[unit, (matrix.loc[unit] > 0) & (matrix.drop(index=unit) == 0).all(axis=0)
                            & ~matrix.columns.isin(list(quiet))]
           for unit in matrix.index}
    ordered = {unit: [str(e) for e, _ in sorted(lines.items(), key=lambda item: (-item[1], str(item[0])))]
               for unit, lines in own.items()}
    reasons = {unit: {"own": [e for e in ordered[unit] if e not in remote],
                      "peer_says": [e for e in ordered[other] if e in remote]}
               for unit, other in zip(matrix.index, matrix.index[::-1])}
    points = pd.Series({unit: float(len(r["own"]) + len(r["peer_says"])) for unit, r in reasons.items()})
    total = points.sum()
    score = 0.5 + 0.25 * (2 * points - total) / total if total else pd.Series(0.5, index=points.index)
    listed = {unit: {key: events[:limit] for key, events in r.items()} for unit, r in reasons.items()}
    return score.reindex(matrix.index), listed


def _others_median(values: np.ndarray) -> np.ndarray:
    """For each element, the median of the other elements' values, NaNs left out (NaN when no
    other value): the median of the sorted values with one copy of the element's own removed."""
    valid = ~np.isnan(values)
    ordered = np.sort(values[valid])
    m = len(ordered)
    out = np.full(len(values), np.median(ordered) if m else np.nan)  # a NaN element: every value is another's
    if m < 2:
        out[valid] = np.nan
        return out
    position = np.empty(m, dtype=int)
    position[np.argsort(values[valid], kind="stable")] = np.arange(m)

    def reduced(k: int) -> np.ndarray:  # the k-th of the others, per valid element
        return np.where(k < position, ordered[k], ordered[np.minimum(k + 1, m - 1)])

    n = m - 1
    out[valid] = reduced(n // 2) if n % 2 else (reduced(n // 2 - 1) + reduced(n // 2)) / 2.0
    return out


def _others_min(values: np.ndarray) -> np.ndarray:
    """For each element, the smallest of the other elements' values, NaNs left out (NaN when none)."""
    ordered = np.sort(values[~np.isnan(values)])
    if not len(ordered):
        return np.full(len(values), np.nan)
    second = ordered[1] if len(ordered) > 1 else np.nan
    lone_first = (values == ordered[0]) & ((len(ordered) == 1) | (second != ordered[0]))
    return np.where(lone_first, second, ordered[0])


def silence(activity: pd.DataFrame, config: SpatialConfig, candidate_lines: pd.Series | None = None) -> pd.DataFrame:
    """Which units went silent, each judged against the peers of its own role.

    Input indexed by unit: n_files, n_lines, n_error, last_s (min_rank, max_rank or ranks optional:
    roles; last_error_s optional); ``candidate_lines``: per unit, its lines of candidate events
    (optional). Output (same index): silent (bool), silent_gap_s (how long before its peers' median
    last line the unit stopped; null without timestamps), missing_files, truncated, stopped (silent
    by time: it stopped that long before its peers without an error line to show for it, whatever
    its files and lines), wrote_errors (it has error lines, routine or early ones included). The
    peers of a unit are the units of its role (``roles``) when that role
    has at least 3 members, else every unit: the node of rank 0 or of the last pipeline stage logs
    more, and HF Trainer's non-main ranks less, by role, not by fault. Of a job's two units each is
    compared with the other: silent when it stopped ``silent_min_gap_s`` before it (no spread to
    scale by), never truncated (one of the two holds rank 0 and logs more by role; the truncation
    bonus put the wrong node first in 2 of 28 two-node jobs of fresh seed 15017). ``pair_silence``
    false: two units are judged as a group of peers (their median and spread: never silent by time),
    as before session 15; ``silent_despite_errors`` false: the first two exceptions for units with
    error lines (below) are off. ``untimed_errors_dated``: a unit's last error is dated by
    ``last_error_by_s`` (optional column; its untimed error lines dated by the timed lines after
    them) rather than by its timestamped error lines alone (``last_error_s``, also without that
    column). ``routine_errors_quiet`` (with ``silent_despite_errors``): the error lines of
    candidate events alone count and date (optional columns n_candidate_error and, dated as above,
    last_candidate_error_by_s or last_candidate_error_s). ``silence_needs_cover``: silent by
    time only when the unit's files are timestamped to their end (optional column ts_cover, at
    least ``timestamp_cover``): a last timestamp followed by untimed lines is no stop.
    ``silent_first_alone``: of three units or more, one that stopped ``silent_min_gap_s`` before
    every other unit's last line is silent by time whatever their spread. ``notices_undate_stops``:
    a unit told to stop after its last timestamp (optional column undated_notice) is not silent
    by time. ``unended_is_silent``: a unit that reported no end where most did (``unended_units``,
    output column unended) is silent, whatever its times.
    """
    role = roles(activity) if {"min_rank", "max_rank"} <= set(activity.columns) else pd.Series("peer", index=activity.index)
    sizes = role.map(role.value_counts())
    group = role.where(sizes >= 3, "all")
    last = activity["last_s"].astype(float)
    reference = pd.Series(np.nan, index=activity.index)
    spread = pd.Series(np.nan, index=activity.index)
    line_median = pd.Series(np.nan, index=activity.index)
    typical_files = pd.Series(0, index=activity.index)
    for name in group.unique():
        members = group.index[group == name] if name != "all" else group.index
        targets = group.index[group == name]
        peer_last = last.loc[members]
        if len(members) < 3 and config.pair_silence:
            # a pair: no spread to judge against and no median of peers; each is compared with
            # the other alone (below)
            for unit in targets:
                others = peer_last.drop(index=unit)
                reference.loc[unit] = others.max() if others.notna().any() else last.loc[unit]
            spread.loc[targets] = 0.0
        elif peer_last.notna().any() and config.silence_without_self and len(members) >= 3:
            # each unit against the others of its group: its own early stop moves neither their
            # median nor their spread (leave-one-out medians, no loop over units)
            values = peer_last.to_numpy(dtype=float)
            ref = _others_median(values)
            mad = np.full(len(values), np.nan)
            for centre in np.unique(ref[~np.isnan(ref)]):
                at = ref == centre
                mad[at] = _others_median(np.abs(values - centre))[at]
            ref, mad = pd.Series(ref, index=members), pd.Series(mad, index=members)
            alone = ref.loc[targets].isna()  # no other member has a last line
            reference.loc[targets] = ref.loc[targets].where(~alone, last.loc[targets])
            spread.loc[targets] = (1.4826 * mad.loc[targets]).where(~alone, 0.0)
        elif peer_last.notna().any():
            ref = peer_last.median()
            reference.loc[targets] = ref
            spread.loc[targets] = 1.4826 * (peer_last - ref).abs().median()
        if len(members) >= 3 or not config.pair_silence:
            line_median.loc[targets] = activity.loc[members, "n_lines"].median()
        typical_files.loc[targets] = activity.loc[members, "n_files"].mode().max() if len(members) else 0
    gap = reference - last
    by_time = (gap >= config.silent_min_gap_s) & (gap >= config.silent_z * spread)
    if config.silent_first_alone and len(activity) >= 3:
        by_time |= (_others_min(last.to_numpy(dtype=float)) - last.to_numpy(dtype=float)) >= config.silent_min_gap_s
    if config.silence_needs_cover and "ts_cover" in activity.columns:
        by_time &= activity["ts_cover"].fillna(1.0) >= config.timestamp_cover
    if config.notices_undate_stops and "undated_notice" in activity.columns:
        # told to stop after its last timestamp: alive until a teardown its lines do not date
        by_time &= ~activity["undated_notice"].fillna(False).astype(bool)
    missing = (typical_files - activity["n_files"]).clip(lower=0)
    truncated = (activity["n_lines"] < config.truncated_share * line_median).fillna(False)
    # A unit that stopped early but wrote errors crashed loudly: the count vectors show it.
    # Silent means it stopped without a word (a dead machine), which only the timing can show.
    # Three cases are silent though they wrote errors: a unit whose error lines are no
    # candidate events (the cross-job filter found them routine), so its count vector shows
    # nothing; a unit whose last error line came a minute or more before its last line, so it
    # did not go down with it (fresh seed 16011: a store host down 212 s before its peers, its
    # errors from the first minutes); and of two units the one that stopped a minute first,
    # whatever it wrote: with one peer the counts do not show who crashed.
    despite = config.silent_despite_errors
    no_candidates = candidate_lines.reindex(activity.index).fillna(0) == 0 \
        if candidate_lines is not None and despite else False
    # When the last error was written: its timestamp, or with ``untimed_errors_dated`` what the
    # unit's lines can date, the first timestamp at or after it in its file (``last_error_by_s``;
    # none when an untimed error follows the last timed line). An untimed error line is no sign
    # the unit went down with it: pip's resolver banner at the top of rank 0's file (issue #18:
    # h21003's dead store host, kept loud by it; docs/spatial.md, "A dead store host is silent").
    dated = "last_error_by_s" if config.untimed_errors_dated and "last_error_by_s" in activity.columns \
        else "last_error_s"
    n_error = activity["n_error"]
    if config.routine_errors_quiet and despite and "n_candidate_error" in activity.columns:
        # only the error lines of candidate events count and date (dated as above): an error the
        # cross-job filter found routine (a retried upload, a skipped sample) is no sign the unit
        # went down with it
        n_error = activity["n_candidate_error"]
        dated = {"last_error_by_s": "last_candidate_error_by_s", "last_error_s": "last_candidate_error_s"}[dated]
    errors_long_before = (activity[dated] < activity["last_s"] - config.silent_min_gap_s) \
        if dated in activity.columns and despite else False
    quiet = (n_error == 0) | no_candidates | errors_long_before | (len(activity) == 2 and config.pair_silence)
    stopped = by_time.fillna(False) & quiet
    unended = unended_units(activity, config)
    silent = stopped | (missing > 0) | truncated | unended
    return pd.DataFrame({"silent": silent.astype(bool), "silent_gap_s": gap.where(last.notna()),
                         "missing_files": missing.astype(int), "truncated": truncated.astype(bool),
                         "stopped": stopped.astype(bool), "wrote_errors": activity["n_error"] > 0,
                         "unended": unended.astype(bool)})


def unended_units(activity: pd.DataFrame, config: SpatialConfig) -> pd.Series:
    """Per unit: it reported no end of its own (optional column reported_end false: no failure
    summary, no notice of a teardown) where at least ``end_share`` of the other units, one at
    least, reported theirs (``unended_among_others``; off: of the job's units, two at least)
    (``unended_is_silent``; false everywhere without the column)."""
    if not config.unended_is_silent or "reported_end" not in activity.columns:
        return pd.Series(False, index=activity.index)
    ended = activity["reported_end"].astype("boolean")
    n_ended = int(ended.fillna(False).sum())
    if config.unended_among_others:
        # each unit without an end, against the others: of n units, k without, (n - k) / (n - 1)
        others = len(activity) - 1
        if n_ended < 1 or n_ended < config.end_share * others:
            return pd.Series(False, index=activity.index)
    elif n_ended < 2 or n_ended < config.end_share * len(activity):
        return pd.Series(False, index=activity.index)
    return ended.eq(False).fillna(False).astype(bool)


def deviations(features: pd.DataFrame) -> pd.DataFrame:
    """Robust deviation of every unit on every event: (value - median) / spread, spread being
    1.4826 MAD floored at 0.5 (a log-scale unit, so that an event on few units is not an
    infinite deviation). Positive: the unit logs the event more than its peers."""
    if features.empty:
        return features
    median = features.median(axis=0)
    spread = (1.4826 * (features - median).abs().median(axis=0)).clip(lower=0.5)
    return (features - median) / spread


def clock_offsets(first_seen: pd.DataFrame, activity: pd.DataFrame, early_share: float = 0.5,
                  every_unit: bool = False) -> pd.Series:
    """Clock offset of every unit against the job's consensus time, in seconds.

    ``first_seen``: unit x event first timestamps (NaN: none); ``activity`` (same index):
    first_s, last_s. The offset is the median, over the events most units (at least half, and
    2) log in the first ``early_share`` of the job, of the unit's first time minus the event's
    median first time; 0 for a unit sharing no such event. Only early events are used: the
    failure's own events (watchdogs, aborts, teardown) happen at different true times on
    different units, and a node that failed seconds early would otherwise have its lead taken
    for clock skew. (``temporal.lines.node_clock_offsets`` keeps the early-events rule in Spark,
    not ``every_unit``: it pairs each node with a reference node over all the lines both print.)

    ``every_unit``: only the early events every unit logs, when there are such events. Every
    rank runs the same start-up; an event only some nodes log is their own (a kernel's
    throttling notice, a slow disk's warning), printed when it happened there, and as a clock
    reading it is noise: fresh 36087's HF Trainer job took a throttle notice that four nodes
    printed hours apart, and a model-loading warning, for a 34 s skew of a node whose clock was
    0.06 s off, and ranked that node "failed first" (docs/spatial.md, "Clocks read from the
    events every unit logs").
    """
    zero = pd.Series(0.0, index=first_seen.index)
    if first_seen.empty:
        return zero
    logged_by = first_seen.notna().sum(axis=0)
    shared = first_seen.loc[:, logged_by >= max(2, len(first_seen) / 2)]
    start, end = activity["first_s"].median(), activity["last_s"].median()
    if shared.empty or pd.isna(start) or pd.isna(end):
        return zero
    typical = shared.median(axis=0)
    early = shared.loc[:, typical <= start + early_share * (end - start)]
    if early.empty:
        return zero
    if every_unit and (logged_by[early.columns] == len(first_seen)).any():
        early = early.loc[:, logged_by[early.columns] == len(first_seen)]
    return early.sub(early.median(axis=0), axis=1).median(axis=1).fillna(0.0)


def failure_onsets(first_seen: pd.DataFrame, activity: pd.DataFrame, offsets: pd.Series,
                   config: SpatialConfig, reactions: pd.DataFrame | None = None,
                   stopped: pd.Series | None = None) -> pd.Series:
    """When each unit's failure began, on aligned clocks (epoch seconds; NaN: unknown).

    ``first_seen``: unit x event first timestamps over the candidate events; ``activity``
    (same index): first_s, last_s, ts_cover (optional). A unit's terminal events are those it
    logs for the first time in the last ``terminal_share`` of its timestamped life (a crash
    trace, a watchdog timeout, its launcher's kill lines: whatever it wrote as it went down).
    Its onset is the start of the first burst of at least ``burst_events`` of them (first times
    more than ``burst_gap_s`` apart split bursts): a failure shows as several new messages at
    once (the error, its trace, the abort), and one unrelated new line shortly before the end
    (a kernel perf warning) is not the start of it. Units whose rank files stop
    being timestamped well before their end (``ts_cover`` below ``timestamp_cover``) have no
    onset: their final lines' times are unknown; with ``uncovered_later_onsets`` one whose timed
    onset is later than the first onset of the covered units counts as timed for the number
    needed (below), still without an onset. With fewer than ``min_timed_units`` onsets
    there is nothing to compare and every onset is NaN; with ``small_job_timing``, a job of
    fewer units than that needs an onset on every unit (and at least 2): a pair is timed when
    both units have one.

    ``reactions`` (optional; unit x event, true where the unit's event says a peer failed, the
    ``remote`` flag of its facts; missing cells false): a unit with such a terminal event first
    seen at or before the start of its onset burst (ties count) failed in reaction to another
    unit. It gets no onset, yet counts as timed for the number needed, so the other units' own
    onsets decide (of a pair, the other unit's, if it has one). The burst as a whole is the reaction, not
    only the matching lines: PyTorch follows the watchdog's "Watchdog caught collective operation
    timeout" milliseconds later with "Exception (either an error or timeout) detected by
    watchdog", "To avoid data inconsistency, we are taking the entire process down" and the
    abort, and the ncclRemoteError text with "Last error:" and the abort; leaving out only the
    matching events left those to start the same onset (docs/spatial.md, "A pair's onsets").
    ``score.unit_signals`` passes them for two-unit jobs only (``pair_onset_without_remote``).

    ``stopped`` (optional; per unit, true where ``silence`` found it stopped early without an
    error line): such a unit without an onset of its own failed when it stopped, at its last
    line (``stop_is_onset``). A machine that dies (kernel panic, power loss) writes nothing;
    its peers' NCCL, HCCL or store errors come seconds to minutes later, so without its stop
    the first peer to report it was the first to fail (issue #18, node_down; docs/spatial.md,
    "A dead node failed when it stopped").
    """
    onset = pd.Series(np.nan, index=activity.index)
    if first_seen.empty:
        return onset
    first_seen = first_seen.reindex(activity.index)
    start, end = activity["first_s"], activity["last_s"]
    cutoff = start + (1.0 - config.terminal_share) * (end - start)
    terminal = first_seen.where(first_seen.ge(cutoff, axis=0))
    covered = activity["ts_cover"].fillna(1.0) >= config.timestamp_cover if "ts_cover" in activity.columns \
        else pd.Series(True, index=activity.index)
    reacting = pd.DataFrame(False, index=terminal.index, columns=terminal.columns)
    if reactions is not None:
        reacting = reactions.reindex(index=terminal.index, columns=terminal.columns).eq(True)
    only_reactions = pd.Series(False, index=activity.index)
    bound = pd.Series(np.nan, index=activity.index)  # the timed onsets of units not covered
    for unit, times in terminal.iterrows():
        ordered = np.sort(times.dropna().to_numpy())
        if not len(ordered):
            continue
        start = _burst_start(ordered, config.burst_gap_s, config.burst_events)
        if not covered[unit]:
            bound[unit] = start
            continue
        # the failure begins with a line saying a peer failed (at the burst's first time, as
        # PyTorch prints its follow-ups milliseconds after it, or before it): a reaction
        only_reactions[unit] = bool((times[reacting.loc[unit]] <= start).any())
        if not only_reactions[unit]:
            onset[unit] = start
    if stopped is not None and config.stop_is_onset:
        stops = stopped.reindex(activity.index).eq(True) & onset.isna() & ~only_reactions
        onset = onset.where(~stops, end)
    onset = onset - offsets.reindex(activity.index).fillna(0.0)
    later = pd.Series(False, index=activity.index)
    if config.uncovered_later_onsets:
        # A unit not covered by timestamps wrote its untimed tail after its last timed line: a
        # failure that began there began later than its timed onset, which is therefore the
        # earliest it can have begun to fail (up to untimed lines between timed ones, as for any
        # unit). Later than the first onset of the covered units, it shows that the unit did not
        # fail first: like a reaction, it counts as timed for the number needed (a small job with
        # such a unit can be timed at all) and gets no onset (how much later is not known).
        # Earlier, it shows nothing. It only confirms an order that at least two onsets of their
        # own give: a unit with few timed lines (Megatron's non-logging ranks) may have begun to
        # fail in untimed lines long before its timed ones, and with one covered unit among
        # uncovered ones, that unit would be first for being the only one timed.
        if onset.notna().sum() >= 2:  # (a unit stopped early has its stop as onset already)
            later = onset.isna() & ((bound - offsets.reindex(activity.index).fillna(0.0)) > onset.min())
    needed = config.min_timed_units
    if config.small_job_timing:
        # A job of fewer units than that (two nodes) can never have as many onsets, and its
        # faulty unit is the one that failed first as on larger jobs: the survivor's NCCL
        # watchdog, store client or HCCL notify wait reports a dead peer only after it has gone
        # (fresh seeds 17001/17003: the faulty unit first in 30 of the 32 pairs with both onsets).
        needed = min(needed, max(2, len(activity)))
    if onset.notna().sum() == 0 or onset.notna().sum() + only_reactions.sum() + later.sum() < needed:
        return pd.Series(np.nan, index=activity.index)
    return onset


def _burst_start(times: np.ndarray, gap_s: float, min_events: int) -> float:
    """Start of the first burst of at least ``min_events`` sorted ``times`` (bursts: runs with
    no gap above ``gap_s``); the first time when no burst is that large."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(times) > gap_s) + 1])
    sizes = np.diff(np.concatenate([starts, [len(times)]]))
    large = starts[sizes >= min_events]
    return float(times[large[0]] if len(large) else times[0])


def address_book(mentions: pd.DataFrame, nodes: Iterable[str], by_elimination: bool = True) -> dict[str, str]:
    """IPv4 address -> node, learnt from what the job's lines say of their own node.

    ``mentions``: node, event_id, token rows (``self:`` and ``ip:`` tokens are read). First the
    addresses lines state as their own (``self:``, ``SpatialConfig.self_address_patterns``:
    NCCL's ``localGid``): an address that one node alone states is that node's (a node may have
    several, one per NIC). Then identity events: one that most nodes (at least half, and 2) log
    naming addresses, where (nearly, 90%) every node names exactly one and (nearly) every
    address is named by one node: each node announcing itself (NCCL's bootstrap interface, a
    launcher's own address). An address named by several nodes (a master address everyone
    connects to) is nobody's.

    ``by_elimination``: a line that states its own address and names another names the far end
    of one of the job's own connections (NCCL's communicators join the job's ranks only). When
    one such peer address is still unknown and one node of the job alone has no address, it is
    that node's: a node that died before it printed anything of itself (its peers' IB errors
    name it). With two or more of either, nothing is guessed.
    """
    nodes = set(nodes)
    n_nodes = len(nodes)
    book: dict[str, str] = {}
    own = mentions.loc[mentions["token"].str.startswith("self:"), ["node", "token"]].drop_duplicates()
    claimed = own.groupby("token")["node"].agg(lambda n: sorted(set(n)))
    book.update({token[len("self:"):]: owners[0] for token, owners in claimed.items() if len(owners) == 1})
    ips = mentions.loc[mentions["token"].str.startswith("ip:"), ["node", "event_id", "token"]].drop_duplicates()
    for _, rows in sorted(ips.groupby("event_id"), key=lambda item: str(item[0])):
        per_node = rows.groupby("node")["token"].nunique()
        per_token = rows.groupby("token")["node"].nunique()
        if len(per_node) < max(2, n_nodes / 2) or (per_node == 1).mean() < 0.9 or (per_token == 1).mean() < 0.9:
            continue
        owners = rows.sort_values(["token", "node"]).drop_duplicates("token")
        for token, node in owners[["token", "node"]].itertuples(index=False):
            if per_token[token] == 1:
                book.setdefault(token[3:], node)
    if by_elimination and len(own):
        stating = mentions.loc[mentions["token"].str.startswith("self:"), ["node", "event_id"]].drop_duplicates()
        named = ips.merge(stating, on=["node", "event_id"], how="inner")["token"].str[len("ip:"):]
        unknown = set(named) - set(book)
        homeless = nodes - set(book.values())
        if len(unknown) == 1 and len(homeless) == 1:
            book[unknown.pop()] = homeless.pop()
    return book


def peer_mentions(mentions: pd.DataFrame, activity: pd.DataFrame, offsets: pd.Series,
                  since: float | None, window_s: float, onsets: pd.Series | None = None,
                  reactions: Iterable[tuple[str, str]] = (), store_clients: bool = False,
                  global_small_ranks: bool = False, group_ranks: bool = False,
                  roll_calls: bool = False, first_name_whole: bool = False,
                  several_communicators: bool = False) -> pd.DataFrame:
    """Which units the others' loud lines name, and how many others name each.

    ``mentions``: unit, node, event_id, token, n_loud, first_s, candidate rows;
    ``activity``: indexed by unit, with node and ranks (or min_rank..max_rank). A token names a
    unit by host name (``host:``), by an address of the job's identity lines (``ip:``, see
    ``address_book``) or by a global rank it holds (``rank:``; numbers below the ranks per node
    are skipped: a local rank 3 and global rank 3 read the same). Counted: loud lines of
    candidate events, not older (aligned) than ``since - window_s`` when ``since`` is known
    (the first failure onset: init-time warnings about the master are not blame), naming a
    unit other than the line's own (for host and address: another node).

    A name is discounted by how many units are expected to give it by design. The unit holding
    the job's lowest rank hosts the rendezvous and the c10d store (MASTER_ADDR): every client
    names it when the store goes away, whoever failed. Within one event, that unit named by
    ``k`` of the ``n - 1`` other units carries ``1 - k / n`` per naming unit: the share of units
    that name it by design, estimated with one unit of smoothing, so that in a job of two nodes
    the one peer's name is not cancelled by itself (``k / (n - 1)`` made it weigh 0); a name of any other unit carries 1 (a ring neighbour is named by the one
    or two units next to it, and so is a faulty node). ``first_name_whole``: that unit named by
    ``k`` others carries ``1 - (k - 1) / (n - 1)`` per naming unit instead: by design means by
    many, and one name is whole (of two units, the other unit's name of the store host weighed 0.5
    against 1 for the store host's name of it; 36047's host OOM kill, where the two nodes' IB
    completion errors named each other). A naming unit counts with its strongest
    name. Output indexed like ``activity``: named_by (distinct naming units), named_weight (the
    sum of their discounted names), names (up to 3 tokens used, sorted).

    ``onsets`` (optional; per unit, aligned failure onsets, NaN unknown): a name written before
    the named unit's failure began is not blame, unless the naming event is one of the namer's
    ``reactions`` ((unit, event_id) pairs whose text says a peer failed: ``remote_patterns``).
    When it was written: the first aligned time of the naming lines, or, untimestamped (NCCL's
    own lines often are), the namer's own onset. The unit that fails first reports its own
    failure, and the report names the peer at the other end: NCCL's ``NET/IB : Got completion
    from peer <ip> with error 12`` on the side whose link went down, HCCL's timeout naming the
    remote rank it waited for. Its peers' names of it come after its failure began. The named
    unit without an onset, or no time for the name: it counts, as before (docs/spatial.md,
    "Blame follows the order of failure").

    ``store_clients``: a name that a unit's event gives as the host its c10d store client
    connects to (a ``store:`` token of the same unit and event, ``unit_mentions``) is the
    rendezvous endpoint the job was started with, not blame: every live client prints it once
    the store goes away, whoever failed (docs/spatial.md, "Store-client lines name the store,
    not the fault"). By host name (or its first label) or by address.

    ``global_small_ranks``: a rank number below the ranks per node counts too when its event
    names, in some loud line of the job, a rank of the job at or above the ranks per node: that
    event numbers ranks across the job, not within a node (HCCL's ``remote rank [N]`` of the
    world group, where the first node's ranks were never read), while a local-rank text never
    names a number that large (docs/spatial.md, "Small rank numbers of an event that numbers
    the job's ranks").

    ``group_ranks``: the rank numbers of a unit's event are not global ranks, and name nobody,
    when the event numbers the ranks of a communicator smaller than the job (``sub_communicator_events``;
    with ``several_communicators``, also when its task tags name several communicators).

    ``roll_calls``: a unit's event that names every unit of the other nodes (two at least) is a
    listing, not blame, and names nobody: srun's ``srun: error: <host>: tasks 4-7: Killed``,
    one line per node whose tasks it killed when the step was torn down. Which names the listing
    holds is decided before the order of failure drops any (docs/spatial.md, "A listing of every
    node names nobody").
    """
    out = pd.DataFrame({"named_by": 0, "named_weight": 0.0, "names": [[] for _ in activity.index]},
                       index=activity.index)
    if mentions.empty:
        return out
    book = address_book(mentions, activity["node"])
    node_units = activity.groupby("node").groups
    rank_units: dict[int, str] = {}
    for unit, ranks in _unit_ranks(activity).items():
        for rank in ranks:
            rank_units.setdefault(int(rank), unit)
    per_node = max((len(r) for r in _node_ranks(activity).values()), default=1)
    loud = mentions[(mentions["n_loud"] > 0) & mentions["candidate"]]
    if group_ranks and len(rank_units):
        in_group = sub_communicator_events(mentions, max(rank_units) + 1, several_communicators)
        if in_group:
            keys = pd.MultiIndex.from_frame(loud[["unit", "event_id"]])
            loud = loud[~(loud["token"].str.startswith("rank:").to_numpy() & keys.isin(list(in_group)))]
    first = loud["first_s"] if "first_s" in loud.columns else pd.Series(np.nan, index=loud.index)
    loud = loud.assign(when=first - loud["unit"].map(offsets).fillna(0.0))  # the naming lines' aligned time
    numbering = set()  # events that name a rank of the job at or above the ranks per node
    if global_small_ranks:
        ranks = loud.loc[loud["token"].str.startswith("rank:"), ["event_id", "token"]]
        numbering = {event for event, token in ranks.itertuples(index=False)
                     if per_node <= int(token[len("rank:"):]) and int(token[len("rank:"):]) in rank_units}
    if since is not None and not math.isnan(since):
        loud = loud[~(loud["when"] < since - window_s)]
    failed = onsets.reindex(activity.index) if onsets is not None else pd.Series(np.nan, index=activity.index)
    reacting = set(reactions)

    def blames(by: str, target: str, event: str, when: float) -> bool:
        # written before the named unit began to fail (the line's time, else the namer's onset):
        # the namer's own failure report, unless its text says a peer failed
        written = failed[by] if pd.isna(when) else when
        return not (written < failed[target]) or (by, event) in reacting

    store_named: set[tuple[str, str, str]] = set()
    if store_clients:
        stores = loud.loc[loud["token"].str.startswith("store:"), ["unit", "event_id", "token"]]
        for unit, event, token in stores.itertuples(index=False):
            endpoint = token[len("store:"):]
            store_named.update({(unit, event, endpoint), (unit, event, endpoint.split(".")[0])})

    named_at = loud.groupby(["unit", "node", "event_id", "token"], sort=False)["when"].min().reset_index()
    named = []  # (by, target, event, token, blamed)
    for unit, node, event, token, when in named_at.itertuples(index=False):
        kind, _, value = token.partition(":")
        if kind == "rank":
            target = rank_units.get(int(value)) if int(value) >= per_node or event in numbering else None
            if target is not None and target != unit:
                named.append((unit, target, event, token, blames(unit, target, event, when)))
            continue
        if kind not in ("host", "ip") or (unit, event, value) in store_named:
            continue
        named_node = value if kind == "host" else book.get(value)
        if named_node is None or named_node == node:
            continue
        named.extend((unit, target, event, token, blames(unit, target, event, when))
                     for target in node_units.get(named_node, []))
    listings: set[tuple[str, str]] = set()
    if roll_calls:
        listed: dict[tuple[str, str], set] = {}
        for by, target, event, _, _ in named:
            listed.setdefault((by, event), set()).add(target)
        unit_node = activity["node"]
        for (by, event), targets in listed.items():
            elsewhere = set(unit_node.index[unit_node != unit_node[by]])
            if len(elsewhere) >= 2 and elsewhere <= targets:
                listings.add((by, event))
    pairs = [(by, target, event, token) for by, target, event, token, blamed in named
             if blamed and (by, event) not in listings]
    if not pairs:
        return out
    frame = pd.DataFrame(pairs, columns=["by", "unit", "event", "token"])
    others = max(1, len(activity) - 1)
    namers = frame.groupby(["event", "unit"])["by"].transform("nunique")
    held = {unit: ranks for unit, ranks in _unit_ranks(activity).items() if len(ranks)}
    lowest = min((min(r) for r in held.values()), default=None)
    hosts_store = frame["unit"].map(lambda u: lowest is not None and lowest in held.get(u, ())).astype(bool)
    by_design = (namers.clip(upper=others) - 1) / others if first_name_whole else namers.clip(upper=others) / (others + 1)
    frame["weight"] = np.where(hosts_store, 1.0 - by_design, 1.0)
    strongest = frame.groupby(["unit", "by"])["weight"].max()
    named_by = frame.groupby("unit")["by"].nunique()
    names = frame.groupby("unit")["token"].agg(lambda t: sorted(set(t))[:3])
    out["named_by"] = named_by.reindex(out.index).fillna(0).astype(int)
    out["named_weight"] = strongest.groupby(level="unit").sum().reindex(out.index).fillna(0.0)
    out["names"] = [names.get(unit, []) for unit in out.index]
    return out


def sub_communicator_events(mentions: pd.DataFrame, world: int, several: bool = False) -> set[tuple[str, str]]:
    """(unit, event_id) pairs whose lines number the ranks of a communicator smaller than the job.

    ``mentions``: unit, event_id, token rows of ``unit_mentions`` (every line, loud or not);
    ``world``: the job's ranks. A communicator's size is what a line states with its identifier
    (``commsize:<identifier>:<n>``: CANN's ``identifier[...] rankSize[n]``, ``commId[...]``); a line
    that states a size alone (``commsize::<n>``: EI0002's group information) states its own. An
    event numbers a smaller communicator's ranks when a line of it states a size below ``world``,
    or when the communicator its task tag names (``comm:<tag>``; the tag starts with the
    communicator's identifier) is one stated below ``world``, or is none of those stated with the
    job's size while some are (the tag names another communicator than the job's). Without any
    size in the job's lines, no event is one: rank numbers read as global, as before.

    ``several``: also when no size is stated for its tag's communicator and the event's tags
    name two communicators or more over the job's lines (``tag_communicator``). A job has one
    world communicator; the data-parallel groups of a tensor- or pipeline-parallel job are one
    communicator each, so their timeouts tag several (MindSpeed with tensor parallel 4: four).
    """
    tokens = mentions.loc[mentions["token"].str.startswith(("comm:", "commsize:")), ["unit", "event_id", "token"]]
    if tokens.empty:
        return set()
    sizes: dict[str, int] = {}
    for token in tokens["token"].unique():
        if token.startswith("commsize:"):
            identifier, _, size = token[len("commsize:"):].rpartition(":")
            if identifier and size.isdigit():
                sizes[identifier] = int(size)
    jobs = [i for i, n in sizes.items() if n >= world]
    tags = tokens[tokens["token"].str.startswith("comm:")]
    named = tags.groupby("event_id")["token"].agg(lambda t: len({tag_communicator(x[len("comm:"):]) for x in t}))
    tagging_several = set(named.index[named >= 2]) if several else set()

    def smaller(tag: str, event: str) -> bool:
        stated = [n for i, n in sizes.items() if tag.startswith(i)]
        if stated:
            return min(stated) < world
        return bool(jobs) or event in tagging_several

    out = set()
    for unit, event, token in tokens.itertuples(index=False):
        if token.startswith("commsize::"):
            size = token[len("commsize::"):]
            if size.isdigit() and int(size) < world:
                out.add((unit, event))
        elif token.startswith("comm:") and smaller(token[len("comm:"):], event):
            out.add((unit, event))
    return out


def tag_communicator(tag: str) -> str:
    """The communicator's identifier a task tag starts with: the tag up to its last ``_<digits>``
    (torch_npu's ``<ip>%<nic>_<port>_<device>_<number>``, MindSpore's ``<hash>_0``), without what a
    tag may run on with (``..._1779783710697217ringAllReduceMeshSmallCountExecutor_device``); the
    whole tag when it has no such part."""
    found = _TAG_IDENTIFIER.match(tag)
    return found.group(1) if found else tag


_TAG_IDENTIFIER = re.compile(r"(.*_\d+)")


def _unit_ranks(activity: pd.DataFrame) -> dict[str, list[int]]:
    if "ranks" in activity.columns:
        return {u: [int(r) for r in (ranks if ranks is not None else [])] for u, ranks in activity["ranks"].items()}
    return {u: list(range(int(lo), int(hi) + 1)) for u, lo, hi in
            activity[["min_rank", "max_rank"]].dropna().itertuples()}


def _node_ranks(activity: pd.DataFrame) -> dict[str, set[int]]:
    ranks: dict[str, set[int]] = {}
    for unit, held in _unit_ranks(activity).items():
        ranks.setdefault(activity.at[unit, "node"], set()).update(held)
    return ranks


def blame_scores(named_by: pd.Series) -> pd.Series:
    """Blame in [0, 1]: the share of the other units that name a unit, beyond the job's typical
    unit (launcher summaries that name every node cancel out). Input: per unit (one row per unit
    of the job), the (discounted) naming count, ``named_weight`` of ``peer_mentions``.

    The share is of the job's other units, not of the most named unit's count: the rendezvous
    host named by every store client carries about one discounted name (``peer_mentions``), and
    dividing by the top count turned that one name back into full blame whenever the store host
    was the only unit named (issue #18: 6 of the 34 misses on seven development fleets)."""
    others = len(named_by) - 1
    if others < 1 or named_by.max() <= 0:
        return pd.Series(0.0, index=named_by.index)
    return ((named_by - named_by.median()) / others).clip(lower=0.0, upper=1.0)


def timing_scores(onset_lag_s: pd.Series, scale_s: float) -> pd.Series:
    """Timing in [0, 1]: 1 for the earliest failure onset, e-fold smaller per ``scale_s``
    seconds behind it; 0 without an onset."""
    return np.exp(-onset_lag_s / scale_s).fillna(0.0)


def lead_scores(onset_lag_s: pd.Series, scale_s: float) -> pd.Series:
    """Timing in [0, 1] by how far a unit's failure onset came before every other unit's: 1 -
    e^(-lead / ``scale_s``) for the first unit; 0 for the others, for units tied first and for
    units without an onset. The only unit with an onset leads by all (1): the others never
    began to fail that the lines show (a pair whose survivor's failure was a reaction)."""
    lag = onset_lag_s.astype(float)
    others = pd.Series(_others_min(lag.to_numpy()), index=lag.index)
    lead = (others - lag).where(others.notna() | lag.isna(), np.inf).clip(lower=0.0).fillna(0.0)
    return 1.0 - np.exp(-lead / scale_s)


def _evidence(deviation: pd.DataFrame, unit: str, limit: int) -> tuple[list[str], list[float]]:
    """The events on which ``unit`` exceeds its peers most (positive deviation above 1)."""
    if deviation.empty or unit not in deviation.index:
        return [], []
    row = deviation.loc[unit]
    row = row[row > 1.0]
    # ties by event id, so the evidence is the same on every run
    order = sorted(row.items(), key=lambda item: (-item[1], str(item[0])))[:limit]
    return [str(e) for e, _ in order], [round(float(v), 4) for _, v in order]


def slowness_scores(activity: pd.DataFrame, detector_votes: pd.Series, config: SpatialConfig) -> pd.Series:
    """Slowness in [0, 1]: is this the unit every other unit waits for (a straggler)?

    Two readings, the stronger one counts. ``activity['slow_z']`` (optional): the unit's
    largest sustained robust z of a per-rank timer (Megatron's ``times across ranks (ms):``,
    ``ranking.unit_slowness``), mapped linearly from ``slow_z_min`` (0) to twice that (1).
    ``detector_votes``: per unit, the share of straggler-detector reports
    (``MnRtt/Slo: <ms>/<rank>``) that name one of its ranks as the slowest. NaN and missing
    read as 0.
    """
    z = activity["slow_z"].astype(float) if "slow_z" in activity.columns else pd.Series(0.0, index=activity.index)
    by_timer = ((z - config.slow_z_min) / config.slow_z_min).clip(lower=0.0, upper=1.0).fillna(0.0)
    votes = detector_votes.reindex(activity.index).fillna(0.0).clip(lower=0.0, upper=1.0)
    return np.maximum(by_timer, votes)


def _collective_positions(mentions: pd.DataFrame, activity: pd.DataFrame) -> pd.DataFrame:
    """unit, group, n (a collective a unit's watchdog lines name) and timed_out (``seq:`` tokens:
    it timed out in it; ``enq:``: the last one a rank enqueued), of the units of ``activity``."""
    if not len(mentions):
        return pd.DataFrame(columns=["unit", "group", "n", "timed_out"])
    named = mentions[mentions["token"].str.startswith(("seq:", "enq:"))]
    named = named[named["unit"].isin(activity.index)]
    if named.empty:
        return pd.DataFrame(columns=["unit", "group", "n", "timed_out"])
    parts = named["token"].str[4:].str.rpartition(":")
    return pd.DataFrame({"unit": named["unit"].to_numpy(), "group": parts[0].to_numpy(),
                         "n": parts[2].astype("int64").to_numpy(),
                         "timed_out": named["token"].str.startswith("seq:").to_numpy()})


# Every member of a process group joins each of its collectives, so where the members of one group
# wait differs by a collective or two (PyTorch's flight-recorder dumps of real desyncs: 1155873
# against 1155874). Positions further apart than this were counted by different groups: PyTorch
# before 2.3 names no group in its watchdog lines, and in a 3D-parallel job a node's loss makes
# its data-parallel peers time out in one group and its pipeline peers in another.
SAME_GROUP_MAX_GAP = 64


def _behind_in(positions: pd.DataFrame) -> dict:
    """unit -> True when it is behind in a process group and never timed out in the collective it
    is behind at (it has not enqueued the one its peers wait in: stuck outside NCCL), False when it
    timed out there (stuck inside an older collective); units not behind are left out. Within a
    group (as named), positions more than ``SAME_GROUP_MAX_GAP`` apart are compared apart."""
    out: dict = {}
    for _, in_group in positions.groupby("group"):
        oldest = in_group.groupby("unit")["n"].min().sort_values()
        run = (oldest.diff() > SAME_GROUP_MAX_GAP).cumsum()
        for _, together in oldest.groupby(run):
            if len(together) < 2 or together.nunique() < 2:
                continue
            for unit in together.index[together < together.max()]:
                at = in_group[(in_group["unit"] == unit) & (in_group["n"] == together[unit])]
                outside = not bool(at["timed_out"].any())
                out[unit] = out.get(unit, True) and outside
    return out


def collective_absentees(mentions: pd.DataFrame, activity: pd.DataFrame) -> list:
    """The units of ``activity`` (indexed by unit, with node and ranks or min_rank/max_rank)
    holding the ranks that never said they timed out waiting in a collective (no ``waited:<rank>``
    token of ``mentions``) while at least two ranks did, when those ranks all sit on one node and
    at least as many of that node's ranks did say so: the collective's missing member, which never
    enqueued what everyone else waits in. Empty otherwise: silent ranks spread over several nodes
    (a launcher taking the rest down as the first timeouts fire), a whole node silent (its death
    is ``silence``'s to judge), or a node most of whose ranks were stopped before they timed out."""
    if not len(mentions) or "node" not in activity.columns:
        return []
    tokens = mentions["token"].dropna()
    waited = {int(t[7:]) for t in tokens[tokens.str.startswith("waited:")]}
    if len(waited) < 2:
        return []
    held = _unit_ranks(activity)
    absent = {unit: set(ranks) - waited for unit, ranks in held.items() if set(ranks) - waited}
    nodes = {activity.at[unit, "node"] for unit in absent}
    if len(nodes) != 1:
        return []
    node_ranks = _node_ranks(activity)[nodes.pop()]
    missing = node_ranks - waited
    return sorted(absent) if len(missing) <= len(node_ranks & waited) else []


def collectives_behind(mentions: pd.DataFrame, activity: pd.DataFrame, absentees: bool = False) -> pd.DataFrame:
    """Per unit (``activity``'s index): ``behind`` 1.0 when the oldest collective its NCCL
    watchdog lines name (tokens of ``unit_mentions``: ``seq:<pg>:<n>``, one that timed out;
    ``enq:<pg>:<n>``, the last one a rank enqueued, which a rank that hangs outside NCCL prints
    when a peer's timeout signals a dump; ``<pg>`` empty: no group named) is older than another
    unit's of the same process group (each group numbers its collectives apart; lines that name
    no group are compared with each other): it is stuck a collective or more behind, and the
    others time out waiting for it to join theirs (PyTorch's flight recorder reads desyncs the
    same way: the rank whose last collective is the oldest). 0.0 otherwise, and for every unit
    when fewer than two units name a collective or all name the same one (a dead peer, a link
    down for all: everyone waits in the same collective). ``outside_nccl`` True when it is
    behind and no rank of it timed out in the collective it is behind at: it never enqueued the
    collective its peers wait in, so it is stuck outside NCCL (Python, data loading, a deadlock:
    a hang), not inside an older collective (a stalled link). With ``absentees``, the units of
    ``collective_absentees`` are behind outside NCCL too (a rank of PyTorch before 2.2 that hangs
    outside NCCL prints no collective number). ``mentions``: unit, token rows."""
    lag = pd.DataFrame({"behind": 0.0, "outside_nccl": False}, index=activity.index)
    for unit, stuck_outside in _behind_in(_collective_positions(mentions, activity)).items():
        lag.loc[unit, ["behind", "outside_nccl"]] = [1.0, stuck_outside]
    for unit in collective_absentees(mentions, activity) if absentees else ():
        if not lag.at[unit, "behind"]:
            lag.loc[unit, ["behind", "outside_nccl"]] = [1.0, True]
    return lag


def detector_votes(mentions: pd.DataFrame, activity: pd.DataFrame) -> pd.Series:
    """Per unit, the share of the job's straggler-detector lines (``slow:<rank>`` tokens) naming
    one of its ranks. ``mentions``: unit, token, n_lines rows; ``activity`` indexed by unit."""
    votes = pd.Series(0.0, index=activity.index)
    slow = mentions[mentions["token"].str.startswith("slow:")] if len(mentions) else mentions
    if slow.empty:
        return votes
    rank_units = {int(r): u for u, ranks in _unit_ranks(activity).items() for r in ranks}
    per_rank = slow.assign(rank=slow["token"].str[5:].astype(int)).groupby("rank")["n_lines"].sum()
    total = per_rank.sum()
    for rank, n in per_rank.items():
        unit = rank_units.get(int(rank))
        if unit is not None:
            votes[unit] += n / total
    return votes
