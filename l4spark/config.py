"""Typed, validated configuration.

The defaults live in the packaged ``l4spark/conf/defaults.toml`` (so a wheel shipped to a
cluster carries them); files given by the user override them key by key, later files winning.
A list (wrappers, headers, masks) in an override replace the default list whole. Every section,
the analysis steps' included, is built into its typed dataclass here, when the files are read:
an unknown key, a wrong type, a value out of range or an unsafe regex is a ``ConfigError`` that
names the key and the file that set it, before any Spark session exists. The steps' own
dataclasses live beside each step (``l4spark/<step>/config.py``, no Spark in them).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

from l4spark.crossjob.config import NormalPoolConfig
from l4spark.crossjob.fingerprint import GroupingLevel
from l4spark.diagnosis.config import DiagnosisConfig
from l4spark.errors import ConfigError
from l4spark.io.delta_jars import find_jars
from l4spark.io.fs import is_local, local_path
from l4spark.parse.textrules import HeaderRule, MaskRule, WrapperRule, compile_pattern
from l4spark.regexsafety import check_regex
from l4spark.spatial.config import SpatialConfig
from l4spark.temporal.config import CountedIterationRule, IterationRule, StageRule, TemporalConfig


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    app_name: str = "l4spark"
    driver_memory: str = "4g"
    shuffle_partitions: int = 8
    log_level: str = "WARN"
    # Folder of Delta's jars for a classic session that l4spark starts (io/delta_jars.py);
    # empty: the checkout's jars/ (make jars). No jars there: the session has no Delta.
    delta_jars: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StorageConfig:
    warehouse: str = "./warehouse"
    # "delta" or "parquet"; "auto" (the default) is Delta when the session l4spark starts has
    # Delta's jars (spark.delta_jars, make jars), else Parquet; load_config resolves it.
    format: str = "parquet"
    lock_wait_s: float = 0.0  # a writing run waits this long for the warehouse lock (l4spark/io/lock.py)
    lock_stale_s: float = 86400.0  # a lock older than this is stale even when its holder cannot be checked
    # Delta upkeep after a writing run (io/maintenance.py): OPTIMIZE a table once it has at least
    # this many data files (0: never); VACUUM files older than vacuum_retain_hours (negative: never),
    # which is also how far back time travel reaches.
    optimize_min_files: int = 16
    vacuum_retain_hours: float = 168.0


@dataclass(frozen=True)
class CatalogConfig:
    """Where a writing run registers the tables by name (io/catalog.py)."""
    register: bool = True
    database: str = "l4spark"
    # The embedded session's persistent catalog (Hive metastore on Derby): this folder, empty for
    # "<warehouse>/../<warehouse name>_metastore". Ignored by a session the cluster configures.
    metastore: str = ""


@dataclass(frozen=True)
class NightlyConfig:
    max_attempts: int = 3  # diagnoses of a job that may fail in a row on the same input before the nightly gives up


@dataclass(frozen=True)
class LayoutConfig:
    pattern: str = r"^(?P<job_id>[^/]+)/(?P<node>[^/]+)/rank-(?P<rank>[0-9]+)\.log(?:\.gz)?$"
    job_file: str = "job.json"


@dataclass(frozen=True)
class IngestConfig:
    target_task_bytes: int = 64 * 1024 * 1024
    gz_expansion: float = 6.0
    max_line_bytes: int = 1024 * 1024
    read_chunk_bytes: int = 4 * 1024 * 1024
    batch_lines: int = 65536
    binary_control_share: float = 0.3
    cache: str = "disk"


@dataclass(frozen=True)
class StructureConfig:
    max_wrapper_depth: int = 4
    fold_digits: bool = True
    max_shapes: int = 300000
    regex_trial: bool = True  # run the timed trial on wrapper, header and mask regexes (regexsafety)
    wrappers: tuple[WrapperRule, ...] = ()
    headers: tuple[HeaderRule, ...] = ()
    levels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DrainConfig:
    depth: int = 4
    sim_th: float = 0.5
    max_children: int = 100
    extra_delimiters: tuple[str, ...] = ()
    parametrize_numeric_tokens: bool = True


# The analysis steps' sections: open tables while files are merged, typed by ``_build``.
STEP_SECTIONS = ("normal_pool", "spatial", "temporal", "diagnosis")
COMMAND_LINE = "the command line"


@dataclass(frozen=True)
class Config:
    spark: SparkConfig = SparkConfig()
    storage: StorageConfig = StorageConfig()
    catalog: CatalogConfig = CatalogConfig()
    nightly: NightlyConfig = NightlyConfig()
    layout: LayoutConfig = LayoutConfig()
    ingest: IngestConfig = IngestConfig()
    structure: StructureConfig = StructureConfig()
    masking: tuple[MaskRule, ...] = ()
    drain: DrainConfig = DrainConfig()
    normal_pool: NormalPoolConfig = NormalPoolConfig()
    spatial: SpatialConfig = SpatialConfig()
    temporal: TemporalConfig = TemporalConfig()
    diagnosis: DiagnosisConfig = DiagnosisConfig()

    def mask_signature(self) -> list:
        """What decides a line's masked message: digit folding and the mask rules, in order.
        Tables of masked messages record it; they mean something else under another signature."""
        return [self.structure.fold_digits] + [[m.name, m.pattern, m.replacement] for m in self.masking]


_SECTIONS = {
    "spark": SparkConfig,
    "storage": StorageConfig,
    "catalog": CatalogConfig,
    "nightly": NightlyConfig,
    "layout": LayoutConfig,
    "ingest": IngestConfig,
    "structure": StructureConfig,
    "drain": DrainConfig,
}
_RULE_LISTS = {"wrappers": WrapperRule, "headers": HeaderRule}


def load_config(*paths: str | Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then each TOML file in order, then ``overrides`` (dotted keys, e.g.
    ``{"storage.warehouse": "/data/wh"}``); validated into a ``Config``. A ConfigError names the
    offending key and where it was set (the file, or the command line for ``overrides``)."""
    merged = _read_defaults()
    origins: dict[str, str] = {}
    for path in paths:
        try:
            with open(path, "rb") as handle:
                layer = tomllib.load(handle)
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        _merge(merged, layer, prefix="", source=str(path), origins=origins)
    for dotted, value in (overrides or {}).items():
        _merge(merged, _nest(dotted, value), prefix="", source=COMMAND_LINE, origins=origins)
    try:
        return _build(merged)
    except ConfigError as exc:
        source = _source_of(str(exc), origins)
        if source is None:
            raise
        raise ConfigError(f"{exc} (set in {source})") from exc


