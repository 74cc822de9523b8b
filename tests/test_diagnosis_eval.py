"""l4spark evaluate's figures: per fault kind and per job size (pure pandas)."""

from __future__ import annotations

import pandas as pd

from l4spark.evaluation.diagnosis_eval import format_result, summarise


def _job(job_id: str, kind: str, n_nodes: int, tp: int, fp: int, top1: float | None) -> dict:
    row = {"job_id": job_id, "fault_kind": kind, "n_nodes": n_nodes, "tp": tp, "fp": fp, "fn": 0,
           "has_faulty_nodes": top1 is not None, "stage_ok": True, "iteration_hit": None}
    for method in ("l4spark", "error_time", "error_count"):
        for k in (1, 3, 5, 8):
            row[f"{method}_top{k}"] = top1 if k == 1 or top1 is None else 1.0
    return row


def test_figures_are_split_by_the_number_of_nodes_of_a_job():
    per_job = pd.DataFrame([_job("a", "oom", 2, 1, 1, 0.0), _job("b", "oom", 2, 2, 0, 1.0),
                            _job("c", "hang", 8, 3, 1, 1.0), _job("d", "program_bug", 8, 1, 0, None)])
    result = summarise(per_job)
    assert list(result["per_size"]) == ["2", "8"]
    two, eight = result["per_size"]["2"], result["per_size"]["8"]
    assert (two["jobs"], two["node_jobs"], two["l4spark_top1"], two["precision"]) == (2, 2, 0.5, 0.75)
    assert (eight["jobs"], eight["node_jobs"], eight["l4spark_top1"], eight["precision"]) == (2, 1, 1.0, 0.8)
    assert result["overall"]["l4spark_top1"] == round(2 / 3, 4)
    text = format_result({**result, "failed_jobs": 4, "fleet": "f", "diagnosis_seconds": 1.0, "errors": []})
    assert "nodes per job" in text and text.splitlines()[-1].startswith("8 ")


def _classed(job_id: str, kind: str, label: str, got: str | None, in_library: bool) -> dict:
    return {**_job(job_id, kind, 4, 1, 0, None), "fault_class": label, "got_fault_class": got,
            "class_ok": got == label, "class_in_library": in_library, "no_pattern": got is None}


def test_fault_class_is_scored_over_every_job_and_over_the_classes_the_library_has():
    per_job = pd.DataFrame([_classed("a", "host_oom_kill", "node", "node", True),
                            _classed("b", "host_oom_kill", "node", "network", True),
                            _classed("c", "straggler", "slowdown", None, False),
                            _classed("d", "oom", "out_of_memory", "out_of_memory", True)])
    result = summarise(per_job)
    overall, oom_kill = result["overall"], result["per_kind"]["host_oom_kill"]
    # the straggler counts (wrong, no match) over every job and is left out of the library's classes
    assert (overall["fault_class_accuracy"], overall["class_jobs"], overall["fault_class_accuracy_in_library"],
            overall["no_pattern_share"]) == (0.5, 3, round(2 / 3, 4), 0.25)
    assert (oom_kill["fault_class_accuracy"], oom_kill["no_pattern_share"]) == (0.5, 0.0)
    text = format_result({**result, "failed_jobs": 4, "fleet": "f", "diagnosis_seconds": 1.0, "errors": []})
    assert "fault class" in text and "no matched pattern" in text


