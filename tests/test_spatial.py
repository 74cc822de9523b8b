"""Spatial comparison: normalisation, silence, ranking, baselines, the diagnosis_nodes table."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from l4spark.errors import ConfigError
from l4spark.spatial.config import SpatialConfig
from l4spark.spatial.ranking import (
    UNIT_FACTS_COLUMNS,
    baseline_rankings,
    configured_unit_inputs,
    rank_nodes,
    spatial_events,
    unit_activity,
    unit_inputs,
    unit_mentions,
    write_diagnosis_nodes,
)
from l4spark.spatial.score import DIAGNOSIS_NODES_COLUMNS, rank_units, top_k_hit
from l4spark.spatial.signals import (
    address_book,
    blame_scores,
    clock_offsets,
    collective_absentees,
    collectives_behind,
    failure_onsets,
    lead_scores,
    peer_mentions,
    roles,
    silence,
    size_factors,
    timing_scores,
)

T0 = datetime(2026, 11, 20, 1, 0, 0)


# ---- pure ----------------------------------------------------------------------------------


def test_size_factors_ignore_events_not_on_every_unit():
    counts = pd.DataFrame({"a": [10, 20, 10], "b": [5, 10, 5], "only_c": [0, 0, 500]}, index=["u1", "u2", "u3"])
    factors = size_factors(counts)
    assert factors.round(6).tolist() == pytest.approx([2 ** (-1 / 3), 2 ** (2 / 3), 2 ** (-1 / 3)])


def test_roles_follow_the_global_ranks_held():
    activity = pd.DataFrame({"min_rank": [0, 4, 8, None], "max_rank": [3, 7, 11, None]}, index=list("abcd"))
    assert roles(activity).tolist() == ["first", "peer", "last", "peer"]


def _activity(n_units: int, **overrides) -> pd.DataFrame:
    frame = pd.DataFrame({
        "node": [f"n{i:02d}" for i in range(n_units)], "process_rank": [None] * n_units,
        "min_rank": [2 * i for i in range(n_units)], "max_rank": [2 * i + 1 for i in range(n_units)],
        "n_files": [2] * n_units, "n_lines": [1000] * n_units, "n_error": [1] * n_units,
        "first_error_s": [100.0] * n_units, "first_s": [0.0] * n_units,
        "last_s": [1000.0 + i % 3 for i in range(n_units)]})
    for column, values in overrides.items():
        for index, value in values.items():
            frame.loc[index, column] = value
    return frame


def test_silence_needs_an_early_quiet_stop_or_missing_files():
    activity = _activity(8, last_s={3: 400.0, 5: 300.0}, n_error={3: 0, 5: 2}, n_files={6: 1}).set_index("node")
    result = silence(activity, SpatialConfig())
    # n03 stopped 600 s early without an error; n05 too but wrote errors (a loud crash);
    # n06 lacks a rank file
    assert result["silent"][result["silent"]].index.tolist() == ["n03", "n06"]
    assert result.loc["n03", "silent_gap_s"] == pytest.approx(601.0)  # the others' median 1001
    # with itself in the median (silence_without_self off, sessions 31 and before): 1000.5
    assert silence(activity, SpatialConfig(silence_without_self=False)).loc["n03", "silent_gap_s"] == pytest.approx(600.5)
    assert result.loc["n06", "missing_files"] == 1
    # n05's error lines are no candidate events (the cross-job filter found them routine): its
    # count vector shows nothing, so its early stop is silence after all (fresh seed 16003: a
    # node down 6 hours before its peers with one routine error line, ranked second)
    lines = pd.Series({"n00": 40, "n01": 40, "n02": 40, "n03": 0, "n04": 40, "n05": 0, "n06": 40, "n07": 40})
    result = silence(activity, SpatialConfig(), candidate_lines=lines)
    assert result["silent"][result["silent"]].index.tolist() == ["n03", "n05", "n06"]
    # n05's errors came in the first minutes and it died 600 s before its peers without another:
    # its stop was not the loud crash (fresh seed 16011: a store host down 212 s early, ranked second)
    early = activity.assign(last_error_s=[100.0 if n == "n05" else 990.0 for n in activity.index])
    result = silence(early, SpatialConfig())
    assert result["silent"][result["silent"]].index.tolist() == ["n03", "n05", "n06"]
    late = activity.assign(last_error_s=[290.0 if n == "n05" else 990.0 for n in activity.index])
    assert silence(late, SpatialConfig())["silent"][lambda x: x].index.tolist() == ["n03", "n06"]


def _counts(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame([(node, None, event, n) for node, event, n in rows],
                        columns=["node", "process_rank", "event_id", "n_lines"])


def _healthy_counts(n_units: int) -> list[tuple[str, str, int]]:
    rows = []
    for i in range(n_units):
        rows += [(f"n{i:02d}", "iteration", 200 + i), (f"n{i:02d}", "nccl_init", 40), (f"n{i:02d}", "watchdog", 4)]
    rows += [("n00", "rank0_banner", 30), ("n00", "launcher_exit", 8)]  # rank 0's routine output
    return rows


def test_the_node_with_its_own_error_events_ranks_first_with_them_as_evidence():
    counts = _counts(_healthy_counts(8) + [("n05", "xid_79", 2), ("n05", "cuda_error", 4)])
    ranked = rank_units("job-x", counts, _activity(8), SpatialConfig())
    assert list(ranked.columns) == DIAGNOSIS_NODES_COLUMNS
    assert ranked["rank"].tolist() == list(range(1, 9))
    first = ranked.iloc[0]
    assert (first["node"], bool(first["suspect"]), bool(first["silent"])) == ("n05", True, False)
    assert sorted(first["evidence"]) == ["cuda_error", "xid_79"]
    assert first["evidence"][0] == "cuda_error"  # more lines, larger deviation
    # rank 0's own banner and launcher lines do not make it a suspect
    assert "n00" not in ranked.loc[ranked["suspect"], "node"].tolist()


def test_role_normalisation_is_what_keeps_rank_0_out_of_first_place():
    counts = _counts(_healthy_counts(8) + [("n05", "xid_79", 1)])
    by_share = rank_units("job-x", counts, _activity(8), SpatialConfig(normalisation="share"))
    by_role = rank_units("job-x", counts, _activity(8), SpatialConfig(normalisation="role"))
    assert by_share.iloc[0]["node"] == "n00"
    assert by_role.iloc[0]["node"] == "n05"


def test_a_silent_node_ranks_first_even_without_an_error_line():
    counts = _counts(_healthy_counts(8) + [("n01", "ib_error", 6), ("n03", "ib_error", 6)])
    activity = _activity(8, last_s={2: 300.0}, n_error={2: 0})
    ranked = rank_units("job-x", counts, activity, SpatialConfig())
    first = ranked.iloc[0]
    assert (first["node"], bool(first["silent"]), bool(first["suspect"])) == ("n02", True, True)
    assert first["silent_gap_s"] == pytest.approx(701.0)


def test_a_job_of_two_units_is_ranked_without_a_forest():
    ranked = rank_units("job-x", _counts([("n00", "e", 1), ("n01", "e", 2)]), _activity(2), SpatialConfig())
    assert ranked["score"].tolist() == [0.5, 0.5]
    assert ranked["suspect"].tolist() == [False, False]


def test_of_two_nodes_the_one_with_failure_lines_of_its_own_ranks_first():
    # a NIC down at start on n01 (fresh seed 15017): its ranks print the IB and NCCL init errors,
    # n00 only what both print; before, both scored 0.5 and the name broke the tie
    counts = _counts([("n00", "iteration", 200), ("n01", "iteration", 190), ("n00", "launcher", 2), ("n01", "launcher", 2),
                      ("n01", "ib_link_down", 1), ("n01", "ibv_modify_qp_failed", 2), ("n01", "nccl_unhandled", 8)])
    ranked = rank_units("job-x", counts, _activity(2), SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00"]
    assert ranked["score"].tolist() == [0.75, 0.25]
    assert ranked.iloc[0]["signals"][0] == ("isolated: score 0.750, logs 3 candidate event(s) the other unit does not: "
                                            "nccl_unhandled, ibv_modify_qp_failed, ib_link_down")
    # no peers to deviate from: nothing becomes a spatially indicating event
    assert [list(e) for e in ranked["evidence"]] == [[], []]
    # each with candidate events of its own, the one with more kinds of them leads, less surely
    counts = _counts([("n00", "watchdog_timeout", 3), ("n01", "xid_79", 1), ("n01", "cuda_error", 4)])
    ranked = rank_units("job-x", counts, _activity(2), SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00"]
    assert ranked["score"].tolist() == pytest.approx([0.5 + 0.25 / 3, 0.5 - 0.25 / 3])


def test_of_two_nodes_the_survivors_lines_saying_a_peer_failed_point_at_the_other():
    # a node goes down with one CUDA line on it (fresh seed 15013); the survivor's ranks print
    # the NCCL errors of a remote process gone, its watchdog timeouts and its own trace lines.
    # Before, those outnumbered the dead node's line and put the survivor first
    rows = [_fact(n, "iteration", 200, 20.0) for n in ("n00", "n01")]
    rows += [_fact("n01", "cuda_error", 1, 900.0)]
    rows += [_fact("n00", "nccl_remote_error", 8, 960.0, remote=True), _fact("n00", "watchdog_timeout", 8, 961.0, remote=True),
             _fact("n00", "proxy_trace", 40, 960.1),
             _fact("n00", "resume_banner", 1, 10.0, loud=False)]  # rank 0's INFO banner: counts for nobody
    counts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    activity = _activity(2, last_s={0: 1000.0, 1: 990.0})
    ranked = rank_units("job-x", counts, activity, SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00"]
    # n01: its own cuda_error and the survivor's two remote events; n00: its proxy trace
    assert ranked["score"].tolist() == [0.5 + 0.25 * 2 / 4, 0.5 - 0.25 * 2 / 4]
    assert ranked.iloc[0]["signals"] == [
        "isolated: score 0.625, logs 1 candidate event(s) the other unit does not: cuda_error",
        "isolated: score 0.625, the other unit alone logs 2 event(s) saying a peer failed: nccl_remote_error, "
        "watchdog_timeout",
        "failed first"]  # the survivor's failure begins with a peer-failed line: it has no onset
    # without the remote flag (an older table) the survivor's own events count for it (at the
    # timing weight of the day, 0.1: session 19's 0.3 puts n01 first by its 60 s lead alone)
    blind = rank_units("job-x", counts.drop(columns=["remote"]), activity, SpatialConfig(timing_weight=0.1))
    assert blind["node"].tolist() == ["n00", "n01"]


def test_of_two_nodes_the_one_that_stopped_first_is_silent_and_neither_is_truncated():
    # rank 0's node logs 20x more by role (DeepSpeed); n01 stopped 10 minutes before it and wrote
    # an error on the way: with one peer neither the line count nor the error decides
    activity = _activity(2, n_lines={0: 7200, 1: 333}, last_s={0: 1600.0, 1: 1000.0}).set_index("node")
    result = silence(activity, SpatialConfig())
    assert result["silent"].tolist() == [False, True] and not result["truncated"].any()
    assert result["silent_gap_s"].tolist() == [-600.0, 600.0]
    # a gap under silent_min_gap_s is no silence
    close = silence(_activity(2, last_s={0: 1020.0, 1: 1000.0}).set_index("node"), SpatialConfig())
    assert not close["silent"].any()


def test_a_unit_isolated_only_by_what_it_lacks_is_not_credited():
    # n00 holds rank 0 but is no singleton role here; n03 lacks the watchdog line everyone logs
    rows = [r for r in _healthy_counts(8) if not (r[0] == "n03" and r[1] == "watchdog")]
    ranked = rank_units("job-x", _counts(rows), _activity(8), SpatialConfig())
    n03 = ranked.set_index("node").loc["n03"]
    assert list(n03["evidence"]) == [] and n03["score"] > 0.5
    assert n03["combined_score"] == 0.5  # capped: it logs nothing more than its peers
    lenient = rank_units("job-x", _counts(rows), _activity(8), SpatialConfig(evidence_required=False))
    assert lenient.set_index("node").loc["n03", "combined_score"] == n03["score"]


# ---- peer blame and first to fail: hand-built facts -----------------------------------------


def _fact(node: str, event: str, n_lines: int, first_s: float | None, remote: bool = False, loud: bool = True) -> tuple:
    return (node, None, event, None, n_lines, n_lines if loud else 0, first_s, True, remote)


def _mention(node: str, event: str, token: str, first_s: float | None, loud: int = 1, candidate: bool = True) -> tuple:
    return (node, None, event, token, 1, loud, first_s, candidate, None)


def _neighbour_job() -> pd.DataFrame:
    """8 nodes; n05's GPU fails first (two kernel/CUDA events, few lines); its ring neighbours
    n04 and n06 time out later and name n05's address, n04 with many more error lines."""
    rows = []
    for i in range(8):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0 + 0.01 * i), _fact(node, "iteration", 200, 20.0),
                 _fact(node, "bootstrap", 4, 11.0), _mention(node, "bootstrap", f"ip:10.0.0.{i + 1}", None, loud=0),
                 _fact(node, "teardown", 4, 990.0)]
    rows += [_fact("n05", "xid", 1, 950.0), _fact("n05", "cuda_error", 1, 950.2)]
    rows += [_fact("n06", "ib_error", 2, 957.0), _mention("n06", "ib_error", "ip:10.0.0.6", 957.0)]
    rows += [_fact("n04", "ib_error", 6, 960.0), _fact("n04", "proxy_trace", 40, 960.1),
             _fact("n04", "nccl_remote", 8, 960.2), _fact("n04", "abort", 4, 960.3),
             _mention("n04", "ib_error", "ip:10.0.0.6", 960.0)]
    return pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])


def test_peer_blame_and_first_failure_each_move_the_faulty_node_above_a_noisier_neighbour():
    counts, activity = _neighbour_job(), _activity(8)
    first = {}
    for name, config in {"isolation": SpatialConfig(blame_weight=0.0, timing_weight=0.0),
                         "blame": SpatialConfig(timing_weight=0.0), "timing": SpatialConfig(blame_weight=0.0),
                         "both": SpatialConfig()}.items():
        first[name] = rank_units("job-x", counts, activity, config).iloc[0]
    assert first["isolation"]["node"] == "n04"  # more error events than the faulty node
    assert [first[n]["node"] for n in ("blame", "timing", "both")] == ["n05", "n05", "n05"]
    both = first["both"]
    assert (both["named_by"], both["onset_lag_s"]) == (2, 0.0)
    defaults = SpatialConfig()
    # blame: named by 2 of the 7 other units, the typical unit by none; timing: its lead of 7 s
    assert both["combined_score"] == pytest.approx(
        both["score"] + defaults.blame_weight * 2 / 7
        + defaults.timing_weight * (1 - np.exp(-7.0 / defaults.timing_scale_s)), abs=1e-6)
    assert both["signals"][1:] == ["named by 2 peer(s) (weight 2.00 after discounting names given by design): ip:10.0.0.6",
                                   "failed first, 7.0 s before the next unit"]


# ---- session 15's rules, each left out (the ablation of spatial_eval --compare) --------------


def _pair(rows: list[tuple], **activity) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two nodes that both log 200 iteration lines, plus ``rows`` (``_fact`` tuples)."""
    facts = [_fact(n, "iteration", 200, 20.0) for n in ("n00", "n01")] + rows
    return pd.DataFrame(facts, columns=UNIT_FACTS_COLUMNS[1:]), _activity(2, **activity)


def _order(counts: pd.DataFrame, activity: pd.DataFrame, config: SpatialConfig) -> tuple[list, list]:
    ranked = rank_units("job-p", counts, activity, config)
    return ranked["node"].tolist(), ranked["combined_score"].round(4).tolist()


def test_of_two_nodes_the_one_whose_failure_began_first_is_timed_first():
    # a NIC link down on n01: its ranks print the IB port error and the failed completion; 30 s
    # later n00's ranks print their own NCCL error and its trace. Two own events each: isolation
    # and blame cannot tell them apart. Before, a pair was never timed (min_timed_units 3) and
    # the name put n00 first
    counts, activity = _pair([_fact("n01", "ib_port_error", 38, 950.0), _fact("n01", "ib_completion_error", 4, 950.2),
                              _fact("n00", "nccl_system_error", 8, 980.0), _fact("n00", "nccl_trace", 16, 980.1)])
    ranked = rank_units("job-p", counts, activity, SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00"]
    assert ranked["onset_lag_s"].tolist() == [0.0, 30.0]
    assert ranked.iloc[0]["signals"] == ["failed first, 30.0 s before the next unit"]
    # one onset of two is nothing to compare; without the rule neither is timed
    one = counts[counts["event_id"].isin(["iteration", "ib_port_error", "ib_completion_error"])]
    assert rank_units("job-p", one, activity, SpatialConfig())["onset_lag_s"].isna().all()
    untimed = rank_units("job-p", counts, activity, SpatialConfig(small_job_timing=False))
    assert untimed["node"].tolist() == ["n00", "n01"] and untimed["onset_lag_s"].isna().all()


def test_of_two_nodes_a_failure_that_begins_with_a_peer_failed_line_is_not_timed_first():
    # n01's GPU is stuck in a kernel; n00's NCCL watchdog times out first and PyTorch prints the
    # timeout with its follow-ups within milliseconds (only the first line is remote). n01's
    # own CUDA error comes 30 s later. Before, n00's reaction started the earlier onset and the
    # timing put the survivor first
    counts, activity = _pair([_fact("n00", "watchdog_timeout", 8, 960.0, remote=True),
                              _fact("n00", "watchdog_exception", 8, 960.0), _fact("n00", "take_down", 8, 960.0),
                              _fact("n00", "abort", 8, 960.001),
                              _fact("n01", "xid", 1, 990.0), _fact("n01", "cuda_error", 8, 990.1),
                              _fact("n01", "cuda_trace", 8, 990.1)])
    ranked = rank_units("job-p", counts, activity, SpatialConfig())
    # 4 points to 3 (n00's timeout is one for n01), and only n01 is timed
    assert ranked["node"].tolist() == ["n01", "n00"]
    timed, weight = SpatialConfig().timing_weight, SpatialConfig().pair_isolation_weight
    assert ranked["combined_score"].round(4).tolist() == [round(0.5 + weight * 0.25 / 7 + timed, 4),
                                                          round(0.5 - weight * 0.25 / 7, 4)]
    assert ranked.iloc[0]["onset_lag_s"] == 0.0 and np.isnan(ranked.iloc[1]["onset_lag_s"])
    assert ranked.iloc[0]["signals"][-1] == "failed first"
    before = rank_units("job-p", counts, activity, SpatialConfig(pair_onset_without_remote=False))
    assert before["node"].tolist() == ["n00", "n01"] and before["onset_lag_s"].tolist() == [0.0, 30.0]


def test_of_two_nodes_an_own_error_before_its_peer_failed_line_still_starts_the_onset():
    # a NIC link down on n01: its IB port error, then its own ncclRemoteError; n00's completion
    # error and ncclRemoteError 30 s later. Each failure begins with a line of its own, so the
    # rule changes nothing: timing puts n01 first (isolation ties, the name would put n00 first)
    counts, activity = _pair([_fact("n01", "ib_port_error", 38, 950.0),
                              _fact("n01", "nccl_remote_error", 8, 950.5, remote=True),
                              _fact("n00", "ib_completion_error", 8, 980.0),
                              _fact("n00", "nccl_remote_error", 8, 980.3, remote=True)])
    ranked = rank_units("job-p", counts, activity, SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00"] and ranked["onset_lag_s"].tolist() == [0.0, 30.0]
    pd.testing.assert_frame_equal(ranked, rank_units("job-p", counts, activity,
                                                     SpatialConfig(pair_onset_without_remote=False)))


def test_a_unit_whose_failure_begins_as_a_reaction_has_no_onset_but_counts_as_timed():
    config = SpatialConfig()
    activity = pd.DataFrame({"first_s": [0.0, 0.0], "last_s": [1000.0, 1000.0]}, index=["a", "b"])
    first_seen = pd.DataFrame({"routine": [5.0, 5.0], "watchdog": [960.0, np.nan], "abort": [960.0, 995.0],
                               "xid": [np.nan, 990.0], "remote_error": [np.nan, 990.5]}, index=activity.index)
    reactions = pd.DataFrame({"watchdog": [True, False], "remote_error": [False, True]}, index=activity.index)
    offsets = pd.Series(0.0, index=activity.index)
    onsets = failure_onsets(first_seen, activity, offsets, config, reactions)
    # a's burst begins with its watchdog (its abort in the same instant); b's with its own Xid
    assert np.isnan(onsets["a"]) and onsets["b"] == 990.0
    assert failure_onsets(first_seen, activity, offsets, config).tolist() == [960.0, 990.0]
    # a reaction alone, the other unit without terminal events: nothing to compare
    quiet_b = first_seen.assign(xid=np.nan, remote_error=np.nan, abort=[960.0, np.nan])
    assert failure_onsets(quiet_b, activity, offsets, config, reactions).isna().all()
    # a peer-failed line before the burst (a lone store error) makes it a reaction too
    early = first_seen.assign(watchdog=[np.nan, 985.0], abort=[960.0, np.nan])
    late = failure_onsets(early, activity, offsets, config, reactions.assign(watchdog=[False, True]))
    assert late["a"] == 960.0 and np.isnan(late["b"])


# ---- session 18: blame follows the order of failure (three-node jobs) -----------------------


def _triple(rows: list[tuple]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three nodes (ranks 0-1, 2-3, 4-5; n00 holds rank 0 and the store) that log 200 iteration
    lines and NCCL's bootstrap line with their own address (10.0.0.1-3), plus ``rows``."""
    facts = []
    for i in range(3):
        node = f"n{i:02d}"
        facts += [_fact(node, "iteration", 200, 20.0), _fact(node, "bootstrap", 4, 11.0),
                  _mention(node, "bootstrap", f"ip:10.0.0.{i + 1}", None, loud=0)]
    return pd.DataFrame(facts + rows, columns=UNIT_FACTS_COLUMNS[1:]), _activity(3)