def check_keys(table: Mapping[str, Any], known: Iterable[str], section: str) -> dict[str, Any]:
    """``table`` as a dict; a key not in ``known`` is a ConfigError naming ``section.key``."""
    known = sorted(known)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"unknown config key(s) {[f'{section}.{k}' for k in unknown]}; known: {known}")
    return dict(table)


def _source_of(message: str, origins: Mapping[str, str]) -> str | None:
    """Where the key that ``message`` names was set: the longest set key the message mentions."""
    named = [key for key in origins if key in message]
    return origins[max(named, key=len)] if named else None


def _read_defaults() -> dict[str, Any]:
    text = resources.files("l4spark").joinpath("conf/defaults.toml").read_text("utf-8")
    return tomllib.loads(text)


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    keys = dotted.split(".")
    nested: dict[str, Any] = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        nested = {key: nested}
    return nested


def _merge(base: dict[str, Any], layer: Mapping[str, Any], prefix: str, source: str,
           origins: dict[str, str]) -> None:
    for key, value in layer.items():
        name = f"{prefix}{key}"
        open_table = prefix in ("spark.extra.", "structure.levels.") or prefix.split(".")[0] in STEP_SECTIONS
        if key not in base and not open_table and name not in STEP_SECTIONS:
            raise ConfigError(f"unknown config key '{name}' (set in {source})")
        if name in STEP_SECTIONS and isinstance(value, dict):
            base.setdefault(key, {})
        if isinstance(value, dict) and isinstance(base.get(key), dict) and name not in ("diagnosis.weights",
                                                                                        "normal_pool.levels"):
            _merge(base[key], value, prefix=f"{name}.", source=source, origins=origins)
        else:
            base[key] = value
            origins[name] = source