def test_evaluate_scores_the_fault_class_of_diagnosis_jobs_against_the_labels(spark, test_config, tmp_path, capsys):
    """A small fleet end to end: the figure is the share of labelled jobs whose diagnosis_jobs
    fault_class is the label's, per kind too. Its dump holds the ranking's inputs: ranked again
    without Spark they give the diagnosis' ranking, score for score (evaluation/rerank.py)."""
    from l4spark.evaluation.diagnosis_eval import evaluate_fleet
    from l4spark.evaluation.labels import load_labels
    from l4spark.io.storage import read_table
    from l4spark.simulate import FleetOptions, simulate_fleet

    fleet = tmp_path / "fleet"
    simulate_fleet(fleet, FleetOptions(seed=5, jobs=6, nodes=(2, 2), ranks_per_node=2, iterations=30, failed_share=0.5,
                                       fault_kinds=("gpu_ecc_error", "dataset_read_failure"), frameworks=("megatron",)))
    result = evaluate_fleet(spark, test_config, fleet, ablation=False, dump=tmp_path / "dump", progress=lambda *_: None)
    labels = load_labels(fleet)
    got = dict(read_table(spark, test_config.storage, "diagnosis_jobs").select("job_id", "fault_class").collect())
    right = [got.get(j) == label.fault_class for j, label in labels.items()]
    assert result["overall"]["fault_class_accuracy"] == round(sum(right) / len(right), 4)
    for kind, block in result["per_kind"].items():
        jobs = [j for j, label in labels.items() if label.fault_kind == kind]
        assert block["fault_class_accuracy"] == round(sum(got.get(j) == labels[j].fault_class for j in jobs) / len(jobs), 4)
    assert result["per_kind"]["gpu_ecc_error"]["fault_class_accuracy"] == 1.0
    _ranked_again_from_the_dump(tmp_path / "dump", capsys)
    _scored_again_from_the_dump(tmp_path / "dump", capsys)


def _ranked_again_from_the_dump(dump, capsys) -> None:
    import pytest

    from l4spark.config import load_config
    from l4spark.evaluation.rerank import main, outcomes, rank_again, read_inputs

    facts, activity, lifts, per_job = read_inputs(dump)
    written = pd.read_parquet(dump / "nodes.parquet")
    # the diagnosis flags the unit facts of its scored events (spatial.pair_scored_events); a dump
    # written without the flag gets the same one from its scored events
    scored = pd.read_parquet(dump / "scored.parquet")
    pairs = set(zip(scored["job_id"], scored["event_id"]))
    stored = pd.read_parquet(dump / "ranking_facts.parquet")
    assert stored["scored"].tolist() == [(j, e) in pairs for j, e in zip(stored["job_id"], stored["event_id"])]
    assert stored["scored"].any() and not stored["scored"].all()
    stored.drop(columns="scored").to_parquet(dump / "ranking_facts.parquet")
    assert read_inputs(dump)[0]["scored"].tolist() == stored["scored"].tolist()
    stored.to_parquet(dump / "ranking_facts.parquet")
    assert len(lifts), "an ECC error printed by one node is a lone printer of a known fault"
    config = load_config()

    def ranking(nodes: pd.DataFrame) -> dict:
        return {j: [(r.node, round(float(r.combined_score), 6), bool(r.suspect)) for r in g.sort_values("rank").itertuples()]
                for j, g in nodes.groupby("job_id")}

    assert ranking(rank_again(facts, activity, lifts, config)) == ranking(written)
    # and scored as evaluate scored them
    got = outcomes(rank_again(facts, activity, lifts, config), per_job).set_index("job_id")
    labelled = per_job[per_job["has_faulty_nodes"]].set_index("job_id")
    for k in ("top1", "top5"):
        assert got[k].to_dict() == labelled[f"l4spark_{k}"].to_dict()
    # without the known-fault term, each lone printer's units score the weight less
    plain = rank_again(facts, activity, lifts, load_config(overrides={"diagnosis.known_fault_weight": 0.0}))
    weight = config.diagnosis.known_fault_weight
    for row in lifts.itertuples():
        before = written[(written.job_id == row.job_id) & (written.node == row.node)]["combined_score"].astype(float)
        after = plain[(plain.job_id == row.job_id) & (plain.node == row.node)]["combined_score"].astype(float)
        assert sorted(round(b - a, 6) for b, a in zip(sorted(before), sorted(after))) == [weight] * len(before)
    n = int(per_job["has_faulty_nodes"].sum())
    assert main(["--dump", str(dump), "--json", str(dump / "base.json")]) == 0
    assert f"of {n}" in capsys.readouterr().out
    assert main(["--dump", str(dump), "--set", "diagnosis.known_fault_weight=0", "--against", str(dump / "base.json")]) == 0
    assert "against the base:" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="shapes the ranking's inputs"):
        main(["--dump", str(dump), "--set", "spatial.granularity=rank"])
    # the known-fault study with the nodes ranked again gives evaluate's class and top-1 counts,
    # the known-fault term applied once (evaluation/known_faults.py --rerank)
    from l4spark.evaluation.known_faults import main as known_faults

    assert known_faults(["--dump", str(dump), "--rerank"]) == 0
    printed = capsys.readouterr().out
    top1 = int((per_job.loc[per_job["has_faulty_nodes"], "l4spark_top1"] == 1).sum())
    assert f"node top-1 {top1} -> {top1} of {n}, fault class {int(per_job['class_ok'].sum())} -> " \
        f"{int(per_job['class_ok'].sum())} of {len(per_job)}" in printed, printed


