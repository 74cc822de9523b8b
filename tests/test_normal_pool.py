"""The normal pool: incremental build from successful jobs, the filter, its report, end to end."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pyspark.sql import functions as F

from l4spark.config import load_config
from l4spark.errors import ConfigError
from l4spark.crossjob.fingerprint import GroupingLevel, settings_key
from l4spark.crossjob.normal_pool import (
    NormalPoolConfig,
    filter_normal_events,
    read_normal_pool,
    update_normal_pool,
)
from l4spark.io.tables import JOBS
from l4spark.io.storage import read_table, write_job_rows

pytestmark = pytest.mark.spark

LEVELS = (GroupingLevel("exact", ("model", "framework", "nodes")), GroupingLevel("framework", ("framework",)))
POOL_CONFIG = NormalPoolConfig(levels=LEVELS, min_group_jobs=2, min_support=0.5)
A = {"model": "m1", "framework": "megatron", "nodes": 2}
B = {"model": "m2", "framework": "deepspeed", "nodes": 2}
C = {"model": "m3", "framework": "hf_trainer", "nodes": 2}
KEY_A, KEY_B = settings_key(A, LEVELS[0]), settings_key(B, LEVELS[0])
FW_A, FW_B = settings_key(A, LEVELS[1]), settings_key(B, LEVELS[1])
EVENTS_SCHEMA = ("job_id string, node string, rank int, file string, line_no long, ts timestamp, level string, "
                 "event_id string, message string, stage string, iteration long")

RINGS = ("E1", "Connected all rings")
RETRY = ("E2", "retry connect attempt 1")
WARMUP = ("E3", "warmup done")


def put_job(spark, config, job_id, status, settings, lines, run_id="run-1"):
    """Register a job and replace its events; ``lines`` are (node, event_id, message)."""
    job = [(job_id, status, json.dumps(settings, sort_keys=True), None, None, None, 0, 0, len(lines), 0, 0, 0,
            run_id, None, "test")]
    write_job_rows(spark.createDataFrame(job, JOBS.schema), config.storage, "jobs", [job_id])
    rows = [(job_id, node, 0, f"{node}/rank-0.log", n + 1, None, "INFO", event, message, None, None)
            for n, (node, event, message) in enumerate(lines)]
    write_job_rows(spark.createDataFrame(rows, EVENTS_SCHEMA), config.storage, "events", [job_id],
                   [job_id] if rows else [])


def on(node, *events, times=1):
    return [(node, event, message) for event, message in events for _ in range(times)]


def pool_rows(spark, config):
    return {(r.settings_key, r.event_id): (r.n_jobs, r.group_jobs) for r in
            read_normal_pool(spark, config.storage).entries.collect()}


@pytest.fixture
def history(spark, test_config):
    """Two healthy jobs of settings A, one of B."""
    put_job(spark, test_config, "s1", "succeeded", A,
            on("n1", RINGS, times=2) + on("n1", RETRY) + on("n2", RINGS, times=2) + [(None, None, None)])
    put_job(spark, test_config, "s2", "succeeded", A,
            on("n1", RINGS, WARMUP) + on("n2", RINGS) + [("n2", "E2", "retry connect attempt 2")])
    put_job(spark, test_config, "s3", "succeeded", B, on("n1", RINGS, ("E4", "deepspeed ready")))
    return test_config


def test_pool_counts_successful_jobs_per_group(spark, history):
    update = update_normal_pool(spark, history, POOL_CONFIG)
    assert update.added_jobs == ["s1", "s2", "s3"] and update.rebuilt
    assert pool_rows(spark, history) == {
        (KEY_A, "E1"): (2, 2), (KEY_A, "E2"): (2, 2), (KEY_A, "E3"): (1, 2),
        (KEY_B, "E1"): (1, 1), (KEY_B, "E4"): (1, 1),
        (FW_A, "E1"): (2, 2), (FW_A, "E2"): (2, 2), (FW_A, "E3"): (1, 2),
        (FW_B, "E1"): (1, 1), (FW_B, "E4"): (1, 1),
    }
    rings = (read_normal_pool(spark, history.storage).entries
             .where((F.col("settings_key") == KEY_A) & (F.col("event_id") == "E1")).first())
    # s1: 4 lines on 3 nodes (n1, n2 and the null node), s2: 2 lines on 2 nodes
    assert (rings.support, rings.max_lines_per_node, rings.median_lines, rings.variant_novelty) == \
        (1.0, 4 / 3, 3.0, 0.0)


def test_adding_a_job_changes_only_its_groups_by_one_and_reruns_change_nothing(spark, history):
    update_normal_pool(spark, history, POOL_CONFIG)
    before = pool_rows(spark, history)
    put_job(spark, history, "s4", "succeeded", A, on("n1", RINGS, ("E5", "profiler on")))
    put_job(spark, history, "f1", "failed", A, on("n1", ("E9", "boom")))

    update = update_normal_pool(spark, history, POOL_CONFIG)
    after = pool_rows(spark, history)
    assert update.added_jobs == ["s4"] and update.removed_jobs == []
    s4_events = {"E1", "E5"}
    for (key, event), (n_jobs, group_jobs) in after.items():
        old_jobs, old_group = before.get((key, event), (0, group_jobs - (key in (KEY_A, FW_A))))
        in_group = key in (KEY_A, FW_A)
        assert n_jobs - old_jobs == (1 if in_group and event in s4_events else 0), (key, event)
        assert group_jobs - old_group == (1 if in_group else 0), (key, event)
    assert set(after) - set(before) == {(KEY_A, "E5"), (FW_A, "E5")}

    rerun = update_normal_pool(spark, history, POOL_CONFIG)
    assert (rerun.added_jobs, rerun.removed_jobs, rerun.rebuilt) == ([], [], False)
    assert pool_rows(spark, history) == after


def test_reparsed_job_is_recounted_once_and_failed_job_is_dropped(spark, history):
    update_normal_pool(spark, history, POOL_CONFIG)
    put_job(spark, history, "s1", "succeeded", A, on("n1", RINGS), run_id="run-2")  # parsed again: no retry line
    put_job(spark, history, "s2", "failed", A, on("n1", RINGS))                     # registry now says failed
    update = update_normal_pool(spark, history, POOL_CONFIG)
    assert (update.added_jobs, update.removed_jobs) == (["s1"], ["s2"])
    rows = pool_rows(spark, history)
    assert rows[(KEY_A, "E1")] == (1, 1) and (KEY_A, "E2") not in rows and (KEY_A, "E3") not in rows
    ledger = read_table(spark, history.storage, "normal_pool_ledger")
    assert sorted(r.job_id for r in ledger.select("job_id").distinct().collect()) == ["s1", "s3"]


def test_a_job_parsed_again_with_other_settings_moves_group_and_kept_jobs_keep_theirs(spark, history):
    update_normal_pool(spark, history, POOL_CONFIG)
    put_job(spark, history, "s3", "succeeded", A, on("n1", RINGS, ("E4", "deepspeed ready")), run_id="run-2")
    update = update_normal_pool(spark, history, POOL_CONFIG)
    assert (update.added_jobs, update.removed_jobs) == (["s3"], [])
    rows = pool_rows(spark, history)
    assert rows[(KEY_A, "E1")] == (3, 3) and rows[(KEY_A, "E4")] == (1, 3) and rows[(FW_A, "E2")] == (2, 3)
    assert not any(key in (KEY_B, FW_B) for key, _ in rows)
    # other grouping rules: the pool is rebuilt from the ledger alone, no job is counted again
    exact_only = dataclasses.replace(POOL_CONFIG, levels=LEVELS[:1])
    rebuilt = update_normal_pool(spark, history, exact_only)
    assert (rebuilt.added_jobs, rebuilt.removed_jobs, rebuilt.rebuilt) == ([], [], True)
    assert pool_rows(spark, history) == {k: v for k, v in rows.items() if k[0] == KEY_A}


def test_filter_keeps_what_is_not_normal_and_says_why(spark, history, default_config):
    update_normal_pool(spark, history, POOL_CONFIG)
    failed = (on("n1", RINGS) + on("n2", ("E1", "transport/net.cc:1134 -> 6"))
              + on("n1", ("E2", "retry connect attempt 7"), times=30) + on("n2", RETRY, times=30)
              + on("n1", WARMUP) + on("n2", ("E9", "NCCL WARN peer 10.0.0.7 unreachable"))
              + [("n1", None, "half-written line"), (None, None, None)])
    put_job(spark, history, "f1", "failed", A, failed)
    put_job(spark, history, "f2", "failed", C, on("n1", RINGS, WARMUP))
    events = read_table(spark, history.storage, "events").where(F.col("job_id").isin("f1", "f2"))
    jobs = read_table(spark, history.storage, "jobs")
    result = filter_normal_events(events, jobs, read_normal_pool(spark, history.storage), POOL_CONFIG,
                                  masking=default_config.masking)

    kept = {(r.job_id, r.message): r.keep_reason for r in result.candidates.collect()}
    assert kept == {
        ("f1", "transport/net.cc:1134 -> 6"): "new_variant",
        ("f1", "retry connect attempt 7"): "rate_above_normal",
        ("f1", "retry connect attempt 1"): "rate_above_normal",
        ("f1", "NCCL WARN peer 10.0.0.7 unreachable"): "not_in_pool",
        ("f1", "half-written line"): "no_event_id",
        ("f1", None): "no_event_id",
        ("f2", "Connected all rings"): "no_history",
        ("f2", "warmup done"): "no_history",
    }
    # input order is kept: the candidates are the input lines minus the removed ones
    removed_lines = {1, 63}  # "Connected all rings" and "warmup done"
    assert [(r.job_id, r.line_no) for r in result.candidates.collect()] == \
        [(r.job_id, r.line_no) for r in events.collect() if not (r.job_id == "f1" and r.line_no in removed_lines)]

    report = {r.job_id: r.asDict() for r in result.report().collect()}
    assert {k: report["f1"][k] for k in ("history", "settings_key", "group_jobs", "n_events_before",
                                         "n_events_after", "n_lines_before", "n_lines_after",
                                         "kept_not_in_pool", "kept_rate_above_normal", "kept_new_variant",
                                         "kept_no_event_id")} == {
        "history": "exact", "settings_key": KEY_A, "group_jobs": 2, "n_events_before": 5, "n_events_after": 4,
        "n_lines_before": 66, "n_lines_after": 64, "kept_not_in_pool": 1, "kept_rate_above_normal": 1,
        "kept_new_variant": 1, "kept_no_event_id": 1}
    assert (report["f2"]["history"], report["f2"]["n_events_removed"], report["f2"]["kept_no_history"]) == ("none", 0, 2)
    removals = [(r.event_id, r.masked, r.n_lines, r.settings_key, r.pool_n_jobs) for r in result.removals().collect()]
    assert removals == [("E1", "Connected all rings", 1, KEY_A, 2), ("E3", "warmup done", 1, KEY_A, 1)]


def test_an_event_absent_from_the_group_but_normal_in_another_groups_healthy_jobs_is_not_in_group(
        spark, history, default_config):
    # a second healthy job of B: its group has enough jobs, and both print "deepspeed ready"
    put_job(spark, history, "s5", "succeeded", B, on("n1", RINGS, ("E4", "deepspeed ready")))
    update_normal_pool(spark, history, POOL_CONFIG)
    put_job(spark, history, "f1", "failed", A,
            on("n1", RINGS, ("E4", "deepspeed ready"), ("E9", "NCCL WARN peer 10.0.0.7 unreachable")))
    events = read_table(spark, history.storage, "events").where(F.col("job_id") == "f1")
    jobs = read_table(spark, history.storage, "jobs")
    pool = read_normal_pool(spark, history.storage)

    result = filter_normal_events(events, jobs, pool, POOL_CONFIG, masking=default_config.masking)
    decided = {r.event_id: (r.reason, r.elsewhere_groups, r.detail) for r in result.decisions.collect()}
    # B's exact and framework groups write E4; nobody writes E9; E1 is normal in A's own group
    assert decided["E4"] == ("not_in_group", 2, f"absent from the 2 successful jobs of {KEY_A}; "
                                                "normal in the healthy jobs of 2 other groups")
    assert decided["E9"][:2] == ("not_in_pool", None) and decided["E1"][0] == "normal"
    assert result.report().first()["kept_not_in_group"] == 1
    # switched off: absent from the group is absent
    off = dataclasses.replace(POOL_CONFIG, known_elsewhere=False)
    decided = {r.event_id: r.reason for r in filter_normal_events(events, jobs, pool, off,
                                                                  masking=default_config.masking).decisions.collect()}
    assert decided == {"E1": "normal", "E4": "not_in_pool", "E9": "not_in_pool"}
    # one healthy job of B is not a group that knows E4 (min_group_jobs 2)
    put_job(spark, history, "s5", "failed", B, on("n1", RINGS))
    update_normal_pool(spark, history, POOL_CONFIG)
    jobs = read_table(spark, history.storage, "jobs")
    decided = {r.event_id: r.reason for r in filter_normal_events(
        events, jobs, read_normal_pool(spark, history.storage), POOL_CONFIG, masking=default_config.masking).decisions.collect()}
    assert decided["E4"] == "not_in_pool"


def test_failure_path_boilerplate_is_removed_whatever_the_history(spark, history, default_config):
    from l4spark.diagnosis.assemble import DiagnosisConfig, with_line_flags

    update_normal_pool(spark, history, POOL_CONFIG)
    crash = [("E20", "Traceback (most recent call last):"),
             ("E21", '  File "/opt/megatron/train.py", line 412, in train_step'),
             ("E22", "    loss = model(batch)"),  # the source line under a frame
             ("E23", "RuntimeError: CUDA error: an illegal memory access was encountered"),
             ("E24", "CUDA kernel errors might be asynchronously reported at some other API call"),
             ("E25", "frame #3: c10::cuda::c10_cuda_check_implementation + 0x1a (libc10_cuda.so)"),
             ("E26", "============================================================"),
             ("E27", "Root Cause (first observed failure):"),
             ("E28", "failed (exitcode: 1) local_rank: 3 (pid: 4120) of binary: /usr/bin/python3"),
             ("E29", "[W1121 07:00:01 Sending process 4121 closing signal SIGTERM"),
             ("E30", "  host      : gpu-node-17")]  # the summary block restates E28
    put_job(spark, history, "f1", "failed", A, on("n1", RINGS, *crash))
    put_job(spark, history, "f2", "failed", C, on("n1", RINGS, *crash))
    events = read_table(spark, history.storage, "events").where(F.col("job_id").isin("f1", "f2"))
    jobs = read_table(spark, history.storage, "jobs")
    pool = read_normal_pool(spark, history.storage)
    flagged = with_line_flags(events, DiagnosisConfig())
    result = filter_normal_events(flagged, jobs, pool, POOL_CONFIG, masking=default_config.masking)

    kept = {(r.job_id, r.event_id): r.keep_reason for r in result.candidates.collect()}
    # the error itself and the agent's line naming the failed process stay; with history, the pool drops E1 too
    assert kept == {("f1", "E23"): "not_in_pool", ("f1", "E28"): "not_in_pool",
                    ("f2", "E1"): "no_history", ("f2", "E23"): "no_history", ("f2", "E28"): "no_history"}
    report = {r.job_id: r.asDict() for r in result.report().collect()}
    assert [(report[j]["n_events_removed"], report[j]["n_events_boilerplate"]) for j in ("f1", "f2")] == [(10, 9), (9, 9)]
    reasons = {(r.event_id, r.reason) for r in result.removals().where(F.col("job_id") == "f2").collect()}
    assert reasons == {(e, "boilerplate") for e, _ in crash if e not in ("E23", "E28")}
    # the spatial and temporal steps still see the boilerplate the pool keeps (timing evidence)
    pool_kept = {(r.job_id, r.event_id) for r in result.pool_kept_events().collect()}
    assert pool_kept == {("f1", e) for e, _ in crash} | {("f2", e) for e, _ in [RINGS, *crash]}
    # switched off, or without the per-line flag: only the pool removes
    off = NormalPoolConfig(levels=LEVELS, remove_boilerplate=False)
    assert filter_normal_events(flagged, jobs, pool, off, masking=default_config.masking).candidates.count() == 23
    assert filter_normal_events(events, jobs, pool, POOL_CONFIG, masking=default_config.masking).candidates.count() == 23


def test_switches_and_errors(spark, history, default_config):
    update_normal_pool(spark, history, POOL_CONFIG)
    put_job(spark, history, "f1", "failed", A, on("n1", RETRY, times=40) + on("n2", ("E1", "odd form")))
    events = read_table(spark, history.storage, "events").where(F.col("job_id") == "f1")
    jobs = read_table(spark, history.storage, "jobs")
    pool = read_normal_pool(spark, history.storage)
    plain = NormalPoolConfig(levels=LEVELS, rate_keep=False, variant_keep=False)
    assert filter_normal_events(events, jobs, pool, plain, masking=default_config.masking).candidates.count() == 0
    with pytest.raises(ConfigError, match="masking rules"):
        filter_normal_events(events, jobs, pool, POOL_CONFIG)
    with pytest.raises(ConfigError, match="min_support"):
        NormalPoolConfig(min_support=0.0)


def test_end_to_end_on_a_generated_fleet(spark, test_config, tmp_path):
    from l4spark.diagnosis.assemble import DiagnosisConfig, with_line_flags
    from l4spark.evaluation.filter_eval import evaluate
    from l4spark.evaluation.labels import indicating_events, load_labels
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet

    fleet = tmp_path / "fleet"
    simulate_fleet(fleet, FleetOptions(seed=3, jobs=12, nodes=(2, 2), ranks_per_node=1, iterations=20,
                                       failed_share=0.4))
    parse_jobs(spark, test_config, fleet)
    update = update_normal_pool(spark, test_config)
    assert len(update.added_jobs) == 7
    labels = load_labels(fleet)
    events = read_table(spark, test_config.storage, "events").where(F.col("job_id").isin(list(labels)))
    jobs = read_table(spark, test_config.storage, "jobs")
    indicating = indicating_events(spark, events, labels)
    pool = read_normal_pool(spark, test_config.storage)

    def shares(conf: DiagnosisConfig) -> tuple[float, float]:
        # as diagnose runs it: stack frames, teardown and advice lines flagged per line
        result = filter_normal_events(with_line_flags(events, conf), jobs, pool, masking=test_config.masking)
        figures = evaluate(result.decisions.toPandas(), indicating, labels)
        with_history = [f for f in figures if f.history != "none"]
        without = [f for f in figures if f.history == "none"]
        assert (len(with_history), len(without)) == (4, 1)
        assert [f.recall for f in with_history] == [1.0] * 4
        # without history the pool removes nothing; only failure-path boilerplate goes
        assert all(f.events_before - f.events_after == f.events_boilerplate for f in without)
        assert all(f.events_after > 0 for f in without)
        removed = sum(f.non_indicating_removed for f in with_history) / sum(f.non_indicating for f in with_history)
        by_pool = sum(f.non_indicating_removed - f.non_indicating_boilerplate for f in with_history) / \
            sum(f.non_indicating for f in with_history)
        return removed, by_pool

    # measured 461/493 = 0.935, of which the pool 0.708 (failure-path lines no successful job writes
    # are the rest); without the boilerplate flag the pool alone removed 0.733
    removed, by_pool = shares(DiagnosisConfig(config_echo_lines=False))
    assert removed >= 0.8 and by_pool >= 0.65
    # with Megatron's argument echo as boilerplate too (session 25, the default) more goes, and
    # lines the pool removed before now go as boilerplate first: measured 0.995, the pool 0.481
    removed_with_echo, by_pool_with_echo = shares(DiagnosisConfig())
    assert removed_with_echo > removed and by_pool_with_echo < by_pool
    assert update_normal_pool(spark, test_config).rebuilt is False


def test_config_from_a_toml_table():
    config = load_config(overrides={"normal_pool": {
        "levels": {"exact": ["model", "framework"], "fw": ["framework"]},
        "min_support": 0.8, "succeeded_statuses": ["succeeded", "completed"]}}).normal_pool
    assert config.levels == (GroupingLevel("exact", ("model", "framework")), GroupingLevel("fw", ("framework",)))
    assert (config.min_support, config.succeeded_statuses) == (0.8, ("succeeded", "completed"))
    with pytest.raises(ConfigError, match=r"unknown config key.*normal_pool\.min_supprt"):
        load_config(overrides={"normal_pool.min_supprt": 0.8})


def test_no_successful_job_gives_an_empty_pool_and_no_history(spark, test_config, default_config):
    put_job(spark, test_config, "f1", "failed", A, on("n1", RINGS))
    update = update_normal_pool(spark, test_config, POOL_CONFIG)
    assert (update.added_jobs, update.pool_rows, update.rebuilt) == ([], 0, True)
    assert update_normal_pool(spark, test_config, POOL_CONFIG).rebuilt is False
    events = read_table(spark, test_config.storage, "events")
    result = filter_normal_events(events, read_table(spark, test_config.storage, "jobs"),
                                  read_normal_pool(spark, test_config.storage), POOL_CONFIG,
                                  masking=default_config.masking)
    assert [(r.message, r.keep_reason) for r in result.candidates.collect()] == [("Connected all rings", "no_history")]


@pytest.mark.parametrize("max_shapes", [300000, 1], ids=["by-shape", "per-line"])
def test_ledger_from_the_parse_forms_equals_masking_every_line(spark, tmp_path, max_shapes):
    """The parse's job_event_forms (per shape, or per masked message when it structures every
    line) give the ledger the rows that masking every successful job's lines gives; they are
    not used when they cannot stand for the lines (other masks, a job re-registered with other
    lines, a table from before forms existed)."""
    from l4spark.config import load_config
    from l4spark.crossjob.normal_pool import _jobs_with_forms, _ledger_rows
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.simulate import FleetOptions, simulate_fleet
    from l4spark.io.storage import delete_job_partitions

    config = load_config(overrides={"storage.warehouse": str(tmp_path / "warehouse"), "spark.master": "local[2]",
                                    "storage.format": "parquet",  # delete_job_partitions is Parquet only
                                    "structure.max_shapes": max_shapes})
    fleet = tmp_path / "fleet"
    # every framework, odd white space and multi-byte text included: the simulator's mix
    simulate_fleet(fleet, FleetOptions(seed=11, jobs=8, nodes=(2, 3), ranks_per_node=2, iterations=30,
                                       failed_share=0.25))
    parse_jobs(spark, config, fleet)
    jobs = sorted(r.job_id for r in read_table(spark, config.storage, "jobs").collect())
    assert _jobs_with_forms(spark, config, jobs) == jobs

    def ledger(cfg):
        return sorted(tuple(r) for r in _ledger_rows(spark, cfg, jobs).collect())

    from_forms = ledger(config)
    assert len(from_forms) > 50 and {r[4] for r in from_forms if r[1]} <= {2, 3}
    other_masks = dataclasses.replace(config, masking=config.masking[:-1])
    assert _jobs_with_forms(spark, other_masks, jobs) == []
    # the events are the truth: a job whose forms no longer add up to its lines is masked line by line
    changed = jobs[0]
    job = read_table(spark, config.storage, "jobs").where(F.col("job_id") == changed).localCheckpoint()
    write_job_rows(job.withColumn("n_lines", F.col("n_lines") + 1), config.storage, "jobs", [changed])
    assert _jobs_with_forms(spark, config, jobs) == jobs[1:]
    write_job_rows(job, config.storage, "jobs", [changed])
    delete_job_partitions(config.storage, "job_event_forms", set(jobs))
    assert _jobs_with_forms(spark, config, jobs) == []
    assert ledger(config) == from_forms


def test_message_form_in_python_equals_the_jvm(spark):
    """``textrules.message_form`` (the parse, per shape) and ``with_message_form`` (per line in
    the JVM) collapse the same white space and trim the same ends."""
    from l4spark.crossjob.normal_pool import with_message_form
    from l4spark.parse.textrules import message_form

    texts = ["  a\t\tb  ", "\ta b\t", "x\x0b\x0cy\r\nz", "nbsp\u00a0kept\u00a0", "em\u2003space", " \n ", "", "é  作\t"]
    frame = spark.createDataFrame([(t,) for t in texts], "masked string")
    jvm = [r.masked for r in with_message_form(frame, ()).collect()]
    assert jvm == [message_form(t) for t in texts]
    assert message_form(None) is None
