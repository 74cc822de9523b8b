"""The normal-event pool of successful jobs, and the cross-job filter that uses it.

L4's first filter: an event that is frequently present in historical *successful* jobs with the
same settings is not what made a job fail, so it is dropped before the spatial and temporal
analyses. Tables in the warehouse:

- ``normal_pool_ledger`` (partitioned by job_id): one row per (counted successful job, event,
  masked message) with its line count, the job's node count, settings and the parse run it was
  read from. A job with no line gets one row with null event and message, so it still counts as
  a job. The ledger makes the pool incremental: only jobs missing from it (or parsed again since)
  are counted, and replacing a job's partition can never count it twice. A job's rows come from
  the parse's ``job_event_forms`` (the parse masked each line shape once) when they stand for its
  lines, else from its events, masking every line (``_ledger_rows``).
- ``normal_pool`` (small, rebuilt from the ledger): one row per (grouping level, settings key,
  event): n_jobs, group_jobs, support = n_jobs / group_jobs, the event's rate in healthy jobs
  (lines per node of the job: median and max over the jobs that have it) and how freely its
  masked form varies between healthy jobs (variant_novelty).
- ``normal_pool_variants`` (small, rebuilt from the ledger): one row per (grouping level,
  settings key, event, masked message) with n_jobs: which forms of an event healthy jobs write.
- ``_normal_pool/state.json``: the grouping rules, masks and jobs the pool was built from
  (written last, so a crash before it makes the next run rebuild).

The filter (``filter_normal_events``) decides per (failed job, event, masked message) whether to
keep it and why, then keeps the job's lines of kept ones (a broadcast join of the small decision
table, so the lines keep their input order). Decisions and a per-job report say what was removed
and which pool entries caused it.

Why masked messages: Drain may put unrelated messages under one generic template
(``NCCL INFO <*> <*> <*>`` holds both ``Connected all rings`` and the call-trace line
``transport/net.cc:1134 -> 6``), and a fault can show as an unusual value in a normal line
(``lm loss: nan``). The masked message (digits folded, variables masked, as the parser computed
it before Drain) separates those; a normal event whose masked form no healthy job of the group
ever wrote is kept (reason ``new_variant``), which can be switched off.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from l4spark.config import Config, StorageConfig
from l4spark.errors import ConfigError
from l4spark.crossjob.config import NormalPoolConfig
from l4spark.crossjob.fingerprint import canonical_settings, parse_settings, settings_key
from l4spark.crossjob.reasons import (
    BOILERPLATE,
    KEEP_REASONS,
    NEW_VARIANT,
    NO_EVENT_ID,
    NO_HISTORY,
    NORMAL,
    NOT_IN_GROUP,
    NOT_IN_POOL,
    RARE_IN_POOL,
    RATE_ABOVE_NORMAL,
)
from l4spark.io.frames import materialize
from l4spark.io import fs
from l4spark.io.storage import (in_parallel, read_table, stored_format, table_exists, table_path, write_job_rows,
                                write_json, write_table)
from l4spark.io.tables import JOB_EVENT_FORMS, NORMAL_POOL, NORMAL_POOL_LEDGER, NORMAL_POOL_VARIANTS, columns
from l4spark.parse.structure import with_masked
from l4spark.parse.textrules import MaskRule

log = logging.getLogger(__name__)

STATE_FILE = Path("_normal_pool") / "state.json"
KEEP_STATE_VERSIONS = 2  # a remote warehouse's pool state versions kept (the current one and the one before)

HISTORY_SCHEMA = "job_id string, history string, level int, settings_key string, group_jobs long"


@dataclass(frozen=True)
class NormalPool:
    """The pool as the filter reads it: event entries and their masked variants."""

    entries: DataFrame  # NORMAL_POOL.schema
    variants: DataFrame  # NORMAL_POOL_VARIANTS.schema


@dataclass
class PoolUpdate:
    """What one ``update_normal_pool`` run did."""

    added_jobs: list[str] = field(default_factory=list)
    removed_jobs: list[str] = field(default_factory=list)
    counted_jobs: int = 0
    rebuilt: bool = False
    pool_rows: int = 0
    groups: int = 0


# ---- building the pool ---------------------------------------------------------------------


def update_normal_pool(spark: SparkSession, config: Config, pool_config: NormalPoolConfig = NormalPoolConfig(),
                       progress: Callable[[str], None] = log.info) -> PoolUpdate:
    """Bring the ledger and the pool in line with the successful jobs of the ``jobs`` table.

    Reads the events only of successful jobs not yet in the ledger or parsed again since they were
    counted (all of them when the masks changed); drops from the ledger jobs that are no longer
    successful or no longer registered. Rebuilds ``normal_pool`` and ``normal_pool_variants`` from
    the ledger when anything changed, when they are missing, or when the grouping rules changed.
    A second run on the same tables reads no events and writes nothing.
    """
    storage = config.storage
    if not table_exists(storage, "jobs"):
        raise ConfigError(f"no jobs table under {storage.warehouse}: run `l4spark parse` first")
    successful_rows = (read_table(spark, storage, "jobs")
                       .where(F.col("status").isin(list(pool_config.succeeded_statuses)))
                       .select("job_id", "run_id", "settings").collect())
    successful = {row.job_id: row.run_id for row in successful_rows}
    state = _read_state(spark, storage)
    masks = config.mask_signature()
    ledger_settings = _ledger_jobs(spark, storage)
    in_ledger = {job_id: run_id for job_id, (run_id, _) in ledger_settings.items()}
    # counted under other masks: the ledger's message forms mean something else, count again
    counted = in_ledger if state.get("masking") == masks else {}
    added = sorted(j for j, run in successful.items() if j not in counted or counted[j] != run)
    removed = sorted(set(in_ledger) - set(successful))
    update = PoolUpdate(added_jobs=added, removed_jobs=removed, counted_jobs=len(successful))
    progress(f"{len(successful)} successful jobs; {len(added)} to count, {len(removed)} to drop from the pool")

    if added or removed:
        rows = _ledger_rows(spark, config, added, progress) if added else spark.createDataFrame([], NORMAL_POOL_LEDGER.schema)
        write_job_rows(rows, storage, NORMAL_POOL_LEDGER.name, added + removed, added)

    # the state is written last: after a crash between the ledger and the pool it still names the
    # old job set, so the next run rebuilds the pool even though the ledger is already current
    target = {"grouping": pool_config.grouping_signature(), "masking": masks, "counted_jobs": dict(sorted(successful.items()))}
    stale = ({k: state.get(k) for k in target} != target
             or not table_exists(storage, NORMAL_POOL.name) or not table_exists(storage, NORMAL_POOL_VARIANTS.name))
    if stale:
        ledger = (read_table(spark, storage, NORMAL_POOL_LEDGER.name) if successful and table_exists(storage, NORMAL_POOL_LEDGER.name)
                  else spark.createDataFrame([], NORMAL_POOL_LEDGER.schema))
        # the ledger's jobs now: those it kept (with the settings it holds) and those just
        # counted (with the settings their rows were given, from the jobs table): known here, so
        # the ledger just written is not read again for them (6 Spark jobs, a tenth of the update)
        rewritten = set(added) | set(removed)
        job_settings = {job_id: settings for job_id, (_, settings) in ledger_settings.items() if job_id not in rewritten}
        job_settings |= {row.job_id: row.settings for row in successful_rows if row.job_id in set(added)}
        groups = _job_groups(spark, job_settings, pool_config).localCheckpoint()
        pool = build_pool(ledger, groups).localCheckpoint()
        variants = build_variants(ledger, groups).localCheckpoint()
        # neither reads the other: both commits at once (``in_parallel``), the state after both
        in_parallel(lambda: write_table(pool, storage, NORMAL_POOL.name),
                    lambda: write_table(variants, storage, NORMAL_POOL_VARIANTS.name))
        _write_state(spark, storage, target)
        update.rebuilt = True
    else:
        pool = read_table(spark, storage, NORMAL_POOL.name)
    summary = pool.agg(F.count(F.lit(1)).alias("rows"), F.countDistinct("settings_key").alias("groups")).first()
    update.pool_rows, update.groups = int(summary["rows"]), int(summary["groups"])
    progress(f"normal pool: {update.pool_rows} rows in {update.groups} groups"
             + (" (rebuilt)" if update.rebuilt else " (unchanged)"))
    return update


def read_normal_pool(spark: SparkSession, storage: StorageConfig) -> NormalPool:
    """The pool tables, or empty ones with their schema when none was built (every job: no history)."""
    if not (table_exists(storage, NORMAL_POOL.name) and table_exists(storage, NORMAL_POOL_VARIANTS.name)):
        return NormalPool(spark.createDataFrame([], NORMAL_POOL.schema), spark.createDataFrame([], NORMAL_POOL_VARIANTS.schema))
    return NormalPool(_read_with_schema(spark, storage, NORMAL_POOL.name, NORMAL_POOL.schema),
                      _read_with_schema(spark, storage, NORMAL_POOL_VARIANTS.name, NORMAL_POOL_VARIANTS.schema))


def _read_with_schema(spark: SparkSession, storage: StorageConfig, table: str, schema: str) -> DataFrame:
    """A small table read with its declared schema (an empty Parquet table has no file to infer one from).
    A Delta table's log holds its schema, and delta-spark refuses a user-specified one."""
    if (stored_format(storage, table) or storage.format) == "delta":
        return read_table(spark, storage, table).select(*columns(schema))
    return spark.read.format("parquet").schema(schema).load(table_path(storage, table))


