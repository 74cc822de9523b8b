"""Faulty-node localisation on a labelled fleet: l4spark against Error_time and Error_count.

    python -m l4spark.evaluation.spatial_eval --generate 11 --out /tmp/spatial-fleet
    python -m l4spark.evaluation.spatial_eval --fleet /tmp/spatial-fleet [--compare]

    python -m l4spark.evaluation.spatial_eval --fleet F1 --fleet F2 --compare --lofo

``--generate SEED`` writes a fleet of hardware-fault jobs (network, accelerator and node
classes; 48 jobs of 8-256 nodes, 4 ranks per node, 40 iterations) first. The fleet is parsed
into ``--warehouse`` (default ``<fleet>.warehouse``) unless it already holds every job. Every
labelled job with a non-empty ``faulty_nodes`` is ranked; top-k accuracy (k = 1, 3, 5, 8) is
the share of its faulty nodes within the first k units, averaged over jobs. ``--compare``
also ranks with each signal left out, with isolation alone (the method before peer blame and
timing), with each of session 15's rules, session 16's small-job timing, session 17's pair onsets
without remote events, session 18's blame that follows the order of failure left out and
session 20's pair isolation at full weight (``PAIR_VARIANTS``) and with the other
normalisations: the ablation tables of docs/spatial.md. Every run prints the two-unit, three-unit and
larger jobs apart (faulty node first, top-1); ``--compare`` adds the top-1 per framework and per fault class of
the defaults and of each of those variants, on two-unit jobs, three-unit jobs and on all jobs (which family a rule costs). The
ranking inputs are built once and ranked under every variant. Only this evaluation reads
``_labels``; the ranking sees the events and nothing else (no history: every event is a
candidate, as for a new kind of job).

The ranking inputs of each fleet are built in Spark once and kept as Parquet next to its
warehouse (``<warehouse>/_spatial_inputs``); every variant is then ranked in pandas from the
per-unit signals (``score.unit_signals``, computed once per setting that shapes them), so an ablation or a
weight search over several fleets takes seconds. ``--lofo`` chooses the weights on a grid with
each family left out (a framework, or a fault class) and reports the held-out family's top-1
with the weights chosen without it, next to the defaults', and then the pair isolation weight alone
on its own grid (``PAIR_GRID``; ``--lofo-pairs`` runs that part only, in seconds). ``--sweep
KEY=V1,V2,...`` ranks with each value of one ``[spatial]`` setting, a weight or a setting that
shapes the signals (``behind_weight=0,0.25,0.5,1``, ``silent_min_gap_s=15,30,60``), and prints
the jobs with a faulty node first per value, per framework and fault class, gained and lost
against the defaults. ``--conf F.toml`` ranks with a
configuration file over the defaults (e.g. a ``[spatial]`` table with other ``remote_patterns``:
the cache is then rebuilt, or kept apart in another warehouse).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import pandas as pd

K_VALUES = (1, 3, 5, 8)
HARDWARE_CLASSES = ("network", "accelerator", "node")


def generate_fleet(out: Path, seed: int, jobs: int = 48) -> None:
    from l4spark.simulate import FAULT_CLASSES, FleetOptions, simulate_fleet

    kinds = tuple(k for k, c in FAULT_CLASSES.items() if c in HARDWARE_CLASSES)
    simulate_fleet(out, FleetOptions(seed=seed, jobs=jobs, nodes=(8, 256), ranks_per_node=4, iterations=40,
                                     failed_share=1.0, fault_kinds=kinds))


GRID = {"blame_weight": (0.1, 0.2, 0.4, 0.8, 1.2), "timing_weight": (0.05, 0.1, 0.2, 0.3, 0.4),
        "silence_weight": (0.25, 0.5, 1.0), "slowness_weight": (0.25, 0.5, 1.0),
        "behind_weight": (0.25, 0.5, 1.0)}
# the weight of a pair's isolation, chosen apart (``--lofo``): it moves two-unit jobs only
PAIR_GRID = (0.2, 0.4, 0.6, 0.8, 1.0)


PAIR_RULES_OFF = dict(remote_patterns=(), pair_quiet_for_nobody=False, pair_silence=False)
PAIR_VARIANTS = ("- remote patterns (pairs)", "- quiet for nobody (pairs)", "- pair silence",
                 "- silent despite errors", "- all three pair rules", "- small-job timing",
                 "- pair onsets without remote", "- blame follows onsets",
                 "- pair isolation weight", "± store-client names", "± untimed errors dated",
                 "± dated, ± store-client", "± stop is onset", "± silent after 60 s")


def ablations(base) -> dict[str, object]:
    """Named SpatialConfig variants of ``base`` for the ablation table (``base`` first)."""
    from l4spark.spatial.config import NORMALISATIONS

    replace = dataclasses.replace
    none = dict(blame_weight=0.0, timing_weight=0.0, silence_weight=0.0, slowness_weight=0.0, truncated_bonus=0.0,
                behind_weight=0.0)
    variants = {
        f"l4spark ({base.normalisation})": base,
        "- peer blame": replace(base, blame_weight=0.0),
        "- store-host discount": replace(base, blame_discount=False),
        "- first to fail": replace(base, timing_weight=0.0),
        "- silence": replace(base, silence_weight=0.0, truncated_bonus=0.0),
        "- slowness": replace(base, slowness_weight=0.0),
        "- collectives behind": replace(base, behind_weight=0.0),
        "- evidence rule": replace(base, evidence_required=False),
        # session 15's rules, one left out at a time (docs/spatial.md, "Two-unit jobs")
        "- remote patterns (pairs)": replace(base, remote_patterns=()),
        "- quiet for nobody (pairs)": replace(base, pair_quiet_for_nobody=False),
        "- pair silence": replace(base, pair_silence=False),
        "- silent despite errors": replace(base, silent_despite_errors=False),
        "- all three pair rules": replace(base, **PAIR_RULES_OFF),
        # session 16: a job of fewer units than min_timed_units is timed when every unit has an onset
        "- small-job timing": replace(base, small_job_timing=False),
        # session 17: of two units, a failure that begins with a line saying a peer failed starts no onset
        "- pair onsets without remote": replace(base, pair_onset_without_remote=False),
        # session 18: a name of a unit that began to fail after the namer is not blame (any job size)
        "- blame follows onsets": replace(base, blame_follows_onsets=False),
        # session 20: of two units, pair_isolation at full weight again (session 14's 0.25-0.75)
        "- pair isolation weight": replace(base, pair_isolation_weight=1.0),
        # session 21: a store client's name of the store host is not blame (off by default: toggled)
        "± store-client names": replace(base, store_client_not_blame=not base.store_client_not_blame),
        # session 22: untimed error lines dated by the timed lines after them (toggled), and with
        # the store-client rule toggled too: the four columns of docs/spatial.md's ablation
        "± untimed errors dated": replace(base, untimed_errors_dated=not base.untimed_errors_dated),
        "± dated, ± store-client": replace(base, untimed_errors_dated=not base.untimed_errors_dated,
                                           store_client_not_blame=not base.store_client_not_blame),
        # session 26: a unit that stopped early without an error line failed at its last line
        # (toggled), and the minute that silence needed until session 26 (toggled with 30 s)
        "± stop is onset": replace(base, stop_is_onset=not base.stop_is_onset),
        "± silent after 60 s": replace(base, silent_min_gap_s=60.0 if base.silent_min_gap_s != 60.0 else 30.0),
        "isolation + evidence": replace(base, **none),
        "isolation only": replace(base, evidence_required=False, **none),
    }
    for normalisation in NORMALISATIONS:
        if normalisation != base.normalisation:
            variants[f"all signals, {normalisation}"] = replace(base, normalisation=normalisation)
    return variants


def families(fleet: Path, labels: dict) -> dict[str, dict[str, str]]:
    """job -> the families it belongs to for leave-one-family-out: framework, fault class."""
    import json

    out = {}
    for job_id, label in labels.items():
        raw = json.loads((fleet / "_labels" / f"{job_id}.json").read_text("utf-8"))
        out[job_id] = {"framework": raw.get("framework", "?"), "fault class": label.fault_class}
    return out


def accuracy(rankings: dict[str, list[str]], faulty: dict[str, tuple[str, ...]]) -> dict[int, float]:
    """Mean top-k hit share over the jobs of ``faulty`` (job -> faulty nodes, all non-empty)."""
    from l4spark.spatial.score import top_k_hit

    return {k: sum(top_k_hit(rankings.get(j, []), nodes, k) for j, nodes in faulty.items()) / len(faulty)
            for k in K_VALUES}


def _rankings(frame: pd.DataFrame) -> dict[str, list[str]]:
    ordered = frame.sort_values(["job_id", "rank"])
    return {job_id: list(group["node"]) for job_id, group in ordered.groupby("job_id", sort=False)}


def _table(rows: list[tuple[str, dict[int, float]]]) -> str:
    head = f"  {'method':<30}" + "".join(f"{'top-' + str(k):>8}" for k in K_VALUES)
    body = [f"  {name:<30}" + "".join(f"{acc[k]:>8.3f}" for k in K_VALUES) for name, acc in rows]
    return "\n".join([head, *body])


def first_count(rankings: dict[str, list[str]], faulty: dict[str, tuple[str, ...]]) -> int:
    """How many jobs of ``faulty`` have one of their faulty nodes ranked first."""
    return sum(bool(rankings.get(j)) and rankings[j][0] in nodes for j, nodes in faulty.items())


def _first_table(ranked: dict[str, dict[str, list[str]]], faulty: dict) -> str:
    head = f"  {'method':<30}{'first':>10}{'top-1':>8}"
    body = [f"  {name:<30}{f'{first_count(order, faulty)}/{len(faulty)}':>10}{accuracy(order, faulty)[1]:>8.3f}"
            for name, order in ranked.items()]
    return "\n".join([head, *body])


def _family_table(ranked: dict[str, dict[str, list[str]]], faulty: dict, family_of: dict[str, str]) -> str:
    """top-1 of each method (rows) on the jobs of each family (columns, with their job counts)."""
    groups = {value: {j: n for j, n in faulty.items() if family_of[j] == value}
              for value in sorted({family_of[j] for j in faulty})}
    width = max(9, *(len(value) + 2 for value in groups))
    head = f"  {'method':<30}" + "".join(f"{value:>{width}}" for value in groups)
    sizes = f"  {'jobs':<30}" + "".join(f"{len(jobs):>{width}}" for jobs in groups.values())
    body = [f"  {name:<30}" + "".join(f"{accuracy(order, jobs)[1]:>{width}.3f}" for jobs in groups.values())
            for name, order in ranked.items()]
    return "\n".join([head, sizes, *body])


def cache_settings(spatial) -> dict:
    """What the cached inputs were built with (``build_inputs``): ``spatial``'s granularity and
    patterns, and this code's watchdog-sequence and rank patterns."""
    from l4spark.spatial.ranking import (COMM_ID_PATTERN, COMM_SIZE_PATTERN, COMM_TAG_PATTERN, ENQUEUED_SEQ_PATTERNS,
                                         PROCESS_GROUP_PATTERN, RANK_PATTERN, SELF_RANK_PREFIX, TIMEOUT_SEQ_PATTERNS)

    return {"granularity": spatial.granularity, "remote_patterns": list(spatial.remote_patterns),
            "store_client_patterns": list(spatial.store_client_patterns),
            "seq_patterns": [*TIMEOUT_SEQ_PATTERNS, PROCESS_GROUP_PATTERN],
            "enqueued_patterns": list(ENQUEUED_SEQ_PATTERNS),
            "self_address_patterns": list(spatial.self_address_patterns),
            "rank_patterns": [RANK_PATTERN, SELF_RANK_PREFIX],
            "communicator_patterns": [COMM_TAG_PATTERN, COMM_SIZE_PATTERN, COMM_ID_PATTERN]}