def test_of_three_nodes_the_first_to_fail_naming_its_peer_does_not_blame_it():
    # n01's IB link goes down: its ranks print the port error and NCCL's "Got completion from
    # peer 10.0.0.3 with error 12", naming n02 at the far end of the failed send. 10 s later n00
    # and n02 print ncclRemoteError and its trace. Every role has one member, so the forest only
    # sees n01 lack the survivors' two events; before, n01's name of n02 (one name more than the
    # median unit, of two others) put n02 first by 0.12 (d19001's ib_completion_error job)
    counts, activity = _triple([_fact("n01", "ib_port_error", 38, 950.0),
                                _fact("n01", "ib_completion_error", 4, 950.2),
                                _mention("n01", "ib_completion_error", "ip:10.0.0.3", 950.2),
                                _fact("n00", "nccl_remote_error", 8, 960.0, remote=True),
                                _fact("n00", "nccl_trace", 16, 960.1),
                                _fact("n02", "nccl_remote_error", 8, 960.3, remote=True),
                                _fact("n02", "nccl_trace", 16, 960.4)])
    ranked = rank_units("job-t", counts, activity, SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00", "n02"]
    assert ranked["named_by"].tolist() == [0, 0, 0] and ranked["onset_lag_s"].tolist() == [0.0, 10.0, 10.3]
    # isolated for lacking the survivors' two events, without evidence: 0.5, and first by 10 s
    defaults = SpatialConfig()
    assert ranked.iloc[0]["combined_score"] == pytest.approx(
        0.5 + defaults.timing_weight * (1 - np.exp(-10.0 / defaults.timing_scale_s)), abs=1e-6)
    # without the rule, at session 18's timing weight (0.1), the name put n02 first
    before = rank_units("job-t", counts, activity, SpatialConfig(blame_follows_onsets=False, timing_weight=0.1))
    assert before["node"].tolist() == ["n02", "n01", "n00"] and before["named_by"].tolist() == [1, 0, 0]
    # without timestamps on the naming unit's failure there is no order: the name blames
    untimed = counts.assign(first_s=counts["first_s"].where(counts["node"] != "n01"))
    assert rank_units("job-t", untimed, activity, SpatialConfig()).iloc[0]["node"] == "n02"


def test_of_three_nodes_peers_that_time_out_first_still_blame_the_stuck_node():
    # n01's GPU hangs in a kernel: n00's and n02's NCCL watchdogs time out first and name n01's
    # ranks; n01's own Xid and CUDA error come 30 s later. The survivors failed first, but
    # their lines say a peer failed (remote_patterns): their names stay blame, and the rule
    # moves nothing
    counts, activity = _triple([_fact("n00", "watchdog_timeout", 8, 960.0, remote=True),
                                _fact("n00", "take_down", 8, 960.0), _mention("n00", "watchdog_timeout", "rank:2", 960.0),
                                _fact("n02", "watchdog_timeout", 8, 960.2, remote=True),
                                _fact("n02", "take_down", 8, 960.2), _mention("n02", "watchdog_timeout", "rank:3", 960.2),
                                _fact("n01", "xid", 1, 990.0), _fact("n01", "cuda_error", 8, 990.1)])
    ranked = rank_units("job-t", counts, activity, SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00", "n02"] and ranked.iloc[0]["named_by"] == 2
    pd.testing.assert_frame_equal(ranked, rank_units("job-t", counts, activity,
                                                     SpatialConfig(blame_follows_onsets=False)))
    # the same names in lines that say nothing of a peer are the earlier units' own reports
    plain = rank_units("job-t", counts, activity, SpatialConfig(remote_patterns=()))
    assert plain.set_index("node").loc["n01", "named_by"] == 0


# ---- session 21: store-client lines name the store, not the fault ----------------------------


def _store_client_triple(store_token: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """n02's host OOM killer ends its workers at 950 s; n00's (rank 0: the c10d store host)
    abort 0.5 s later, and with them the store; n01's store client then prints ``recvValue
    failed on SocketImpl(... remote=[n00]:29500): Connection reset by peer`` (d19001's
    host_oom_kill job), naming n00 as the endpoint it connects to (``store:n00`` with
    ``store_token``), and aborts too."""
    rows = [_fact("n02", "oom_kill", 1, 950.0), _fact("n02", "abort", 4, 950.1),
            _fact("n00", "abort", 4, 950.5), _fact("n00", "sigterm", 4, 950.6),
            _fact("n01", "store_recv_failed", 40, 965.0), _fact("n01", "abort", 4, 965.1),
            _fact("n01", "sigterm", 4, 965.1), _mention("n01", "store_recv_failed", "host:n00", 965.0)]
    if store_token:
        rows.append(_mention("n01", "store_recv_failed", "store:n00", 965.0))
    return _triple(rows)


STORE_RULE = SpatialConfig(store_client_not_blame=True)  # the default since session 22 (docs/spatial.md)
NAMES_AS_BLAME = SpatialConfig(store_client_not_blame=False)


def test_of_three_nodes_a_store_clients_name_of_the_store_host_is_not_blame():
    counts, activity = _store_client_triple(store_token=True)
    ranked = rank_units("job-s", counts, activity, STORE_RULE)
    assert ranked["node"].tolist() == ["n02", "n00", "n01"] and ranked["named_by"].tolist() == [0, 0, 0]
    # with the name as blame (sessions 21 and before; discounted by design: 1 - 1/3 of one name,
    # a third of the two others) the store host comes first by 0.02, as on d19001
    assert rank_units("job-s", counts, activity, SpatialConfig())["node"].tolist() == ["n02", "n00", "n01"]
    before = rank_units("job-s", counts, activity, NAMES_AS_BLAME).set_index("node")
    assert before.loc["n00", "rank"] == 1 and before.loc["n00", "named_by"] == 1
    # the same name from a line that is no store client's (NCCL's "Connection closed by remote
    # peer n00<4242>") stays blame
    counts, activity = _store_client_triple(store_token=False)
    assert rank_units("job-s", counts, activity, STORE_RULE).iloc[0]["node"] == "n00"


def test_a_store_name_is_matched_by_address_and_by_the_host_names_first_label():
    counts, activity = _store_client_triple(store_token=False)
    for named, endpoint in (("ip:10.0.0.1", "store:10.0.0.1"), ("host:n00", "store:n00.cluster.local")):
        rows = counts[counts["token"].ne("host:n00") | counts["token"].isna()]
        extra = pd.DataFrame([_mention("n01", "store_recv_failed", named, 965.0),
                              _mention("n01", "store_recv_failed", endpoint, 965.0)], columns=UNIT_FACTS_COLUMNS[1:])
        ranked = rank_units("job-s", pd.concat([rows, extra], ignore_index=True), activity, STORE_RULE)
        assert ranked.iloc[0]["node"] == "n02" and ranked["named_by"].sum() == 0
    # a store endpoint of another unit leaves this name alone
    other = pd.DataFrame([_mention("n01", "store_recv_failed", "store:n02", 965.0)], columns=UNIT_FACTS_COLUMNS[1:])
    ranked = rank_units("job-s", pd.concat([counts, other], ignore_index=True), activity, STORE_RULE)
    assert ranked.set_index("node").loc["n00", "named_by"] == 1


STORE_CLIENT_MESSAGES = {  # real c10d client texts (sources in SpatialConfig.store_client_patterns)
    "[c10d] recvValue failed on SocketImpl(fd=63, addr=[n3]:42318, remote=[n0]:29500): Connection reset by peer": "n0",
    "[c10d] TCP client failed to connect/validate to host nccl-master:29500 - timed out (try=0, timeout=120000ms): "
    "The client socket has timed out after 120000ms while trying to connect to (nccl-master, 29500).": "nccl-master",
    "[c10d] TCP client failed to connect/validate to host 10.176.58.107:53217 - retrying (try=0, timeout=600000ms, "
    "delay=33924ms): Connection reset by peer": "10.176.58.107",
    "[c10d] The client socket has failed to connect to [DESKTOP-63Q8UGP]:29500 (errno: 111 - Connection refused).":
        "DESKTOP-63Q8UGP",
    "[c10d] The client socket has timed out after 600000ms while trying to connect to (192.168.6.2, 53489).":
        "192.168.6.2",
    "The client socket has failed to connect to any network address of (nccl-master, 29500).": "nccl-master",
}


def test_store_client_patterns_read_the_endpoint_of_c10ds_client_lines_only():
    import re

    patterns = [re.compile(p) for p in SpatialConfig().store_client_patterns]
    for message, host in STORE_CLIENT_MESSAGES.items():
        assert {m for p in patterns for m in p.findall(message)} == {host}, message
    # a peer named by NCCL, Gloo or HCCL is no store endpoint (REMOTE_MESSAGES has c10d's recvValue line)
    others = [m for m in REMOTE_MESSAGES + LOCAL_MESSAGES if m not in STORE_CLIENT_MESSAGES]
    for message in others + ["[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with Connection closed by "
                             "peer [10.1.0.3]:3615"]:
        assert not any(p.search(message) for p in patterns), message
    with pytest.raises(ConfigError, match="needs a group"):
        SpatialConfig(store_client_patterns=(r"remote=\[[^\]]+\]",))


# ---- session 20: a pair's isolation weighs less ---------------------------------------------


def _rank_0_talks_more_pair() -> tuple[pd.DataFrame, pd.DataFrame]:
    """n01 (the last rank's node) loses a GPU: Xid 79 and the CUDA error at 950 s. n00 holds
    rank 0 and prints by role what n01 never does (DeepSpeed's config echo, one event per key,
    its step lines, a wandb retry: 13 events, all long before the end), then its NCCL watchdog
    reacts to n01 at 980 s (a remote line, its abort in the same instant)."""
    routine = ["ds_config_header", "zero_stage", "train_batch_size", "micro_batch", "grad_accum", "grad_clip",
               "steps_per_print", "bf16", "cpu_checkpointing", "partition_activations", "optimizer_echo",
               "step_line", "wandb_retry"]
    rows = [_fact("n00", event, 1, 10.0 + i) for i, event in enumerate(routine)]
    rows += [_fact("n01", "xid_79", 1, 950.0), _fact("n01", "cuda_error", 8, 950.1),
             _fact("n00", "watchdog_timeout", 8, 980.0, remote=True), _fact("n00", "abort", 8, 980.0)]
    return _pair(rows)


def test_of_two_nodes_rank_0s_role_output_does_not_outweigh_who_failed_first():
    counts, activity = _rank_0_talks_more_pair()
    # own points 14 (13 role events and the abort) to 3 (Xid, CUDA error, n00's watchdog):
    # pair_isolation 0.5 + 0.25 x 11/17 = 0.6618 and 0.3382; n01 alone is timed (n00 reacted)
    ranked = rank_units("job-p", counts, activity, SpatialConfig())
    assert ranked["node"].tolist() == ["n01", "n00"]
    assert ranked["score"].round(4).tolist() == [0.3382, 0.6618]
    weight, timed = SpatialConfig().pair_isolation_weight, SpatialConfig().timing_weight
    gap = 0.25 * 11 / 17
    assert ranked["combined_score"].tolist() == pytest.approx([0.5 - weight * gap + timed, 0.5 + weight * gap],
                                                             abs=1e-6)
    # at full weight (session 14 to 19) the role output outweighs the 0.3 of failing first
    before = rank_units("job-p", counts, activity, SpatialConfig(pair_isolation_weight=1.0))
    assert before["node"].tolist() == ["n00", "n01"]
    assert before["combined_score"].round(4).tolist() == [0.6618, round(0.3382 + timed, 4)]


def test_of_two_nodes_only_events_the_scoring_weighs_are_a_units_own():
    """Issue #18, fresh 36001's MindSpeed pair (HCCL timeout): node448's RoCE link failed and it
    printed an error CQE; both nodes printed HCCL's Notify-wait timeouts and the launcher's exit
    line. node447 holds rank 0 and alone printed Megatron's argument lines with values no normal
    job had, and a SIGABRT traceback common to failed jobs: seven events the spatial step sees
    but the event scoring does not (boilerplate, role output). They made node447 the unit with
    own events (7 to 1) and first. With the facts' ``scored`` flag a unit's own events are the
    scored ones: the CQE alone, and node448 is first. Without the flag (inputs of ``l4spark
    spatial``, older dumps) or with ``pair_scored_events`` off: as before."""
    role = ["args_lr", "args_load", "args_save", "args_data_path", "args_timers", "sigabrt_traceback", "exitcode"]
    rows = [_fact("n00", event, 1, None) for event in role]
    rows += [_fact("n01", "error_cqe", 4, None)]
    rows += [_fact(n, "notify_wait_timeout", 4, None, remote=True) for n in ("n00", "n01")]
    rows += [_fact(n, "launcher_exit", 1, None) for n in ("n00", "n01")]
    counts, activity = _pair(rows)
    scored = {"error_cqe", "notify_wait_timeout", "launcher_exit"}
    flagged = counts.assign(scored=counts["event_id"].isin(scored))
    assert _order(flagged, activity, SpatialConfig())[0] == ["n01", "n00"]
    ranked = rank_units("job-p", flagged, activity, SpatialConfig())
    assert ranked["signals"].iloc[0] == ["isolated: score 0.750, logs 1 candidate event(s) the other unit does not: "
                                         "error_cqe"]
    assert _order(counts, activity, SpatialConfig())[0] == ["n00", "n01"]
    assert _order(flagged, activity, SpatialConfig(pair_scored_events=False))[0] == ["n00", "n01"]
    # larger jobs: the flag changes nothing
    eight = _neighbour_job()
    pd.testing.assert_frame_equal(rank_units("job-x", eight.assign(scored=False), _activity(8), SpatialConfig()),
                                  rank_units("job-x", eight, _activity(8), SpatialConfig()))


def test_the_pair_isolation_weight_leaves_larger_jobs_alone():
    counts, activity = _neighbour_job(), _activity(8)
    pd.testing.assert_frame_equal(rank_units("job-x", counts, activity, SpatialConfig()),
                                  rank_units("job-x", counts, activity, SpatialConfig(pair_isolation_weight=1.0)))


def test_the_pair_isolation_weight_is_a_conf_number_at_least_0(tmp_path):
    from l4spark.config import load_config

    path = tmp_path / "pair.toml"
    path.write_text("[spatial]\npair_isolation_weight = 1.0\n")
    assert load_config(path).spatial.pair_isolation_weight == 1.0
    assert load_config().spatial.pair_isolation_weight == 0.4
    with pytest.raises(ConfigError, match="spatial.pair_isolation_weight"):
        SpatialConfig(pair_isolation_weight=-0.1)


def test_without_remote_patterns_the_survivors_peer_failed_lines_count_for_the_survivor():
    # the flag was stored with the patterns of its day; no patterns must mean no remote event
    # (isolation at full weight, as when the rule was written: session 15)
    counts, activity = _pair([_fact("n01", "cuda_error", 1, 900.0),
                              _fact("n00", "nccl_remote_error", 8, 960.0, remote=True),
                              _fact("n00", "watchdog_timeout", 8, 961.0, remote=True)])
    full = SpatialConfig(pair_isolation_weight=1.0)
    assert _order(counts, activity, full) == (["n01", "n00"], [0.75, 0.25])  # 3 points to 0
    assert _order(counts, activity, SpatialConfig(remote_patterns=(), pair_isolation_weight=1.0)) == (
        ["n00", "n01"], [0.5833, 0.4167])


def test_without_the_quiet_rule_rank_0s_info_lines_of_its_own_count_for_it():
    counts, activity = _pair([_fact("n00", "resume_banner", 1, 10.0, loud=False),
                              _fact("n00", "config_echo", 40, 11.0, loud=False),
                              _fact("n01", "xid_79", 2, 900.0)])
    full = SpatialConfig(pair_isolation_weight=1.0)  # isolation at full weight, as in session 15
    assert _order(counts, activity, full) == (["n01", "n00"], [0.75, 0.25])  # 1 point to 0
    assert _order(counts, activity, SpatialConfig(pair_quiet_for_nobody=False, pair_isolation_weight=1.0)) == (
        ["n00", "n01"], [0.5833, 0.4167])


def test_a_lead_in_time_outweighs_a_peers_larger_share_of_events():
    # timing_weight 0.3 (session 19; 0.1 before): n01 fails 10 minutes before n00 with one CUDA
    # line, n00's own tracebacks are 2 events to 1. Isolation gives n00 0.5833 and n01 0.4167
    # (at full weight; 0.5333 and 0.4667 at the pair weight 0.4 of session 20); the lead adds
    # 0.3 (0.1 was not enough at full weight), with pair silence left out so time alone decides
    counts, activity = _pair([_fact("n01", "cuda_error", 1, 990.0), _fact("n00", "proxy_trace", 40, 1590.0),
                              _fact("n00", "abort", 4, 1591.0)], last_s={0: 1600.0, 1: 1000.0})
    assert _order(counts, activity, SpatialConfig(pair_silence=False, pair_isolation_weight=1.0)) == (
        ["n01", "n00"], [0.7167, 0.5833])
    assert _order(counts, activity, SpatialConfig(pair_silence=False)) == (["n01", "n00"], [0.7667, 0.5333])


def test_without_pair_silence_the_node_that_stopped_first_is_not_silent_and_rank_0s_peer_is_truncated():
    # n01 dies with one CUDA line 10 minutes before n00, whose own tracebacks outnumber it (n01's
    # earlier failure onset adds the timing weight, small_job_timing)
    counts, activity = _pair([_fact("n01", "cuda_error", 1, 990.0), _fact("n00", "proxy_trace", 40, 1590.0),
                              _fact("n00", "abort", 4, 1591.0)], last_s={0: 1600.0, 1: 1000.0})
    defaults = SpatialConfig()
    timed = defaults.timing_weight
    weight = defaults.pair_isolation_weight
    assert _order(counts, activity, defaults) == (["n01", "n00"], [
        round(0.5 - weight * 0.25 / 3 + defaults.silence_weight + timed, 4), round(0.5 + weight * 0.25 / 3, 4)])
    # without the rule, at session 15's weights (timing 0.1, isolation in full), n00's tracebacks
    # outweigh n01's lead
    assert _order(counts, activity, SpatialConfig(pair_silence=False, timing_weight=0.1, pair_isolation_weight=1.0)) \
        == (["n00", "n01"], [0.5833, 0.5167])
    # as before session 15, the two are one group of peers: the midpoint, a spread of half the
    # gap (never silent by time) and a line median, by which rank 0's peer is truncated
    by_role = _activity(2, n_lines={0: 7200, 1: 333}).set_index("node")
    assert silence(by_role, SpatialConfig(pair_silence=False))["truncated"].tolist() == [False, True]
    assert not silence(by_role, defaults)["truncated"].any()


def test_a_node_down_whose_one_error_line_is_untimed_and_early_is_silent():
    # issue #18 (h21003, 22013): the dead store host n00 stopped 700 s before its peers; its one
    # error line, pip's resolver banner at the top of rank 0's file, has no timestamp, but the
    # timed lines after it date it to the first seconds of the job. The peers wrote timed errors
    # as the job went down, and name nobody
    counts = _counts(_healthy_counts(8) + [(f"n{i:02d}", "watchdog", 4) for i in range(1, 8)])
    activity = _activity(8, last_s={0: 300.0}).assign(
        last_error_s=[np.nan] + [990.0] * 7, last_error_by_s=[5.0] + [990.0] * 7)
    assert silence(activity.set_index("node"), SpatialConfig())["silent"].tolist() == [True] + [False] * 7
    assert rank_units("job-u", counts, activity, SpatialConfig()).iloc[0]["node"] == "n00"
    # the switch off: only timestamped error lines date the last error, and n00 has none (loud)
    assert not silence(activity.set_index("node"), SpatialConfig(untimed_errors_dated=False))["silent"].any()
    # an untimed error after the unit's last timed line has no date: it may have gone down with it
    undated = activity.assign(last_error_by_s=[np.nan] + [990.0] * 7).set_index("node")
    assert not silence(undated, SpatialConfig())["silent"].any()


def test_a_node_down_whose_last_error_lines_are_routine_is_silent():
    # issue #18 (fresh 30909's job-20261105-0034, MindSpeed node_down): n00 went down 7,000 s
    # before its peers; its last error lines are routine noise that normal jobs print too
    # ("ERROR:root:Skipping corrupted sample ..." after its files' last timed lines, a retried
    # checkpoint upload), so the cross-job filter kept none of them. It still logged candidate
    # events (start-up lines no normal job has), so ``candidate_lines`` cannot tell. The peers'
    # own errors are candidates and dated at their end
    activity = _activity(8, last_s={0: 3000.0}).assign(
        n_error=[3] + [2] * 7, last_error_s=[2990.0] + [9990.0] * 7, last_error_by_s=[np.nan] + [9990.0] * 7,
        n_candidate_error=[0] + [2] * 7, last_candidate_error_by_s=[np.nan] + [9990.0] * 7,
        last_s=[3000.0] + [10000.0 + i % 3 for i in range(1, 8)]).set_index("node")
    lines = pd.Series(40, index=activity.index)
    assert silence(activity, SpatialConfig(), candidate_lines=lines)["silent"].tolist() == [True] + [False] * 7
    counts = _counts(_healthy_counts(8) + [(f"n{i:02d}", "watchdog", 4) for i in range(1, 8)])
    first = rank_units("job-r", counts, activity.reset_index(), SpatialConfig()).iloc[0]
    assert first["node"] == "n00" and "before its peers, its error lines no sign of it" in " ".join(first["signals"])
    # the switch off: its undated routine errors may have been the last thing it wrote (loud)
    assert not silence(activity, SpatialConfig(routine_errors_quiet=False), candidate_lines=lines)["silent"].any()
    # one candidate error line among them, at its end: it went down with it (a loud crash)
    loud = activity.assign(n_candidate_error=[1] + [2] * 7, last_candidate_error_by_s=[2999.0] + [9990.0] * 7)
    assert not silence(loud, SpatialConfig(), candidate_lines=lines)["silent"].any()
    # ... and one long before its end: dated, so silent again
    early = loud.assign(last_candidate_error_by_s=[100.0] + [9990.0] * 7)
    assert silence(early, SpatialConfig(), candidate_lines=lines)["silent"].tolist() == [True] + [False] * 7
    # ``untimed_errors_dated`` off: the timestamped candidate error lines alone date it, as every
    # error line is dated by its timestamp alone then (spatial_eval's ablations build dated caches)
    timed = dict(untimed_errors_dated=False)
    for at, silent in ((2999.0, False), (100.0, True)):
        by_stamp = early.assign(last_candidate_error_s=[at] + [9990.0] * 7)
        assert silence(by_stamp, SpatialConfig(**timed), candidate_lines=lines)["silent"].iloc[0] == silent


def _dead_node_job(stop_s: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Four nodes; n02 goes down (kernel panic) at ``stop_s`` and writes nothing more; the peers'
    NCCL watchdogs time out on it 40-45 s later, n01's first, and take their ranks down. No
    line names anybody (the simulator's node_down of fresh seeds 26021, 26031, 26035)."""
    rows = []
    for i in range(4):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0 + 0.01 * i), _fact(node, "iteration", 200, 20.0)]
    for node, t in (("n01", 985.0), ("n00", 989.0), ("n03", 989.5)):
        rows += [_fact(node, "watchdog_timeout", 8, t), _fact(node, "take_down", 8, t + 0.1),
                 _fact(node, "abort", 4, t + 0.2)]
    facts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    activity = _activity(4, last_s={0: 990.0, 1: 986.0, 2: stop_s, 3: 990.0}, n_error={2: 0},
                         first_error_s={2: np.nan})
    return facts, activity


def test_a_dead_node_failed_when_it_stopped_not_when_its_peers_timed_out():
    # issue #18, node_down: n02 stopped 45 s before its peers without a word. Its stop is its
    # failure onset (stop_is_onset), so it failed first, 40 s before n01's watchdog
    facts, activity = _dead_node_job(945.0)
    ranked = rank_units("job-d", facts, activity, SpatialConfig()).set_index("node")
    assert ranked["rank"].idxmin() == "n02"
    assert bool(ranked.loc["n02", "silent"]) and ranked.loc["n02", "onset_lag_s"] == 0.0
    assert ranked.loc["n01", "onset_lag_s"] == pytest.approx(40.0, abs=0.01)  # clocks aligned on init
    assert "failed first, 40.0 s before the next unit" in ranked.loc["n02", "signals"]
    # session 25's ranking: silent only after a minute, and a silent unit without an onset
    before = SpatialConfig(silent_min_gap_s=60.0, stop_is_onset=False)
    assert rank_units("job-d", facts, activity, before).iloc[0]["node"] == "n01"
    # each part alone: silence after 30 s is not enough to outweigh n01's lead in time, and the
    # stop is no onset while the unit is not found silent
    assert rank_units("job-d", facts, activity, SpatialConfig(stop_is_onset=False)).iloc[0]["node"] == "n01"
    assert rank_units("job-d", facts, activity, SpatialConfig(silent_min_gap_s=60.0)).iloc[0]["node"] == "n01"
    # a node that stopped with its peers (the last line of a quiet rank seconds before the end)
    # has no onset of its own: the peers' watchdogs decide, as before
    close, near = _dead_node_job(975.0)
    ranked = rank_units("job-d", close, near, SpatialConfig()).set_index("node")
    assert not ranked.loc["n02", "silent"] and np.isnan(ranked.loc["n02", "onset_lag_s"])
    assert ranked["rank"].idxmin() == "n01"


def test_a_unit_that_stopped_after_another_began_to_fail_is_not_silent():
    # issue #18 (fresh 32003, MindSpeed invalid_rank_table): n03's ranks fail at 930 s with errors
    # of their own; n02 stops 15 s later without a candidate error (taken down with the job) while
    # n00 and n01 run on to their watchdogs. Stopped early, but after n03 began to fail: its quiet
    # end says nothing about it, and it is no dead node that failed first
    facts, activity = _dead_node_job(945.0)
    own = pd.DataFrame([_fact("n03", "rank_table_error", 4, 930.0), _fact("n03", "trace", 8, 930.1),
                        _fact("n03", "abort", 4, 930.2)], columns=UNIT_FACTS_COLUMNS[1:])
    facts = pd.concat([facts[facts["node"] != "n03"], own], ignore_index=True)
    activity = activity.assign(last_s=[990.0, 986.0, 945.0, 931.0])
    ranked = rank_units("job-d", facts, activity, SpatialConfig()).set_index("node")
    assert not ranked.loc["n02", "silent"] and ranked["rank"].idxmin() == "n03"
    # the switch off (sessions 31 and before): n02 is silent, its stop its onset
    before = rank_units("job-d", facts, activity, SpatialConfig(stop_before_onsets=False)).set_index("node")
    assert before.loc["n02", "silent"] and before.loc["n02", "combined_score"] > ranked.loc["n02", "combined_score"]
    # a dead node stops before anyone fails: the rule keeps it silent and first
    facts, activity = _dead_node_job(945.0)
    assert rank_units("job-d", facts, activity, SpatialConfig()).iloc[0]["node"] == "n02"


def test_a_unit_that_stopped_alone_first_is_silent_whatever_the_spread_of_the_others():
    # issue #18 (fresh 33001, HF Trainer node_down of 8 nodes): rank 0's node n00 went down at
    # -179 s; four peers crashed loudly at -103 to -83 s, three hung until killed at about 0 s.
    # The others' median is -83 s, their spread (MAD) 20 s: 96 s early is under five spreads
    ends = {0: -179.3, 1: -82.9, 2: -3.4, 3: -103.0, 4: -99.1, 5: -85.9, 6: 0.0, 7: -1.6}
    activity = _activity(8, last_s=ends, n_error={0: 0, 2: 0, 6: 0, 7: 0}).set_index("node")
    assert silence(activity, SpatialConfig())["silent"].tolist() == [True] + [False] * 7
    assert not silence(activity, SpatialConfig(silent_first_alone=False))["silent"].any()
    # 76 s before the first other end is the margin; one within silent_min_gap_s of it is not alone
    close = _activity(8, last_s={**ends, 0: -120.0}, n_error={0: 0, 2: 0, 6: 0, 7: 0}).set_index("node")
    assert not silence(close, SpatialConfig())["silent"].any()


def test_the_leave_one_out_medians_and_minimum_equal_the_loops_they_replace():
    # silence_without_self and silent_first_alone per unit, by dropping the unit (session 32's
    # first version: O(n^2), 4.3 s for 4,096 units), against the vectorised forms
    from l4spark.spatial.signals import _others_median, _others_min

    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 5, 8, 33):
        for _ in range(40):
            values = np.round(rng.normal(1000.0, 50.0, n), 0 if rng.random() < 0.5 else 3)  # ties half the time
            values[rng.random(n) < 0.2] = np.nan
            series = pd.Series(values)
            loop_median = [series.drop(index=i).median() for i in range(n)]
            loop_min = [series.drop(index=i).min() for i in range(n)]
            np.testing.assert_allclose(_others_median(values), loop_median, equal_nan=True)
            np.testing.assert_allclose(_others_min(values), loop_min, equal_nan=True)
            ref = _others_median(values)
            for i in range(n):
                if not np.isnan(ref[i]):
                    others = series.drop(index=i)
                    mad = _others_median(np.abs(values - ref[i]))[i]
                    assert mad == pytest.approx((others - ref[i]).abs().median())


def test_a_unit_not_timestamped_to_its_end_is_not_silent_by_time():
    # issue #18 (26031, MindSpeed loss_nan): n02's files carry timestamps only at start-up and
    # hours of untimed iteration lines after them (ts_cover 0.5): its last timestamp is no stop
    activity = _activity(4, last_s={2: 300.0}, n_error={2: 0}).set_index("node").assign(ts_cover=[1.0, 1.0, 0.5, 0.97])
    assert not silence(activity, SpatialConfig())["silent"].any()
    assert silence(activity, SpatialConfig(silence_needs_cover=False))["silent"].tolist() == [False, False, True, False]
    # timestamped to its end (at least timestamp_cover), the same stop is silence
    assert silence(activity.assign(ts_cover=0.95), SpatialConfig())["silent"].tolist() == [False, False, True, False]
    # and the uncovered unit gets no stop as its onset either: nobody is timed by it
    facts, dead = _dead_node_job(945.0)
    uncovered = dead.assign(ts_cover=[1.0, 1.0, 0.5, 1.0])
    ranked = rank_units("job-d", facts, uncovered, SpatialConfig()).set_index("node")
    assert not ranked.loc["n02", "silent"] and np.isnan(ranked.loc["n02", "onset_lag_s"])


def test_silence_judges_a_unit_against_the_others_of_its_group_without_itself():
    # 22013's job-20261105-0029 (node_down of rank 0's node): n00 stopped 104 s before two
    # peers, and the last stage's node n02 logged 450 s longer; with n00 in its own median and
    # spread (a MAD of 52 s over four units) it needed 386 s to be silent
    activity = _activity(4, last_s={0: 446.0, 1: 550.0, 2: 1000.0, 3: 550.2}, n_error={0: 0}).set_index("node")
    assert not silence(activity, SpatialConfig(silence_without_self=False, silent_first_alone=False))["silent"].any()
    # (it stopped 104 s before every other unit's end: silent_first_alone finds it on its own too)
    assert silence(activity, SpatialConfig(silence_without_self=False))["silent"].tolist() == [True, False, False, False]
    result = silence(activity, SpatialConfig(silence_without_self=True, silent_first_alone=False))
    assert result["silent"].tolist() == [True, False, False, False]
    assert result.loc["n00", "silent_gap_s"] == pytest.approx(104.2)  # the others' median, 550.2
    # a pair is still judged by pair_silence alone (each against the other), whatever the switch
    pair = _activity(2, last_s={1: 900.0}, n_error={1: 0}).set_index("node")
    assert silence(pair, SpatialConfig(pair_silence=False, silence_without_self=True))["silent"].tolist() == \
        silence(pair, SpatialConfig(pair_silence=False, silence_without_self=False))["silent"].tolist()


def test_without_silence_despite_errors_a_node_down_long_after_its_last_error_is_not_silent():
    # n02 wrote its errors in the first minutes and stopped 700 s before its peers
    counts = _counts(_healthy_counts(8) + [("n01", "ib_error", 6), ("n03", "ib_error", 6)])
    activity = _activity(8, last_s={2: 300.0}, n_error={2: 3}).assign(
        last_error_s=[100.0 if i == 2 else 990.0 for i in range(8)])
    assert rank_units("job-s", counts, activity, SpatialConfig()).iloc[0]["node"] == "n02"
    assert rank_units("job-s", counts, activity, SpatialConfig(silent_despite_errors=False)).iloc[0]["node"] != "n02"
    # the other exception (errors that are no candidate lines) goes with it
    lines = pd.Series(40, index=[f"n{i:02d}" for i in range(8)]).mask(lambda x: x.index == "n02", 0)
    alone = activity.drop(columns=["last_error_s"]).set_index("node")
    assert silence(alone, SpatialConfig(), lines)["silent"]["n02"]
    assert not silence(alone, SpatialConfig(silent_despite_errors=False), lines)["silent"].any()
    # of two units, pair silence already counts a stop with errors: this rule changes no pair
    pair = _activity(2, last_s={1: 300.0}).assign(last_error_s=100.0).set_index("node")
    assert silence(pair, SpatialConfig(silent_despite_errors=False))["silent"].tolist() == [False, True]


def test_spatial_eval_re_ranks_cached_inputs_under_each_left_out_rule():
    from l4spark.evaluation.spatial_eval import PAIR_VARIANTS, Ranker, ablations

    defaults = SpatialConfig()
    variants = ablations(defaults)
    changed = {name: {f for f in ("remote_patterns", "pair_quiet_for_nobody", "pair_silence", "silent_despite_errors",
                                  "small_job_timing", "pair_onset_without_remote", "blame_follows_onsets",
                                  "pair_isolation_weight", "store_client_not_blame", "untimed_errors_dated",
                                  "stop_is_onset", "silent_min_gap_s")
                      if getattr(variants[name], f) != getattr(defaults, f)} for name in PAIR_VARIANTS}
    assert changed == {"- remote patterns (pairs)": {"remote_patterns"},
                       "- quiet for nobody (pairs)": {"pair_quiet_for_nobody"},
                       "- pair silence": {"pair_silence"}, "- silent despite errors": {"silent_despite_errors"},
                       "- all three pair rules": {"remote_patterns", "pair_quiet_for_nobody", "pair_silence"},
                       "- small-job timing": {"small_job_timing"},
                       "- pair onsets without remote": {"pair_onset_without_remote"},
                       "- blame follows onsets": {"blame_follows_onsets"},
                       "- pair isolation weight": {"pair_isolation_weight"},
                       "± store-client names": {"store_client_not_blame"},
                       "± untimed errors dated": {"untimed_errors_dated"},
                       "± dated, ± store-client": {"untimed_errors_dated", "store_client_not_blame"},
                       "± stop is onset": {"stop_is_onset"}, "± silent after 60 s": {"silent_min_gap_s"}}
    # a cached fleet of one two-node job: its remote flags were set in Spark
    counts, activity = _pair([_fact("n01", "cuda_error", 1, 900.0),
                              _fact("n00", "nccl_remote_error", 8, 960.0, remote=True),
                              _fact("n00", "watchdog_timeout", 8, 961.0, remote=True)])
    ranker = Ranker({"fleet": {"facts": counts.assign(job_id="job-p"), "activity": activity.assign(job_id="job-p")}})
    firsts = {name: ranker.rankings(variants[name])["job-p"][0] for name in (next(iter(variants)), *PAIR_VARIANTS)}
    assert firsts == {"l4spark (role)": "n01", "- remote patterns (pairs)": "n00", "- quiet for nobody (pairs)": "n01",
                      "- pair silence": "n01", "- silent despite errors": "n01", "- all three pair rules": "n00",
                      "- small-job timing": "n01", "- pair onsets without remote": "n01",
                      "- blame follows onsets": "n01", "- pair isolation weight": "n01",
                      "± store-client names": "n01", "± untimed errors dated": "n01", "± dated, ± store-client": "n01",
                      "± stop is onset": "n01", "± silent after 60 s": "n01"}


def test_spatial_eval_sweeps_one_setting_and_counts_the_jobs_each_value_gains_and_loses():
    from l4spark.evaluation.spatial_eval import GRID, Ranker, parse_sweep, sweep_table

    assert "behind_weight" in GRID  # --lofo chooses it with the other weights
    defaults = SpatialConfig()
    # a two-node job whose faulty unit n01 is first only while the remote rules hold
    counts, activity = _pair([_fact("n01", "cuda_error", 1, 900.0),
                              _fact("n00", "nccl_remote_error", 8, 960.0, remote=True),
                              _fact("n00", "watchdog_timeout", 8, 961.0, remote=True)])
    ranker = Ranker({"fleet": {"facts": counts.assign(job_id="job-p"), "activity": activity.assign(job_id="job-p")}})
    faulty, family = {"job-p": ("n01",)}, {"job-p": {"framework": "megatron", "fault class": "accelerator"}}
    key, values = parse_sweep("pair_silence=true,false", defaults)
    assert (key, values) == ("pair_silence", [True, False])
    table = sweep_table(ranker, defaults, key, values, faulty, family)
    lines = {line.split()[0] + " " + line.split()[1]: line.split()[-2:] for line in table.splitlines()[1:]}
    assert lines["all 1"] == ["1", "1"] and lines["framework megatron"] == ["1", "1"]
    removed = sweep_table(ranker, dataclasses.replace(defaults, remote_patterns=()), "pair_silence", [True],
                          faulty, family)
    assert removed.splitlines()[1].split()[-1] == "0"  # without the remote rules the survivor is first
    key, values = parse_sweep("silent_min_gap_s=15,30", defaults)
    assert values == [15.0, 30.0]
    for bad in ("nonsense=1", "behind_weight=", "behind_weight=x", "behind_weight=-1", "pair_silence=yes",
                "remote_patterns=1"):
        with pytest.raises(SystemExit, match="--sweep"):
            parse_sweep(bad, defaults)


def _cached_fleet(root: Path, name: str, job_id: str, faulty: str) -> Path:
    """A generated fleet's labels and its cached spatial_eval inputs: one two-node job."""
    fleet = root / name
    (fleet / "_labels").mkdir(parents=True)
    (fleet / "_labels" / f"{job_id}.json").write_text(json.dumps({
        "job_id": job_id, "fault_class": "node", "fault_kind": "node_down", "faulty_nodes": [faulty],
        "failure_stage": "training", "indicating_messages": [], "framework": "megatron"}))
    counts, activity = _pair([_fact(faulty, "cuda_error", 1, 900.0)])
    cache = root / f"{name}.warehouse" / "_spatial_inputs"
    cache.mkdir(parents=True)
    baselines = activity[["node", "process_rank"]].assign(method="error_time", rank=[1, 2])
    for table, frame in {"facts": counts, "activity": activity.assign(last_error_s=900.0, last_error_by_s=900.0,
                                                                  last_candidate_error_s=900.0),
                          "baselines": baselines}.items():
        frame.assign(job_id=job_id).to_parquet(cache / f"{table}.parquet")
    from l4spark.evaluation.spatial_eval import cache_settings

    (cache / "settings.json").write_text(json.dumps(cache_settings(SpatialConfig())))
    return fleet


def test_spatial_eval_keeps_apart_jobs_of_two_fleets_with_the_same_id(tmp_path):
    # seeds 17003 and 17005 both have job-20261105-0027-mixtral8x7b; merged by bare id, one
    # replaced the other (101 jobs instead of 102)
    from l4spark.evaluation.spatial_eval import Ranker, load_fleets

    fleets = [_cached_fleet(tmp_path, "f1", "job-a", "n01"), _cached_fleet(tmp_path, "f2", "job-a", "n00")]
    labels, faulty, family, inputs = load_fleets(fleets, SpatialConfig(), "local[1]")  # from the cache: no Spark
    assert faulty == {"f1/job-a": ("n01",), "f2/job-a": ("n00",)}
    assert set(labels) == set(family) == set(faulty)
    assert {j: order[0] for j, order in Ranker(inputs).rankings(SpatialConfig()).items()} == {"f1/job-a": "n01",
                                                                                             "f2/job-a": "n00"}


def test_the_pair_rule_switches_are_true_or_false():
    for key in ("pair_quiet_for_nobody", "pair_silence", "silent_despite_errors", "small_job_timing", "pair_scored_events",
                "pair_onset_without_remote", "blame_follows_onsets", "store_client_not_blame", "untimed_errors_dated",
                "silence_without_self", "routine_errors_quiet", "uncovered_later_onsets", "lone_roles_own_events",
                "stop_before_onsets", "silence_needs_cover", "silent_first_alone"):
        with pytest.raises(ConfigError, match=f"spatial.{key}: expected true or false"):
            SpatialConfig(**{key: "false"})


@pytest.mark.parametrize("key", ["pair_onset_without_remote", "blame_follows_onsets"])
def test_the_session_17_and_18_rules_are_conf_switches_on_by_default(tmp_path, key):
    from l4spark.config import load_config

    path = tmp_path / "rule.toml"
    path.write_text(f"[spatial]\n{key} = false\n")
    assert getattr(load_config(path).spatial, key) is False
    assert getattr(load_config().spatial, key) is True
    path.write_text(f'[spatial]\n{key} = "no"\n')
    with pytest.raises(ConfigError, match=f"spatial.{key}"):
        load_config(path)


def test_the_store_client_rule_is_a_conf_switch_on_by_default(tmp_path):
    from l4spark.config import load_config

    path = tmp_path / "rule.toml"
    path.write_text("[spatial]\nstore_client_not_blame = false\n")
    assert load_config(path).spatial.store_client_not_blame is False
    assert load_config().spatial.store_client_not_blame is True


def test_untimed_error_dating_is_a_conf_switch(tmp_path):
    from l4spark.config import load_config

    path = tmp_path / "rule.toml"
    path.write_text("[spatial]\nuntimed_errors_dated = false\n")
    assert load_config(path).spatial.untimed_errors_dated is False
    assert load_config().spatial.untimed_errors_dated is SpatialConfig().untimed_errors_dated


def test_clock_offsets_come_from_early_events_not_from_the_failure():
    # n2's clock is 10 s ahead; n1 really fails 2 s before the others at the end of the job
    first_seen = pd.DataFrame({"init": [0.0, 0.0, 10.0, 0.0], "load": [50.0, 50.0, 60.0, 50.0],
                               "abort": [1000.0, 998.0, 1010.0, 1000.0], "trace": [1000.5, 998.5, 1010.5, 1000.5],
                               "kill": [1001.0, 999.0, 1011.0, 1001.0]},
                              index=["n0", "n1", "n2", "n3"])
    activity = pd.DataFrame({"first_s": [0.0, 0.0, 10.0, 0.0], "last_s": [1001.0, 999.0, 1011.0, 1001.0]},
                            index=first_seen.index)
    assert clock_offsets(first_seen, activity).tolist() == [0.0, 0.0, 10.0, 0.0]
    # over every event (more failure events than start-up ones), n1's lead would be taken for skew
    everything = first_seen.sub(first_seen.median(axis=0), axis=1).median(axis=1)
    assert everything["n1"] == -2.0


def test_clock_offsets_come_from_the_early_events_every_unit_logs():
    # issue #18 (fresh 36087, HF Trainer IB error): clocks within a second, but the early events
    # at least half the units logged included a throttle notice four nodes printed hours apart
    # (mce) and a warning each rank prints when its model has loaded (tens of seconds apart);
    # n1's median over them was a 34 s "skew", and its failure, 8 s after n0's, came first
    skew = {"n0": -0.2, "n1": -0.1, "n2": 0.0, "n3": 3.0, "n4": -0.6, "n5": 0.1}
    units = list(skew)
    lifecycle = {unit: 100.0 + s for unit, s in skew.items()}
    first_seen = pd.DataFrame({
        "args": lifecycle, "nccl_init": {u: t + 40.0 for u, t in lifecycle.items()},
        "model_loaded": {"n0": 3900.0, "n1": 3934.0, "n2": 3901.0, "n3": 3909.0, "n4": 3894.0, "n5": 3903.0},
        "throttled": {"n0": 7000.0, "n1": 16070.0, "n3": 12677.0, "n5": 20000.0},
        "throttle_end": {"n0": 7001.0, "n1": 16071.0, "n3": 12678.0, "n5": 20001.0}}).loc[units]
    activity = pd.DataFrame({"first_s": first_seen["args"], "last_s": [50000.0] * 6}, index=units)
    every = clock_offsets(first_seen, activity, every_unit=True)
    assert (every - every["n2"]).round(3).to_dict() == skew  # against the job's median clock
    half = clock_offsets(first_seen, activity)
    assert half["n1"] > 30.0
    # no early event that every unit logs: those of half the units, as before
    assert clock_offsets(first_seen.drop(columns=["args", "nccl_init", "model_loaded"]).assign(
        args=first_seen["args"].where(first_seen.index != "n4")), activity, every_unit=True).equals(
        clock_offsets(first_seen.drop(columns=["args", "nccl_init", "model_loaded"]).assign(
            args=first_seen["args"].where(first_seen.index != "n4")), activity))


def test_failure_onset_is_the_first_burst_of_new_events_at_a_units_end():
    config = SpatialConfig()
    activity = pd.DataFrame({"first_s": [0.0] * 4, "last_s": [1000.0] * 4, "ts_cover": [1.0, 1.0, 1.0, 0.5]},
                            index=["a", "b", "c", "d"])
    first_seen = pd.DataFrame({
        "routine": [5.0, 5.0, 5.0, 5.0],
        "perf_warning": [np.nan, 930.0, np.nan, np.nan],  # a lone line before b's real failure
        "ib_error": [np.nan, 950.0, 948.0, 940.0], "trace": [945.0, 950.1, 948.1, 940.1],
        "xid": [944.0, np.nan, np.nan, np.nan]}, index=activity.index)
    onsets = failure_onsets(first_seen, activity, pd.Series(0.0, index=activity.index), config)
    # a: its two events; b: not the lone warning; c: its burst; d: its files stop being timestamped early
    assert onsets.tolist()[:3] == [944.0, 950.0, 948.0] and np.isnan(onsets["d"])
    # the lone warning would make b first
    assert failure_onsets(first_seen, activity, pd.Series(0.0, index=activity.index),
                          SpatialConfig(burst_events=1))["b"] == 930.0
    # fewer than min_timed_units onsets: nothing to compare
    assert failure_onsets(first_seen, activity, pd.Series(0.0, index=activity.index),
                          SpatialConfig(min_timed_units=4)).isna().all()


def test_a_unit_not_covered_by_timestamps_counts_as_timed_when_later_than_the_first():
    # issue #18 (MindSpeed hccl_timeout, 3 nodes): n1's rank files end in untimed tracebacks
    # (ts_cover 0.74), so its onset was unknown, and of three units two onsets are too few:
    # nobody was timed, though n0's failure began ten minutes before anyone else's. n1's untimed
    # tail was written after its timed lines, so its timed onset is the earliest it can have
    # failed: later than n0's, it shows n1 did not fail first. Like a reaction, it counts as timed
    # for the number needed, without an onset of its own (how much later is not known)
    activity = pd.DataFrame({"first_s": [0.0] * 3, "last_s": [9990.0] * 3, "ts_cover": [0.97, 0.74, 0.94]},
                            index=["n0", "n1", "n2"])
    first_seen = pd.DataFrame({"routine": [5.0] * 3, "cqe_error": [9390.0, np.nan, np.nan],
                               "acl_error": [9390.2, np.nan, np.nan], "notify_timeout": [9989.0, 9987.0, 9987.5],
                               "launcher_exit": [9990.0, 9988.0, 9988.5]}, index=activity.index)
    offsets = pd.Series(0.0, index=activity.index)
    onsets = failure_onsets(first_seen, activity, offsets, SpatialConfig())
    assert onsets["n0"] == 9390.0 and np.isnan(onsets["n1"]) and onsets["n2"] == 9987.5  # n1 counts, unscored
    # the switch off: n1 has no onset, and two of three units are too few
    assert failure_onsets(first_seen, activity, offsets, SpatialConfig(uncovered_later_onsets=False)).isna().all()
    # a timed onset earlier than the first covered unit's shows nothing (its tail may be later or not)
    early = first_seen.assign(cqe_error=[np.nan, 9380.0, np.nan], acl_error=[np.nan, 9380.1, np.nan])
    assert failure_onsets(early, activity, offsets, SpatialConfig()).isna().all()
    # compared on aligned clocks: n1's clock 700 s behind puts its timed onset before n0's
    skewed = pd.Series([0.0, 700.0, 0.0], index=activity.index)
    assert failure_onsets(first_seen, activity, skewed, SpatialConfig()).isna().all()
    # one covered unit among uncovered ones: nothing to confirm (fresh 32003, a Megatron hang of
    # 13 nodes whose non-logging ranks are timed only at start-up; the one covered node, the last
    # stage's, was first for being the only one timed)
    sparse = activity.assign(ts_cover=[0.97, 0.74, 0.70])
    assert failure_onsets(first_seen, sparse, offsets, SpatialConfig()).isna().all()
    # an uncovered unit that stopped early has its stop as its onset, and counts once: n1 stopped,
    # n2's timed onset is before n0's, so n0 and n1 are two of three units, too few
    stopped = pd.Series([False, True, False], index=activity.index)
    n2_early = first_seen.assign(cqe_error=[9390.0, np.nan, 9380.0], acl_error=[9390.2, np.nan, 9380.1])
    assert failure_onsets(n2_early, sparse.assign(last_s=[9990.0, 9988.0, 9990.0]), offsets, SpatialConfig(),
                          stopped=stopped).isna().all()


def test_address_book_learns_addresses_from_identity_lines_only():
    mentions = pd.DataFrame(
        [(f"n{i}", "bootstrap", f"ip:10.0.0.{i}") for i in range(4)]
        + [(f"n{i}", "master_addr", "ip:10.0.0.99") for i in range(4)]  # everyone names the master
        + [("n1", "ib_error", "ip:10.0.0.2"), ("n1", "ib_error", "ip:10.0.0.1")],
        columns=["node", "event_id", "token"])
    assert address_book(mentions, ["n0", "n1", "n2", "n3"]) == {f"10.0.0.{i}": f"n{i}" for i in range(4)}


def test_address_book_learns_the_address_a_nodes_own_lines_state():
    # no identity line (NCCL_DEBUG below INFO): each node's IB completion errors state its own
    # RoCE address (localGid) and name the far end's; an address two nodes claim is nobody's
    mentions = pd.DataFrame(
        [("n1", "ib_error", "self:10.0.0.1"), ("n1", "ib_error", "ip:10.0.0.1"), ("n1", "ib_error", "ip:10.0.0.2"),
         ("n2", "ib_error", "self:10.0.0.2"), ("n2", "ib_error", "ip:10.0.0.2"), ("n2", "ib_error", "ip:10.0.0.1"),
         ("n2", "ib_error", "self:10.0.0.7"), ("n3", "ib_error", "self:10.0.0.7")],
        columns=["node", "event_id", "token"])
    assert address_book(mentions, ["n0", "n1", "n2", "n3"], by_elimination=False) == {"10.0.0.1": "n1", "10.0.0.2": "n2"}


def test_self_address_patterns_read_only_the_printing_nodes_own_address():
    import re

    patterns = [re.compile(p) for p in SpatialConfig().self_address_patterns]
    own = {  # real texts (sources in SpatialConfig.self_address_patterns) -> the printing node's addresses
        "NET/IB : Got completion from peer 10.5.0.34<33956> with error 5, opcode 0, len 1, vendor err 244 (Recv) "
        "localGid ::ffff:10.6.0.35 remoteGid ::ffff:10.5.0.34": {"10.6.0.35"},
        "NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send) "
        "localGid ::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1": {"10.99.92.59"},
        "[c10d] recvValue failed on SocketImpl(fd=63, addr=[10.1.0.4]:42318, remote=[10.1.0.1]:29500): Connection "
        "reset by peer": {"10.1.0.4"},
        "An error CQE occurred during operator execution. Local information: server 10.78.106.107, device ID 0, device "
        "IP 192.168.200.100. Peer information: server 10.78.106.111, device ID 0, device IP 192.168.200.101.":
            {"10.78.106.107"},
        # a host name, an IPv6 GID of InfiniBand: no IPv4 address stated
        "[c10d] recvValue failed on SocketImpl(fd=63, addr=[h2]:42318, remote=[h1]:29500)": set(),
        "NET/IB : Got completion from peer 10.5.0.34<1> with error 12 (Recv) localGid fe80::a288:c203:6b:1f6e": set(),
        "NCCL INFO Bootstrap : Using eth0:10.1.0.1<0>": set(),
    }
    for message, addresses in own.items():
        assert {m for p in patterns for m in p.findall(message)} == addresses, message
    with pytest.raises(ConfigError, match="needs a group"):
        SpatialConfig(self_address_patterns=(r"localGid ::ffff:[0-9.]+",))


def test_address_book_gives_the_one_unknown_peer_address_to_the_one_node_without_an_address():
    # n0 died before it printed anything of itself; its peers' IB errors name it by address
    rows = [(f"n{i}", "ib_error", token) for i in (1, 2, 3)
            for token in (f"self:10.0.0.{i}", f"ip:10.0.0.{i}", "ip:10.0.0.0")]
    mentions = pd.DataFrame(rows, columns=["node", "event_id", "token"])
    nodes = ["n0", "n1", "n2", "n3"]
    assert address_book(mentions, nodes)["10.0.0.0"] == "n0"
    assert "10.0.0.0" not in address_book(mentions, nodes, by_elimination=False)
    # two nodes without an address: nothing is guessed
    assert "10.0.0.0" not in address_book(mentions, [*nodes, "n4"])
    # an address in a line that states no address of its own (an NFS server, say) is no peer
    other = pd.DataFrame([("n1", "nfs_error", "ip:10.9.9.9")], columns=["node", "event_id", "token"])
    assert "10.9.9.9" not in address_book(pd.concat([mentions, other]), [*nodes[1:], "n5"])


def test_a_dead_node_is_blamed_by_the_peers_that_name_its_address():
    activity = pd.DataFrame({"node": ["a", "b", "c", "d"], "ranks": [[0, 1], [2, 3], [4, 5], [6, 7]]},
                            index=["a", "b", "c", "d"])
    rows = []
    for i, unit in ((1, "b"), (3, "d")):   # b and d lost their connections to a; c's link to b broke later
        rows += [(unit, unit, "ib_error", f"self:10.0.0.{i}", 1, 900.0, True),
                 (unit, unit, "ib_error", f"ip:10.0.0.{i}", 1, 900.0, True),
                 (unit, unit, "ib_error", "ip:10.0.0.0", 1, 900.0, True)]
    rows += [("c", "c", "ib_error", "self:10.0.0.2", 1, 910.0, True), ("c", "c", "ib_error", "ip:10.0.0.2", 1, 910.0, True),
             ("c", "c", "ib_error", "ip:10.0.0.1", 1, 910.0, True)]
    mentions = pd.DataFrame(rows, columns=["unit", "node", "event_id", "token", "n_loud", "first_s", "candidate"])
    named = peer_mentions(mentions, activity, pd.Series(0.0, index=activity.index), since=900.0, window_s=60.0)
    assert named["named_by"].to_dict() == {"a": 2, "b": 1, "c": 0, "d": 0}
    assert named.at["a", "names"] == ["ip:10.0.0.0"]


def test_a_listing_of_every_other_node_names_nobody():
    """Fresh 36029's straggler job (three nodes): after the step was cancelled, srun on the first
    node printed ``srun: error: <host>: tasks 4-7: Killed`` for every node. Its name of the
    second node counted as blame (the third's came before that node's failure began), and that
    node was ranked above the straggler. A line that lists every node of the others names nobody;
    one that names one peer still blames it, and so does a listing in a job of two nodes."""
    from l4spark.spatial.config import SpatialConfig

    activity = pd.DataFrame({"node": ["a", "b", "c"], "ranks": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]},
                            index=["a", "b", "c"])
    killed = [("a", "a", "srun_killed", f"host:{n}", 1, 1000.0, True) for n in ("a", "b", "c")]
    mentions = pd.DataFrame(killed, columns=["unit", "node", "event_id", "token", "n_loud", "first_s", "candidate"])
    onsets = pd.Series({"a": 990.0, "b": 995.0, "c": 1010.0})  # c began to fail after the listing
    zero = pd.Series(0.0, index=activity.index)
    before = peer_mentions(mentions, activity, zero, since=990.0, window_s=60.0, onsets=onsets)
    assert before["named_by"].to_dict() == {"a": 0, "b": 1, "c": 0}  # sessions 40 and before
    listed = peer_mentions(mentions, activity, zero, since=990.0, window_s=60.0, onsets=onsets, roll_calls=True)
    assert not listed["named_by"].any()
    assert SpatialConfig().roll_calls_not_blame
    # one peer named: blame
    accused = mentions[mentions["token"] != "host:c"]
    assert peer_mentions(accused, activity, zero, 990.0, 60.0, onsets=onsets, roll_calls=True)["named_by"]["b"] == 1
    # two nodes: the one other node is no listing
    pair = activity.loc[["a", "b"]]
    assert peer_mentions(accused, pair, zero[["a", "b"]], 990.0, 60.0, roll_calls=True)["named_by"]["b"] == 1


def test_a_role_of_one_keeps_its_own_events_once_the_cross_job_filter_ran():
    # issue #18: in a job of three nodes every node is a role of one (rank 0's, the last rank's,
    # the one between), and the candidate events only one role logs were zeroed, as if they were
    # its routine output. n02's GPU fails (an ECC error and a CUDA error only it prints); its peers
    # time out. The cross-job filter has run (the iteration lines are no candidates)
    rows = [(n, "iteration", 200) for n in ("n00", "n01", "n02")]
    rows += [("n00", "nccl_timeout", 4), ("n01", "nccl_timeout", 4), ("n02", "ecc_error", 2), ("n02", "cuda_error", 3)]
    counts = _counts(rows).assign(candidate=[False] * 3 + [True] * 4)
    activity = _activity(3)
    on = rank_units("job-l", counts, activity, SpatialConfig(lone_roles_own_events=True)).set_index("node")
    assert set(on.at["n02", "evidence"]) == {"ecc_error", "cuda_error"}
    assert on.at["n02", "combined_score"] == on.at["n02", "score"] > 0.5
    # off: its own events are zeroed; the forest isolates it for what it lacks (the peers'
    # timeouts), which is no evidence: it counts as ordinary (0.5)
    off = rank_units("job-l", counts, activity, SpatialConfig()).set_index("node")
    assert not any(len(e) for e in off["evidence"]) and off.at["n02", "combined_score"] == 0.5
    # without the filter (every event a candidate) they stay zeroed, switch or not
    unfiltered = rank_units("job-l", counts.drop(columns=["candidate"]), activity, SpatialConfig(lone_roles_own_events=True))
    assert not any(len(e) for e in unfiltered["evidence"])


def test_small_rank_numbers_count_in_an_event_that_numbers_the_jobs_ranks():
    # issue #18 (MindSpeed hccl_timeout, 3 nodes of 4 ranks): every rank's HCCL notify wait names
    # the remote rank it waited for; n1 and n2 wait for n0's ranks (0-3), n0 for n1's. Numbers below
    # the ranks per node were never read (HF Trainer's "Process rank: 3" is a local rank), so
    # only n0's names counted and the healthy n1 was blamed
    activity = pd.DataFrame({"node": ["n0", "n1", "n2"], "ranks": [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]},
                            index=["n0", "n1", "n2"])
    rows = [("n0", "n0", "notify_wait", "rank:4", 1, 1199.0, True), ("n0", "n0", "notify_wait", "rank:5", 1, 1199.0, True),
            ("n1", "n1", "notify_wait", "rank:0", 1, 1197.0, True), ("n2", "n2", "notify_wait", "rank:2", 1, 1197.5, True),
            # a local rank: its event never names a number as large as the ranks per node
            ("n1", "n1", "process_rank", "rank:3", 1, 1190.0, True), ("n2", "n2", "process_rank", "rank:1", 1, 1190.0, True)]
    mentions = pd.DataFrame(rows, columns=["unit", "node", "event_id", "token", "n_loud", "first_s", "candidate"])
    offsets = pd.Series(0.0, index=activity.index)
    named = peer_mentions(mentions, activity, offsets, since=1190.0, window_s=60.0, global_small_ranks=True)
    assert named["named_by"].to_dict() == {"n0": 2, "n1": 1, "n2": 0}
    assert named.at["n0", "names"] == ["rank:0", "rank:2"]
    # off: the first node's ranks are never named
    before = peer_mentions(mentions, activity, offsets, since=1190.0, window_s=60.0)
    assert before["named_by"].to_dict() == {"n0": 0, "n1": 1, "n2": 0}
    # an event whose numbers all stay below the ranks per node names nobody, switch or not
    local = mentions[mentions["event_id"] == "process_rank"]
    assert not peer_mentions(local, activity, offsets, 1190.0, 60.0, global_small_ranks=True)["named_by"].any()


@pytest.mark.spark
def test_unit_mentions_read_the_address_a_line_states_as_its_own(spark):
    rows = [("job-s", "h2", 8, "h2/rank-8.log", 1, T0, "WARN", "ib_error",
             "NCCL WARN NET/IB : Got completion from peer 10.3.2.77<48497> with error 12, opcode 0, len 0, vendor err 129 "
             "(Recv) localGid ::ffff:10.3.2.78 remoteGid ::ffff:10.3.2.77"),
            ("job-s", "h3", 16, "h3/rank-16.log", 1, T0, "WARN", "ib_error_220",
             "NCCL WARN NET/IB: Got completion from peer 10.3.2.77<51161> with status=4 opcode=32614 len=32614 vendor err 81 "
             "(Send) localGid ::ffff:10.3.2.79 remoteGids::ffff:10.3.2.77 hca mlx5_1"),
            ("job-s", "h4", 24, "h4/rank-24.log", 1, T0, None, "cqe",
             "An error CQE occurred during operator execution. Local information: server 10.3.2.80, device ID 2, "
             "device IP 192.168.1.12. Peer information: server 10.3.2.77, device ID 2, device IP 192.168.1.10.")]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)
    mentions = unit_mentions(events, self_address_patterns=SpatialConfig().self_address_patterns).toPandas()
    got = sorted((r.node, r.token) for r in mentions.itertuples() if r.token.startswith("self:"))
    assert got == [("h2", "self:10.3.2.78"), ("h3", "self:10.3.2.79"), ("h4", "self:10.3.2.80")]
    assert not unit_mentions(events).toPandas()["token"].str.startswith("self:").any()