def _scored_again_from_the_dump(dump, capsys) -> None:
    """The dump's event score inputs scored again without Spark give the diagnosis' scores and
    flags, event for event, and ``evaluate``'s event counts, job for job (evaluation/rescore.py);
    ``SCORE_SETTINGS`` is what ``score_events`` reads."""
    import pytest

    from l4spark.config import load_config
    from l4spark.diagnosis.scoring import SCORE_SETTINGS, score_events
    from l4spark.diagnosis.assemble import kept_shares
    from l4spark.evaluation.rescore import event_outcomes, main, read_score_inputs, score_again

    inputs = read_score_inputs(dump)
    config = load_config()

    def scores(frame: pd.DataFrame) -> dict:
        return {(r.job_id, r.event_id): (round(float(r.score), 4), bool(r.flagged), None if pd.isna(r.rank) else int(r.rank))
                for r in frame.itertuples()}

    again = score_again(inputs, config)
    written = pd.read_parquet(dump / "scored.parquet")
    assert scores(again) == scores(written) and written["flagged"].any()
    counts = event_outcomes(again, inputs["indicating"], inputs["per_job"]).set_index("job_id")
    per_job = inputs["per_job"].set_index("job_id")
    assert counts[["tp", "fp", "fn"]].to_dict() == per_job[["tp", "fp", "fn"]].to_dict()
    # without the cross-job weight, exactly the cross-job events score that much less
    weight = config.diagnosis.weights["cross_job"]
    plain = scores(score_again(inputs, load_config(overrides={"diagnosis.weights.cross_job": 0.0})))
    before = scores(again)
    cross = set(zip(again.loc[again["cross_job"], "job_id"], again.loc[again["cross_job"], "event_id"]))
    assert cross and all(round(before[k][0] - plain[k][0], 4) == (weight if k in cross else 0.0) for k in before)

    class Reads:
        def __init__(self, conf):
            self.conf, self.names = conf, set()

        def __getattr__(self, name):
            self.names.add(name)
            return getattr(self.conf, name)

    reads = Reads(config.diagnosis)
    score_events(inputs["score_evidence"], inputs["score_timing"], inputs["score_spatial"], inputs["score_temporal"],
                 inputs["score_hits"], kept_shares(inputs["score_shares"]), reads, nodes=inputs["nodes"])
    assert reads.names == set(SCORE_SETTINGS)

    assert main(["--dump", str(dump), "--json", str(dump / "events.json")]) == 0
    tp, fp, fn = (int(per_job[k].sum()) for k in ("tp", "fp", "fn"))
    assert f"TP/FP/FN {tp}/{fp}/{fn}" in capsys.readouterr().out
    assert main(["--dump", str(dump), "--set", "diagnosis.min_score=10", "--against", str(dump / "events.json")]) == 0
    out = capsys.readouterr().out
    assert f"TP/FP/FN 0/0/{tp + fn}" in out and f"against the base: 0 won, {tp} lost, 0 added false, {fp} removed false" in out
    for fixed in ("diagnosis.use_normal_pool=false", "diagnosis.suspect_exit_lines=false", "spatial.behind_weight=0.5"):
        with pytest.raises(SystemExit, match="not a setting of the event score alone"):
            main(["--dump", str(dump), "--set", fixed])