def build_inputs(fleet: Path, warehouse: Path, master: str, spatial, job_ids: list[str]) -> dict[str, pd.DataFrame]:
    """facts, activity and baselines of ``job_ids`` (Spark once, then Parquet under the warehouse).

    The cache is reused only if it was built at ``spatial``'s granularity with its
    ``remote_patterns`` and ``store_client_patterns`` and with this code's watchdog sequence
    and rank patterns (``_spatial_inputs/settings.json``): the facts' ``remote`` flag and the ``store:``,
    ``seq:``, ``enq:``, ``rank:``, ``comm:`` and ``commsize:`` tokens are set in Spark, and a cache of older patterns would rank with them (a cache
    of before session 26 has no ``seq:`` token: nobody would be behind)."""
    import json

    cache = warehouse / "_spatial_inputs"
    names = ("facts", "activity", "baselines")
    settings = cache_settings(spatial)
    stored = cache / "settings.json"
    if stored.exists() and json.loads(stored.read_text("utf-8")) == settings \
            and all((cache / f"{n}.parquet").exists() for n in names):
        frames = {n: pd.read_parquet(cache / f"{n}.parquet") for n in names}
        if set(job_ids) <= set(frames["activity"]["job_id"]) \
                and {"last_error_by_s", "last_candidate_error_s"} <= set(frames["activity"].columns):
            return frames
    from pyspark.sql import functions as F

    from l4spark.config import load_config
    from l4spark.parse.pipeline import parse_jobs
    from l4spark.spatial.ranking import baseline_rankings, unit_inputs
    from l4spark.io.session import build_session
    from l4spark.io.storage import read_table, table_exists

    config = load_config(overrides={"storage.warehouse": str(warehouse), "spark.master": master})
    spark = build_session(config.spark)
    try:
        parsed = set()
        if table_exists(config.storage, "jobs"):
            parsed = {r.job_id for r in read_table(spark, config.storage, "jobs").select("job_id").collect()}
        if not set(job_ids) <= parsed:
            print(f"parsing {fleet} into {warehouse}", flush=True)
            parse_jobs(spark, config, fleet, progress=lambda m: print("  " + m, flush=True))
        events = read_table(spark, config.storage, "events").where(F.col("job_id").isin(sorted(job_ids)))
        facts, activity = unit_inputs(events, spatial.granularity, remote_patterns=spatial.remote_patterns,
                                      store_patterns=spatial.store_client_patterns,
                                      self_address_patterns=spatial.self_address_patterns)
        frames = {"facts": facts.toPandas(), "activity": activity.toPandas(), "baselines": baseline_rankings(events).toPandas()}
    finally:
        spark.stop()
    cache.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.to_parquet(cache / f"{name}.parquet")
    stored.write_text(json.dumps(settings), "utf-8")  # last: a cache cut short is rebuilt
    return frames