def test_unit_mentions_do_not_read_a_process_group_prefix_as_a_name(spark):
    # Megatron's data-parallel group: global ranks 16, 20, 24 (nodes h4-h6, 4 ranks a node) are its
    # members 4, 5, 6; ProcessGroupNCCL prints that group rank in its own prefix, which names nobody
    # (read as global ranks, 4-6 are node h1's)
    rows = [("job-g", "h4", 16, "h4/rank-16.log", 1, T0, "E", "pg_timeout",
             "[PG ID 4 PG GUID 7(DATA_PARALLEL_GROUP) Rank 4] Process group watchdog thread terminated with exception: "
             "[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=209190, OpType=ALLREDUCE, "
             "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600015 milliseconds before timing out."),
            ("job-g", "h5", 20, "h5/rank-20.log", 1, T0, "E", "pg_last_work",
             "[PG 4 Rank 5] Timeout at NCCL work: 209190, last enqueued NCCL work: 209191, last completed NCCL work: 209189."),
            ("job-g", "h6", 24, "h6/rank-24.log", 1, T0, "ERROR", "old_watchdog",
             "[Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18308, OpType=ALLREDUCE, "
             "Timeout(ms)=1800000) ran for 1800321 milliseconds before timing out."),
            ("job-g", "h6", 24, "h6/rank-24.log", 2, T0, "E", "dump_signal",
             "[PG ID 0 PG GUID 0(default_pg) Rank 24] Received a dump signal due to a collective timeout from rank 9 "
             "and we will try our best to dump the debug info.")]
    mentions = unit_mentions(spark.createDataFrame(rows, MESSAGES_SCHEMA)).toPandas()
    ranks = sorted((r.node, r.token) for r in mentions.itertuples() if r.token.startswith("rank:"))
    assert ranks == [("h6", "rank:9")]  # the rank the dump signal came from is a name
    assert sorted(t for t in mentions["token"] if t.startswith("seq:")) == ["seq:4:209190", "seq:4:209190", "seq::18308"]