def _build(raw: dict[str, Any]) -> Config:
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        values = dict(raw.get(name, {}))
        if name == "structure":
            for list_name, rule_cls in _RULE_LISTS.items():
                values[list_name] = tuple(
                    _rule(rule_cls, item, f"structure.{list_name}[{i}]")
                    for i, item in enumerate(values.get(list_name, []))
                )
            values["levels"] = {str(k).upper(): str(v).upper() for k, v in values.get("levels", {}).items()}
        if name == "drain":
            values["extra_delimiters"] = tuple(values.get("extra_delimiters", ()))
        if name == "spark":
            values["extra"] = {str(k): str(v) for k, v in values.get("extra", {}).items()}
        sections[name] = _typed(cls, values, name)
    masking = tuple(_rule(MaskRule, item, f"masking[{i}]") for i, item in enumerate(raw.get("masking", [])))
    for name in STEP_SECTIONS:
        table = raw.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"'{name}' must be a table, found {table!r}")
        sections[name] = _STEP_BUILDERS[name](dict(table))
    if sections["storage"].format == "auto":
        sections["storage"] = dataclasses.replace(sections["storage"],
                                                  format=default_format(sections["spark"], sections["storage"].warehouse))
    config = Config(masking=masking, **sections)
    _validate(config)
    return config