def load_fleets(fleets: list[Path], spatial, master: str, warehouse: Path | None = None) -> tuple[dict, dict, dict, dict]:
    """(labels, faulty nodes, families, ranking inputs) of ``fleets``, each a dict by job id.

    Of several fleets every job id is prefixed with its fleet's folder name (``f17005/job-...``):
    fleets of different seeds can hold the same job id (17003 and 17005 both have
    job-20261105-0027-mixtral8x7b), and merged by bare id one job would replace the other and
    the baselines would rank both jobs' units as one. ``warehouse``: of a single fleet only
    (default ``<fleet>.warehouse``)."""
    from l4spark.evaluation.labels import load_labels

    tags = [Path(str(f).rstrip("/")).name for f in fleets]
    if len(set(tags)) < len(tags):
        tags = [str(f).rstrip("/") for f in fleets]
    labels, faulty, family, inputs = {}, {}, {}, {}
    for fleet, tag in zip(fleets, tags):
        fleet_labels = load_labels(fleet)
        fleet_faulty = {j: label.faulty_nodes for j, label in fleet_labels.items() if label.faulty_nodes}
        store = warehouse if warehouse and len(fleets) == 1 else Path(str(fleet).rstrip("/") + ".warehouse")
        frames = build_inputs(fleet, store, master, spatial, sorted(fleet_faulty))
        fleet_family = families(fleet, fleet_labels)
        if len(fleets) > 1:
            named = lambda job_id: f"{tag}/{job_id}"
            frames = {name: frame.assign(job_id=frame["job_id"].map(named)) for name, frame in frames.items()}
            fleet_labels, fleet_faulty, fleet_family = ({named(j): v for j, v in d.items()}
                                                        for d in (fleet_labels, fleet_faulty, fleet_family))
        inputs[str(fleet)] = frames
        labels |= fleet_labels
        faulty |= fleet_faulty
        family |= fleet_family
    return labels, faulty, family, inputs


