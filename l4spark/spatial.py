"""Spatial comparison (L4 step 3): which nodes of a failed job deviate, and through which events.

Per failed job, every unit (a node by default, a process rank on request) is a vector of event
counts over the job's candidate events (those left by cross-job filtering; all events when there
is no history). The long-form counts are made in Spark; the pivot, the normalisation and an
Isolation Forest run per job inside one grouped pandas function (``cogroup().applyInPandas``),
so Python only ever holds one job's small unit x event matrix.

What a unit's score means:

* ``score``: the Isolation Forest anomaly score of the unit's normalised vector,
  ``2 ** (-E[h(x)] / c(n))`` as in Liu et al. (0.5 is ordinary, towards 1 is isolated quickly).
* ``silent``: the unit stopped logging long before its peers without writing an ERROR/FATAL
  line (its last timestamp is a robust outlier below the job's typical last timestamp by at
  least ``silent_min_gap_s``; a unit that crashed loudly is left to the counts), or it has
  fewer rank files than its peers, or far fewer lines. A dead machine writes no error line, so
  this is the one fault the count vectors cannot show; silent units rank first.
* ``rank``: 1 = most suspect; silent units first (by gap), then by score, ties by name.
* ``suspect``: within the top ``top_k`` and (silent or ``score >= threshold``).
* ``evidence``: the events that make the unit deviate from its peers (robust z of its
  normalised count against the peers' median), most deviating first, with ``evidence_scores``.

Normalisation (``SpatialConfig.normalisation``; docs/spatial.md has the measured effect):

* ``raw``: counts as they are; ``log``: ``log1p(count)``;
* ``share``: ``log1p(count / size_factor)``, the size factor being the unit's median ratio to
  the job over the events every unit logs (per-unit volume normalised, log-scaled; robust to
  the role-only and failure-only events that a plain lines-per-unit total is inflated by);
* ``role`` (default): ``share``, then each unit is compared with the peers of its *role*:
  the unit holding global rank 0, the unit holding the highest global rank (Megatron's last
  pipeline stage logs the iterations) and the rest. Each feature becomes the unit's value minus
  its role group's median. A role with one member is compared with everyone, except on the
  events only it logs (one job cannot tell its role's routine output from a fault there).

The baselines (``baseline_rankings``): Error_time ranks units by their first ERROR/FATAL line,
Error_count by their number of ERROR/FATAL lines (units without one come last, by name).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from l4spark.config import Config, StorageConfig, step_options
from l4spark.errors import ConfigError
from l4spark.storage import write_job_rows

log = logging.getLogger(__name__)

NORMALISATIONS = ("raw", "log", "share", "role")
GRANULARITIES = ("node", "rank")
ERROR_LEVELS = ("ERROR", "FATAL")

DIAGNOSIS_NODES_SCHEMA = (
    "job_id string, node string, process_rank int, rank int, score double, suspect boolean, "
    "silent boolean, silent_gap_s double, n_lines long, evidence array<string>, "
    "evidence_scores array<double>"
)
DIAGNOSIS_NODES_COLUMNS = ["job_id", "node", "process_rank", "rank", "score", "suspect", "silent",
                           "silent_gap_s", "n_lines", "evidence", "evidence_scores"]


@dataclass(frozen=True)
class SpatialConfig:
    """Knobs of the spatial comparison (defaults in code; the TOML section is ``[spatial]``)."""

    granularity: str = "node"  # "node" or "rank"
    normalisation: str = "role"
    top_k: int = 8
    threshold: float = 0.55  # minimum Isolation Forest score of a non-silent suspect
    n_estimators: int = 200
    seed: int = 20250325
    max_evidence: int = 10
    silent_min_gap_s: float = 60.0  # a silent unit stops at least this long before its peers...
    silent_z: float = 5.0  # ...and this many robust spreads (1.4826 MAD) below their median
    truncated_share: float = 0.5  # fewer lines than this share of the peers' median: truncated

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ConfigError(f"spatial.granularity: expected one of {GRANULARITIES}, found {self.granularity!r}")
        if self.normalisation not in NORMALISATIONS:
            raise ConfigError(f"spatial.normalisation: expected one of {NORMALISATIONS}, found {self.normalisation!r}")
        for key in ("top_k", "n_estimators", "max_evidence"):
            if getattr(self, key) < 1:
                raise ConfigError(f"spatial.{key}: expected an integer >= 1, found {getattr(self, key)!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"spatial.threshold: expected a score in [0, 1], found {self.threshold!r}")


def spatial_config(config: Config) -> SpatialConfig:
    """The ``[spatial]`` section of the conf as a SpatialConfig (unknown keys refused)."""
    import dataclasses
    return SpatialConfig(**step_options(config, "spatial", [f.name for f in dataclasses.fields(SpatialConfig)]))


# ---- Spark: long-form inputs -------------------------------------------------------------


def _unit_columns(granularity: str) -> list:
    rank = F.col("rank").cast("int") if granularity == "rank" else F.lit(None).cast("int")
    return [F.col("node"), rank.alias("process_rank")]


def unit_event_counts(events: DataFrame, granularity: str = "node",
                      candidates: DataFrame | None = None) -> DataFrame:
    """Long-form unit x event counts over the candidate events.

    Input: ``events`` (job_id, node, rank, event_id, ...); ``candidates`` (job_id, event_id) or
    None for every event. Output: job_id, node, process_rank (null at node granularity),
    event_id, n_lines. Lines with a null event_id are not counted.
    """
    lines = events.where(F.col("event_id").isNotNull())
    if candidates is not None:
        lines = lines.join(candidates.select("job_id", "event_id").distinct(), on=["job_id", "event_id"],
                           how="left_semi")
    return (
        lines.groupBy(F.col("job_id"), *_unit_columns(granularity), F.col("event_id"))
        .agg(F.count(F.lit(1)).alias("n_lines"))
        # fresh column ids: both sides of rank_nodes' cogroup derive from the same events, and a
        # shared grouping column id would be ambiguous there
        .select(*[F.col(c).alias(c) for c in ("job_id", "node", "process_rank", "event_id", "n_lines")])
    )


def unit_activity(events: DataFrame, granularity: str = "node") -> DataFrame:
    """Per unit, over all its lines: how much and until when it logged, and its error lines.

    Input: ``events`` (job_id, node, rank, ts, level, event_id). Output: job_id, node,
    process_rank, min_rank, max_rank (global ranks the unit holds), n_files (distinct ranks),
    n_lines, n_error (ERROR/FATAL lines), first_error_s, last_s (epoch seconds; null when the
    unit has no timestamped / error line).
    """
    is_error = F.col("level").isin(*ERROR_LEVELS)
    seconds = F.col("ts").cast("double")
    return (
        events.groupBy(F.col("job_id"), *_unit_columns(granularity))
        .agg(F.min("rank").cast("int").alias("min_rank"), F.max("rank").cast("int").alias("max_rank"),
             F.countDistinct("rank").cast("int").alias("n_files"), F.count(F.lit(1)).alias("n_lines"),
             F.count(F.when(is_error, 1)).alias("n_error"),
             F.min(F.when(is_error, seconds)).alias("first_error_s"), F.max(seconds).alias("last_s"))
        .select(*[F.col(c).alias(c) for c in ("job_id", "node", "process_rank", "min_rank", "max_rank", "n_files",
                                              "n_lines", "n_error", "first_error_s", "last_s")])
    )


# ---- pure per-job logic --------------------------------------------------------------------


def _unit_key(frame: pd.DataFrame) -> pd.Series:
    rank = frame["process_rank"]
    return frame["node"].astype(str) + np.where(rank.isna(), "", "#" + rank.astype("Int64").astype(str))


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


def normalised_features(matrix: pd.DataFrame, activity: pd.DataFrame, normalisation: str) -> pd.DataFrame:
    """The unit x event matrix transformed for comparison (see the module docstring).

    ``matrix``: counts (index = unit keys, columns = event ids); ``activity``: indexed by unit
    key, with min_rank and max_rank. Returns a float frame of the same rows; columns constant over the
    units are dropped (they cannot tell units apart).
    """
    counts = matrix.astype(float)
    if normalisation == "raw":
        features = counts
    elif normalisation == "log":
        features = np.log1p(counts)
    else:
        features = np.log1p(counts.div(size_factors(counts), axis=0))
        if normalisation == "role":
            features = _relative_to_role(features, counts, activity.reindex(counts.index))
    varying = features.columns[features.nunique(axis=0) > 1]
    return features[varying]


def _relative_to_role(features: pd.DataFrame, counts: pd.DataFrame, activity: pd.DataFrame) -> pd.DataFrame:
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
        others = [u for u in features.index if role[u] != name]
        own_only = (counts.loc[others] == 0).all(axis=0)
        out.loc[members, own_only[own_only].index] = 0.0
    return out


def isolation_scores(features: pd.DataFrame, config: SpatialConfig) -> pd.Series:
    """Isolation Forest anomaly score per unit in (0, 1] (0.5 is ordinary); 0.5 everywhere when
    fewer than 3 units or no varying feature (nothing to compare)."""
    if len(features) < 3 or features.shape[1] == 0:
        return pd.Series(0.5, index=features.index)
    from sklearn.ensemble import IsolationForest

    forest = IsolationForest(n_estimators=config.n_estimators, max_samples=min(256, len(features)),
                             random_state=config.seed)
    forest.fit(features.to_numpy())
    return pd.Series(-forest.score_samples(features.to_numpy()), index=features.index)


def silence(activity: pd.DataFrame, config: SpatialConfig) -> pd.DataFrame:
    """Which units went silent. Input indexed by unit: n_files, n_lines, n_error, last_s. Output (same
    index): silent (bool), silent_gap_s (how long before the peers' median last line the unit
    stopped; null without timestamps), missing_files, truncated."""
    last = activity["last_s"].astype(float)
    if last.notna().any():
        reference = last.median()
        spread = 1.4826 * (last - reference).abs().median()
    else:  # no timestamp in the job: only files and lines can show silence
        reference = spread = math.nan
    gap = reference - last
    by_time = (gap >= config.silent_min_gap_s) & (gap >= config.silent_z * spread)
    typical_files = activity["n_files"].mode().max() if len(activity) else 0
    missing = (typical_files - activity["n_files"]).clip(lower=0)
    truncated = activity["n_lines"] < config.truncated_share * activity["n_lines"].median()
    # A unit that stopped early but wrote errors crashed loudly: the count vectors show it.
    # Silent means it stopped without a word (a dead machine), which only the timing can show.
    quiet = activity["n_error"] == 0
    silent = (by_time.fillna(False) & quiet) | (missing > 0) | truncated
    return pd.DataFrame({"silent": silent.astype(bool), "silent_gap_s": gap.where(last.notna()),
                         "missing_files": missing.astype(int), "truncated": truncated.astype(bool)})


def deviations(features: pd.DataFrame) -> pd.DataFrame:
    """Robust deviation of every unit on every event: (value - median) / spread, spread being
    1.4826 MAD floored at 0.5 (a log-scale unit, so that an event on few units is not an
    infinite deviation). Positive: the unit logs the event more than its peers."""
    if features.empty:
        return features
    median = features.median(axis=0)
    spread = (1.4826 * (features - median).abs().median(axis=0)).clip(lower=0.5)
    return (features - median) / spread


def rank_units(job_id: str, counts: pd.DataFrame, activity: pd.DataFrame, config: SpatialConfig) -> pd.DataFrame:
    """Rank the units of one job.

    ``counts``: node, process_rank, event_id, n_lines (candidate events); ``activity``: the
    ``unit_activity`` columns for every unit of the job (units with no candidate line still
    count: they are all-zero vectors). Output: the DIAGNOSIS_NODES_COLUMNS, one row per unit.
    """
    if activity.empty:
        return pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
    activity = activity.assign(unit=_unit_key(activity)).set_index("unit").sort_index()
    if counts.empty:
        matrix = pd.DataFrame(index=activity.index, dtype=float)
    else:
        counts = counts.assign(unit=_unit_key(counts))
        matrix = (counts.pivot_table(index="unit", columns="event_id", values="n_lines", aggfunc="sum", fill_value=0)
                  .reindex(activity.index, fill_value=0).sort_index(axis=1))
    features = normalised_features(matrix, activity, config.normalisation)
    score = isolation_scores(features, config)
    silent = silence(activity, config)
    deviation = deviations(features)
    ranked = pd.DataFrame({"silent": silent["silent"], "score": score,
                           "silent_gap": silent["silent_gap_s"].fillna(0.0).where(silent["silent"], 0.0)})
    ranked = ranked.rename_axis("unit").reset_index().sort_values(
        ["silent", "silent_gap", "score", "unit"], ascending=[False, False, False, True], kind="stable")
    ranked["rank"] = np.arange(1, len(ranked) + 1)
    ranked["suspect"] = (ranked["rank"] <= config.top_k) & (ranked["silent"] | (ranked["score"] >= config.threshold))
    evidence = [_evidence(deviation, unit, config.max_evidence) for unit in ranked["unit"]]
    unit_info = activity.loc[ranked["unit"]]
    return pd.DataFrame({
        "job_id": job_id,
        "node": unit_info["node"].to_numpy(),
        "process_rank": unit_info["process_rank"].astype("Int64").to_numpy(),
        "rank": ranked["rank"].to_numpy(),
        "score": ranked["score"].round(6).to_numpy(),
        "suspect": ranked["suspect"].to_numpy(),
        "silent": ranked["silent"].to_numpy(),
        "silent_gap_s": silent["silent_gap_s"].loc[ranked["unit"]].to_numpy(),
        "n_lines": unit_info["n_lines"].astype("int64").to_numpy(),
        "evidence": [ids for ids, _ in evidence],
        "evidence_scores": [scores for _, scores in evidence],
    })


def _evidence(deviation: pd.DataFrame, unit: str, limit: int) -> tuple[list[str], list[float]]:
    """The events on which ``unit`` exceeds its peers most (positive deviation only)."""
    if deviation.empty:
        return [], []
    row = deviation.loc[unit]
    row = row[row > 1.0]
    # ties by event id, so the evidence is the same on every run
    order = sorted(row.items(), key=lambda item: (-item[1], str(item[0])))[:limit]
    top = pd.Series([v for _, v in order], index=[e for e, _ in order], dtype=float)
    return [str(e) for e in top.index], [round(float(v), 4) for v in top.to_numpy()]


# ---- Spark: per-job ranking, baselines, outputs --------------------------------------------


def rank_nodes(events: DataFrame, config: SpatialConfig = SpatialConfig(),
               candidates: DataFrame | None = None) -> DataFrame:
    """``diagnosis_nodes`` rows for every job in ``events`` (filter it to the failed jobs first).

    Input: ``events`` (job_id, node, rank, ts, level, event_id); ``candidates`` (job_id,
    event_id) from cross-job filtering, or None to compare over every event. A job whose
    candidate set is empty still gets its units ranked by silence (all scores 0.5).
    Output (DIAGNOSIS_NODES_SCHEMA): one row per unit; process_rank is null at node granularity.
    """
    counts = unit_event_counts(events, config.granularity, candidates)
    activity = unit_activity(events, config.granularity)

    def per_job(job_counts: pd.DataFrame, job_activity: pd.DataFrame) -> pd.DataFrame:
        if job_activity.empty:
            return pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
        job_id = str(job_activity["job_id"].iloc[0])
        return rank_units(job_id, job_counts, job_activity.drop(columns=["job_id"]), config)

    return (
        counts.groupBy("job_id").cogroup(activity.groupBy("job_id"))
        .applyInPandas(per_job, schema=DIAGNOSIS_NODES_SCHEMA)
        .select(*DIAGNOSIS_NODES_COLUMNS)
    )


def baseline_rankings(events: DataFrame, granularity: str = "node") -> DataFrame:
    """The two baselines of the paper as rankings of every unit.

    Input: ``events`` (job_id, node, rank, ts, level). Output: job_id, node, process_rank,
    method (``error_time``: earliest ERROR/FATAL line first; ``error_count``: most ERROR/FATAL
    lines first), rank (1 = most suspect). Units without an error line (or, for error_time,
    without a timestamped one) come after the others, by name.
    """
    activity = unit_activity(events, granularity)
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


def spatial_events(node_rows: DataFrame) -> DataFrame:
    """The spatially indicating events of each job: the evidence of its suspect units.

    Input: ``diagnosis_nodes`` rows. Output: job_id, event_id, score (the largest deviation
    of a suspect unit on the event), n_nodes (suspect units it is evidence for), nodes (sorted),
    source (``spatial``). Jobs without a suspect have no row.
    """
    return (
        node_rows.where("suspect")
        .select("job_id", "node", F.explode(F.arrays_zip("evidence", "evidence_scores")).alias("item"))
        .groupBy("job_id", F.col("item.evidence").alias("event_id"))
        .agg(F.max("item.evidence_scores").alias("score"), F.countDistinct("node").alias("n_nodes"),
             F.array_sort(F.collect_set("node")).alias("nodes"))
        .select("job_id", "event_id", "score", "n_nodes", "nodes", F.lit("spatial").alias("source"))
    )


def write_diagnosis_nodes(node_rows: DataFrame, storage: StorageConfig, job_ids: Iterable[str]) -> None:
    """Replace the ``diagnosis_nodes`` rows of ``job_ids`` with ``node_rows`` (those jobs only)."""
    job_ids = sorted(set(job_ids))
    with_rows = {r.job_id for r in node_rows.select("job_id").distinct().collect()}
    write_job_rows(node_rows.select(*DIAGNOSIS_NODES_COLUMNS), storage, "diagnosis_nodes", job_ids, with_rows, small=True)
    log.info("diagnosis_nodes: wrote %d jobs (%d with rows)", len(job_ids), len(with_rows))


def failed_job_ids(jobs: DataFrame) -> list[str]:
    """Job ids whose status is ``failed`` (input: the ``jobs`` table), sorted."""
    return sorted(r.job_id for r in jobs.where(F.col("status") == "failed").select("job_id").collect())


def top_k_hit(ranking: Iterable[str], faulty: Iterable[str], k: int) -> float:
    """Share of ``faulty`` nodes within the first ``k`` of ``ranking`` (nan if none faulty)."""
    faulty = set(faulty)
    if not faulty:
        return math.nan
    return len(faulty & set(list(ranking)[:k])) / len(faulty)