def _typed(cls: type, values: dict[str, Any], section: str) -> Any:
    """``cls(**values)`` after checking each key is a field and each value has the field's type
    (scalars exactly; lists and tables by kind); the dataclass's own checks become ConfigErrors."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"unknown config key '{section}.{key}'; known: {sorted(known)}")
        expected = str(known[key].type)
        if expected == "int" and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"'{section}.{key}' must be an integer, found {value!r}")
        if expected == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise ConfigError(f"'{section}.{key}' must be a number, found {value!r}")
        if expected == "str" and not isinstance(value, str):
            raise ConfigError(f"'{section}.{key}' must be a string, found {value!r}")
        if expected == "bool" and not isinstance(value, bool):
            raise ConfigError(f"'{section}.{key}' must be true or false, found {value!r}")
        if expected.startswith("tuple") and not isinstance(value, (list, tuple)):
            raise ConfigError(f"'{section}.{key}' must be a list, found {value!r}")
        if expected.startswith("dict") and not isinstance(value, dict):
            raise ConfigError(f"'{section}.{key}' must be a table, found {value!r}")
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"'{section}': {exc}") from exc


def _spatial(table: dict[str, Any]) -> SpatialConfig:
    return _typed(SpatialConfig, table, "spatial")


def _normal_pool(table: dict[str, Any]) -> NormalPoolConfig:
    """Levels as a table of name = [keys], in order; statuses as a list."""
    levels = table.get("levels")
    if levels is not None:
        if not isinstance(levels, dict):
            raise ConfigError(f"'normal_pool.levels' must be a table of name = [keys], found {levels!r}")
        table["levels"] = tuple(GroupingLevel(str(name), tuple(str(k) for k in keys)) for name, keys in levels.items())
    if "succeeded_statuses" in table and isinstance(table["succeeded_statuses"], list):
        table["succeeded_statuses"] = tuple(str(s) for s in table["succeeded_statuses"])
    return _typed(NormalPoolConfig, table, "normal_pool")


def _temporal(table: dict[str, Any]) -> TemporalConfig:
    """Scalars by name; ``stage_rules`` as a list of ``{stage, pattern, names_iteration}``
    (``names_iteration`` optional, default false), ``iteration_rules`` of
    ``{pattern}``, ``counted_iteration_rules`` of ``{pattern, interval_pattern, start_pattern}``,
    ``elapsed_rules``, ``bad_count_rules``, ``nonfinite_rules``, ``progress_clock_rules``, ``pace_rules`` and
    ``data_failure_rules`` and ``save_failure_rules`` as lists of regexes (each replaces the default list whole)."""
    check_keys(table, [f.name for f in dataclasses.fields(TemporalConfig)], "temporal")
    try:
        if "stage_rules" in table:
            table["stage_rules"] = tuple(StageRule(str(r["stage"]), str(r["pattern"]), bool(r.get("names_iteration", False)))
                                         for r in table["stage_rules"])
        if "iteration_rules" in table:
            table["iteration_rules"] = tuple(IterationRule(str(r["pattern"])) for r in table["iteration_rules"])
        for name in ("elapsed_rules", "bad_count_rules", "nonfinite_rules", "progress_clock_rules", "pace_rules",
                     "data_failure_rules", "save_failure_rules"):
            if name in table:
                table[name] = tuple(str(r) for r in table[name])
        if "counted_iteration_rules" in table:
            table["counted_iteration_rules"] = tuple(
                CountedIterationRule(str(r["pattern"]), str(r["interval_pattern"]), str(r.get("start_pattern", "")))
                for r in table["counted_iteration_rules"])
    except (TypeError, KeyError) as exc:
        raise ConfigError(f"'temporal': a rule is incomplete or not a table: {exc!r}") from exc
    return _typed(TemporalConfig, table, "temporal")


def _diagnosis(table: dict[str, Any]) -> DiagnosisConfig:
    """Pattern lists as lists of regexes; ``weights`` a table merged over the default weights."""
    for key in ("frame_patterns", "consequence_patterns", "exit_line_patterns", "failed_call_patterns",
                "disabled_patterns"):
        if isinstance(table.get(key), list):
            table[key] = tuple(str(p) for p in table[key])
    if isinstance(table.get("weights"), dict):
        table["weights"] = {**DiagnosisConfig().weights, **table["weights"]}
    return _typed(DiagnosisConfig, table, "diagnosis")


_STEP_BUILDERS = {"normal_pool": _normal_pool, "spatial": _spatial, "temporal": _temporal, "diagnosis": _diagnosis}


def _rule(cls: type, item: Any, where: str) -> Any:
    if not isinstance(item, dict):
        raise ConfigError(f"'{where}' must be a table, found {item!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    for key in item:
        if key not in names:
            raise ConfigError(f"unknown config key '{where}.{key}'")
    try:
        return cls(**item)
    except TypeError as exc:
        raise ConfigError(f"'{where}' is incomplete: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"'{where}': {exc}") from exc


def default_format(spark: SparkConfig, warehouse: str = "") -> str:
    """``storage.format = "auto"``: Delta where l4spark starts the Spark session itself with
    Delta's jars (``spark.delta_jars``, the checkout's jars/ by default), on a local warehouse as
    on HDFS or an object store, else Parquet. A session made by spark-submit
    (``PYSPARK_GATEWAY_PORT``) or a Spark Connect server (``spark.remote``, ``SPARK_REMOTE``) has
    the jars its submitter or server gave it, which l4spark cannot see before it starts;
    ``storage.format = "delta"`` asks for Delta there. A local warehouse that already holds tables
    keeps their format (a Parquet warehouse from before stays Parquet). A remote one cannot be
    listed before Spark starts: its Parquet tables from before are found as such when read, and a
    Delta write to one is refused, naming the setting (``io.storage.check_format``).

    Why Delta on remote storage too: a remote Parquet table is a file per job per table, and
    HDFS makes each file's writer wait (docs/deploy.md); a Delta table is a file per writing task.
    The HDFS/local parse ratio was 3.24 as Parquet and 1.82 as Delta on the 48-job bench fleet
    (load 7-10); on 12 bigger jobs the two are close (1.38 and 1.29; docs/capacity.md, session 13)."""
    existing = _existing_format(warehouse) if is_local(warehouse or ".") else None
    if existing is not None:
        return existing
    own_session = "PYSPARK_GATEWAY_PORT" not in os.environ and not (
        spark.extra.get("spark.remote") or os.environ.get("SPARK_REMOTE"))
    return "delta" if own_session and find_jars(spark.delta_jars) is not None else "parquet"


def _existing_format(warehouse: str) -> str | None:
    """The format of the first table folder of a local warehouse (a Delta log, or a completed
    Parquet write), None when it has none yet."""
    root = local_path(warehouse or ".")
    if not root.is_dir():
        return None
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(("_", ".")) or not entry.is_dir():
            continue
        if (entry / "_delta_log").is_dir():
            return "delta"
        if (entry / "_SUCCESS").exists():
            return "parquet"
    return None


def _validate(config: Config) -> None:
    if config.storage.format not in ("parquet", "delta"):
        raise ConfigError(f"'storage.format' must be 'auto', 'parquet' or 'delta', found '{config.storage.format}'")
    if config.storage.lock_wait_s < 0 or config.storage.lock_stale_s <= 0:
        raise ConfigError("'storage.lock_wait_s' must be >= 0 and 'storage.lock_stale_s' positive")
    if config.storage.optimize_min_files < 0:
        raise ConfigError("'storage.optimize_min_files' must be >= 0 (0: never OPTIMIZE)")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", config.catalog.database):
        raise ConfigError(f"'catalog.database' must be a plain SQL name (letters, digits, _), found '{config.catalog.database}'")
    if config.nightly.max_attempts < 1:
        raise ConfigError(f"'nightly.max_attempts' must be at least 1, found {config.nightly.max_attempts}")
    if config.ingest.cache not in ("disk", "memory"):
        raise ConfigError(f"'ingest.cache' must be 'disk' or 'memory', found '{config.ingest.cache}'")
    for key in ("target_task_bytes", "max_line_bytes", "read_chunk_bytes", "batch_lines"):
        if getattr(config.ingest, key) <= 0:
            raise ConfigError(f"'ingest.{key}' must be positive")
    if not 0 < config.ingest.binary_control_share <= 1:
        raise ConfigError("'ingest.binary_control_share' must be in (0, 1]")
    try:
        check_regex("^(?:" + config.layout.pattern + ")")
        layout = compile_pattern(config.layout.pattern)
    except ValueError as exc:
        raise ConfigError(f"'layout.pattern': {exc}") from exc
    missing = {"job_id", "node", "rank"} - set(layout.groupindex)
    if missing:
        raise ConfigError(f"'layout.pattern' needs the named groups job_id, node, rank; missing {sorted(missing)}")
    if config.drain.depth < 3:
        raise ConfigError(f"'drain.depth' must be at least 3, found {config.drain.depth}")
    if not 0 < config.drain.sim_th <= 1:
        raise ConfigError(f"'drain.sim_th' must be in (0, 1], found {config.drain.sim_th}")
    if config.structure.max_shapes <= 0:
        raise ConfigError("'structure.max_shapes' must be positive")
    if config.structure.max_wrapper_depth < 0:
        raise ConfigError("'structure.max_wrapper_depth' must be >= 0")
    if config.structure.regex_trial:
        rules = [(f"structure.wrappers[{i}]", r) for i, r in enumerate(config.structure.wrappers)]
        rules += [(f"structure.headers[{i}]", r) for i, r in enumerate(config.structure.headers)]
        rules += [(f"masking[{i}]", r) for i, r in enumerate(config.masking)]
        for key, rule in rules:
            try:
                check_regex(rule.as_used())
            except ValueError as exc:
                raise ConfigError(f"'{key}': {exc}") from exc