class Ranker:
    """Ranks every job of some fleets under SpatialConfig variants, from per-unit signals computed
    once per signal-shaping setting (normalisation and the rest); the weights only re-sum them."""

    _WEIGHTS = ("blame_weight", "timing_weight", "silence_weight", "slowness_weight", "truncated_bonus",
                "behind_weight", "evidence_required", "blame_discount", "slow_z_min", "timing_scale_s", "top_k",
                "threshold", "pair_isolation_weight")

    def __init__(self, inputs: dict[str, dict[str, pd.DataFrame]]) -> None:
        self.inputs = inputs  # fleet name -> frames
        self._signals: dict[tuple, dict[str, pd.DataFrame]] = {}

    def _key(self, config) -> tuple:
        return tuple((f.name, getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in self._WEIGHTS)

    def signals(self, config) -> dict[str, pd.DataFrame]:
        """job -> unit signals (and node names) under ``config``'s signal settings."""
        from l4spark.spatial.score import unit_signals

        key = self._key(config)
        if key not in self._signals:
            out = {}
            for frames in self.inputs.values():
                facts = dict(tuple(frames["facts"].groupby("job_id")))
                for job_id, activity in frames["activity"].groupby("job_id"):
                    counts = facts.get(job_id, frames["facts"].iloc[0:0]).drop(columns=["job_id"])
                    signals, details = unit_signals(counts, activity.drop(columns=["job_id"]), config)
                    out[job_id] = signals.assign(node=details["activity"]["node"])
            self._signals[key] = out
        return self._signals[key]

    def rankings(self, config, jobs=None) -> dict[str, list[str]]:
        """job -> units by combined score under ``config`` (of ``jobs`` only, when given)."""
        from l4spark.spatial.score import combine, order_units

        out = {}
        for job_id, signals in self.signals(config).items():
            if jobs is not None and job_id not in jobs:
                continue
            order = order_units(combine(signals, config)["combined"])
            out[job_id] = list(signals.loc[order, "node"])
        return out


PARTS = ("isolation", "blame", "timing", "silence", "truncated", "slowness", "behind")
WEIGHT_OF_PART = {"blame": "blame_weight", "timing": "timing_weight", "silence": "silence_weight",
                  "truncated": "truncated_bonus", "slowness": "slowness_weight", "behind": "behind_weight"}


def _parts(ranker: Ranker, base) -> dict[str, tuple]:
    """job -> (unit x PARTS matrix before weighting, node per row), rows by unit key: a weight
    vector then scores every job with one matrix product (the grid search's inner loop)."""
    from l4spark.spatial.score import combine

    out = {}
    for job_id, signals in ranker.signals(base).items():
        parts = combine(signals, base).assign(truncated=signals["only_truncated"].astype(float)).sort_index()
        out[job_id] = (parts[list(PARTS)].to_numpy(float), signals.loc[parts.index, "node"].to_numpy())
    return out


def _top(parts: dict[str, tuple], weights, faulty: dict, k: int) -> float:
    """Mean top-k hit share over ``faulty`` under one weight vector (ties by unit key, as ``order_units``)."""
    import numpy as np

    hits = 0.0
    for job_id, nodes in faulty.items():
        matrix, names = parts[job_id]
        combined = matrix @ weights
        first = np.lexsort((np.arange(len(combined)), -combined))[:k]
        hits += len(set(names[first]) & set(nodes)) / len(nodes)
    return hits / len(faulty)


def _choose(ranker: Ranker, base, faulty: dict) -> tuple[object, dict[int, float]]:
    """The grid point with the best mean top-1 (then top-3, then nearest the defaults) on ``faulty``."""
    import itertools

    import numpy as np

    parts = _parts(ranker, base)
    best = None
    for values in itertools.product(*GRID.values()):
        variant = dataclasses.replace(base, **dict(zip(GRID, values)))
        weights = np.array([1.0] + [getattr(variant, WEIGHT_OF_PART[p]) for p in PARTS[1:]])
        distance = sum(abs(v - getattr(base, k)) for k, v in zip(GRID, values))
        key = (_top(parts, weights, faulty, 1), _top(parts, weights, faulty, 3), -distance)
        if best is None or key > best[0]:
            best = (key, variant)
    return best[1], accuracy(ranker.rankings(best[1]), faulty)


def _family_folds(family: dict, held_from: dict, train_from: dict):
    """Leave-one-family-out folds: per axis (framework, fault class) and value of ``held_from``'s
    jobs, (axis, value, the jobs of ``held_from`` in that family, the jobs of ``train_from`` not in it)."""
    for axis in ("framework", "fault class"):
        for value in sorted({family[j][axis] for j in held_from}):
            yield (axis, value, {j: n for j, n in held_from.items() if family[j][axis] == value},
                   {j: n for j, n in train_from.items() if family[j][axis] != value})


def _choose_pair_weight(ranker: Ranker, base, faulty: dict) -> float:
    """The ``PAIR_GRID`` value with the most two-unit jobs of ``faulty`` first (then nearest the
    default); the other weights stay at ``base``'s. Larger jobs do not depend on it."""
    units = ranker.signals(base)
    pairs = {j: n for j, n in faulty.items() if j in units and len(units[j]) == 2}
    scored = [(first_count(ranker.rankings(dataclasses.replace(base, pair_isolation_weight=w), pairs), pairs),
               -abs(w - base.pair_isolation_weight), w) for w in PAIR_GRID]
    return max(scored)[2]


def parse_sweep(text: str, base) -> tuple[str, list]:
    """``--sweep KEY=V1,V2,...``: a ``SpatialConfig`` field and the values to rank with (each
    checked as a configuration file's value would be)."""
    key, _, values = text.partition("=")
    key = key.strip()
    if key not in {f.name for f in dataclasses.fields(base)} or not values:
        raise SystemExit(f"--sweep: expected KEY=V1,V2,... with KEY a [spatial] setting, found {text!r}")
    kind = type(getattr(base, key))
    if kind not in (int, float, bool):
        raise SystemExit(f"--sweep: spatial.{key} is not a number or a switch")

    def value(raw: str):
        raw = raw.strip()
        if kind is bool:
            if raw not in ("true", "false"):
                raise SystemExit(f"--sweep: spatial.{key}: expected true or false, found {raw!r}")
            return raw == "true"
        try:
            return kind(float(raw)) if kind is int else float(raw)
        except ValueError:
            raise SystemExit(f"--sweep: spatial.{key}: expected a number, found {raw!r}") from None

    from l4spark.errors import ConfigError

    swept = [value(v) for v in values.split(",")]
    for v in swept:
        try:
            dataclasses.replace(base, **{key: v})  # the configuration's own checks
        except ConfigError as error:
            raise SystemExit(f"--sweep: {error}") from None
    return key, swept


def sweep_table(ranker: Ranker, base, key: str, values: list, faulty: dict, family: dict) -> str:
    """Jobs with a faulty node first under each value of ``key`` (the others at ``base``'s): all
    jobs, per framework and per fault class, and the jobs gained and lost against ``base``."""
    ranked = {f"{key}={v:g}" if not isinstance(v, bool) else f"{key}={str(v).lower()}":
              ranker.rankings(dataclasses.replace(base, **{key: v})) for v in values}
    default = ranker.rankings(base)
    rows = [("all", "", len(faulty), *(first_count(order, faulty) for order in ranked.values()))]
    for axis in ("framework", "fault class"):
        for value in sorted({family[j][axis] for j in faulty}):
            jobs = {j: n for j, n in faulty.items() if family[j][axis] == value}
            rows.append((axis, value, len(jobs), *(first_count(order, jobs) for order in ranked.values())))
    gained = {name: sum(order[j][:1] != default[j][:1] and bool(order[j]) and order[j][0] in faulty[j]
                        for j in faulty if j in order and j in default) for name, order in ranked.items()}
    lost = {name: sum(order[j][:1] != default[j][:1] and bool(default[j]) and default[j][0] in faulty[j]
                      for j in faulty if j in order and j in default) for name, order in ranked.items()}
    rows.append(("gained", f"against {key}={getattr(base, key)}", "", *gained.values()))
    rows.append(("lost", "", "", *lost.values()))
    return pd.DataFrame(rows, columns=["axis", "family", "jobs", *ranked]).to_string(index=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spatial_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--fleet", type=Path, action="append", help="a generated fleet (with _labels); repeatable")
    source.add_argument("--generate", type=int, metavar="SEED", help="generate a hardware-fault fleet first")
    parser.add_argument("--out", type=Path, default=Path("/tmp/spatial-fleet"), help="where --generate writes")
    parser.add_argument("--jobs", type=int, default=48, help="jobs to generate (default 48)")
    parser.add_argument("--warehouse", type=Path, help="default: <fleet>.warehouse (one fleet only)")
    parser.add_argument("--normalisation", help="default: the SpatialConfig default (role)")
    parser.add_argument("--compare", action="store_true", help="also rank with the ablation variants")
    parser.add_argument("--lofo", action="store_true", help="leave-one-family-out choice of the weights on a grid")
    parser.add_argument("--lofo-pairs", action="store_true",
                        help="only the pair isolation weight's part of --lofo (seconds, not minutes)")
    parser.add_argument("--misses", action="store_true", help="print every miss with its signals")
    parser.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="rank with each value of one [spatial] setting (e.g. behind_weight=0,0.25,0.5,1 or "
                             "silent_min_gap_s=15,30,60): faulty node first per value, per family, gained and "
                             "lost against the defaults; repeatable")
    parser.add_argument("--conf", type=Path, action="append", default=[],
                        help="a TOML file over the defaults (e.g. a [spatial] table); repeatable")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    fleets = args.fleet or []
    if args.generate is not None:
        print(f"generating fleet seed {args.generate} ({args.jobs} jobs) into {args.out}", flush=True)
        generate_fleet(args.out, args.generate, args.jobs)
        fleets = [args.out]

    from l4spark.config import load_config

    base = load_config(*args.conf).spatial
    if args.normalisation:
        base = dataclasses.replace(base, normalisation=args.normalisation)
    sweeps = [parse_sweep(text, base) for text in args.sweep]  # checked before any fleet is read
    labels, faulty, family, inputs = load_fleets(fleets, base, args.master, args.warehouse)
    ranker = Ranker(inputs)
    variants = ablations(base) if args.compare else {f"l4spark ({base.normalisation})": base}
    names = list(variants)
    rankings = {"l4spark": ranker.rankings(base)}
    baselines = pd.concat([frames["baselines"] for frames in inputs.values()])
    for method in ("error_time", "error_count"):
        rankings[method] = _rankings(baselines[baselines["method"] == method])
    print(f"\n{len(faulty)} jobs with a faulty node in {len(fleets)} fleet(s): {', '.join(map(str, fleets))}")
    ranked = {names[0]: rankings["l4spark"], "Error_time": rankings["error_time"],
              "Error_count": rankings["error_count"]}
    ranked |= {name: ranker.rankings(variants[name]) for name in names[1:]}
    print(_table([(name, accuracy(order, faulty)) for name, order in ranked.items()]))

    units = ranker.signals(base)
    pairs = {j: n for j, n in faulty.items() if j in units and len(units[j]) == 2}
    triples = {j: n for j, n in faulty.items() if j in units and len(units[j]) == 3}
    larger = {j: n for j, n in faulty.items() if j in units and len(units[j]) >= 4}
    for title, jobs in (("two-unit", pairs), ("three-unit", triples), ("four-or-more-unit", larger)):
        print(f"\n{title} jobs ({len(jobs)} of {len(faulty)}): jobs with a faulty node first, top-1")
        print(_first_table(ranked, jobs) if jobs else "  none")
    if args.compare:
        compared = {name: ranked[name] for name in (names[0], *PAIR_VARIANTS)}
        for axis in ("framework", "fault class"):
            family_of = {j: family[j][axis] for j in faulty}
            for title, jobs in (("two-unit jobs", pairs), ("three-unit jobs", triples), ("all jobs", faulty)):
                if jobs:
                    print(f"\ntop-1 per {axis}, {title}: the rules of sessions 15 to 18 left out one at a time")
                    print(_family_table(compared, jobs, family_of))

    print("\nper fault kind (l4spark top-1/3/5/8 | Error_time top-1 | Error_count top-1):")
    for kind in sorted({labels[j].fault_kind for j in faulty}):
        jobs = {j: n for j, n in faulty.items() if labels[j].fault_kind == kind}
        ours_acc = accuracy(rankings["l4spark"], jobs)
        print(f"  {kind:<22} n={len(jobs):<3}" + "".join(f"{ours_acc[k]:>7.2f}" for k in K_VALUES)
              + f"  | {accuracy(rankings['error_time'], jobs)[1]:.2f} | {accuracy(rankings['error_count'], jobs)[1]:.2f}")

    for key, values in sweeps:
        print(f"\nsweep of spatial.{key} (the other settings as configured): jobs with a faulty node first")
        print(sweep_table(ranker, base, key, values, faulty, family))

    if args.lofo:
        print("\nleave-one-family-out: weights chosen on the other families, top-1 on the held-out one")
        print(f"  {'held out':<34} {'n':>3} {'defaults':>9} {'chosen':>7}  weights chosen (blame, timing, silence, slowness, behind)")
        for axis, value, held, train in _family_folds(family, faulty, faulty):
            if not train:
                continue
            chosen, _ = _choose(ranker, base, train)
            weights = ", ".join(f"{getattr(chosen, k):g}" for k in GRID)
            print(f"  {axis + ' = ' + value:<34} {len(held):>3} {accuracy(rankings['l4spark'], held)[1]:>9.3f} "
                  f"{accuracy(ranker.rankings(chosen), held)[1]:>7.3f}  {weights}")
    if args.lofo or args.lofo_pairs:
        units = ranker.signals(base)
        pairs = {j: n for j, n in faulty.items() if j in units and len(units[j]) == 2}
        print("\nleave-one-family-out, the pair isolation weight alone (two-unit jobs of the held-out family first)")
        print(f"  {'held out':<34} {'pairs':>5} {'defaults':>9} {'chosen':>7}  weight chosen")
        for axis, value, held, train in _family_folds(family, pairs, faulty):
            weight = _choose_pair_weight(ranker, base, train)
            chosen = ranker.rankings(dataclasses.replace(base, pair_isolation_weight=weight), held)
            print(f"  {axis + ' = ' + value:<34} {len(held):>5} {first_count(rankings['l4spark'], held):>9} "
                  f"{first_count(chosen, held):>7}  {weight:g}")

    if args.misses:
        print("\nmisses (faulty node not ranked first):")
        signals = ranker.signals(base)
        for job_id, nodes in sorted(faulty.items()):
            ranking = rankings["l4spark"].get(job_id, [])
            if ranking[:1] and ranking[0] in nodes:
                continue
            position = min((ranking.index(n) + 1 for n in nodes if n in ranking), default=None)
            from l4spark.spatial.score import combine

            parts = combine(signals[job_id], base).assign(node=signals[job_id]["node"]).set_index("node")
            show = lambda node: f"{node} " + ", ".join(f"{c} {parts.at[node, c]:.2f}" for c in parts.columns) if node in parts.index else "-"
            print(f"  {job_id:<36} {labels[job_id].fault_kind:<20} faulty at rank {position} of {len(ranking)}\n"
                  f"      first:  {show(ranking[0]) if ranking else '-'}\n      faulty: {show(nodes[0])}")
    print(f"\n{time.perf_counter() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