def build_pool(ledger: DataFrame, groups: DataFrame) -> DataFrame:
    """``normal_pool`` rows from ledger rows (``NORMAL_POOL_LEDGER.schema``) and job groups (``_job_groups``).

    Output: ``NORMAL_POOL.schema``, ordered by level, settings_key, event_id. Ledger rows with a null
    event_id count their job in group_jobs only. ``variant_novelty`` is the leave-one-out rate at
    which the group's own healthy jobs write a masked form of the event that no other healthy job
    of the group wrote: 0 for an event whose forms are stable (every form of ``NCCL INFO <*> <*>
    <*>`` in every job), high for one whose variable part takes free values (an argument dump).
    """
    group_sizes = groups.groupBy("settings_key").agg(F.countDistinct("job_id").alias("group_jobs"))
    in_groups = ledger.where(F.col("event_id").isNotNull()).join(groups, on="job_id", how="inner")
    per_job = (
        in_groups.groupBy("level", "level_name", "settings_key", "group_settings", "job_id", "event_id")
        .agg(F.sum("n_lines").alias("n_lines"), F.first("job_nodes").alias("job_nodes"))
        .withColumn("lines_per_node", F.col("n_lines") / F.col("job_nodes"))
    )
    # a job writes a novel form when one of its masked messages of the event is its own alone
    form_jobs = (Window.partitionBy("settings_key", "event_id", "masked")
                 .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    novel = (
        in_groups.withColumn("form_jobs", F.count(F.lit(1)).over(form_jobs))
        .where(F.col("form_jobs") == 1)
        .groupBy("settings_key", "event_id")
        .agg(F.countDistinct("job_id").alias("novel_jobs"))
    )
    return (
        per_job.groupBy("level", "level_name", "settings_key", "event_id")
        .agg(F.first("group_settings").alias("settings"),
             F.countDistinct("job_id").alias("n_jobs"),
             F.median("lines_per_node").alias("median_lines_per_node"),
             F.max("lines_per_node").alias("max_lines_per_node"),
             F.median("n_lines").alias("median_lines"))
        .join(group_sizes, on="settings_key", how="inner")
        .join(novel, on=["settings_key", "event_id"], how="left")
        .select(F.col("level").cast("int"), "level_name", "settings_key", "settings", "event_id",
                F.col("n_jobs").cast("long"), F.col("group_jobs").cast("long"),
                (F.col("n_jobs") / F.col("group_jobs")).alias("support"),
                F.col("median_lines_per_node").cast("double"), F.col("max_lines_per_node").cast("double"),
                F.col("median_lines").cast("double"),
                (F.coalesce("novel_jobs", F.lit(0)) / F.col("n_jobs")).alias("variant_novelty"))
        .orderBy("level", "settings_key", "event_id")
    )


def build_variants(ledger: DataFrame, groups: DataFrame) -> DataFrame:
    """``normal_pool_variants`` rows: per group, event and masked message, the jobs that wrote it."""
    return (
        ledger.where(F.col("event_id").isNotNull())
        .join(groups, on="job_id", how="inner")
        .groupBy("level", "settings_key", "event_id", "masked")
        .agg(F.countDistinct("job_id").cast("long").alias("n_jobs"))
        .select(F.col("level").cast("int"), "settings_key", "event_id", "masked", "n_jobs")
        .orderBy("level", "settings_key", "event_id", "masked")
    )


def _job_groups(spark: SparkSession, job_settings: dict[str, str | None], config: NormalPoolConfig) -> DataFrame:
    """job_id, level, level_name, settings_key, group_settings: the group of each ledger job
    (``job_settings``: job -> its settings as the ledger holds them) at each level (none at a
    level whose keys its settings lack). One row per job: computed on the driver."""
    rows = []
    for job_id, raw_settings in sorted(job_settings.items()):
        settings = parse_settings(raw_settings)
        for index, level in enumerate(config.levels):
            key = settings_key(settings, level)
            if key is not None:
                rows.append((job_id, index, level.name, key, canonical_settings(settings, level.keys)))
    return spark.createDataFrame(
        rows, "job_id string, level int, level_name string, settings_key string, group_settings string")


def with_message_form(lines: DataFrame, masking: Sequence[MaskRule], fold_digits: bool = True) -> DataFrame:
    """Add ``masked``: the parser's masked message (``structure.with_masked``) with runs of white
    space collapsed to one space and trimmed, as Drain's tokens see it (``iteration      914/``
    and ``iteration       14/`` are one form). A ``masked`` column already present is only
    collapsed. Null message: null."""
    if "masked" not in lines.columns:
        lines = with_masked(lines, masking, fold_digits)
    return lines.withColumn("masked", F.trim(F.regexp_replace("masked", r"\s+", " ")))


def masked_rates(lines: DataFrame) -> DataFrame:
    """Per (job, event, masked message): lines, the job's node count and the boilerplate share.

    Input: events lines with job_id, node, event_id, masked, and optionally a boolean
    ``boilerplate`` per line. Output: job_id, event_id, masked, n_lines, job_nodes,
    boilerplate_share (share of the lines flagged; 0.0 without the column). Null event ids and
    null messages form groups of their own; a null node counts as one node.
    """
    per_job = lines.groupBy("job_id").agg(F.countDistinct(_node()).cast("long").alias("job_nodes"))
    flag = (F.coalesce(F.col("boilerplate"), F.lit(False)) if "boilerplate" in lines.columns
            else F.lit(False)).cast("double")
    return (
        lines.groupBy("job_id", "event_id", "masked")
        .agg(F.count(F.lit(1)).alias("n_lines"), F.avg(flag).alias("boilerplate_share"))
        .join(per_job, on="job_id", how="inner")
        .select("job_id", "event_id", "masked", "n_lines", "job_nodes", "boilerplate_share")
    )


def _node() -> Column:
    """A line's node; a null node counts as one node."""
    return F.coalesce(F.col("node"), F.lit("\x00no-node"))


def _ledger_rows(spark: SparkSession, config: Config, job_ids: list[str],
                 progress: Callable[[str], None] = log.info) -> DataFrame:
    """Ledger rows of ``job_ids`` (a null-event row for a job without lines): from the parse's
    ``job_event_forms`` where they stand for the job's lines (``_jobs_with_forms``), else from
    the events, masking every line."""
    storage = config.storage
    jobs = (read_table(spark, storage, "jobs").where(F.col("job_id").isin(job_ids))
            .select("job_id", "settings", F.col("run_id").alias("parse_run_id")))
    columns = [c.split()[0] for c in NORMAL_POOL_LEDGER.schema.split(", ")]
    if not table_exists(storage, "events"):
        rates = spark.createDataFrame([], NORMAL_POOL_LEDGER.schema).drop("settings", "parse_run_id")
    else:
        events = read_table(spark, storage, "events")
        forms = (read_table(spark, storage, JOB_EVENT_FORMS.name).where(F.col("job_id").isin(job_ids)).localCheckpoint()
                 if table_exists(storage, JOB_EVENT_FORMS.name) else None)
        by_forms = _jobs_with_forms(spark, config, job_ids, forms)
        by_lines = sorted(set(job_ids) - set(by_forms))
        progress(f"ledger: {len(by_forms)} jobs from the parse's message forms, {len(by_lines)} by masking their lines")
        rates = spark.createDataFrame([], NORMAL_POOL_LEDGER.schema).drop("settings", "parse_run_id")
        if by_forms:
            nodes = (events.where(F.col("job_id").isin(by_forms)).groupBy("job_id")
                     .agg(F.countDistinct(_node()).cast("long").alias("job_nodes")))
            rates = rates.unionByName(
                forms.where(F.col("job_id").isin(by_forms))
                .join(nodes, on="job_id", how="inner")
                .select("job_id", "event_id", "masked", "n_lines", "job_nodes"))
        if by_lines:
            lines = (events.where(F.col("job_id").isin(by_lines))
                     .transform(lambda df: with_message_form(df, config.masking, config.structure.fold_digits)))
            rates = rates.unionByName(masked_rates(lines).drop("boilerplate_share"))
    with_events = rates.join(jobs, on="job_id", how="inner")
    without_events = (jobs.join(rates.select("job_id").distinct(), on="job_id", how="left_anti")
                      .select("job_id", F.lit(None).cast("string").alias("event_id"),
                              F.lit(None).cast("string").alias("masked"), F.lit(0).cast("long").alias("n_lines"),
                              F.lit(0).cast("long").alias("job_nodes"), "settings", "parse_run_id"))
    return with_events.select(*columns).unionByName(without_events.select(*columns))


def _jobs_with_forms(spark: SparkSession, config: Config, job_ids: list[str],
                     forms: DataFrame | None = None) -> list[str]:
    """The jobs of ``job_ids`` whose ``job_event_forms`` rows stand for their lines: written by
    the job's current parse run, under the current masks, and adding up to the job's lines
    (the forms are counted in the parse's first read; a file that grew before the second has
    more lines in the events). Small: a row per job from each table. ``forms``: the table's rows
    of ``job_ids`` when the caller has read them (None: read here)."""
    storage = config.storage
    if forms is None:
        if not table_exists(storage, JOB_EVENT_FORMS.name):
            return []
        forms = read_table(spark, storage, JOB_EVENT_FORMS.name).where(F.col("job_id").isin(job_ids))
    current = {(r.job_id, r.run_id, int(r.n_lines or 0))
               for r in read_table(spark, storage, "jobs").where(F.col("job_id").isin(job_ids))
               .select("job_id", "run_id", "n_lines").collect()}
    masks = json.dumps(config.mask_signature())
    totals = (forms.groupBy("job_id", "run_id", "masks").agg(F.sum("n_lines").alias("n_lines")).collect())
    counted = Counter(r.job_id for r in totals)  # one run and one signature per job, or not usable
    return sorted(r.job_id for r in totals
                  if counted[r.job_id] == 1 and r.masks == masks and (r.job_id, r.run_id, int(r.n_lines)) in current)


def _ledger_jobs(spark: SparkSession, storage: StorageConfig) -> dict[str, tuple[str, str | None]]:
    """Counted job -> (the parse run it was counted from, its settings then)."""
    if not table_exists(storage, NORMAL_POOL_LEDGER.name):
        return {}
    return {row.job_id: (row.parse_run_id, row.settings)
            for row in read_table(spark, storage, NORMAL_POOL_LEDGER.name)
            .select("job_id", "parse_run_id", "settings").distinct().collect()}


def _read_state(spark: SparkSession, storage: StorageConfig) -> dict:
    if not fs.is_local(storage.warehouse):
        data = fs.read_latest(spark, fs.child(storage.warehouse, STATE_FILE.parent.name), "state")
        return json.loads(data.decode("utf-8")) if data else {}
    path = fs.local_path(storage.warehouse) / STATE_FILE
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def _write_state(spark: SparkSession, storage: StorageConfig, state: dict) -> None:
    """The pool's state, replaced atomically: a file locally, a new write-once version remotely
    (the versions before the last ``KEEP_STATE_VERSIONS`` deleted once it is listed)."""
    if fs.is_local(storage.warehouse):
        write_json(fs.local_path(storage.warehouse) / STATE_FILE, state)
        return
    folder = fs.child(storage.warehouse, STATE_FILE.parent.name)
    version = max(fs.versions(spark, folder, "state"), default=0) + 1
    fs.write_version(spark, folder, "state", version, json.dumps(state, indent=2, default=str).encode())
    fs.prune_versions(spark, folder, ("state",), version, KEEP_STATE_VERSIONS)


# ---- the filter ----------------------------------------------------------------------------


def job_history(jobs: DataFrame, pool: NormalPool, config: NormalPoolConfig = NormalPoolConfig()) -> DataFrame:
    """Which group of successful jobs each job is compared with.

    Input: ``jobs`` with job_id, settings (JSON string; null or malformed = no settings). Output
    (``HISTORY_SCHEMA``): one row per job: history (the level name used, or ``none``), level,
    settings_key and group_jobs (null when ``none``). The first level whose group has at least
    ``min_group_jobs`` successful jobs wins.
    """
    spark = jobs.sparkSession
    sizes = {row.settings_key: int(row.group_jobs)
             for row in pool.entries.select("settings_key", "group_jobs").distinct().collect()}
    rows = []
    for job in jobs.select("job_id", "settings").distinct().collect():
        settings = parse_settings(job.settings)
        chosen = ("none", None, None, None)
        for index, level in enumerate(config.levels):
            key = settings_key(settings, level)
            if key is not None and sizes.get(key, 0) >= config.min_group_jobs:
                chosen = (level.name, index, key, sizes[key])
                break
        rows.append((job.job_id, *chosen))
    return spark.createDataFrame(rows, HISTORY_SCHEMA)


def event_decisions(lines: DataFrame, jobs: DataFrame, pool: NormalPool,
                    config: NormalPoolConfig = NormalPoolConfig()) -> DataFrame:
    """Keep or remove, and why, every (job, event, masked message) of ``lines``.

    Input: lines with job_id, node, event_id, masked; jobs (job_id, settings); the pool. Output:
    job_id, event_id, masked, n_lines (of this masked message), event_lines, lines_per_node (of the
    event), history, settings_key, group_jobs, pool_n_jobs, pool_support, pool_max_lines_per_node,
    pool_variant_novelty, variant_n_jobs, elsewhere_groups, boilerplate_share, kept, reason, detail,
    pool_kept (what the pool alone decides, boilerplate or not). reason, first
    that applies: ``no_event_id`` (never removed), ``boilerplate`` (removed: at least
    ``boilerplate_share`` of the lines carry the input's ``boilerplate`` flag, when
    ``remove_boilerplate``; any history), ``no_history`` (no group with enough successful jobs:
    everything else kept), ``not_in_group`` (absent from the group, normal in the healthy jobs of
    ``elsewhere_groups`` other groups, when ``known_elsewhere``), ``not_in_pool``,
    ``rare_in_pool`` (support below ``min_support``),
    ``rate_above_normal``, ``new_variant``, else ``normal`` (removed; the pool entry that caused
    it is settings_key / event_id / pool_*).
    """
    history = job_history(jobs, pool, config)
    entries = pool.entries.select("settings_key", "event_id", F.col("n_jobs").alias("pool_n_jobs"),
                                  F.col("support").alias("pool_support"),
                                  F.col("max_lines_per_node").alias("pool_max_lines_per_node"),
                                  F.col("variant_novelty").alias("pool_variant_novelty"))
    variants = pool.variants.select("settings_key", "event_id", "masked", F.col("n_jobs").alias("variant_n_jobs"))
    # events the healthy jobs of some group write (as "normal" would judge them there): an event
    # absent from the job's own group is known elsewhere when any such group has it
    elsewhere = (pool.entries.where((F.col("support") >= F.lit(config.min_support))
                                    & (F.col("group_jobs") >= F.lit(config.min_group_jobs)))
                 .groupBy("event_id").agg(F.countDistinct("settings_key").alias("elsewhere_groups")))
    # every masked message of an event, whole partition: the event's lines, whatever the order
    whole_event = (Window.partitionBy("job_id", "event_id")
                   .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing))
    stats = (
        masked_rates(lines)
        .withColumn("event_lines", F.sum("n_lines").over(whole_event))
        .withColumn("lines_per_node", F.col("event_lines") / F.col("job_nodes"))
        .join(F.broadcast(history), on="job_id", how="left")
        .join(entries, on=["settings_key", "event_id"], how="left")
        .join(variants, on=["settings_key", "event_id", "masked"], how="left")
        .join(F.broadcast(elsewhere), on="event_id", how="left")
    )
    rate_high = (F.lit(config.rate_keep)
                 & (F.col("lines_per_node") > F.lit(config.rate_factor) * F.col("pool_max_lines_per_node"))
                 & (F.col("event_lines") >= F.lit(config.rate_min_lines)))
    boilerplate = F.lit(config.remove_boilerplate) & (F.col("boilerplate_share") >= F.lit(config.boilerplate_share))
    # what the pool alone decides (boilerplate or not): the spatial and temporal steps take the
    # events it keeps, boilerplate included (a traceback's first line says which rank failed first)
    pool_reason = (
        F.when(F.col("event_id").isNull(), F.lit(NO_EVENT_ID))
        .when(F.col("settings_key").isNull(), F.lit(NO_HISTORY))
        .when(F.col("pool_support").isNull() & F.lit(config.known_elsewhere) & F.col("elsewhere_groups").isNotNull(),
              F.lit(NOT_IN_GROUP))
        .when(F.col("pool_support").isNull(), F.lit(NOT_IN_POOL))
        .when(F.col("pool_support") < F.lit(config.min_support), F.lit(RARE_IN_POOL))
        .when(rate_high, F.lit(RATE_ABOVE_NORMAL))
        .when(F.lit(config.variant_keep) & F.col("variant_n_jobs").isNull()
              & (F.col("pool_variant_novelty") <= F.lit(config.variant_max_novelty)), F.lit(NEW_VARIANT))
        .otherwise(F.lit(NORMAL))
    )
    reason = F.when(F.col("event_id").isNotNull() & boilerplate, F.lit(BOILERPLATE)).otherwise(F.col("pool_reason"))
    group = F.format_string("%d successful jobs of %s", "group_jobs", "settings_key")
    detail = (
        F.when(F.col("reason") == BOILERPLATE,
               F.format_string("%.0f%% of the lines are stack frames, teardown or advice text", F.col("boilerplate_share") * 100))
        .when(F.col("reason") == NO_HISTORY, F.lit("no settings group with enough successful jobs"))
        .when(F.col("reason") == NO_EVENT_ID, F.lit("lines without an event id are never removed"))
        .when(F.col("reason") == NOT_IN_POOL, F.concat(F.lit("absent from the "), group))
        .when(F.col("reason") == NOT_IN_GROUP,
              F.format_string("absent from the %s; normal in the healthy jobs of %d other groups", group,
                              "elsewhere_groups"))
        .when(F.col("reason") == RARE_IN_POOL,
              F.format_string("in %d of the %s (support %.2f < %.2f)", "pool_n_jobs", group, "pool_support",
                              F.lit(config.min_support)))
        .when(F.col("reason") == RATE_ABOVE_NORMAL,
              F.format_string("%.1f lines per node, above %.0fx the highest rate %.2f in the %s", "lines_per_node",
                              F.lit(config.rate_factor), "pool_max_lines_per_node", group))
        .when(F.col("reason") == NEW_VARIANT,
              F.format_string("event in %d of the %s (forms stable: novelty %.2f), but never this masked message",
                              "pool_n_jobs", group, "pool_variant_novelty"))
        .otherwise(F.format_string("in %d of the %s (support %.2f)", "pool_n_jobs", group, "pool_support"))
    )
    return (
        stats.withColumn("pool_reason", pool_reason)
        .withColumn("reason", reason)
        .withColumn("detail", detail)
        .select("job_id", "event_id", "masked", "n_lines", "event_lines", "lines_per_node",
                F.coalesce("history", F.lit("none")).alias("history"), "settings_key", "group_jobs",
                "pool_n_jobs", "pool_support", "pool_max_lines_per_node", "pool_variant_novelty", "variant_n_jobs",
                "elsewhere_groups", "boilerplate_share", (~F.col("reason").isin(NORMAL, BOILERPLATE)).alias("kept"),
                "reason", "detail",
                (F.col("pool_reason") != NORMAL).alias("pool_kept"))
    )


