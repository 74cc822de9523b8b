"""Spatial comparison (L4 step 3): which nodes of a failed job deviate, and through which events.

Per failed job, every unit (a node by default, a process rank on request) is a vector of event
counts over the job's candidate events (those left by cross-job filtering; all events when there
is no history). The long-form inputs are made in Spark; the pivot, the normalisation, an
Isolation Forest and the other per-job signals run inside one grouped pandas function
(``cogroup().applyInPandas``), so Python only ever holds one job's small unit x event tables.

A unit is ranked on four signals, the ones an SRE reads off a failed job (docs/spatial.md has
the measured effect of each):

* ``silent``: the unit stopped logging long before its peers without writing an ERROR/FATAL
  line, or it has fewer rank files than its peers, or far fewer lines. A dead machine writes no
  error line, so this is the one fault the other signals cannot show; silent units rank first.
* ``score`` (isolation): the Isolation Forest anomaly score of the unit's normalised count
  vector, ``2 ** (-E[h(x)] / c(n))`` as in Liu et al. (0.5 is ordinary, towards 1 isolated).
  It counts above 0.5 only for a unit that logs some event more than its peers (it has
  ``evidence``): a unit isolated only by what it lacks is the silence detector's business.
* ``named_by`` (peer blame): how many other units' loud lines (not INFO/DEBUG/TRACE) of
  candidate events name the unit, by host name, by an IPv4 address the job's own identity lines
  tie to it (NCCL's ``Bootstrap : Using eth0:<ip>`` and the like: an event nearly every node
  logs, each with one address of its own), or by a global rank number it holds. Peers' timeouts
  and transport errors name the node they waited on; the node's own errors name its neighbours.
* ``onset_lag_s`` (first to fail): per unit, the first timestamped line among the events it
  logs for the first time in the last ``terminal_share`` of its timestamped life, on clocks
  aligned across units; the lag behind the earliest unit. The faulty node's processes fail,
  time out or abort before the ones that suffer from it.

``combined_score = isolation + blame_weight * blame + timing_weight * timing`` (blame in [0, 1]:
the unit's excess of naming peers over the job's median, over the most named unit's count;
timing = exp(-onset_lag_s / timing_scale_s), 0 without a usable onset; plus ``truncated_bonus``
for a unit with far fewer lines than its peers that did not stop ``silent_min_gap_s`` before them). ``rank``: first
the units that stopped early without an error line or lack rank files (by gap), and the units
named by at least ``strong_blame_share`` of the other units (peers timed out waiting on them);
then by combined score, ties by name. Far fewer lines alone does not rank a unit first: the
node of rank 0 or of the last pipeline stage out-logs the rest by role. ``suspect``: within the top ``top_k`` and
(silent or ``combined_score >= threshold``). ``signals``: the reasons, readable.

Normalisation of the counts (``SpatialConfig.normalisation``):

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
from typing import Iterable

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from l4spark.config import StorageConfig
from l4spark.spatial.config import SpatialConfig
from l4spark.io.storage import write_job_rows
from l4spark.io.tables import DIAGNOSIS_NODES, columns

log = logging.getLogger(__name__)

ERROR_LEVELS = ("ERROR", "FATAL")
QUIET_LEVELS = ("INFO", "DEBUG", "TRACE")  # other levels, and lines without one, are loud

# What a line may name another unit by. Host names need a digit (cluster names do; it keeps
# ordinary words out), ranks are the number after the word "rank" (not local_rank / localRank).
IPV4_PATTERN = r"\b(?:\d{1,3}\.){3}\d{1,3}\b"
HOST_PATTERN = r"\b[A-Za-z][A-Za-z0-9_.-]*[0-9][A-Za-z0-9_.-]*\b"
RANK_PATTERN = r"(?i)\brank\W{0,3}(\d+)"
DIAGNOSIS_NODES_COLUMNS = columns(DIAGNOSIS_NODES.schema)

# Long-form per-job input of rank_units: one row per unit x event (token null) with its line
# count and first timestamp, and one row per unit x event x token a line of it names.
UNIT_FACTS_COLUMNS = ["job_id", "node", "process_rank", "event_id", "token", "n_lines", "n_loud", "first_s",
                      "candidate"]
UNIT_FACTS_SCHEMA = ("job_id string, node string, process_rank int, event_id string, token string, "
                     "n_lines long, n_loud long, first_s double, candidate boolean")


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


def _flag_candidates(frame: DataFrame, candidates: DataFrame | None) -> DataFrame:
    if candidates is None:
        return frame.withColumn("candidate", F.lit(True))
    flags = candidates.select("job_id", "event_id").distinct().withColumn("candidate", F.lit(True))
    return (frame.join(flags, on=["job_id", "event_id"], how="left")
            .withColumn("candidate", F.coalesce(F.col("candidate"), F.lit(False))))


def unit_event_facts(events: DataFrame, granularity: str = "node",
                     candidates: DataFrame | None = None) -> DataFrame:
    """Per unit and event over *all* events: lines, loud lines, first timestamp, candidate flag.

    Input: ``events`` (job_id, node, rank, ts, level, event_id); ``candidates`` (job_id,
    event_id) from cross-job filtering, or None for every event. Output: UNIT_FACTS_COLUMNS
    with a null token; lines with a null event_id are not counted. Every event is kept (clock
    alignment needs the routine ones); ``candidate`` tells which ones the count vectors use.
    """
    facts = (
        events.where(F.col("event_id").isNotNull())
        .groupBy(F.col("job_id"), *_unit_columns(granularity), F.col("event_id"))
        .agg(F.count(F.lit(1)).alias("n_lines"), F.count(F.when(_is_loud(), 1)).alias("n_loud"),
             F.min(_seconds()).alias("first_s"))
        .withColumn("token", F.lit(None).cast("string"))
    )
    return _fresh(_flag_candidates(facts, candidates), UNIT_FACTS_COLUMNS)


def unit_mentions(events: DataFrame, granularity: str = "node",
                  candidates: DataFrame | None = None) -> DataFrame:
    """What each unit's lines name: IPv4 addresses (all lines: identity lines are INFO), and in
    loud lines global rank numbers and host names of the job's own nodes.

    Input: ``events`` (job_id, node, rank, ts, level, event_id, message; without a message
    column nothing is named). Output: UNIT_FACTS_COLUMNS with token = ``ip:<a.b.c.d>``,
    ``rank:<n>`` or ``host:<node>``; n_lines / n_loud: lines / loud lines naming it; first_s:
    the first timestamp of a loud line naming it. Token extraction is JVM regex, no Python.
    """
    if "message" not in events.columns:
        return events.sparkSession.createDataFrame([], UNIT_FACTS_SCHEMA)
    loud = _is_loud()
    empty = F.array().cast("array<string>")

    def tagged(kind: str, pattern: str, group: int, only_loud: bool) -> F.Column:
        found = F.transform(F.regexp_extract_all(F.col("message"), F.lit(pattern), group),
                            lambda value: F.concat(F.lit(kind + ":"), value))
        return F.when(loud, found).otherwise(empty) if only_loud else found

    lines = (
        events.where(F.col("event_id").isNotNull() & F.col("message").isNotNull())
        .select("job_id", *_unit_columns(granularity), "event_id", _seconds().alias("t"), loud.alias("loud"),
                F.explode(F.array_distinct(F.concat(tagged("ip", IPV4_PATTERN, 0, False),
                                                    tagged("rank", RANK_PATTERN, 1, True),
                                                    tagged("host", HOST_PATTERN, 0, True)))).alias("token"))
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
    )
    return _fresh(_flag_candidates(mentions, candidates), UNIT_FACTS_COLUMNS)


def unit_activity(events: DataFrame, granularity: str = "node") -> DataFrame:
    """Per unit, over all its lines: how much and until when it logged, and its error lines.

    Input: ``events`` (job_id, node, rank, ts, level, event_id; line_no optional). Output:
    job_id, node, process_rank, min_rank, max_rank (global ranks the unit holds), ranks (all of
    them, sorted), n_files (distinct ranks), n_lines, n_error (ERROR/FATAL lines),
    first_error_s, first_s, last_s (epoch seconds; null when the unit has no timestamped /
    error line), ts_cover (the largest share, over the unit's rank files, of a file's lines
    up to its last timestamped line: 1.0 when its last line has a timestamp; null without
    line numbers).
    """
    is_error = F.col("level").isin(*ERROR_LEVELS)
    seconds = _seconds()
    if "line_no" in events.columns:
        last_line, last_timed = F.max("line_no"), F.max(F.when(F.col("ts").isNotNull(), F.col("line_no")))
    else:
        last_line = last_timed = F.lit(None).cast("long")
    per_file = (
        events.groupBy(F.col("job_id"), *_unit_columns(granularity), F.col("rank"))
        .agg(F.count(F.lit(1)).alias("n_lines"), F.count(F.when(is_error, 1)).alias("n_error"),
             F.min(F.when(is_error, seconds)).alias("first_error_s"), F.min(seconds).alias("first_s"),
             F.max(seconds).alias("last_s"), last_line.alias("last_line"), last_timed.alias("last_timed"))
    )
    cover = F.coalesce(F.col("last_timed"), F.lit(0)) / F.col("last_line")
    activity = (
        per_file.groupBy("job_id", "node", "process_rank")
        .agg(F.min("rank").cast("int").alias("min_rank"), F.max("rank").cast("int").alias("max_rank"),
             F.array_sort(F.collect_list(F.col("rank").cast("int"))).alias("ranks"),
             F.count("rank").cast("int").alias("n_files"), F.sum("n_lines").alias("n_lines"),
             F.sum("n_error").alias("n_error"), F.min("first_error_s").alias("first_error_s"),
             F.min("first_s").alias("first_s"), F.max("last_s").alias("last_s"), F.max(cover).alias("ts_cover"))
    )
    return _fresh(activity, ["job_id", "node", "process_rank", "min_rank", "max_rank", "ranks", "n_files", "n_lines",
                             "n_error", "first_error_s", "first_s", "last_s", "ts_cover"])


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


def clock_offsets(first_seen: pd.DataFrame, activity: pd.DataFrame, early_share: float = 0.5) -> pd.Series:
    """Clock offset of every unit against the job's consensus time, in seconds.

    ``first_seen``: unit x event first timestamps (NaN: none); ``activity`` (same index):
    first_s, last_s. The offset is the median, over the events most units (at least half, and
    2) log in the first ``early_share`` of the job, of the unit's first time minus the event's
    median first time; 0 for a unit sharing no such event. Only early events are used: the
    failure's own events (watchdogs, aborts, teardown) happen at different true times on
    different units, and a node that failed seconds early would otherwise have its lead taken
    for clock skew. (``temporal.lines.node_clock_offsets`` medians over every shared event,
    which absorbs exactly that lead when a job's failure events outnumber its start-up ones.)
    """
    zero = pd.Series(0.0, index=first_seen.index)
    if first_seen.empty:
        return zero
    shared = first_seen.loc[:, first_seen.notna().sum(axis=0) >= max(2, len(first_seen) / 2)]
    start, end = activity["first_s"].median(), activity["last_s"].median()
    if shared.empty or pd.isna(start) or pd.isna(end):
        return zero
    typical = shared.median(axis=0)
    early = shared.loc[:, typical <= start + early_share * (end - start)]
    if early.empty:
        return zero
    return early.sub(early.median(axis=0), axis=1).median(axis=1).fillna(0.0)


def failure_onsets(first_seen: pd.DataFrame, activity: pd.DataFrame, offsets: pd.Series,
                   config: SpatialConfig) -> pd.Series:
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
    onset: their final lines' times are unknown. With fewer than ``min_timed_units`` onsets
    there is nothing to compare and every onset is NaN.
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
    for unit, times in terminal.iterrows():
        times = np.sort(times.dropna().to_numpy())
        if len(times) and covered[unit]:
            onset[unit] = _burst_start(times, config.burst_gap_s, config.burst_events)
    onset = onset - offsets.reindex(activity.index).fillna(0.0)
    if onset.notna().sum() < config.min_timed_units:
        return pd.Series(np.nan, index=activity.index)
    return onset


def _burst_start(times: np.ndarray, gap_s: float, min_events: int) -> float:
    """Start of the first burst of at least ``min_events`` sorted ``times`` (bursts: runs with
    no gap above ``gap_s``); the first time when no burst is that large."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(times) > gap_s) + 1])
    sizes = np.diff(np.concatenate([starts, [len(times)]]))
    large = starts[sizes >= min_events]
    return float(times[large[0]] if len(large) else times[0])


def address_book(mentions: pd.DataFrame, nodes: Iterable[str]) -> dict[str, str]:
    """IPv4 address -> node, learnt from the job's identity lines.

    ``mentions``: node, event_id, token rows (``ip:`` tokens are read). An identity event is
    one that most nodes (at least half, and 2) log naming addresses, where (nearly, 90%) every
    node names exactly one and (nearly) every address is named by one node: each node
    announcing itself (NCCL's bootstrap interface, a launcher's own address). An address
    named by several nodes (a master address everyone connects to) is nobody's.
    """
    n_nodes = len(set(nodes))
    ips = mentions.loc[mentions["token"].str.startswith("ip:"), ["node", "event_id", "token"]].drop_duplicates()
    book: dict[str, str] = {}
    for _, rows in sorted(ips.groupby("event_id"), key=lambda item: str(item[0])):
        per_node = rows.groupby("node")["token"].nunique()
        per_token = rows.groupby("token")["node"].nunique()
        if len(per_node) < max(2, n_nodes / 2) or (per_node == 1).mean() < 0.9 or (per_token == 1).mean() < 0.9:
            continue
        owners = rows.sort_values(["token", "node"]).drop_duplicates("token")
        for token, node in owners[["token", "node"]].itertuples(index=False):
            if per_token[token] == 1:
                book.setdefault(token[3:], node)
    return book


def peer_mentions(mentions: pd.DataFrame, activity: pd.DataFrame, offsets: pd.Series,
                  since: float | None, window_s: float) -> pd.DataFrame:
    """Which units the others' loud lines name, and how many others name each.

    ``mentions``: unit, node, event_id, token, n_loud, first_s, candidate rows;
    ``activity``: indexed by unit, with node and ranks (or min_rank..max_rank). A token names a
    unit by host name (``host:``), by an address of the job's identity lines (``ip:``, see
    ``address_book``) or by a global rank it holds (``rank:``; numbers below the ranks per node
    are skipped: a local rank 3 and global rank 3 read the same). Counted: loud lines of
    candidate events, not older (aligned) than ``since - window_s`` when ``since`` is known
    (the first failure onset: init-time warnings about the master are not blame), naming a
    unit other than the line's own (for host and address: another node). Output indexed like
    ``activity``: named_by (distinct naming units), names (up to 3 tokens used, sorted).
    """
    out = pd.DataFrame({"named_by": 0, "names": [[] for _ in activity.index]}, index=activity.index)
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
    if since is not None and not math.isnan(since):
        aligned = loud["first_s"] - loud["unit"].map(offsets).fillna(0.0)
        loud = loud[~(aligned < since - window_s)]
    pairs = []
    for unit, node, token in loud[["unit", "node", "token"]].drop_duplicates().itertuples(index=False):
        kind, _, value = token.partition(":")
        if kind == "rank":
            target = rank_units.get(int(value)) if int(value) >= per_node else None
            if target is not None and target != unit:
                pairs.append((unit, target, token))
            continue
        named_node = value if kind == "host" else book.get(value)
        if named_node is None or named_node == node:
            continue
        pairs.extend((unit, target, token) for target in node_units.get(named_node, []))
    if not pairs:
        return out
    frame = pd.DataFrame(pairs, columns=["by", "unit", "token"])
    named_by = frame.groupby("unit")["by"].nunique()
    names = frame.groupby("unit")["token"].agg(lambda t: sorted(set(t))[:3])
    out["named_by"] = named_by.reindex(out.index).fillna(0).astype(int)
    out["names"] = [names.get(unit, []) for unit in out.index]
    return out


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
    """Blame in [0, 1]: how far more peers name a unit than name the job's typical unit, as a
    share of the most named unit's count (launcher summaries that name every node cancel out)."""
    top = named_by.max() if len(named_by) else 0
    if top <= 0:
        return pd.Series(0.0, index=named_by.index)
    return ((named_by - named_by.median()) / top).clip(lower=0.0, upper=1.0)


def timing_scores(onset_lag_s: pd.Series, scale_s: float) -> pd.Series:
    """Timing in [0, 1]: 1 for the earliest failure onset, e-fold smaller per ``scale_s``
    seconds behind it; 0 without an onset."""
    return np.exp(-onset_lag_s / scale_s).fillna(0.0)


def rank_units(job_id: str, counts: pd.DataFrame, activity: pd.DataFrame, config: SpatialConfig) -> pd.DataFrame:
    """Rank the units of one job.

    ``counts``: node, process_rank, event_id, n_lines, and optionally first_s, candidate
    (missing: every row a candidate) and the ``unit_mentions`` rows (token not null; n_loud).
    Rows with a null or missing token are the unit x event facts; the count vectors use the
    candidate ones, clock alignment every one. ``activity``: the ``unit_activity`` columns for
    every unit of the job (units with no candidate line still count: they are all-zero
    vectors; first_s, last_s, ranks, ts_cover may be missing: no timing / ranks from
    min_rank..max_rank). Output: the DIAGNOSIS_NODES_COLUMNS, one row per unit.
    """
    if activity.empty:
        return pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
    activity = activity.assign(unit=_unit_key(activity)).set_index("unit").sort_index()
    for column in ("first_s", "last_s"):
        if column not in activity.columns:
            activity[column] = np.nan
    counts = counts.assign(unit=_unit_key(counts)) if len(counts) else counts.assign(unit=pd.Series(dtype=str))
    if "candidate" not in counts.columns:
        counts = counts.assign(candidate=True)
    is_fact = counts["token"].isna() if "token" in counts.columns else pd.Series(True, index=counts.index)
    facts, mentions = counts[is_fact], counts[~is_fact]
    matrix = _pivot(facts[facts["candidate"].astype(bool)], "n_lines", activity.index).fillna(0)

    features = normalised_features(matrix, activity, config.normalisation)
    score = isolation_scores(features, config)
    deviation = deviations(features)
    evidence = {unit: _evidence(deviation, unit, config.max_evidence) for unit in activity.index}
    has_evidence = pd.Series({unit: bool(ids) for unit, (ids, _) in evidence.items()}, dtype=bool)
    isolation = score.where(has_evidence | (not config.evidence_required), score.clip(upper=0.5))
    silent = silence(activity, config)

    if "first_s" in facts.columns:
        first_seen = _pivot(facts, "first_s", activity.index)
        offsets = clock_offsets(first_seen, activity)
        onsets = failure_onsets(first_seen.reindex(columns=_candidate_events(facts)), activity, offsets, config)
    else:
        offsets, onsets = pd.Series(0.0, index=activity.index), pd.Series(np.nan, index=activity.index)
    onset_lag = onsets - onsets.min()
    named = peer_mentions(mentions, activity, offsets, onsets.min(), config.mention_window_s)
    combined = (isolation + config.blame_weight * blame_scores(named["named_by"])
                + config.timing_weight * timing_scores(onset_lag, config.timing_scale_s))

    # first: units that stopped early or lack rank files (a dead machine says nothing), and units
    # most peers name (they timed out waiting on it). Far fewer lines alone is weaker: a node of
    # rank 0 or of the last pipeline stage logs more than the rest by role, so it only adds.
    only_truncated = silent["truncated"] & silent["silent"] & (silent["missing_files"] == 0) & ~(
        silent["silent_gap_s"].fillna(0.0) >= config.silent_min_gap_s)
    combined = combined + config.truncated_bonus * only_truncated
    strong_blame = named["named_by"] >= max(2.0, config.strong_blame_share * (len(activity) - 1))
    first = (silent["silent"] & ~only_truncated) | strong_blame
    ranked = pd.DataFrame({"first": first, "combined": combined,
                           "silent_gap": silent["silent_gap_s"].fillna(0.0).where(silent["silent"] & ~only_truncated, 0.0)})
    ranked = ranked.rename_axis("unit").reset_index().sort_values(
        ["first", "silent_gap", "combined", "unit"], ascending=[False, False, False, True], kind="stable")
    order = ranked["unit"].to_numpy()
    rank = np.arange(1, len(ranked) + 1)
    suspect = (rank <= config.top_k) & (ranked["first"].to_numpy() | (ranked["combined"].to_numpy() >= config.threshold))
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
        "signals": [_signals(u, silent, score, evidence, named, onset_lag, onsets) for u in order],
    })


