"""One score per unit, and the order of the units by that score alone (pure pandas, no Spark).

``rank_units`` reads one job's unit tables (built by ``ranking.unit_inputs`` in Spark, or
inline in a unit test), computes every signal of ``signals.py`` and adds them up:

``combined_score = isolation + blame_weight * blame + timing_weight * timing
+ silence_weight * silent + truncated_bonus * truncated + slowness_weight * slowness
+ behind_weight * behind``

(of two units, isolation is ``0.5 + pair_isolation_weight * (pair_isolation - 0.5)``)

and ranks by ``combined_score`` (ties by unit name). No signal gets a tier of its own: a
weaker signal can only beat a stronger one by its weight, and every weight is measured by an
ablation (docs/spatial.md).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import pandas as pd

from l4spark.io.tables import DIAGNOSIS_NODES, columns
from l4spark.spatial.config import SpatialConfig
from l4spark.spatial.signals import (
    _evidence,
    blame_scores,
    clock_offsets,
    collectives_behind,
    detector_votes,
    deviations,
    failure_onsets,
    isolation_scores,
    lead_scores,
    normalised_features,
    pair_isolation,
    peer_mentions,
    silence,
    slowness_scores,
    timing_scores,
)

DIAGNOSIS_NODES_COLUMNS = columns(DIAGNOSIS_NODES.schema)


def unit_key(frame: pd.DataFrame) -> pd.Series:
    rank = frame["process_rank"]
    return frame["node"].astype(str) + np.where(rank.isna(), "", "#" + rank.astype("Int64").astype(str))


# the text of a unit behind that never enqueued the collective its peers wait in (a hang outside
# NCCL): the signature of the built-in hang fault (diagnosis.patterns.hung_unit_pattern)
BEHIND_OUTSIDE_TEXT = "behind, outside NCCL"

SIGNAL_COLUMNS = ["score", "has_evidence", "named_by", "named_weight", "onset_lag_s", "stopped", "only_truncated",
                  "slow_z", "detector_votes", "behind"]


def unit_signals(counts: pd.DataFrame, activity: pd.DataFrame, config: SpatialConfig) -> tuple[pd.DataFrame, dict]:
    """Every signal of every unit of one job, before weighting (inputs as for ``rank_units``).

    Returns (``signals`` indexed by unit key with SIGNAL_COLUMNS, ``details``: what the output
    rows and their ``signals`` text need: activity, silent, evidence, named, onsets). The
    weights of ``combine`` are applied later, so an ablation or a weight search reuses them.
    """
    activity = activity.assign(unit=unit_key(activity)).set_index("unit").sort_index()
    for column in ("first_s", "last_s"):
        if column not in activity.columns:
            activity[column] = np.nan
    counts = counts.assign(unit=unit_key(counts)) if len(counts) else counts.assign(unit=pd.Series(dtype=str))
    if "candidate" not in counts.columns:
        counts = counts.assign(candidate=True)
    is_fact = counts["token"].isna() if "token" in counts.columns else pd.Series(True, index=counts.index)
    facts, mentions = counts[is_fact], counts[~is_fact]
    matrix = _pivot(facts[facts["candidate"].astype(bool)], "n_lines", activity.index).fillna(0)

    own: dict = {}
    if len(activity.index) == 2:
        # no remote_patterns, no remote event, whatever a stored flag says (set with older patterns)
        remote = facts.loc[facts["remote"].eq(True), "event_id"] \
            if "remote" in facts.columns and config.remote_patterns else []
        quiet = []
        if "n_loud" in facts.columns and config.pair_quiet_for_nobody:
            loud_lines = facts.groupby("event_id")["n_loud"].sum()
            quiet = loud_lines.index[loud_lines == 0]
        # with pair_scored_events, a unit's own events are those the scoring weighs (the facts'
        # ``scored`` flag): not the failure-path boilerplate nor rank 0's argument lines the
        # spatial step also sees
        own_matrix = _pivot(facts[facts["candidate"].astype(bool) & facts["scored"].eq(True)], "n_lines",
                            activity.index).fillna(0) \
            if config.pair_scored_events and "scored" in facts.columns else matrix
        score, own = pair_isolation(own_matrix, config.max_evidence, remote, quiet)
        evidence = {unit: ([], []) for unit in activity.index}
        has_evidence = score > 0.5
    else:
        # the cross-job filter ran on the job when some of its events are no candidates
        filtered = not facts["candidate"].astype(bool).all()
        features = normalised_features(matrix, activity, config.normalisation,
                                       config.lone_roles_own_events and filtered)
        score = isolation_scores(features, config)
        deviation = deviations(features)
        evidence = {unit: _evidence(deviation, unit, config.max_evidence) for unit in activity.index}
        has_evidence = pd.Series({unit: bool(ids) for unit, (ids, _) in evidence.items()}, dtype=bool)
    has_evidence = has_evidence.reindex(activity.index).fillna(False).astype(bool)
    silent = silence(activity, config, matrix.sum(axis=1))
    if "first_s" in facts.columns:
        first_seen = _pivot(facts, "first_s", activity.index)
        offsets = clock_offsets(first_seen, activity, every_unit=config.offsets_from_every_unit)
        first_seen = first_seen.reindex(columns=_candidate_events(facts))
        if config.stop_before_onsets:
            silent = stopped_before_onsets(silent, failure_onsets(first_seen, activity, offsets, config),
                                           activity["last_s"].astype(float) - offsets)
        onsets = failure_onsets(first_seen, activity, offsets, config, stopped=silent["stopped"])
        timed = onsets
        if len(activity.index) == 2 and config.pair_onset_without_remote:
            # of two units, a failure that begins with a line saying a peer failed is a reaction: no onset
            timed = failure_onsets(first_seen, activity, offsets, config, _reactions(facts, config, activity.index),
                                   silent["stopped"])
    else:
        offsets, onsets = pd.Series(0.0, index=activity.index), pd.Series(np.nan, index=activity.index)
        timed = onsets
    # blame's window still opens at the first onset with reactions (what it was measured with);
    # with blame_follows_onsets a name of a unit that began to fail after the namer is not blame,
    # unless the naming line says a peer failed (a remote event of the namer)
    ordered_by = onsets if config.blame_follows_onsets else None
    reactions = facts.loc[facts["remote"].eq(True), ["unit", "event_id"]].itertuples(index=False, name=None) \
        if "remote" in facts.columns and config.remote_patterns else ()
    named = peer_mentions(mentions, activity, offsets, onsets.min(), config.mention_window_s, ordered_by,
                          list(reactions), config.store_client_not_blame, config.global_small_ranks,
                          config.group_ranks_by_communicator, config.roll_calls_not_blame,
                          config.first_name_whole, config.several_communicators_are_groups)
    # far fewer lines alone is weaker than stopping early: the node of rank 0 or of the last
    # pipeline stage logs more than the rest by role
    only_truncated = silent["truncated"] & silent["silent"] & (silent["missing_files"] == 0) & ~(
        silent["silent_gap_s"].fillna(0.0) >= config.silent_min_gap_s) & ~silent["unended"]
    if config.truncated_needs_quiet:
        # a unit that logs events more than its peers (evidence) and fewer lines in all ended on
        # what it logged: its own lines say why it is short, and its isolation counts them already
        explained = only_truncated & has_evidence
        silent = silent.assign(truncated=silent["truncated"] & ~explained, silent=silent["silent"] & ~explained)
        only_truncated &= ~explained
    lag = collectives_behind(mentions, activity, config.absent_member_behind)
    signals = pd.DataFrame({
        "score": score, "has_evidence": has_evidence,
        "named_by": named["named_by"], "named_weight": named["named_weight"], "onset_lag_s": timed - timed.min(),
        "stopped": silent["silent"] & ~only_truncated, "only_truncated": only_truncated,
        "slow_z": activity["slow_z"].astype(float) if "slow_z" in activity.columns else np.nan,
        "detector_votes": detector_votes(mentions, activity),
        "behind": lag["behind"],
    }, index=activity.index)
    details = {"activity": activity, "silent": silent, "evidence": evidence, "named": named, "onsets": timed,
               "own": own, "outside_nccl": lag["outside_nccl"]}
    return signals, details


def stopped_before_onsets(silent: pd.DataFrame, onsets: pd.Series, stops: pd.Series) -> pd.DataFrame:
    """``silence``'s frame with ``stopped`` kept only for the units whose stop (``stops``, aligned
    last lines) came before every other unit's own failure onset (``onsets``, aligned; NaN: none);
    ``silent`` recomputed from it (stopped, missing files or truncated)."""
    stopped = silent["stopped"].copy()
    for unit in stopped.index[stopped]:
        others = onsets.drop(index=unit).dropna()
        if len(others) and stops[unit] > others.min():
            stopped[unit] = False
    unended = silent["unended"] if "unended" in silent.columns else False
    return silent.assign(stopped=stopped, silent=stopped | (silent["missing_files"] > 0) | silent["truncated"] | unended)


def combine(signals: pd.DataFrame, config: SpatialConfig) -> pd.DataFrame:
    """The weighted parts and their sum per unit (``combined``), from ``unit_signals``.

    Output columns: isolation (the forest's score, 0.5 at most for a unit without evidence when
    ``evidence_required``; of two units ``pair_isolation``'s distance from 0.5 times
    ``pair_isolation_weight``), blame, timing, silence, slowness, behind (each in [0, 1] before its
    weight), combined. ``blame_discount=False`` counts naming units without the by-design
    discount (the ablation of the discount).
    """
    isolation = signals["score"].where(signals["has_evidence"] | (not config.evidence_required),
                                       signals["score"].clip(upper=0.5))
    if len(signals) == 2:
        # of two units, own events are mostly role output: their difference weighs less
        isolation = 0.5 + config.pair_isolation_weight * (isolation - 0.5)
    blame = blame_scores(signals["named_weight"] if config.blame_discount else signals["named_by"].astype(float))
    timing = timing_scores(signals["onset_lag_s"], config.timing_scale_s) if not config.timing_by_lead \
        else lead_scores(signals["onset_lag_s"], config.timing_scale_s)
    slowness = slowness_scores(signals[["slow_z"]], signals["detector_votes"], config)
    silence_part = signals["stopped"].astype(float) * config.silence_weight + \
        signals["only_truncated"].astype(float) * config.truncated_bonus
    behind = signals["behind"] if "behind" in signals.columns else pd.Series(0.0, index=signals.index)
    combined = (isolation + config.blame_weight * blame + config.timing_weight * timing + silence_part
                + config.slowness_weight * slowness + config.behind_weight * behind)
    return pd.DataFrame({"isolation": isolation, "blame": blame, "timing": timing,
                         "silence": signals["stopped"].astype(float), "slowness": slowness, "behind": behind,
                         "combined": combined})


def order_units(combined: pd.Series) -> np.ndarray:
    """Unit keys by combined score, highest first, ties by unit key: the only ordering rule."""
    frame = combined.rename("combined").rename_axis("unit").reset_index()
    return frame.sort_values(["combined", "unit"], ascending=[False, True], kind="stable")["unit"].to_numpy()


def suspect_flags(rank, combined, config: SpatialConfig):
    """Suspect: among the first ``top_k`` units by rank and a combined score of ``threshold`` or more."""
    return (rank <= config.top_k) & (combined >= config.threshold)


def rank_units(job_id: str, counts: pd.DataFrame, activity: pd.DataFrame, config: SpatialConfig) -> pd.DataFrame:
    """Rank the units of one job by their one combined score.

    ``counts``: node, process_rank, event_id, n_lines, and optionally first_s, candidate
    (missing: every row a candidate), remote (the event's text says a peer failed:
    ``SpatialConfig.remote_patterns``; missing: none does) and the ``unit_mentions`` rows
    (token not null; n_loud).
    Rows with a null or missing token are the unit x event facts; the count vectors use the
    candidate ones, clock alignment every one. ``activity``: the ``unit_activity`` columns for
    every unit of the job (units with no candidate line still count: they are all-zero
    vectors; first_s, last_s, ranks, ts_cover, slow_z may be missing: no timing / ranks from
    min_rank..max_rank / no timer reading). Output: the DIAGNOSIS_NODES_COLUMNS, one row per unit.
    """
    if activity.empty:
        return pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
    signals, details = unit_signals(counts, activity, config)
    parts = combine(signals, config)
    combined = parts["combined"]
    activity, silent, evidence = details["activity"], details["silent"], details["evidence"]
    named, onsets, onset_lag = details["named"], details["onsets"], signals["onset_lag_s"]
    score, slowness = signals["score"], parts["slowness"]
    order = order_units(combined)
    rank = np.arange(1, len(order) + 1)
    suspect = suspect_flags(rank, combined.loc[order].to_numpy(), config)
    unit_info = activity.loc[order]
    return pd.DataFrame({
        "job_id": job_id,
        "node": unit_info["node"].to_numpy(),
        "process_rank": unit_info["process_rank"].astype("Int64").to_numpy(),
        "rank": rank,
        "score": score.loc[order].round(6).to_numpy(),
        "suspect": suspect,
        "silent": silent["silent"].loc[order].to_numpy(),
        "silent_gap_s": silent["silent_gap_s"].loc[order].to_numpy(),
        "n_lines": unit_info["n_lines"].astype("int64").to_numpy(),
        "evidence": [evidence[u][0] for u in order],
        "evidence_scores": [evidence[u][1] for u in order],
        "named_by": named["named_by"].loc[order].astype("int32").to_numpy(),
        "onset_lag_s": onset_lag.loc[order].round(3).to_numpy(),
        "combined_score": combined.loc[order].round(6).to_numpy(),
        "signals": [_signals(u, silent, score, evidence, named, onset_lag, onsets, slowness, details["own"],
                             parts["behind"], details["outside_nccl"]) for u in order],
    })


def _pivot(rows: pd.DataFrame, values: str, units: pd.Index) -> pd.DataFrame:
    """unit x event table of ``values`` (sum; NaN where a unit has no row), rows = ``units``."""
    if rows.empty:
        return pd.DataFrame(index=units, dtype=float)
    aggfunc = "min" if values == "first_s" else "sum"
    table = rows.pivot_table(index="unit", columns="event_id", values=values, aggfunc=aggfunc, dropna=False)
    return table.reindex(units).sort_index(axis=1)


def _reactions(facts: pd.DataFrame, config: SpatialConfig, units: pd.Index) -> pd.DataFrame:
    """unit x event, true where the unit's event says a peer failed (its ``remote`` flag; none
    without ``remote_patterns``, whatever a stored flag says, as for ``pair_isolation``)."""
    if "remote" not in facts.columns or not config.remote_patterns:
        return pd.DataFrame(index=units, dtype=bool)
    remote = facts.assign(remote=facts["remote"].eq(True))
    return _pivot(remote, "remote", units).fillna(0).astype(bool)


def _candidate_events(facts: pd.DataFrame) -> list[str]:
    return sorted(facts.loc[facts["candidate"].astype(bool), "event_id"].unique())


def _signals(unit: str, silent: pd.DataFrame, score: pd.Series, evidence: dict, named: pd.DataFrame,
             onset_lag: pd.Series, onsets: pd.Series, slowness: pd.Series, own: dict,
             behind: pd.Series, outside_nccl: pd.Series) -> list[str]:
    """The reasons behind a unit's place, for people: which signals fired and how strongly."""
    out = []
    row = silent.loc[unit]
    if row["missing_files"] > 0:
        out.append(f"silent: {int(row['missing_files'])} rank file(s) fewer than its peers")
    elif row["stopped"]:
        # before "far fewer lines": a unit that stopped hours early has few lines because it
        # stopped (session 47: three dead nodes read as truncated only, so the dead node's
        # fault, whose signature is the stop, was not named). Its error lines, if any, were
        # routine (no candidate event), written long before it stopped, or (of two units)
        # cannot tell who crashed: ``silence``
        why = "its error lines no sign of it" if row.get("wrote_errors", False) else "without an error line"
        out.append(f"silent: stopped {row['silent_gap_s']:.0f} s before its peers, {why}")
    elif row.get("unended", False):
        out.append("silent: no end of its own (no failure summary, no notice to stop) where its peers reported theirs")
    elif row["truncated"]:
        out.append("silent: far fewer lines than its peers")
    ids = evidence[unit][0]
    if ids:
        out.append(f"isolated: score {score[unit]:.3f}, logs {len(ids)} event(s) more than its peers")
    reasons = own.get(unit, {})
    if score[unit] > 0.5 and reasons.get("own"):
        out.append(f"isolated: score {score[unit]:.3f}, logs {len(reasons['own'])} candidate event(s) the other unit "
                   "does not: " + ", ".join(reasons["own"]))
    if score[unit] > 0.5 and reasons.get("peer_says"):
        out.append(f"isolated: score {score[unit]:.3f}, the other unit alone logs {len(reasons['peer_says'])} event(s) "
                   "saying a peer failed: " + ", ".join(reasons["peer_says"]))
    if named.at[unit, "named_by"] > 0:
        out.append(f"named by {int(named.at[unit, 'named_by'])} peer(s) (weight {named.at[unit, 'named_weight']:.2f} "
                   f"after discounting names given by design): {', '.join(named.at[unit, 'names'])}")
    if slowness[unit] > 0:
        out.append(f"slow: the others wait for it (slowness {slowness[unit]:.2f})")
    if behind.get(unit, 0.0) > 0 and outside_nccl.get(unit, False):
        out.append(f"{BEHIND_OUTSIDE_TEXT}: it never enqueued the collective its peers timed out in")
    elif behind.get(unit, 0.0) > 0:
        out.append("behind: it stopped in an older collective than the one its peers timed out in")
    lag = onset_lag.get(unit, np.nan)
    if not pd.isna(lag):
        if lag == 0.0:
            later = onsets.drop(unit).min() - onsets[unit]
            out.append(f"failed first, {later:.1f} s before the next unit" if later >= 0.05 else "failed first")
        else:
            out.append(f"failure onset {lag:.1f} s after the first unit")
    return out


def top_k_hit(ranking: Iterable[str], faulty: Iterable[str], k: int) -> float:
    """Share of ``faulty`` nodes within the first ``k`` of ``ranking`` (nan if none faulty)."""
    faulty = set(faulty)
    if not faulty:
        return math.nan
    return len(faulty & set(list(ranking)[:k])) / len(faulty)