@dataclass(frozen=True)
class NormalFilterResult:
    """The filter's output: candidate lines, and the decisions behind them."""

    candidates: DataFrame
    decisions: DataFrame

    def pool_kept_events(self) -> DataFrame:
        """(job_id, event_id) of the events the pool keeps, boilerplate included: the evidence the
        spatial and temporal steps use (the failure-path lines are timing and localisation
        evidence, a traceback's first line says which rank failed first, though not candidates)."""
        return (self.decisions.where(F.col("pool_kept") & F.col("event_id").isNotNull())
                .select("job_id", "event_id").distinct())

    def event_outcomes(self) -> DataFrame:
        """Per (job, event): kept when any of its masked messages is kept, with that reason.

        Output: job_id, event_id, n_lines, history, settings_key, group_jobs, pool_n_jobs,
        pool_support, kept, reason (the kept messages' reason; removed: ``boilerplate`` when a
        message of it was removed as such, else ``normal``).
        """
        kept = F.col("kept")
        return (
            self.decisions.groupBy("job_id", "event_id", "history", "settings_key", "group_jobs", "pool_n_jobs",
                                   "pool_support")
            .agg(F.sum("n_lines").alias("n_lines"), F.max(kept).alias("kept"),
                 F.max(F.when(kept, F.col("reason"))).alias("kept_reason"),
                 F.min(F.when(~kept, F.col("reason"))).alias("removed_reason"))  # "boilerplate" < "normal"
            .select("job_id", "event_id", "n_lines", "history", "settings_key", "group_jobs", "pool_n_jobs",
                    "pool_support", "kept", F.coalesce("kept_reason", "removed_reason").alias("reason"))
        )

    def report(self) -> DataFrame:
        """Per job: history, group, distinct events and lines before and after, kept events by reason.

        Output: job_id, history, settings_key, group_jobs, n_events_before, n_events_after,
        n_events_removed, n_events_boilerplate (of the removed: as boilerplate, not by the pool),
        n_lines_before, n_lines_after, kept_<reason> for each keep reason. (An event counts once,
        under the reason of its kept lines.)
        """
        lines_after = (self.decisions.groupBy("job_id")
                       .agg(F.sum(F.when(F.col("kept"), F.col("n_lines")).otherwise(0)).alias("n_lines_after")))
        kept = F.col("kept")
        return (
            self.event_outcomes()
            .groupBy("job_id", "history", "settings_key", "group_jobs")
            .agg(F.count(F.lit(1)).alias("n_events_before"),
                 F.sum(kept.cast("long")).alias("n_events_after"),
                 F.sum((~kept).cast("long")).alias("n_events_removed"),
                 F.sum((~kept & (F.col("reason") == BOILERPLATE)).cast("long")).alias("n_events_boilerplate"),
                 F.sum("n_lines").alias("n_lines_before"),
                 *[F.sum((F.col("reason") == r).cast("long")).alias(f"kept_{r}") for r in KEEP_REASONS])
            .join(lines_after, on="job_id", how="inner")
            .select("job_id", "history", "settings_key", "group_jobs", "n_events_before", "n_events_after",
                    "n_events_removed", "n_events_boilerplate", "n_lines_before", "n_lines_after",
                    *[f"kept_{r}" for r in KEEP_REASONS])
            .orderBy("job_id")
        )

    def removals(self) -> DataFrame:
        """The pool entries that caused removals, per removed (job, event, masked message):
        job_id, event_id, masked, n_lines, settings_key, pool_n_jobs, group_jobs, pool_support,
        variant_n_jobs, reason (``normal``: the pool entry; ``boilerplate``: no pool entry involved)."""
        return (self.decisions.where(~F.col("kept"))
                .select("job_id", "event_id", "masked", "n_lines", "settings_key", "pool_n_jobs", "group_jobs",
                        "pool_support", "variant_n_jobs", "reason")
                .orderBy("job_id", F.desc("n_lines"), "event_id", "masked"))