def _pivot(rows: pd.DataFrame, values: str, units: pd.Index) -> pd.DataFrame:
    """unit x event table of ``values`` (sum; NaN where a unit has no row), rows = ``units``."""
    if rows.empty:
        return pd.DataFrame(index=units, dtype=float)
    aggfunc = "min" if values == "first_s" else "sum"
    table = rows.pivot_table(index="unit", columns="event_id", values=values, aggfunc=aggfunc, dropna=False)
    return table.reindex(units).sort_index(axis=1)


def _candidate_events(facts: pd.DataFrame) -> list[str]:
    return sorted(facts.loc[facts["candidate"].astype(bool), "event_id"].unique())


def _signals(unit: str, silent: pd.DataFrame, score: pd.Series, evidence: dict, named: pd.DataFrame,
             onset_lag: pd.Series, onsets: pd.Series) -> list[str]:
    """The reasons behind a unit's place, for people: which signals fired and how strongly."""
    out = []
    row = silent.loc[unit]
    if row["missing_files"] > 0:
        out.append(f"silent: {int(row['missing_files'])} rank file(s) fewer than its peers")
    elif row["truncated"]:
        out.append("silent: far fewer lines than its peers")
    elif row["silent"]:
        out.append(f"silent: stopped {row['silent_gap_s']:.0f} s before its peers without an error line")
    ids = evidence[unit][0]
    if ids:
        out.append(f"isolated: score {score[unit]:.3f}, logs {len(ids)} event(s) more than its peers")
    if named.at[unit, "named_by"] > 0:
        out.append(f"named by {int(named.at[unit, 'named_by'])} peer(s): {', '.join(named.at[unit, 'names'])}")
    lag = onset_lag.get(unit, np.nan)
    if not pd.isna(lag):
        if lag == 0.0:
            later = onsets.drop(unit).min() - onsets[unit]
            out.append(f"failed first, {later:.1f} s before the next unit" if later >= 0.05 else "failed first")
        else:
            out.append(f"failure onset {lag:.1f} s after the first unit")
    return out