def test_peer_mentions_count_other_units_loud_lines_naming_a_unit():
    activity = pd.DataFrame({"node": ["a", "b", "c", "d"], "ranks": [[0, 1], [2, 3], [4, 5], [6, 7]]},
                            index=["a", "b", "c", "d"])
    rows = [(u, u, "bootstrap", f"ip:10.0.0.{i}", 0, None, True) for i, u in enumerate("abcd")]
    rows += [
        ("a", "a", "ib_error", "ip:10.0.0.2", 1, 900.0, True),   # a names c by address
        ("b", "b", "wait_timeout", "rank:5", 1, 901.0, True),    # b names c by global rank
        ("d", "d", "socket_error", "host:c", 1, 902.0, True),    # d names c by host name
        ("c", "c", "ib_error", "ip:10.0.0.2", 1, 899.0, True),   # c names itself: not blame
        ("c", "c", "ib_error", "ip:10.0.0.0", 1, 899.0, True),   # c names a
        ("d", "d", "process_rank", "rank:1", 1, 903.0, True),    # below ranks per node: maybe a local rank
        ("b", "b", "nccl_info", "host:d", 0, None, True),        # INFO line: not loud
        ("b", "b", "old_event", "host:d", 1, 900.0, False),      # not a candidate event
        ("a", "a", "rendezvous", "host:b", 1, 10.0, True),       # long before the failure began
    ]
    mentions = pd.DataFrame(rows, columns=["unit", "node", "event_id", "token", "n_loud", "first_s", "candidate"])
    named = peer_mentions(mentions, activity, pd.Series(0.0, index=activity.index), since=899.0, window_s=60.0)
    assert named["named_by"].to_dict() == {"a": 1, "b": 0, "c": 3, "d": 0}
    assert named.at["c", "names"] == ["host:c", "ip:10.0.0.2", "rank:5"]
    # without a failure onset, the rendezvous warning counts
    assert peer_mentions(mentions, activity, pd.Series(0.0, index=activity.index), None, 60.0).at["b", "named_by"] == 1


