"""Typed, validated configuration.

The defaults live in the packaged ``l4spark/conf/defaults.toml`` (so a wheel shipped to a
cluster carries them); files given by the user override them key by key, later files winning.
A list (wrappers, headers, masks) in an override replaces the default list whole. An unknown
key, a wrong type or a regex that does not compile is a ``ConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping

from l4spark.errors import ConfigError
from l4spark.regexsafety import check_regex
from l4spark.textrules import HeaderRule, MaskRule, WrapperRule, compile_pattern


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    app_name: str = "l4spark"
    driver_memory: str = "4g"
    shuffle_partitions: int = 8
    log_level: str = "WARN"
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StorageConfig:
    warehouse: str = "./warehouse"
    format: str = "parquet"
    lock_wait_s: float = 0.0  # a writing run waits this long for the warehouse lock (l4spark/lock.py)
    lock_stale_s: float = 86400.0  # a lock older than this is stale even when its holder cannot be checked


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
    max_wrapper_depth: int = 3
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


# Sections of the analysis steps: kept here as plain tables and turned into each step's typed
# config by the step (``normal_pool.pool_config``, ``spatial.spatial_config``,
# ``temporal.temporal_config``, ``diagnose.diagnosis_config``), which refuses an unknown key by name. (The step modules import
# Spark; this module must not, so it cannot build their dataclasses itself.)
STEP_SECTIONS = ("normal_pool", "spatial", "temporal", "diagnosis")


@dataclass(frozen=True)
class Config:
    spark: SparkConfig = SparkConfig()
    storage: StorageConfig = StorageConfig()
    layout: LayoutConfig = LayoutConfig()
    ingest: IngestConfig = IngestConfig()
    structure: StructureConfig = StructureConfig()
    masking: tuple[MaskRule, ...] = ()
    drain: DrainConfig = DrainConfig()
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)

    def mask_signature(self) -> list:
        """What decides a line's masked message: digit folding and the mask rules, in order.
        Tables of masked messages record it; they mean something else under another signature."""
        return [self.structure.fold_digits] + [[m.name, m.pattern, m.replacement] for m in self.masking]


_SECTIONS = {
    "spark": SparkConfig,
    "storage": StorageConfig,
    "layout": LayoutConfig,
    "ingest": IngestConfig,
    "structure": StructureConfig,
    "drain": DrainConfig,
}
_RULE_LISTS = {"wrappers": WrapperRule, "headers": HeaderRule}


def load_config(*paths: str | Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Defaults, then each TOML file in order, then ``overrides`` (dotted keys, e.g.
    ``{"storage.warehouse": "/data/wh"}``); validated into a ``Config``."""
    merged = _read_defaults()
    for path in paths:
        try:
            with open(path, "rb") as handle:
                layer = tomllib.load(handle)
        except FileNotFoundError as exc:
            raise ConfigError(f"config file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        _merge(merged, layer, prefix="")
    for dotted, value in (overrides or {}).items():
        _merge(merged, _nest(dotted, value), prefix="")
    return _build(merged)


def step_options(config: Config, step: str, known: Iterable[str]) -> dict[str, Any]:
    """The ``[step]`` table of ``config``, refusing keys the step does not know, by name."""
    return check_keys(config.steps.get(step, {}), known, step)


def check_keys(table: Mapping[str, Any], known: Iterable[str], section: str) -> dict[str, Any]:
    """``table`` as a dict; a key not in ``known`` is a ConfigError naming ``section.key``."""
    known = sorted(known)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"unknown config key(s) {[f'{section}.{k}' for k in unknown]}; known: {known}")
    return dict(table)


def _read_defaults() -> dict[str, Any]:
    text = resources.files("l4spark").joinpath("conf/defaults.toml").read_text("utf-8")
    return tomllib.loads(text)


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    keys = dotted.split(".")
    nested: dict[str, Any] = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        nested = {key: nested}
    return nested


def _merge(base: dict[str, Any], layer: Mapping[str, Any], prefix: str) -> None:
    for key, value in layer.items():
        name = f"{prefix}{key}"
        open_table = prefix in ("spark.extra.", "structure.levels.") or prefix.rstrip(".") in STEP_SECTIONS
        if key not in base and not open_table:
            raise ConfigError(f"unknown config key '{name}'")
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value, prefix=f"{name}.")
        else:
            base[key] = value


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
    steps = {}
    for name in STEP_SECTIONS:
        table = raw.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"'{name}' must be a table, found {table!r}")
        steps[name] = dict(table)
    config = Config(masking=masking, steps=steps, **sections)
    _validate(config)
    return config


def _typed(cls: type, values: dict[str, Any], section: str) -> Any:
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"unknown config key '{section}.{key}'")
        expected = known[key].type
        if expected in ("int",) and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"'{section}.{key}' must be an integer, found {value!r}")
        if expected == "float" and not isinstance(value, (int, float)):
            raise ConfigError(f"'{section}.{key}' must be a number, found {value!r}")
        if expected == "str" and not isinstance(value, str):
            raise ConfigError(f"'{section}.{key}' must be a string, found {value!r}")
        if expected == "bool" and not isinstance(value, bool):
            raise ConfigError(f"'{section}.{key}' must be true or false, found {value!r}")
    return cls(**values)


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


def _validate(config: Config) -> None:
    if config.storage.format not in ("parquet", "delta"):
        raise ConfigError(f"'storage.format' must be 'parquet' or 'delta', found '{config.storage.format}'")
    if config.storage.lock_wait_s < 0 or config.storage.lock_stale_s <= 0:
        raise ConfigError("'storage.lock_wait_s' must be >= 0 and 'storage.lock_stale_s' positive")
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
