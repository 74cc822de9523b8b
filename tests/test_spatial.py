"""Spatial comparison: normalisation, silence, ranking, baselines, the diagnosis_nodes table."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from l4spark.errors import ConfigError
from l4spark.spatial import (
    DIAGNOSIS_NODES_COLUMNS,
    SpatialConfig,
    baseline_rankings,
    rank_nodes,
    rank_units,
    roles,
    silence,
    size_factors,
    spatial_events,
    top_k_hit,
    write_diagnosis_nodes,
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
        "first_error_s": [100.0] * n_units, "last_s": [1000.0 + i % 3 for i in range(n_units)]})
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
    assert result.loc["n03", "silent_gap_s"] == pytest.approx(600.5)  # peers median 1000.5
    assert result.loc["n06", "missing_files"] == 1


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
    assert first["silent_gap_s"] == pytest.approx(700.5)


def test_a_job_of_two_units_is_ranked_without_a_forest():
    ranked = rank_units("job-x", _counts([("n00", "e", 1), ("n01", "e", 2)]), _activity(2), SpatialConfig())
    assert ranked["score"].tolist() == [0.5, 0.5]
    assert ranked["suspect"].tolist() == [False, False]


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
    events = spatial_events(rows).toPandas().sort_values("event_id")
    suspects = rows.where("suspect").toPandas()
    assert set(events["event_id"]) == {e for ev in suspects["evidence"] for e in ev}
    assert set(events["source"]) == {"spatial"}


# ---- end to end ----------------------------------------------------------------------------


@pytest.mark.spark
def test_generated_fleet_faulty_nodes_rank_first(spark, test_config, tmp_path):
    from l4spark.parse import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet
    from l4spark.storage import read_table

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