def _evidence(deviation: pd.DataFrame, unit: str, limit: int) -> tuple[list[str], list[float]]:
    """The events on which ``unit`` exceeds its peers most (positive deviation above 1)."""
    if deviation.empty or unit not in deviation.index:
        return [], []
    row = deviation.loc[unit]
    row = row[row > 1.0]
    # ties by event id, so the evidence is the same on every run
    order = sorted(row.items(), key=lambda item: (-item[1], str(item[0])))[:limit]
    return [str(e) for e, _ in order], [round(float(v), 4) for _, v in order]


# ---- Spark: per-job ranking, baselines, outputs --------------------------------------------


def unit_inputs(events: DataFrame, granularity: str = "node",
                candidates: DataFrame | None = None) -> tuple[DataFrame, DataFrame]:
    """The two long-form inputs of ``rank_units`` for every job of ``events``: the unit facts
    and mentions (UNIT_FACTS_COLUMNS) and the unit activity (``unit_activity``). Built once, they
    can be ranked under several configurations (``rank_unit_inputs``; the evaluation does)."""
    facts = unit_event_facts(events, granularity, candidates).unionByName(
        unit_mentions(events, granularity, candidates))
    return facts, unit_activity(events, granularity)


def rank_unit_inputs(facts: DataFrame, activity: DataFrame, config: SpatialConfig = SpatialConfig()) -> DataFrame:
    """``diagnosis_nodes`` rows from ``unit_inputs`` (made with ``config.granularity``): one
    grouped pandas call per job (``cogroup().applyInPandas(rank_units)``)."""

    def per_job(job_facts: pd.DataFrame, job_activity: pd.DataFrame) -> pd.DataFrame:
        if job_activity.empty:
            return pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
        job_id = str(job_activity["job_id"].iloc[0])
        return rank_units(job_id, job_facts.drop(columns=["job_id"]), job_activity.drop(columns=["job_id"]), config)

    return (
        facts.groupBy("job_id").cogroup(activity.groupBy("job_id"))
        .applyInPandas(per_job, schema=DIAGNOSIS_NODES.schema)
        .select(*DIAGNOSIS_NODES_COLUMNS)
    )