def filter_normal_events(events: DataFrame, jobs: DataFrame, pool: NormalPool,
                         config: NormalPoolConfig = NormalPoolConfig(),
                         masking: Sequence[MaskRule] | None = None, fold_digits: bool = True) -> NormalFilterResult:
    """L4's cross-job filter: drop the lines of events that are normal for the job's settings.

    Input: ``events`` (the events table's columns, any set of jobs; needs job_id, node, event_id,
    message, or a ``masked`` column computed as the parser does), ``jobs`` (job_id, settings)
    covering those jobs (a job missing from it has no history), ``pool`` (``read_normal_pool``),
    optionally a boolean ``boilerplate`` column per line (``diagnose.with_line_flags``; its
    messages are removed whatever the history, see ``NormalPoolConfig.remove_boilerplate``),
    and the parser's masks (``config.masking``, ``config.structure.fold_digits``) when events has
    no ``masked`` column. Output: ``candidates`` = the input lines that are kept, the input columns
    plus keep_reason and keep_detail, in input order (the small decision table is broadcast and
    the lines streamed through the join); lines with a null event_id or message are kept.
    ``decisions`` as in ``event_decisions``. Raises ConfigError when neither masks nor a masked
    column are given (every line would look new).
    """
    if "masked" not in events.columns and masking is None:
        raise ConfigError("filter_normal_events needs the parser's masking rules (config.masking) "
                          "or events with a `masked` column")
    lines = with_message_form(events, masking or (), fold_digits)
    decisions = materialize(event_decisions(lines, jobs, pool, config))
    kept = F.broadcast(
        decisions.where(F.col("kept"))
        .select(F.col("job_id").alias("_kept_job"), F.col("event_id").alias("_kept_event"),
                F.col("masked").alias("_kept_masked"), F.col("reason").alias("keep_reason"),
                F.col("detail").alias("keep_detail"))
    )
    candidates = (
        lines.join(kept, on=(F.col("job_id") == F.col("_kept_job")) & F.col("event_id").eqNullSafe(F.col("_kept_event"))
                   & F.col("masked").eqNullSafe(F.col("_kept_masked")), how="inner")
        .select(*events.columns, "keep_reason", "keep_detail")
    )
    return NormalFilterResult(candidates, decisions)