def test_blame_and_timing_scores():
    # a share of the other units, beyond the median unit's names
    assert blame_scores(pd.Series([2, 1, 1, 1, 0])).tolist() == [0.25, 0.0, 0.0, 0.0, 0.0]
    assert blame_scores(pd.Series([4.0, 0, 0, 0, 0])).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert blame_scores(pd.Series([0, 0, 0])).tolist() == [0.0, 0.0, 0.0]
    # the store host named by all 15 others with its by-design discount (1 - 15/16 each) is not
    # blamed as if everyone named it: dividing by the most named unit's count made this 1.0
    assert blame_scores(pd.Series([15 / 16] + [0.0] * 15))[0] == pytest.approx(1 / 16)
    assert timing_scores(pd.Series([0.0, 2.0, np.nan]), 2.0).tolist() == pytest.approx([1.0, np.exp(-1.0), 0.0])


def test_ranking_is_deterministic():
    counts = _counts(_healthy_counts(16) + [("n09", "xid_48", 3)])
    first = rank_units("job-x", counts, _activity(16), SpatialConfig())
    again = rank_units("job-x", counts.sample(frac=1.0, random_state=3), _activity(16), SpatialConfig())
    pd.testing.assert_frame_equal(first, again)


def test_top_k_hit_is_the_share_of_faulty_nodes_found():
    assert top_k_hit(["a", "b", "c"], ["b"], 1) == 0.0
    assert top_k_hit(["a", "b", "c"], ["b"], 3) == 1.0
    assert top_k_hit(["a", "b", "c"], ["a", "z"], 8) == 0.5
    assert np.isnan(top_k_hit(["a"], [], 1))


def test_bad_config_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match="spatial.granularity"):
        SpatialConfig(granularity="rack")
    with pytest.raises(ConfigError, match="spatial.threshold"):
        SpatialConfig(threshold=1.5)
    with pytest.raises(ConfigError, match="spatial.blame_weight"):
        SpatialConfig(blame_weight=-0.1)
    with pytest.raises(ConfigError, match="spatial.terminal_share"):
        SpatialConfig(terminal_share=0.0)


# ---- Spark ---------------------------------------------------------------------------------

EVENTS_SCHEMA = "job_id string, node string, rank int, ts timestamp, level string, event_id string"


def _events_rows() -> list[tuple]:
    rows = []
    for n in range(6):
        node = f"n{n}"
        for r in (2 * n, 2 * n + 1):
            rows += [("job-a", node, r, T0 + timedelta(seconds=i), "INFO", "iteration") for i in range(20)]
    rows += [("job-a", "n4", 8, T0 + timedelta(seconds=30), "ERROR", "xid_79"),
             ("job-a", "n4", 9, T0 + timedelta(seconds=31), "ERROR", "cuda_error"),
             ("job-a", "n1", 2, T0 + timedelta(seconds=25), "ERROR", "ib_error"),
             ("job-a", "n1", 3, T0 + timedelta(seconds=33), "ERROR", "ib_error"),
             ("job-a", "n1", 3, T0 + timedelta(seconds=34), "ERROR", "ib_error"),
             ("job-a", "n2", 4, None, None, None)]  # a line without time, level or event
    return rows


@pytest.fixture(scope="module")
def tiny_events(spark):
    return spark.createDataFrame(_events_rows(), EVENTS_SCHEMA)


@pytest.mark.spark
def test_rank_nodes_ranks_every_node_and_flags_the_faulty_one(tiny_events):
    rows = rank_nodes(tiny_events).toPandas().sort_values("rank")
    assert rows["node"].nunique() == 6 and rows["rank"].tolist() == [1, 2, 3, 4, 5, 6]
    assert rows.iloc[0]["node"] == "n4"
    assert sorted(rows.iloc[0]["evidence"]) == ["cuda_error", "xid_79"]
    assert rows["process_rank"].isna().all()


@pytest.mark.spark
def test_candidates_restrict_the_compared_events(spark, tiny_events):
    candidates = spark.createDataFrame([("job-a", "ib_error")], "job_id string, event_id string")
    rows = rank_nodes(tiny_events, candidates=candidates).toPandas().sort_values("rank")
    assert rows.iloc[0]["node"] == "n1"
    assert list(rows.iloc[0]["evidence"]) == ["ib_error"]


@pytest.mark.spark
def test_rank_granularity_gives_one_row_per_rank(tiny_events):
    rows = rank_nodes(tiny_events, SpatialConfig(granularity="rank")).toPandas()
    assert len(rows) == 12 and sorted(rows["process_rank"].tolist()) == list(range(12))


@pytest.mark.spark
def test_baselines_rank_by_first_error_and_by_error_count(tiny_events):
    ranks = baseline_rankings(tiny_events).toPandas()
    by_time = ranks[ranks["method"] == "error_time"].sort_values("rank")["node"].tolist()
    by_count = ranks[ranks["method"] == "error_count"].sort_values("rank")["node"].tolist()
    assert by_time == ["n1", "n4", "n0", "n2", "n3", "n5"]
    assert by_count == ["n1", "n4", "n0", "n2", "n3", "n5"]


@pytest.mark.spark
def test_diagnosis_nodes_are_written_per_job_and_replaced_on_rerun(spark, tiny_events, test_config):
    rows = rank_nodes(tiny_events)
    write_diagnosis_nodes(rows, test_config.storage, ["job-a", "job-gone"])
    write_diagnosis_nodes(rows, test_config.storage, ["job-a"])
    table = spark.read.parquet(test_config.storage.warehouse + "/diagnosis_nodes")
    assert set(DIAGNOSIS_NODES_COLUMNS) == set(table.columns)
    assert table.count() == 6
    events = spatial_events(rows.toPandas()).sort_values("event_id")
    suspects = rows.where("suspect").toPandas()
    assert set(events["event_id"]) == {e for ev in suspects["evidence"] for e in ev}
    assert set(events["source"]) == {"spatial"}


MESSAGES_SCHEMA = ("job_id string, node string, rank int, file string, line_no long, ts timestamp, level string, "
                   "event_id string, message string")


def _message_rows() -> list[tuple]:
    """Three nodes of two ranks; every rank announces its address; h1 and h2 name h3 in errors."""
    rows = []
    for n, node in enumerate(("h1", "h2", "h3")):
        for r in (2 * n, 2 * n + 1):
            rows += [("job-m", node, r, f"{node}/rank-{r}.log", 1, T0, "INFO", "boot",
                      f"NCCL INFO Bootstrap : Using eth0:10.1.0.{n + 1}<0>"),
                     ("job-m", node, r, f"{node}/rank-{r}.log", 2, T0 + timedelta(seconds=5), "INFO", "iteration",
                      "iteration 10/100 | loss 2.0"),
                     ("job-m", node, r, f"{node}/rank-{r}.log", 3, T0 + timedelta(seconds=9), "INFO", "rank_info",
                      f"Process rank {r % 2} ready on h{n + 1}")]
    rows += [
        ("job-m", "h2", 2, "h2/rank-2.log", 4, T0 + timedelta(seconds=20), "WARN", "ib",
         "NET/IB : Got completion from peer 10.1.0.3<4411> with error 12, vendor err 129 via eth0"),
        ("job-m", "h1", 0, "h1/rank-0.log", 4, T0 + timedelta(seconds=21), "ERROR", "hccl",
         "wait socket establish timeout, role[0] rank[5] timeout[120]"),
        ("job-m", "h1", 1, "h1/rank-1.log", 4, None, None, "srun",
         "srun: error: h3.cluster.local: tasks 4-5: Killed (h9 unknown)"),
        ("job-m", "h3", 4, "h3/rank-4.log", 4, None, None, "trace", "Traceback (most recent call last):"),
        ("job-m", "h3", 5, "h3/rank-5.log", 4, None, "INFO", None, None),
    ]
    return rows


@pytest.fixture(scope="module")
def message_events(spark):
    return spark.createDataFrame(_message_rows(), MESSAGES_SCHEMA)


@pytest.mark.spark
def test_unit_mentions_read_the_store_endpoint_of_c10d_client_lines(spark):
    rows = [("job-c", "h2", 2, "h2/rank-2.log", 1, T0, "WARN", "store_recv",
             "[c10d] recvValue failed on SocketImpl(fd=63, addr=[h2]:42318, remote=[h1]:29500): Connection reset by peer"),
            ("job-c", "h3", 4, "h3/rank-4.log", 1, T0, "WARN", "store_retry",
             "[c10d] TCP client failed to connect/validate to host 10.1.0.1:29500 - retrying (try=0, timeout=1800000ms,"
             " delay=100ms): Connection reset by peer"),
            ("job-c", "h1", 0, "h1/rank-0.log", 1, T0, "INFO", "boot", "NCCL INFO Bootstrap : Using eth0:10.1.0.1<0>")]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)
    mentions = unit_mentions(events, store_patterns=SpatialConfig().store_client_patterns).toPandas()
    got = sorted((r.node, r.event_id, r.token) for r in mentions.itertuples())
    assert got == [("h1", "boot", "ip:10.1.0.1"), ("h2", "store_recv", "host:h1"), ("h2", "store_recv", "host:h2"),
                   ("h2", "store_recv", "store:h1"), ("h3", "store_retry", "ip:10.1.0.1"),
                   ("h3", "store_retry", "store:10.1.0.1")]
    # without patterns, no store token
    assert not unit_mentions(events).toPandas()["token"].str.startswith("store:").any()


def test_unit_mentions_read_the_collective_each_nccl_watchdog_line_says_timed_out(spark):
    # PyTorch's ProcessGroupNCCL: the watchdog's message and, since 2.2, its "Timeout at NCCL work" line
    rows = [("job-w", "h1", 0, "h1/rank-0.log", 1, T0, "ERROR", "watchdog",
             "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18308, OpType=ALLREDUCE, "
             "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600072 milliseconds before timing out."),
            ("job-w", "h2", 4, "h2/rank-4.log", 1, T0, "ERROR", "last_work",
             "[PG ID 0 PG GUID 0(default_pg) Rank 4] Timeout at NCCL work: 18307, last enqueued NCCL work: 18307, "
             "last completed NCCL work: 18306."),
            ("job-w", "h2", 4, "h2/rank-4.log", 2, T0, "INFO", "coll", "NCCL INFO AllReduce: opCount 4790 sendbuff"),
            # PyTorch 2.6+: the timed-out collective, and the last one enqueued (past it)
            ("job-w", "h3", 8, "h3/rank-8.log", 1, T0, "ERROR", "detected",
             "[PG ID 1 PG GUID 1 Rank 8]  failure detected by watchdog at work sequence id: 20585 PG status: "
             "last enqueued work: 20589, last completed work: 20584"),
            # a rank that hangs outside NCCL times out in nothing: when a peer's timeout signals a
            # dump it prints the last collective it enqueued
            ("job-w", "h4", 13, "h4/rank-13.log", 1, T0, "ERROR", "dump",
             "[PG ID 0 PG GUID 0(default_pg) Rank 13] Received a dump signal due to a collective timeout from  rank 7 "
             "and we will try our best to dump the debug info. Last enqueued NCCL work: 56115, last completed NCCL "
             "work: 56115.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used "
             "across ranks, the order of collectives is not same for all ranks or the scheduled collective, for "
             "some reason, didn't run.")]
    mentions = unit_mentions(spark.createDataFrame(rows, MESSAGES_SCHEMA)).toPandas()
    got = sorted((r.node, r.event_id, r.token) for r in mentions.itertuples() if r.token.startswith(("seq:", "enq:")))
    # the first line names no process group, the others their group (PyTorch 2.4's prefix);
    # seq: the collective that timed out, enq: the last one the rank enqueued
    assert got == [("h1", "watchdog", "seq::18308"), ("h2", "last_work", "enq:0:18307"),
                   ("h2", "last_work", "seq:0:18307"), ("h3", "detected", "enq:1:20589"),
                   ("h3", "detected", "seq:1:20585"), ("h4", "dump", "enq:0:56115")]


@pytest.mark.spark
def test_an_address_within_a_communicators_identifier_names_nobody(spark):
    # issue #18, 36031: torch_npu names each HCCL communicator after its root's address, and every
    # rank's EI0002 timeout prints it in its task tag and group information (the wording of
    # public CANN logs and of CANN's current error table, hicann/hcomm); the
    # cluster report's exception location names the failed device's node
    rows = [("job-n", "h2", 4, "h2/rank-4.log", 1, T0, "ERROR", "ei0002",
             "EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not "
             "received the Notify record from remote rank: [25]. base information: [streamID:[5], taskID[12357], "
             "taskType[Notify Wait], tag[AllReduce_192.168.2.65%enp189s0f0_60000_0_7430395676]]. task information: "
             "[notify id:[0x000000d28ad660c3], stage:[ffffffff], remote rank:[25]]. group information: "
             "[group:[192.168.2.65%enp189s0f0_60000_0_7430395676], user define information[], rankSize[8], "
             "rankId[4], peerRankId[25]]"),
            ("job-n", "h2", 4, "h2/rank-4.log", 2, T0, "INFO", "init",
             "hcclCommInitInfo success, rank[4] rankSize[8] commId[192.168.2.65%enp189s0f0_60000_0_7430395676]"),
            ("job-n", "h3", 8, "h3/rank-8.log", 1, T0, "ERROR", "location",
             "Cluster Exception Location[IP/ID]:[192.168.2.71/1], Arrival Time:[Thu Nov 5 08:31:21 2026]")]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)

    def addresses(unnamed_ids: bool) -> list:
        mentions = unit_mentions(events, unnamed_ids=unnamed_ids).toPandas()
        return sorted((r.node, r.event_id, r.token) for r in mentions.itertuples() if r.token.startswith("ip:"))

    assert addresses(True) == [("h3", "location", "ip:192.168.2.71")]
    assert addresses(False) == [("h2", "ei0002", "ip:192.168.2.65"), ("h2", "init", "ip:192.168.2.65"),
                                ("h3", "location", "ip:192.168.2.71")]
    # the identifier itself is still read as the communicator's (comm: tokens, group_ranks_by_communicator)
    comm = unit_mentions(events, unnamed_ids=True).toPandas()
    assert "comm:192.168.2.65%enp189s0f0_60000_0_7430395676" in set(comm["token"])
    # the ranking's inputs read the setting (on by default)
    facts, _ = configured_unit_inputs(events, SpatialConfig())
    assert not facts.toPandas()["token"].eq("ip:192.168.2.65").any()
    facts, _ = configured_unit_inputs(events, SpatialConfig(communicator_ids_name_nobody=False))
    assert facts.toPandas()["token"].eq("ip:192.168.2.65").any()


@pytest.mark.spark
def test_the_informer_of_a_failure_is_named_by_nobody(spark):
    # issue #18, 36139's dead store host: HCCL's heartbeat spreads a lost peer to every rank, and
    # each prints the failed device's node (Location) and the neighbour that found it (Discoverer,
    # hccl heartbeat.cc); its run log says the same as "crimer rank [..] by informer rank [..]"
    rows = [("job-i", f"h{n}", 8 * n, f"h{n}/rank-{8 * n}.log", 1, T0 + timedelta(seconds=n), "ERROR", "lost",
             "    Cluster Exception Location[IP/ID]:[10.0.0.1/3], Arrival Time:[Sat Nov 07 14:46:27 2026], "
             "Discoverer:[10.0.0.2/3], ExceptionType:[Heartbeat Lost Occurred], Possible Reason:1. Process has "
             "exited, 2. Network Disconnected") for n in (2, 3, 4)]
    rows.append(("job-i", "h3", 24, "h3/rank-24.log", 2, T0 + timedelta(seconds=5), "ERROR", "run",
                 "[HeartbeatAbnormal]local rank [10.0.0.3/0]: crimer rank [10.0.0.1/3] status[LOST] by informer "
                 "rank [10.0.0.2/3]"))
    # PyTorch: the rank whose watchdog fired first (rank 9, on h1) signals a dump; the others say so
    rows += [("job-i", f"h{n}", 8 * n, f"h{n}/rank-{8 * n}.log", 3, T0 + timedelta(seconds=9), "ERROR", "dump",
              f"[PG ID 0 PG GUID 0(default_pg) Rank {8 * n}] Received a dump signal due to a collective timeout "
              "from  rank 9 and we will try our best to dump the debug info. Last enqueued NCCL work: 56116, "
              "last completed NCCL work: 56116.") for n in (2, 3)]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)

    def named(config: SpatialConfig) -> set:
        facts, _ = configured_unit_inputs(events, config)
        return {(r.node, r.event_id, r.token) for r in facts.toPandas().itertuples()
                if isinstance(r.token, str) and r.token.startswith(("ip:", "rank:"))}

    crimer = {("h2", "lost", "ip:10.0.0.1"), ("h3", "lost", "ip:10.0.0.1"), ("h4", "lost", "ip:10.0.0.1"),
              ("h3", "run", "ip:10.0.0.1"), ("h3", "run", "ip:10.0.0.3")}
    assert named(SpatialConfig()) == crimer  # and no rank 10 from "rank [10.0.0.3/0]": an address
    informer = {("h2", "lost", "ip:10.0.0.2"), ("h3", "lost", "ip:10.0.0.2"), ("h4", "lost", "ip:10.0.0.2"),
                ("h3", "run", "ip:10.0.0.2"), ("h2", "dump", "rank:9"), ("h3", "dump", "rank:9")}
    assert named(SpatialConfig(reporter_patterns=())) == crimer | informer
    # with the communicators' names read as before too: both sets of patterns are removed
    assert named(SpatialConfig(communicator_ids_name_nobody=False)) == crimer