def rank_nodes(events: DataFrame, config: SpatialConfig = SpatialConfig(),
               candidates: DataFrame | None = None) -> DataFrame:
    """``diagnosis_nodes`` rows for every job in ``events`` (filter it to the failed jobs first).

    Input: ``events`` (job_id, node, rank, ts, level, event_id; message and line_no are used
    when present: peer mentions, timestamp cover); ``candidates`` (job_id, event_id) from
    cross-job filtering, or None to compare over every event. A job whose candidate set is
    empty still gets its units ranked by silence (all scores 0.5). Output
    (DIAGNOSIS_NODES.schema): one row per unit; process_rank is null at node granularity.
    """
    return rank_unit_inputs(*unit_inputs(events, config.granularity, candidates), config)


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
    write_job_rows(node_rows.select(*DIAGNOSIS_NODES_COLUMNS), storage, "diagnosis_nodes", job_ids, with_rows)
    log.info("diagnosis_nodes: wrote %d jobs (%d with rows)", len(job_ids), len(with_rows))


def top_k_hit(ranking: Iterable[str], faulty: Iterable[str], k: int) -> float:
    """Share of ``faulty`` nodes within the first ``k`` of ``ranking`` (nan if none faulty)."""
    faulty = set(faulty)
    if not faulty:
        return math.nan
    return len(faulty & set(list(ranking)[:k])) / len(faulty)