@pytest.mark.spark
def test_deepspeeds_launcher_summary_is_a_units_end(spark):
    # issue #18, 36135's dead store host: DeepSpeed's launcher on every node whose worker died logs
    # "<cmd> exits with return code = N" (launcher/launch.py, sigkill_handler); the node that went
    # down with its launcher logs no end
    rows = [("job-e", f"h{n}", 8 * n, f"h{n}/rank-{8 * n}.log", 1, T0, "INFO", "step",
             "[Rank 0] step=2503, skipped=0") for n in range(4)]
    # (the parse keeps the message after DeepSpeed's ``[launch.py:321:sigkill_handler]`` header)
    rows += [("job-e", f"h{n}", 8 * n, f"h{n}/rank-{8 * n}.log", 2, T0 + timedelta(seconds=9), "ERROR", "exit",
              f"['/usr/bin/python', '-u', 'train.py', '--local_rank=7'] exits with return code = {-6 if n == 2 else 1}")
             for n in (1, 2)]
    # h3's launcher was told to stop (SIGTERM): it kills its workers, no worker failed, no exit line
    rows += [("job-e", "h3", 24, "h3/rank-24.log", 2 + k, T0 + timedelta(seconds=12), "INFO", "kill",
              f"Killing subprocess {41007 + k}") for k in range(2)]
    # h4's and h5's the same, their launcher's source or pdsh's host prefix kept in the message by
    # a format the parse did not split; h6's line names a process id that is not the line's end
    for node, rank, text in (("h4", 32, "[launch.py:316:sigkill_handler] Killing subprocess 52001"),
                             ("h5", 40, "worker-5: Killing subprocess 52002"),
                             ("h6", 48, "Killing subprocess 52003 failed: no such process")):
        rows += [("job-e", node, rank, f"{node}/rank-{rank}.log", 1, T0, "INFO", "step", "[Rank 0] step=2503, skipped=0"),
                 ("job-e", node, rank, f"{node}/rank-{rank}.log", 2, T0 + timedelta(seconds=12), "INFO",
                  f"kill-{node}", text)]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)

    def ended(config: SpatialConfig) -> dict:
        _, activity = configured_unit_inputs(events, config)
        return {r.node: r.reported_end for r in activity.toPandas().itertuples()}

    launcher_ends = {"h0": False, "h1": True, "h2": True, "h3": True, "h4": True, "h5": True, "h6": False}
    assert ended(SpatialConfig()) == launcher_ends
    # without the kill lines: the launchers told to stop report no end
    assert ended(SpatialConfig(end_patterns=SpatialConfig().end_patterns[:1])) == \
        {**launcher_ends, "h3": False, "h4": False, "h5": False}
    # torchrun's and Slurm's ends alone: nobody reported one
    assert ended(SpatialConfig(end_patterns=())) == dict.fromkeys(launcher_ends, False)


@pytest.mark.spark
def test_a_rank_that_hung_outside_nccl_is_behind_by_the_last_collective_it_enqueued(spark):
    # rank 5 (on h3) hangs in Python before collective 56116; every other rank times out in it.
    # The hung rank prints no timeout, only the dump-signal line with its last enqueued work
    rows = []
    for rank in range(8):
        node = f"h{rank // 2 + 1}"
        prefix = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
        if rank == 5:
            line = (f"{prefix} Received a dump signal due to a collective timeout from  rank 0 and we will try our "
                    "best to dump the debug info. Last enqueued NCCL work: 56115, last completed NCCL work: 56115.")
        else:
            line = (f"{prefix} Timeout at NCCL work: 56116, last enqueued NCCL work: 56116, "
                    "last completed NCCL work: 56115.")
        rows.append(("job-h", node, rank, f"{node}/rank-{rank}.log", 1, T0, "ERROR", "wd", line))
    mentions = unit_mentions(spark.createDataFrame(rows, MESSAGES_SCHEMA)).toPandas().rename(columns={"node": "unit"})
    activity = pd.DataFrame(index=["h1", "h2", "h3", "h4"])
    lag = collectives_behind(mentions, activity)
    assert lag["behind"].to_dict() == {"h1": 0.0, "h2": 0.0, "h3": 1.0, "h4": 0.0}
    # h3's other rank timed out in 56116 with the rest: h3 is behind only by its hung rank,
    # which never enqueued 56116: stuck outside NCCL
    assert lag["outside_nccl"].to_dict() == {"h1": False, "h2": False, "h3": True, "h4": False}


@pytest.mark.spark
def test_a_rank_that_says_it_timed_out_waiting_is_named_by_the_rank_that_printed_it(spark):
    # PyTorch 2.1's watchdog line, Ascend HCCL's EI0002 and Gloo's: each a waited:<its printing
    # rank>; the same words at INFO, a line of no rank and other errors are none
    texts = [("ERROR", 0, "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=989190, "
                          "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800053 milliseconds before timing out."),
             ("ERROR", 1, "EI0002: The wait execution of the Notify register times out. Reason: The Notify register "
                          "has not received the Notify record from remote rank: [0]."),
             ("ERROR", 2, "terminate called after throwing an instance of 'gloo::IoException' what(): [../third_party/"
                          "gloo/gloo/transport/tcp/pair.cc:598] Timed out waiting 1800000ms for recv operation to complete"),
             ("INFO", 3, "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"),
             ("ERROR", None, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"),
             ("ERROR", 4, "RuntimeError: CUDA error: an illegal memory access was encountered")]
    rows = [("job-w", f"h{i}", rank, f"h{i}/rank-{rank}.log", 1, T0, level, f"e{i}", text)
            for i, (level, rank, text) in enumerate(texts)]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)
    tokens = unit_mentions(events, timeout_patterns=SpatialConfig().collective_timeout_patterns).toPandas()
    waited = tokens.loc[tokens["token"].str.startswith("waited:"), ["node", "token"]]
    assert sorted(map(tuple, waited.to_numpy())) == [("h0", "waited:0"), ("h1", "waited:1"), ("h2", "waited:2")]
    assert not unit_mentions(events).toPandas()["token"].str.startswith("waited:").any()
    # the ranking's inputs read the patterns
    facts, _ = configured_unit_inputs(events, SpatialConfig())
    assert facts.toPandas()["token"].eq("waited:1").any()


def _waited(ranks, per_node: int = 4, n_nodes: int = 4) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(mentions, activity) of n_nodes nodes of per_node ranks, ``ranks`` saying they timed out waiting."""
    activity = pd.DataFrame({"node": [f"n{i:02d}" for i in range(n_nodes)],
                             "ranks": [list(range(i * per_node, (i + 1) * per_node)) for i in range(n_nodes)]},
                            index=[f"n{i:02d}" for i in range(n_nodes)])
    mentions = pd.DataFrame({"unit": [f"n{r // per_node:02d}" for r in ranks], "token": [f"waited:{r}" for r in ranks]})
    return mentions, activity


def test_the_collectives_missing_member_is_the_rank_that_never_said_it_waited():
    every = set(range(16))
    # rank 3 (on n00) hangs outside NCCL under PyTorch 2.1: every other rank's watchdog times out
    assert collective_absentees(*_waited(every - {3})) == ["n00"]
    lag = collectives_behind(*_waited(every - {3}), absentees=True)
    assert lag.loc["n00"].tolist() == [1.0, True] and lag["behind"].sum() == 1.0
    assert collectives_behind(*_waited(every - {3}), absentees=False)["behind"].sum() == 0.0
    # two of n01's four ranks: still at least as many of its ranks said so
    assert collective_absentees(*_waited(every - {5, 6})) == ["n01"]
    # a whole node silent (it died: silence judges it), most of a node's ranks stopped by its
    # launcher once one timed out, silent ranks on two nodes, or fewer than two ranks waiting: nobody
    assert collective_absentees(*_waited(every - {4, 5, 6, 7})) == []
    assert collective_absentees(*_waited(every - {4, 5, 6})) == []
    assert collective_absentees(*_waited(every - {3, 9})) == []
    assert collective_absentees(*_waited({0})) == []
    assert collective_absentees(*_waited(every)) == []
    # per rank: the hung rank's unit alone
    mentions, activity = _waited(every - {3}, per_node=4)
    by_rank = pd.DataFrame({"node": [f"n{r // 4:02d}" for r in range(16)], "ranks": [[r] for r in range(16)]},
                           index=[f"r{r}" for r in range(16)])
    assert collective_absentees(mentions, by_rank) == ["r3"]


def test_a_unit_behind_outside_nccl_is_said_so_in_its_signals_and_matches_the_hang_fault():
    from l4spark.diagnosis.patterns import hung_unit_pattern

    hang = hung_unit_pattern()
    rows = []
    for i in range(4):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0 + 0.01 * i), _fact(node, "iteration", 200, 20.0),
                 _fact(node, "watchdog_timeout", 8, 958.0 + i), _mention(node, "watchdog_timeout", "seq:0:18308",
                                                                         958.0 + i),
                 _mention(node, "watchdog_timeout", "enq:0:18308", 958.0 + i)]
    # n02's hung rank prints only the dump-signal line: its last enqueued work is 18307
    rows += [_fact("n02", "dump_signal", 1, 958.5), _mention("n02", "dump_signal", "enq:0:18307", 958.5)]
    facts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    ranked = rank_units("job-h", facts, _activity(4), SpatialConfig()).set_index("node")
    assert ranked["rank"].idxmin() == "n02"
    said = [s for s in ranked.loc["n02", "signals"] if s.startswith("behind")]
    assert said == ["behind, outside NCCL: it never enqueued the collective its peers timed out in"]
    assert any(re.search(hang.signature[0], s) for s in ranked.loc["n02", "signals"])
    # its ranks timed out in the older collective instead: stuck inside NCCL, not the hang
    inside = pd.concat([facts, pd.DataFrame([_mention("n02", "dump_signal", "seq:0:18307", 958.5)],
                                            columns=UNIT_FACTS_COLUMNS[1:])])
    ranked = rank_units("job-h", inside, _activity(4), SpatialConfig()).set_index("node")
    assert ranked["rank"].idxmin() == "n02"
    assert not any(re.search(hang.signature[0], s) for s in ranked.loc["n02", "signals"])


def test_a_rank_hung_outside_nccl_under_pytorch_2_1_is_behind_though_it_prints_no_collective():
    # PyTorch 2.1 prints no "last enqueued" line: n02's rank 5 hangs in Python and says nothing,
    # every other rank's watchdog times out in collective 18308; n01's clock runs 2 s early, so
    # it seems to fail first
    from l4spark.diagnosis.patterns import hung_unit_pattern

    rows = []
    for i in range(4):
        node, t = f"n{i:02d}", (956.0 if i == 1 else 958.0 + 0.1 * i)
        ranks = [r for r in (2 * i, 2 * i + 1) if r != 5]
        rows += [_fact(node, "init", 4, 10.0 + 0.01 * i), _fact(node, "iteration", 200, 20.0),
                 _fact(node, "watchdog_timeout", len(ranks), t), _fact(node, "take_down", 2, t + 1.0),
                 _mention(node, "watchdog_timeout", "seq::18308", t)]
        rows += [_mention(node, "watchdog_timeout", f"waited:{r}", t) for r in ranks]
    facts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    ranked = rank_units("job-h", facts, _activity(4), SpatialConfig()).set_index("node")
    assert ranked["rank"].idxmin() == "n02"
    assert any(re.search(hung_unit_pattern().signature[0], s) for s in ranked.loc["n02", "signals"])
    off = rank_units("job-h", facts, _activity(4), SpatialConfig(absent_member_behind=False)).set_index("node")
    assert off["rank"].idxmin() == "n01"
    assert not any(s.startswith("behind") for s in off.loc["n02", "signals"])


def test_the_unit_stuck_a_collective_behind_is_the_one_the_others_wait_for():
    # RoCE transmit timeouts stall n02's collectives: its watchdog times out in collective 18307
    # while the others wait in 18308 for it. A skewed clock puts n01's timeout 2 s before n02's,
    # so the first to fail is n01; n02 is behind, and first
    rows = []
    for i in range(4):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0 + 0.01 * i), _fact(node, "iteration", 200, 20.0)]
    for node, t, seq in (("n01", 958.0, 18308), ("n02", 960.0, 18307), ("n00", 960.5, 18308), ("n03", 960.6, 18308)):
        rows += [_fact(node, "watchdog_timeout", 8, t), _fact(node, "take_down", 8, t + 0.1),
                 _mention(node, "watchdog_timeout", f"seq:{seq}", t)]
    facts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    ranked = rank_units("job-w", facts, _activity(4), SpatialConfig()).set_index("node")
    assert ranked["rank"].idxmin() == "n02"
    assert "behind: it stopped in an older collective than the one its peers timed out in" in ranked.loc["n02", "signals"]
    assert rank_units("job-w", facts, _activity(4), SpatialConfig(behind_weight=0.0)).iloc[0]["node"] == "n01"
    # everyone in the same collective (a dead peer, a link down for all): nobody is behind
    same = facts.assign(token=facts["token"].replace({"seq:18307": "seq:18308"}))
    assert rank_units("job-w", same, _activity(4), SpatialConfig()).iloc[0]["node"] == "n01"


def test_collectives_behind_needs_two_reporting_units_that_disagree():
    activity = pd.DataFrame(index=["a", "b", "c"])
    tokens = lambda pairs: pd.DataFrame([(u, t) for u, t in pairs], columns=["unit", "token"])
    behind = lambda pairs: collectives_behind(tokens(pairs), activity)["behind"].tolist()
    # b's oldest is 8, still newer than a's
    assert behind([("a", "seq:7"), ("b", "seq:9"), ("b", "seq:8"), ("c", "ip:10.0.0.1")]) == [1.0, 0.0, 0.0]
    assert behind([("a", "seq:7")]) == [0.0, 0.0, 0.0]
    assert behind([("a", "seq:7"), ("b", "seq:7")]) == [0.0, 0.0, 0.0]
    assert behind([]) == [0.0, 0.0, 0.0]
    # process groups number their collectives apart: a tensor-parallel group's 120,000th collective
    # and the data-parallel group's 4,000th say nothing of who is behind
    assert behind([("a", "seq:1:4000"), ("b", "seq:2:120000"), ("c", "seq:2:120000")]) == [0.0, 0.0, 0.0]
    assert behind([("a", "seq:0:7"), ("b", "seq:0:8"), ("c", "seq::3")]) == [1.0, 0.0, 0.0]
    # PyTorch before 2.3 names no group: a pipeline peer's timeout in its p2p group (collective
    # 2,310) and the data-parallel peers' in theirs (48,117) are not one sequence; within each
    # run of close numbers the older is still behind
    assert behind([("a", "seq:2310"), ("b", "seq:48117"), ("c", "seq:48117")]) == [0.0, 0.0, 0.0]
    assert behind([("a", "seq:2310"), ("b", "seq:48116"), ("c", "seq:48117")]) == [0.0, 1.0, 0.0]


@pytest.mark.spark
def test_unit_mentions_extract_addresses_ranks_and_known_host_names(message_events):
    rows = unit_mentions(message_events).toPandas()
    assert list(rows.columns) == UNIT_FACTS_COLUMNS
    got = sorted((r.node, r.event_id, r.token, r.n_lines, r.n_loud) for r in rows.itertuples())
    assert got == [("h1", "boot", "ip:10.1.0.1", 2, 0), ("h1", "hccl", "rank:5", 1, 1),
                   ("h1", "srun", "host:h3", 1, 1),
                   ("h2", "boot", "ip:10.1.0.2", 2, 0), ("h2", "ib", "ip:10.1.0.3", 1, 1),
                   ("h3", "boot", "ip:10.1.0.3", 2, 0)]
    assert rows.set_index("token").loc["rank:5", "first_s"] == (T0 + timedelta(seconds=21)).timestamp()


REMOTE_MESSAGES = [  # real texts: NCCL, PyTorch c10d, Gloo (sources in SpatialConfig.remote_patterns)
    "[Rank 3] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there was a "
    "network error, NCCL version 2.20.5",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node2<42830>",
    "[c10d] recvValue failed on SocketImpl(fd=63, addr=[n3]:42318, remote=[n0]:29500): Connection reset by peer",
    '[PG ID 0 PG GUID 0(default_pg) Rank 10] Failed to check the "should dump" flag on TCPStore, (maybe TCPStore '
    "server has shut down too early), with error: Connection reset by peer",
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=351188, OpType=ALLREDUCE, NumelIn=8388608, "
    "NumelOut=8388608, Timeout(ms)=600000) ran for 600023 milliseconds before timing out.",
    # Ascend HCCL: a rank that waited for a remote rank (EI0002, its lost-peer report, EI0006, the plog's wait)
    "EI0002: [PID: 13075] The wait execution of the Notify register times out. Reason: The Notify register has not "
    "received the Notify record from remote rank: [unknown]. base information: [streamID:[1], taskID[8318285]]",
    "serverId[10.90.55.95], deviceId[0], Heartbeat Lost Occurred, Possible Reason: 1. Process has exited, "
    "2. Network Disconnected",
    "EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank did not send "
    "the data in time. Please check the reason for the rank being stuck",
    "[hccl_socket_manager.cc:778] [2734049][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[12] "
    "timeout[120]",
]
LOCAL_MESSAGES = [  # local errors, and link errors the side whose link failed logs too (naming the far end)
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "EI0013: [PID: 4411] An error CQE occurred during operator execution. Local information: server 10.1.0.2, "
    "device ID 3, device IP 10.1.0.103. Peer information: server 10.1.0.3, device ID 3, device IP 10.1.0.103.",
    "NVRM: Xid (PCI:0000:8f:00): 94, pid=1874839, name=python3, Contained: SM (0x2)",
    "NET/IB : Got completion from peer 10.1.0.3<4411> with error 4, opcode 0, len 0, vendor err 81 (Send)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]


def test_remote_patterns_tell_a_peer_failed_from_a_local_error():
    import re

    patterns = [re.compile(p) for p in SpatialConfig().remote_patterns]
    assert all(any(p.search(m) for p in patterns) for m in REMOTE_MESSAGES)
    assert not any(p.search(m) for p in patterns for m in LOCAL_MESSAGES)
    with pytest.raises(ConfigError, match="spatial.remote_patterns"):
        SpatialConfig(remote_patterns=("(a+)+$",))


@pytest.mark.spark
def test_unit_event_facts_flag_the_events_whose_text_says_a_peer_failed(spark):
    from l4spark.spatial.ranking import unit_event_facts

    rows = [("job-r", "h1", 0, "h1/rank-0.log", i + 1, T0 + timedelta(seconds=i), "ERROR", f"remote{i}", m)
            for i, m in enumerate(REMOTE_MESSAGES)]
    rows += [("job-r", "h2", 2, "h2/rank-2.log", i + 1, T0 + timedelta(seconds=i), "ERROR", f"local{i}", m)
             for i, m in enumerate(LOCAL_MESSAGES)]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)
    facts = unit_event_facts(events, remote_patterns=SpatialConfig().remote_patterns).toPandas()
    assert list(facts.columns) == UNIT_FACTS_COLUMNS
    flagged = dict(zip(facts["event_id"], facts["remote"]))
    assert flagged == {**{f"remote{i}": True for i in range(len(REMOTE_MESSAGES))},
                       **{f"local{i}": False for i in range(len(LOCAL_MESSAGES))}}
    # no patterns (or no message column): nothing is remote
    assert not unit_event_facts(events).toPandas()["remote"].any()


@pytest.mark.spark
def test_unit_activity_keeps_ranks_and_timestamp_cover(message_events):
    activity = unit_activity(message_events).toPandas().set_index("node").sort_index()
    assert [list(r) for r in activity["ranks"]] == [[0, 1], [2, 3], [4, 5]]
    # h1's rank-0 file ends timestamped; h3's last lines have none (3 of 4 lines covered)
    assert activity["ts_cover"].tolist() == [1.0, 1.0, 0.75]


@pytest.mark.spark
def test_unit_activity_dates_untimed_error_lines_by_the_timed_lines_after_them(spark):
    at = lambda seconds: T0 + timedelta(seconds=seconds)
    rows = [  # h1: pip's resolver banner, untimed, at the top of rank 0's file, then timed training lines
        ("job-d", "h1", 0, "h1/rank-0.log", 1, None, "ERROR", "pip", "ERROR: pip's dependency resolver does not ..."),
        ("job-d", "h1", 0, "h1/rank-0.log", 2, at(10), "INFO", "start", "start"),
        ("job-d", "h1", 0, "h1/rank-0.log", 3, at(300), "INFO", "step", "step"),
        ("job-d", "h1", 1, "h1/rank-1.log", 1, at(20), "INFO", "start", "start"),
        # h2: a timed error, and an untimed one later in another file: no timed line after it
        ("job-d", "h2", 2, "h2/rank-2.log", 1, at(50), "ERROR", "oom", "CUDA out of memory"),
        ("job-d", "h2", 2, "h2/rank-2.log", 2, at(60), "INFO", "step", "step"),
        ("job-d", "h2", 3, "h2/rank-3.log", 1, at(40), "INFO", "step", "step"),
        ("job-d", "h2", 3, "h2/rank-3.log", 2, None, "ERROR", "trace", "RuntimeError: ..."),
        # h3: no error line
        ("job-d", "h3", 4, "h3/rank-4.log", 1, at(70), "INFO", "step", "step")]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)
    activity = unit_activity(events).toPandas().set_index("node").sort_index()
    start = T0.timestamp()
    assert activity.loc["h1", "last_error_by_s"] == start + 10  # written no later than the next timed line
    assert pd.isna(activity.loc["h1", "last_error_s"])  # its own time is unknown
    assert pd.isna(activity.loc["h2", "last_error_by_s"])  # rank-3's error may be the last thing it wrote
    assert activity.loc["h2", "last_error_s"] == start + 50
    assert pd.isna(activity.loc["h3", "last_error_by_s"])
    # not dated (the switch off, the baselines): the timed error lines alone; the files' last
    # error lines are not looked up (no join, no window over the lines)
    undated = unit_activity(events, dated=False)
    plan = undated._jdf.queryExecution().optimizedPlan().toString()
    assert "Join" not in plan and "Window" not in plan
    undated = undated.toPandas().set_index("node").sort_index()
    assert pd.isna(undated.loc["h1", "last_error_by_s"]) and undated.loc["h2", "last_error_by_s"] == start + 50
    pd.testing.assert_frame_equal(undated.drop(columns=["last_error_by_s", "last_candidate_error_by_s"]),
                                  activity.drop(columns=["last_error_by_s", "last_candidate_error_by_s"]))
    # without candidates every error line is one: the candidate columns repeat the others
    assert activity["n_candidate_error"].tolist() == activity["n_error"].tolist() == [1, 2, 0]
    pd.testing.assert_series_equal(activity["last_candidate_error_by_s"], activity["last_error_by_s"], check_names=False)
    pd.testing.assert_series_equal(activity["last_candidate_error_s"], activity["last_error_s"], check_names=False)
    # the cross-job filter kept "oom" alone: pip's banner and rank-3's trace no longer count or date
    kept = spark.createDataFrame([("job-d", "oom"), ("job-d", "step")], "job_id string, event_id string")
    for is_dated in (True, False):
        only = unit_activity(events, dated=is_dated, candidates=kept).toPandas().set_index("node").sort_index()
        assert only["n_candidate_error"].tolist() == [0, 1, 0]
        assert pd.isna(only.loc["h1", "last_candidate_error_by_s"]) and pd.isna(only.loc["h3", "last_candidate_error_by_s"])
        assert only.loc["h2", "last_candidate_error_by_s"] == start + 50  # the oom line, dated by itself
        assert only.loc["h2", "last_candidate_error_s"] == start + 50
        assert only["last_candidate_error_s"].isna().tolist() == [True, False, True]
        # the other columns are those of every error line
        candidate_columns = ["n_candidate_error", "last_candidate_error_s", "last_candidate_error_by_s"]
        pd.testing.assert_frame_equal(only.drop(columns=candidate_columns),
                                      (activity if is_dated else undated).drop(columns=candidate_columns))
    # the ranking's inputs pass the cross-job filter's candidates on (rank_nodes -> unit_inputs)
    _, ranked = unit_inputs(events, candidates=kept)
    assert ranked.toPandas().set_index("node").sort_index()["n_candidate_error"].tolist() == [0, 1, 0]


@pytest.mark.spark
def test_times_lines_state_and_notices_of_a_teardown_date_a_units_stop(spark):
    # issue #18, 36031: a DeepSpeed job whose ranks print a time only at checkpoint saves. The
    # dead node h1 stopped after its last save; every survivor printed its untimed NCCL error and
    # torchrun's untimed failure summary, whose "time :" says when (half an hour later). And a
    # MindSpeed job's store host h4, shut down by its agent after another node failed: its last
    # timestamp is from start-up, its SIGTERM notice untimed after it.
    at = lambda seconds: T0 + timedelta(seconds=seconds)
    stated = lambda seconds: at(seconds).strftime("%Y-%m-%d_%H:%M:%S")
    rows = []
    for node, rank in (("h1", 0), ("h2", 4), ("h3", 8), ("h4", 12), ("h5", 16)):
        file = f"{node}/rank-{rank}.log"
        rows += [("job-t", node, rank, file, 1, at(10), "INFO", "start", "start"),
                 ("job-t", node, rank, file, 2, at(250 if node == "h4" else 300), "INFO", "saved", "Checkpoint is ready now!")]
    for node, rank, seconds in (("h2", 4, 1200), ("h3", 8, 1210)):
        file = f"{node}/rank-{rank}.log"
        rows += [("job-t", node, rank, file, 3, None, "ERROR", "watchdog",
                  f"[E ProcessGroupNCCL.cpp:1182] [Rank {rank}] NCCL watchdog thread terminated with exception"),
                 ("job-t", node, rank, file, 4, None, None, "summary_time", f"  time      : {stated(seconds)}"),
                 ("job-t", node, rank, file, 5, None, None, "summary_host", f"  host      : {node}")]
    # h4's other rank files end at its last timestamp: its best-covered file is timed to its end
    rows += [("job-t", "h4", 13, "h4/rank-13.log", 1, at(250), "INFO", "init", "hcclCommInitInfo success"),
             ("job-t", "h4", 12, "h4/rank-12.log", 3, None, "WARN", "death",
              "WARNING:torch.distributed.elastic.agent.server.api:Received Signals.SIGTERM death signal, shutting down workers"),
             ("job-t", "h4", 12, "h4/rank-12.log", 4, None, None, "signal",
              "torch.distributed.elastic.multiprocessing.api.SignalException: Process 660513 got signal: 15"),
             ("job-t", "h5", 16, "h5/rank-16.log", 3, None, "ERROR", "cancel",
              f"slurmstepd: error: *** STEP 4800521.0 ON h5 CANCELLED AT {at(1300).strftime('%Y-%m-%dT%H:%M:%S')} ***")]
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)
    start = T0.timestamp()

    def activity(config: SpatialConfig) -> pd.DataFrame:
        return configured_unit_inputs(events, config)[1].toPandas().set_index("node").sort_index()

    config = SpatialConfig()
    stated_on = activity(config)
    assert (stated_on["last_s"] - start).tolist() == [300, 1200, 1210, 250, 1300]
    assert stated_on.loc["h2", "ts_cover"] == pytest.approx(0.8)  # the host line after the time has none
    assert stated_on.loc["h2", "last_error_by_s"] == start + 1200  # the untimed watchdog error, dated by the summary
    # the store host's notice follows its last timestamp; h5's cancel notice dates itself
    assert stated_on["undated_notice"].tolist() == [False, False, False, True, False]
    assert silence(stated_on, config)["stopped"].tolist() == [True, False, False, False, False]
    # the notice switch off: the store host's start-up timestamp is a stop too
    assert silence(stated_on, dataclasses.replace(config, notices_undate_stops=False))["stopped"].tolist() == \
        [True, False, False, True, False]
    # no stated times: every survivor's last timestamp is its last save, and the dead node hides among them
    plain = activity(dataclasses.replace(config, stated_time_patterns=()))
    assert (plain["last_s"] - start).tolist() == [300, 300, 300, 250, 300]
    assert pd.isna(plain.loc["h2", "last_error_by_s"])
    assert not silence(plain, config)["stopped"].iloc[0]
    # no notices read: no unit has one
    assert not activity(dataclasses.replace(config, termination_patterns=()))["undated_notice"].any()
    # a summary, a notice to stop or a cancel notice is a reported end; the dead node has none
    assert stated_on["reported_end"].tolist() == [False, True, True, True, True]
    assert activity(dataclasses.replace(config, termination_patterns=(), stated_time_patterns=(), end_patterns=()))[
        "reported_end"].isna().all()


@pytest.mark.spark
def test_a_notice_to_stop_is_a_reaction_of_a_pair(spark):
    # issue #18, 36045's two-node job: the store host h1's torchrun agent got its SIGTERM (glog
    # W-lines, timed) 2 s before h2's own GPU error showed on h2's clock, which runs late. The
    # notice and its SignalException opened the pair's only onset of its own and were h1's own
    # events; as reactions they count for the other unit, and h2, whose GPU failed, is first
    at = lambda seconds: T0 + timedelta(seconds=seconds)
    rows = []
    for node, ranks in (("h1", (0, 1)), ("h2", (2, 3))):
        for rank in ranks:
            file = f"{node}/rank-{rank}.log"
            rows += [("job-p", node, rank, file, 1, at(10), "INFO", "start", "start")]
            rows += [("job-p", node, rank, file, 1 + step, at(10 + 9 * step), "INFO", "progress", f"step {step}")
                     for step in range(1, 100)]
    for rank in (0, 1):
        file = f"h1/rank-{rank}.log"
        rows += [("job-p", "h1", rank, file, 200, at(998), "WARN", "death",
                  "W1107 api.py:704] Received Signals.SIGTERM death signal, shutting down workers"),
                 ("job-p", "h1", rank, file, 201, at(998.001), "WARN", "closing",
                  f"W1107 api.py:897] Sending process {900 + rank} closing signal SIGTERM"),
                 ("job-p", "h1", rank, file, 202, None, "ERROR", "signal",
                  "torch.distributed.elastic.multiprocessing.api.SignalException: Process 955395 got signal: 15")]
    for rank in (2, 3):
        file = f"h2/rank-{rank}.log"
        rows += [("job-p", "h2", rank, file, 200, at(1000), "ERROR", "cuda",
                  "RuntimeError: CUDA error: an illegal memory access was encountered"),
                 ("job-p", "h2", rank, file, 201, at(1000.2), "ERROR", "abort", "terminate called after throwing"),
                 ("job-p", "h2", rank, file, 202, None, None, "summary_time",
                  f"  time      : {at(1000).strftime('%Y-%m-%d_%H:%M:%S')}")]  # torchrun's failure summary: an end
    events = spark.createDataFrame(rows, MESSAGES_SCHEMA)

    def ranked(config: SpatialConfig) -> pd.DataFrame:
        facts, activity = configured_unit_inputs(events, config)
        return rank_units("job-p", facts.toPandas(), activity.toPandas(), config).set_index("node")

    on = ranked(SpatialConfig())
    assert on.index.tolist() == ["h2", "h1"]
    assert on.loc["h2", "score"] > on.loc["h1", "score"]
    assert pd.isna(on.loc["h1", "onset_lag_s"])  # h1's failure began with a reaction: no onset
    off = ranked(SpatialConfig(notices_are_reactions=False))
    assert off.index.tolist() == ["h1", "h2"]
    assert off.loc["h1", "onset_lag_s"] == 0.0 and any(s.startswith("failed first") for s in off.loc["h1", "signals"])


def test_timing_is_the_lead_of_the_first_onset_over_every_other():
    # issue #18, 36021's MindSpeed hang: the hung node193 has no onset of its own; two peers'
    # watchdogs fired in the same second. By lag both got the full timing weight over it
    lag = pd.Series({"n00": 0.0, "n01": 0.0, "n02": np.nan, "n03": 30.0})
    assert lead_scores(lag, 2.0).tolist() == [0.0, 0.0, 0.0, 0.0]
    assert timing_scores(lag, 2.0).tolist() == pytest.approx([1.0, 1.0, 0.0, np.exp(-15.0)])
    # a lead of 4 s over the next unit; the others lead nobody
    led = lead_scores(pd.Series({"n00": 0.0, "n01": 4.0, "n02": 4.5}), 2.0)
    assert led.tolist() == pytest.approx([1 - np.exp(-2.0), 0.0, 0.0])
    # the only unit with an onset leads by all; no onset at all, no timing
    assert lead_scores(pd.Series({"n00": 0.0, "n01": np.nan}), 2.0).tolist() == [1.0, 0.0]
    assert lead_scores(pd.Series({"n00": np.nan, "n01": np.nan}), 2.0).tolist() == [0.0, 0.0]
    # in the ranking, a switch
    counts, activity = _neighbour_job(), _activity(8)
    by_lag = rank_units("job-x", counts, activity, SpatialConfig(timing_by_lead=False)).set_index("node")
    by_lead = rank_units("job-x", counts, activity, SpatialConfig()).set_index("node")
    assert by_lag.loc["n05", "combined_score"] > by_lead.loc["n05", "combined_score"]


def test_a_unit_that_reported_no_end_where_its_peers_did_is_silent():
    # issue #18, 36039's HF Trainer node_down: the non-main ranks print no timestamp after
    # start-up, so the dead node's stop cannot be dated; every survivor's torchrun printed its
    # failure summary, the dead node's printed nothing
    activity = _activity(4, n_error={2: 0}).set_index("node").assign(reported_end=[True, True, False, True])
    result = silence(activity, SpatialConfig())
    assert result["unended"].tolist() == result["silent"].tolist() == [False, False, True, False]
    assert not result["stopped"].any()  # no stop to date: no onset from it
    assert not silence(activity, SpatialConfig(unended_is_silent=False))["silent"].any()
    # too few reported ends to expect one: 2 of 4 is under end_share (0.75)
    half = activity.assign(reported_end=[True, False, False, True])
    assert not silence(half, SpatialConfig())["silent"].any()
    assert silence(half, SpatialConfig(end_share=0.5))["silent"].tolist() == [False, True, True, False]
    # no launcher that reports (null: no patterns read) or none reported: nobody is unended
    assert not silence(activity.assign(reported_end=None), SpatialConfig())["silent"].any()
    assert not silence(activity.assign(reported_end=False), SpatialConfig())["silent"].any()
    # of two units, the share is of the other unit (36041's two-node DeepSpeed node_down: the
    # survivor's SIGTERM notice came 14 s after the dead node's last line, under silent_min_gap_s)
    pair = _activity(2, n_error={1: 0}).set_index("node").assign(reported_end=[True, False])
    assert silence(pair, SpatialConfig())["silent"].tolist() == [False, True]
    assert not silence(pair, SpatialConfig(unended_among_others=False))["silent"].any()
    # three of four, against the job's units or the others': the same
    assert silence(activity, SpatialConfig(unended_among_others=False))["silent"].tolist() == [False, False, True, False]
    # in the ranking: n02 went down with its launcher at 985 s, its last timestamp no earlier than
    # its peers' (untimed files); it gains the silence weight, and the reason in words
    facts, dead = _dead_node_job(985.0)
    dead = dead.assign(reported_end=[True, True, False, True])
    on = rank_units("job-u", facts, dead, SpatialConfig()).set_index("node")
    off = rank_units("job-u", facts, dead, SpatialConfig(unended_is_silent=False)).set_index("node")
    assert on.loc["n02", "silent"] and not off.loc["n02", "silent"]
    assert on.loc["n02", "combined_score"] - off.loc["n02", "combined_score"] == pytest.approx(SpatialConfig().silence_weight)
    assert on.loc["n02", "rank"] == off.loc["n02", "rank"] == 2  # behind n01, whose own watchdog timed out first
    assert "silent: no end of its own (no failure summary, no notice to stop) where its peers reported theirs" \
        in on.loc["n02", "signals"]


@pytest.mark.spark
def test_rank_nodes_counts_the_peers_naming_a_node(message_events):
    rows = rank_nodes(message_events).toPandas().set_index("node")
    assert rows["named_by"].to_dict() == {"h1": 0, "h2": 0, "h3": 2}
    assert list(rows.columns) == [c for c in DIAGNOSIS_NODES_COLUMNS if c != "node"]


def test_unit_input_settings_are_the_settings_configured_unit_inputs_reads():
    """``rerank`` refuses to change UNIT_INPUT_SETTINGS offline: a setting that starts to shape the
    inputs there must join the list."""
    import ast
    import inspect

    from l4spark.spatial.ranking import UNIT_INPUT_SETTINGS, configured_unit_inputs

    read = {node.attr for node in ast.walk(ast.parse(inspect.getsource(configured_unit_inputs)))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "config"}
    assert sorted(read) == sorted(UNIT_INPUT_SETTINGS)


# ---- end to end ----------------------------------------------------------------------------


@pytest.mark.spark
def test_generated_fleet_faulty_nodes_rank_first(spark, test_config, tmp_path):
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet
    from l4spark.io.storage import read_table

    fleet = tmp_path / "fleet"
    simulate_fleet(fleet, FleetOptions(seed=3, jobs=3, nodes=(8, 8), ranks_per_node=2, iterations=20,
                                       failed_share=1.0, fault_kinds=("gpu_ecc_error", "node_down", "kernel_exec_failure")))
    parse_jobs(spark, test_config, fleet, progress=lambda m: None)
    labels = {p.stem: json.loads(p.read_text()) for p in (fleet / "_labels").glob("*.json")}
    events = read_table(spark, test_config.storage, "events")
    rows = rank_nodes(events).toPandas()
    write_diagnosis_nodes(spark.createDataFrame(rows, schema=rank_nodes(events).schema), test_config.storage, list(labels))
    stored = pq.read_table(test_config.storage.warehouse + "/diagnosis_nodes").to_pandas()
    assert len(stored) == 3 * 8
    for job_id, label in labels.items():
        first = rows[(rows["job_id"] == job_id) & (rows["rank"] == 1)].iloc[0]
        assert first["node"] == label["faulty_nodes"][0], (label["fault_kind"], first.to_dict())
        assert bool(first["suspect"])


def test_a_node_most_peers_name_outranks_one_that_only_logs_less():
    """A dead node's peers all time out naming it; another node logs far fewer lines only
    because of its role (no rank 0 on it) and keeps logging to the end: the named one is first."""
    rows = []
    for i in range(8):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0), _fact(node, "iteration", 200, 20.0),
                 _mention(node, "bootstrap", f"ip:10.0.0.{i + 1}", None, loud=0)]
        if node != "n03":  # every peer of n03 reports the timeout on it
            rows += [_fact(node, "timeout", 2, 900.0), _mention(node, "timeout", "ip:10.0.0.4", 900.0)]
    rows += [_fact("n06", "role_warning", 5, 50.0)]
    counts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    activity = _activity(8, n_lines={6: 200}, last_s={3: 899.0})
    # one score, no tier: which wins is the weights' business. Named by all seven others, n03's
    # blame is 1.0; worth 0.4 (or the default 0.8) it beats n06's extra event and far fewer lines
    # (0.733 + 0.1) with n03's 0.5 (isolated only by what it lacks) + the blame weight
    # (n06's truncation counted as before session 53: it logs an event more than its peers, which
    # now explains why it is short, truncated_needs_quiet)
    ranked = rank_units("job-y", counts, activity,
                        SpatialConfig(blame_weight=0.4, truncated_needs_quiet=False)).set_index("node")
    assert ranked.loc["n06", "silent"] and ranked.loc["n06", "signals"][0] == "silent: far fewer lines than its peers"
    assert not rank_units("job-y", counts, activity, SpatialConfig(blame_weight=0.4)).set_index("node").loc["n06", "silent"]
    assert ranked.loc["n03", "named_by"] == 7
    assert ranked.loc["n03", "rank"] == 1 and ranked.loc["n03", "suspect"]
    assert ranked.loc["n06", "rank"] > 1
    default = rank_units("job-y", counts, activity, SpatialConfig()).set_index("node")
    assert default.loc["n03", "combined_score"] == pytest.approx(0.5 + SpatialConfig().blame_weight)
    # the same quiet node that also stopped early without an error line is a dead machine: first
    stopped = _activity(8, n_lines={6: 200}, last_s={3: 899.0, 6: 400.0}, n_error={6: 0})
    ranked = rank_units("job-y", counts, stopped, SpatialConfig(blame_weight=0.4)).set_index("node")
    assert ranked.loc["n06", "rank"] == 1 and ranked.loc["n03", "rank"] == 2


def test_a_node_that_stopped_early_is_said_to_have_stopped_not_only_to_log_less():
    """A node that went down hours before its peers has few lines because it stopped. Its
    reason said only "far fewer lines" (the truncation was written before the stop), so the dead
    node's known fault, whose signature is the stop, was not named: the job's class was its
    peers' IB errors, network (session 47: three node_down jobs of 36027, 36043 and 36065). A
    node that only logs less by role keeps that reason."""
    from l4spark.diagnosis.config import DiagnosisConfig
    from l4spark.diagnosis.patterns import PatternMatch
    from l4spark.diagnosis.scoring import with_unit_faults

    rows = []
    for i in range(8):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0), _fact(node, "iteration", 200 if i != 3 else 20, 20.0)]
        if node != "n03":
            rows += [_fact(node, "ib_error", 2, 30000.0)]
    counts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    activity = _activity(8, n_lines={3: 30, 6: 200}, last_s={i: 30000.0 + i for i in range(8)} | {3: 900.0},
                         n_error={3: 0})
    ranked = rank_units("job-z", counts, activity, SpatialConfig()).set_index("node")
    assert ranked.loc["n03", "rank"] == 1
    assert ranked.loc["n03", "signals"][0] == "silent: stopped 29104 s before its peers, without an error line"
    assert ranked.loc["n06", "signals"][0] == "silent: far fewer lines than its peers"
    ib = PatternMatch("ib-completion-error", "IB", "network", 1.0, ("E_ib",))
    nodes = ranked.reset_index().assign(job_id="job-z")
    got = with_unit_faults({"job-z": [ib]}, nodes, DiagnosisConfig())
    assert [m.pattern_id for m in got["job-z"]] == ["node-down-unit", "ib-completion-error"]


# ---- issue #18: one score, names given by design, role-relative silence, stragglers ----------


def _store_host_job() -> pd.DataFrame:
    """8 nodes, rank 0 on n00 (the c10d store host). n05's GPU fails; its ring neighbours n04
    and n06 name n05's address; once n00's launcher is torn down every survivor's store
    client names n00 while it retries (n00 itself logs nothing unusual)."""
    rows = []
    for i in range(8):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0 + 0.01 * i), _fact(node, "iteration", 200, 20.0),
                 _fact(node, "bootstrap", 4, 11.0), _mention(node, "bootstrap", f"ip:10.0.0.{i + 1}", None, loud=0)]
        if node not in ("n00", "n05"):
            rows += [_fact(node, "store_recv_failed", 40, 965.0), _mention(node, "store_recv_failed", "host:n00", 965.0)]
    rows += [_fact("n05", "xid", 1, 950.0), _fact("n05", "cuda_error", 1, 950.2)]
    for node in ("n04", "n06"):
        rows += [_fact(node, "ib_error", 3, 957.0), _mention(node, "ib_error", "ip:10.0.0.6", 957.0)]
    return pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])


def test_the_store_host_named_by_every_survivor_is_not_the_suspect():
    ranked = rank_units("job-s", _store_host_job(), _activity(8), SpatialConfig()).set_index("node")
    assert ranked.loc["n00", "named_by"] == 6 and ranked.loc["n05", "named_by"] == 2
    assert ranked.loc["n05", "rank"] == 1 and ranked.loc["n00", "rank"] > 1
    # one score orders the units: ranks follow combined_score, whatever the signal behind it
    ordered = ranked.sort_values("rank")["combined_score"].to_numpy()
    assert (np.diff(ordered) <= 0).all()
    # without the discount the six store-client names make n00 the most blamed unit
    from l4spark.spatial.score import combine, unit_signals

    signals, details = unit_signals(_store_host_job(), _activity(8), SpatialConfig())
    nodes = details["activity"]["node"]
    blame = combine(signals, SpatialConfig()).set_index(nodes)["blame"]
    raw = combine(signals, SpatialConfig(blame_discount=False)).set_index(nodes)["blame"]
    # six of seven name n00: from the second namer on, 6 x (1 - 5/7) = 12/7 against n05's two full names
    assert blame.idxmax() == "n05" and blame["n00"] == pytest.approx(6 / 7 * blame["n05"])
    # each name discounted (first_name_whole off): 6 x (1 - 6/8) = 1.5
    smoothed = combine(*unit_signals(_store_host_job(), _activity(8), SpatialConfig(first_name_whole=False))[:1],
                       SpatialConfig(first_name_whole=False)).set_index(nodes)["blame"]
    assert smoothed["n00"] == pytest.approx(0.75 * smoothed["n05"])
    assert raw.idxmax() == "n00" and raw["n00"] == pytest.approx(6 / 7)  # six of the seven others


def test_one_name_of_the_store_host_is_whole():
    # issue #18, 36047's host OOM kill: the kernel killed rank 0 on n00 (the store host) without a
    # line; both nodes' NCCL IB completion errors name the other end of the link, and n01's
    # ncclRemoteError says a peer failed. Each one name: n00's was halved by design (1 - 1/2)
    # and n01 came first on it, although n00 is the isolated unit
    rows = [_fact(node, "iteration", 200, 20.0) for node in ("n00", "n01")]
    rows += [_mention("n00", "bootstrap", "ip:10.0.0.1", None, loud=0), _mention("n01", "bootstrap", "ip:10.0.0.2", None, loud=0),
             _fact("n00", "bootstrap", 4, 11.0), _fact("n01", "bootstrap", 4, 11.0),
             _fact("n00", "ib_completion", 1, None), _mention("n00", "ib_completion", "ip:10.0.0.2", None),
             _fact("n00", "memory_report", 2, None),
             _fact("n01", "ib_completion", 4, None), _mention("n01", "ib_completion", "ip:10.0.0.1", None),
             _fact("n01", "remote_error", 12, 990.0, remote=True), _fact("n01", "abort", 2, 990.1)]
    counts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    activity = _activity(2)
    ranked = rank_units("job-o", counts, activity, SpatialConfig()).set_index("node")
    assert ranked.loc["n00", "rank"] == 1 and ranked.loc["n00", "named_by"] == ranked.loc["n01", "named_by"] == 1
    halved = rank_units("job-o", counts, activity, SpatialConfig(first_name_whole=False)).set_index("node")
    assert halved.loc["n01", "rank"] == 1
    assert "weight 0.50" in " ".join(halved.loc["n00", "signals"]) and "weight 1.00" in " ".join(ranked.loc["n00", "signals"])


def test_a_silent_unit_gets_the_silence_weight_not_a_tier():
    counts, activity = _neighbour_job(), _activity(8, last_s={2: 300.0}, n_error={2: 0})
    ranked = rank_units("job-t", counts, activity, SpatialConfig()).set_index("node")
    assert ranked.loc["n02", "silent"]
    unweighted = rank_units("job-t", counts, activity, SpatialConfig(silence_weight=0.0)).set_index("node")
    assert ranked.loc["n02", "combined_score"] - unweighted.loc["n02", "combined_score"] == pytest.approx(SpatialConfig().silence_weight)
    # a silence weight below the faulty node's other evidence leaves the faulty node first
    light = rank_units("job-t", counts, activity, SpatialConfig(silence_weight=0.1)).set_index("node")
    assert light.loc["n05", "rank"] == 1 and light.loc["n02", "rank"] > 1


def test_a_unit_short_of_lines_that_logged_its_own_failure_is_not_silent():
    # issue #18, 36149's MindSpeed node_down: n02 died with no end of its own while its peers
    # reported theirs; its ring neighbour n01 waited for it, timed out, crashed first and so wrote
    # far fewer lines than the others, which were torn down later. n01's timeout lines are its
    # evidence (it logs them more than its peers) and why it is short: the dead node comes first.
    rows = _healthy_counts(8) + [("n01", "socket_timeout", 8), ("n01", "allreduce_error", 8),
                                 ("n03", "socket_timeout", 8), ("n03", "allreduce_error", 8)]
    ends = {i: i != 2 for i in range(8)}
    activity = _activity(8, n_lines={1: 300}, reported_end=ends)
    ranked = rank_units("job-r", _counts(rows), activity, SpatialConfig()).set_index("node")
    assert ranked.loc["n02", "rank"] == 1 and ranked.loc["n02", "silent"]
    assert not ranked.loc["n01", "silent"] and not any("far fewer" in s for s in ranked.loc["n01", "signals"])
    before = rank_units("job-r", _counts(rows), activity, SpatialConfig(truncated_needs_quiet=False)).set_index("node")
    assert before.loc["n01", "rank"] == 1 and "silent: far fewer lines than its peers" in before.loc["n01", "signals"]
    # a unit short of lines that logs nothing more than its peers keeps the bonus (36045's host
    # OOM kill: the node whose processes were killed wrote less, and no line about it)
    quiet = rank_units("job-q", _counts(_healthy_counts(8)), _activity(8, n_lines={4: 300}), SpatialConfig())
    assert quiet.iloc[0]["node"] == "n04" and "silent: far fewer lines than its peers" in quiet.iloc[0]["signals"]


def test_silence_is_judged_against_peers_of_the_same_role():
    # rank 0's node and the last stage's log 5x more by role; three of six peers log 450 lines,
    # three 1000: against every unit (median 1000) the 450s look truncated, against the peers
    # (median 725) they do not
    lines = {0: 5000, 7: 5000, 1: 1000, 2: 1000, 3: 1000, 4: 450, 5: 450, 6: 450}
    activity = _activity(8, n_lines=lines).set_index("node")
    result = silence(activity, SpatialConfig())
    assert not result["silent"].any()
    alone = silence(activity.drop(columns=["min_rank", "max_rank"]), SpatialConfig())  # no roles: all are peers
    assert alone["silent"][alone["silent"]].index.tolist() == ["n04", "n05", "n06"]


def test_the_rank_every_other_rank_waits_for_ranks_first_without_any_error():
    rows = []
    for i in range(8):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0), _fact(node, "iteration", 200, 20.0)]
    rows += [_fact("n02", "role_warning", 9, 30.0)]  # a unit isolated by routine output
    counts = pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:])
    activity = _activity(8, slow_z={3: 40.0}, n_error={i: 0 for i in range(8)})
    ranked = rank_units("job-u", counts, activity, SpatialConfig()).set_index("node")
    assert ranked.loc["n03", "rank"] == 1 and any(s.startswith("slow:") for s in ranked.loc["n03", "signals"])
    # the straggler detector's reports (slow:<rank> tokens) name a rank of n06
    detector = pd.DataFrame(rows + [_mention("n00", "straggler_report", "slow:13", 100.0 + k) for k in range(5)],
                            columns=UNIT_FACTS_COLUMNS[1:])
    ranked = rank_units("job-u", detector, _activity(8, n_error={i: 0 for i in range(8)}), SpatialConfig()).set_index("node")
    assert ranked.loc["n06", "rank"] == 1
    assert rank_units("job-u", detector, _activity(8), SpatialConfig(slowness_weight=0.0)).iloc[0]["node"] != "n06"


@pytest.mark.spark
def test_unit_slowness_reads_megatron_per_rank_timers(spark):
    from l4spark.spatial.ranking import unit_slowness

    rows, line = [], 0
    for block in range(3):
        for text in ["times across ranks (ms):", "  forward-compute:"] + \
                [f"     rank {r:2d}: {(150.0 if r == 5 and block else 100.0) + 0.3 * ((r * 7 + block) % 5):.2f}" for r in range(8)]:
            line += 1
            rows.append(("job-v", "n3", 7, line, text))
    for r in range(8):
        rows.append(("job-v", f"n{r // 2}", r, 1, "start"))
    events = spark.createDataFrame(rows, "job_id string, node string, rank int, line_no long, message string")
    slow = unit_slowness(events).toPandas().set_index("node")["slow_z"]
    assert slow.idxmax() == "n2" and slow["n2"] > 20 and slow.drop("n2").max() < 3


@pytest.mark.spark
def test_a_straggler_reported_only_in_the_last_timer_block_is_slow_a_spike_before_is_not(spark):
    """Megatron prints its per-rank timers every few log intervals: a straggler that began
    shortly before the job was stopped shows in the last block only (two MindSpeed jobs of
    fresh seed 14011, 1.3x and 1.6x slower ranks, ranked 2nd and 4th+). The last block is the
    state the job ended in; one slow report earlier in the run is not sustained."""
    from l4spark.spatial.ranking import unit_slowness

    rows = []
    for job_id, slow_block in (("job-last", 3), ("job-middle", 1)):
        line = 0
        for block in range(4):
            for text in ["times across ranks (ms):", "  forward-compute:"] + \
                    [f"     rank {r:2d}: {(130.0 if r == 5 and block == slow_block else 100.0) + 0.3 * ((r * 7 + block) % 5):.2f}"
                     for r in range(8)]:
                line += 1
                rows.append((job_id, "n3", 7, line, text))
        rows += [(job_id, f"n{r // 2}", r, 1, "start") for r in range(8)]
    events = spark.createDataFrame(rows, "job_id string, node string, rank int, line_no long, message string")
    slow = unit_slowness(events).toPandas()
    last = slow[slow["job_id"] == "job-last"].set_index("node")["slow_z"]
    middle = slow[slow["job_id"] == "job-middle"].set_index("node")["slow_z"]
    assert last.idxmax() == "n2" and last["n2"] > 2 * SpatialConfig().slow_z_min and last.drop("n2").max() < 3
    assert middle.max() < 3


def test_a_store_host_named_by_every_rank_does_not_outrank_a_faulty_node_nobody_names():
    """16 nodes, a CUDA kernel failure on n09 whose peers' errors name nobody; every other
    node's store client names n00 (rank 0, the c10d store host), which times out on the store
    more than the two others that report it. The store host's names are given by design:
    discounted, they are a small share of the 15 others, and n09's own error events, logged
    first, rank it first (issue #18: dividing the discounted names by the most named unit's
    count gave n00 full blame, 0.979 against n09's 0.888)."""
    rows = []
    for i in range(16):
        node = f"n{i:02d}"
        rows += [_fact(node, "init", 4, 10.0), _fact(node, "iteration", 200, 20.0),
                 _fact(node, "bootstrap", 4, 11.0), _mention(node, "bootstrap", f"ip:10.0.0.{i + 1}", None, loud=0)]
        if node != "n00":
            rows += [_fact(node, "store_recv_failed", 30, 965.0), _mention(node, "store_recv_failed", "host:n00", 965.0)]
    rows += [_fact("n00", "tcpstore_timeout", 6, 960.0), _fact("n01", "tcpstore_timeout", 1, 960.0),
             _fact("n02", "tcpstore_timeout", 1, 960.0),
             _fact("n09", "cuda_kernel_error", 2, 950.0), _fact("n09", "xid_13", 1, 950.1)]
    ranked = rank_units("job-k", pd.DataFrame(rows, columns=UNIT_FACTS_COLUMNS[1:]), _activity(16),
                        SpatialConfig()).set_index("node")
    assert ranked.loc["n00", "named_by"] == 15 and ranked.loc["n09", "named_by"] == 0
    assert ranked.loc["n00", "score"] > 0.7  # isolated too: the blame alone decides
    assert ranked.loc["n09", "rank"] == 1 and ranked.loc["n00", "rank"] == 2


def test_rank_numbers_of_a_smaller_communicator_name_nobody():
    # issue #18 (MindSpeed hang, fresh 36019): Megatron runs its collectives in the data-parallel
    # group; HCCL's EI0002 then names the remote rank *within that group*. With tensor parallel 2
    # over 4 nodes of 2 ranks, group rank 3 is global rank 6 (n3, the hung node), but read as a
    # global rank it named n1. The tag names the group's communicator, whose size CANN states
    world = "10.0.0.1%enp189s0f0_60000_0_111"
    group = "10.0.0.1%enp189s0f0_60000_0_222"
    activity = pd.DataFrame({"node": ["n0", "n1", "n2", "n3"], "ranks": [[0, 1], [2, 3], [4, 5], [6, 7]]},
                            index=["n0", "n1", "n2", "n3"])

    def mentions(group_line: str | None, tag: str, stated: str | None = None) -> pd.DataFrame:
        rows = []
        for unit in ("n0", "n2"):  # their ranks wait for group rank 3
            rows += [(unit, unit, "notify_wait", "rank:3", 1, 1199.0, True),
                     (unit, unit, "notify_wait", "comm:" + tag + "ringAllReduceExecutor_device", 1, 1199.0, True)]
            if stated:
                rows.append((unit, unit, "notify_wait", "commsize::" + stated, 1, 1199.0, True))
            rows.append((unit, unit, "init", "commsize:%s:8" % world, 0, None, False))
            if group_line:
                rows.append((unit, unit, "init", "commsize:%s:%s" % (group, group_line), 0, None, False))
        return pd.DataFrame(rows, columns=["unit", "node", "event_id", "token", "n_loud", "first_s", "candidate"])

    offsets = pd.Series(0.0, index=activity.index)

    def named(frame: pd.DataFrame, on: bool = True) -> dict:
        return peer_mentions(frame, activity, offsets, 1190.0, 60.0, global_small_ranks=True,
                             group_ranks=on)["named_by"].to_dict()

    nobody = {"n0": 0, "n1": 0, "n2": 0, "n3": 0}
    # the tag's communicator is stated with 4 ranks: its numbers are the group's
    assert named(mentions("4", group)) == nobody
    assert named(mentions("4", group), on=False) == {"n0": 0, "n1": 2, "n2": 0, "n3": 0}
    # not stated, but the job's communicator is, and the tag names another one
    assert named(mentions(None, group)) == nobody
    # the line states its communicator's size itself (EI0002's group information)
    assert named(mentions(None, group, stated="4").query("token != 'commsize:%s:8'" % world)) == nobody
    # the world's communicator: global ranks, read as before
    assert named(mentions("4", world)) == {"n0": 0, "n1": 2, "n2": 0, "n3": 0}
    assert named(mentions(None, world, stated="8")) == {"n0": 0, "n1": 2, "n2": 0, "n3": 0}
    # nothing states a size: as before
    bare = mentions(None, group)
    assert named(bare[~bare["token"].str.startswith("commsize:")]) == {"n0": 0, "n1": 2, "n2": 0, "n3": 0}


def test_rank_numbers_of_an_event_tagging_several_communicators_name_nobody():
    # issue #18 (fresh 36089, MindSpeed hang, tensor parallel 4): no line stated a communicator's
    # size, and the peers' EI0002 lines tagged the four data-parallel groups' communicators; their
    # "remote rank [10]" (group rank 10: the hung rank's) read as global rank 10 named another node.
    # Here tensor parallel 2 over 4 nodes of 2 ranks: group rank 3 is global rank 6 or 7 (n3)
    activity = pd.DataFrame({"node": ["n0", "n1", "n2", "n3"], "ranks": [[0, 1], [2, 3], [4, 5], [6, 7]]},
                            index=["n0", "n1", "n2", "n3"])
    offsets = pd.Series(0.0, index=activity.index)

    def mentions(tags: dict[str, list[str]]) -> pd.DataFrame:
        rows = []
        for unit, unit_tags in tags.items():
            rows.append((unit, unit, "notify_wait", "rank:3", 1, 1199.0, True))
            rows += [(unit, unit, "notify_wait", "comm:" + tag, 1, 1199.0, True) for tag in unit_tags]
        return pd.DataFrame(rows, columns=["unit", "node", "event_id", "token", "n_loud", "first_s", "candidate"])

    def named(frame: pd.DataFrame, several: bool = True) -> dict:
        return peer_mentions(frame, activity, offsets, 1190.0, 60.0, global_small_ranks=True, group_ranks=True,
                             several_communicators=several)["named_by"].to_dict()

    first, second = "10.0.0.1%enp189s0f0_60000_0_222", "10.0.0.1%enp189s0f0_60000_1_223"
    groups = {"n0": [first, second], "n2": [first, second]}
    assert named(mentions(groups)) == {"n0": 0, "n1": 0, "n2": 0, "n3": 0}
    assert named(mentions(groups), several=False) == {"n0": 0, "n1": 2, "n2": 0, "n3": 0}
    # each unit tags one, but not the same one
    assert named(mentions({"n0": [first], "n2": [second]})) == {"n0": 0, "n1": 0, "n2": 0, "n3": 0}
    # one communicator, whatever its tags run on with (the executor's name): the world's, global ranks
    world = {"n0": [first + "ringAllReduceMeshSmallCountExecutor_device"], "n2": [first + "AllGatherExecutor_device", first]}
    assert named(mentions(world)) == {"n0": 0, "n1": 2, "n2": 0, "n3": 0}


def test_communicator_sizes_are_read_from_cann_wordings_not_from_list_indexes():
    import re

    from l4spark.spatial.ranking import COMM_ID_PATTERN, COMM_SIZE_PATTERN, COMM_TAG_PATTERN
    from l4spark.spatial.signals import tag_communicator

    def size(line: str) -> list[str]:
        return re.findall(COMM_SIZE_PATTERN, line)

    # CANN's run logs and EI0002's group information (hcomm's troubleshooting guide, task_exception_handler.cc)
    key = "[Communicator Key Info]identifier[127.0.0.1%enp_60000_0_1765367607599032] rankSize[8] serverNum[1]"
    entry = ("Entry-HcclCommInitRootInfoConfigInner:ranks[16], rank[0], rootinfo: host ip[127.10.0.1] "
             "port[60000] nicDeploy[1] identifier[group_name_0], deviceLogicId[0]")
    group = "group information: [group:[x], user define information[], rankSize[4], rankId[1], peerRankId[3]]"
    assert size(key) == ["8"] and re.findall(COMM_ID_PATTERN, key) == ["127.0.0.1%enp_60000_0_1765367607599032"]
    assert size(entry) == ["16"] and re.findall(COMM_ID_PATTERN, entry) == ["group_name_0"]
    assert size(group) == ["4"]
    # a list index in any framework's traceback states no communicator
    assert size("    src = ranks[0]") == [] and size("[rank3]:     peer = group_ranks[1]") == []
    tag = "tag[AllReduce_80.48.9.154%enp48s3u1u1_60000_0_1779783710697217ringAllReduceMeshSmallCountExecutor_device]"
    assert re.findall(COMM_TAG_PATTERN, tag) == ["80.48.9.154%enp48s3u1u1_60000_0_1779783710697217ringAllReduceMeshSmallCountExecutor_device"]
    # the communicator a tag names, without the executor's name it may run on with
    assert tag_communicator(re.findall(COMM_TAG_PATTERN, tag)[0]) == "80.48.9.154%enp48s3u1u1_60000_0_1779783710697217"
    assert tag_communicator("9f3c2a_0") == "9f3c2a_0" and tag_communicator("group") == "group"
