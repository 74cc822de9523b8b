"""Settings fingerprints: which jobs are comparable, for the cross-job filter.

L4 compares a failed job with historical successful jobs "with the same settings". A job's
settings come from its registry entry (``job.json`` ``settings``, stored in the ``jobs`` table
as JSON with sorted keys). A *grouping level* names the settings keys that count at that level;
the fingerprint of a job at a level is a hash of exactly those keys' values, so two jobs share a
group when they agree on every counted key. Level 0 is the exact grouping; later levels are
coarser fallbacks (e.g. same framework) used when the exact group has too few successful jobs.

Pure Python, no Spark: the fingerprint of one job is computed on the driver (there is one per
job, not per line) and joined to the data.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from l4spark.errors import ConfigError

# Keys that change which log events a healthy job writes: the code (model, framework, its
# version, the container image, torch), the hardware (accelerator) and the launcher (its own
# lines and wrappers), and the parallel layout and scale (process groups, NCCL rings). Batch
# sizes and sequence length are left out: they change numbers in lines, not which lines appear.
EXACT_KEYS: tuple[str, ...] = (
    "model", "framework", "framework_version", "image", "torch_version", "accelerator", "launcher",
    "tensor_parallel", "pipeline_parallel", "data_parallel", "nodes", "gpus_per_node", "zero_stage",
)


@dataclass(frozen=True)
class GroupingLevel:
    """One way of grouping jobs: a name (for reports) and the settings keys that count."""

    name: str
    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.name or not self.keys:
            raise ConfigError(f"normal_pool.levels: a level needs a name and at least one key, found {self!r}")
        if len(set(self.keys)) != len(self.keys):
            raise ConfigError(f"normal_pool.levels.{self.name}: duplicate keys in {self.keys}")


DEFAULT_LEVELS: tuple[GroupingLevel, ...] = (
    GroupingLevel("exact", EXACT_KEYS),
    GroupingLevel("framework_version", ("framework", "framework_version", "accelerator", "launcher")),
)


def canonical_settings(settings: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The counted part of ``settings`` as canonical JSON, or None when no counted key is present.

    Keys absent from ``settings`` are recorded as null, so a job that does not say its image is
    not grouped with jobs that do. Strings are stripped; floats with an integral value become ints
    (``8.0`` and ``8`` are the same layout). A job with none of the keys cannot be compared with
    anything (None: "no history"), rather than falling into one group of all undescribed jobs.
    """
    if not any(key in settings and settings[key] is not None for key in keys):
        return None
    counted = {key: _normal_value(settings.get(key)) for key in sorted(keys)}
    return json.dumps(counted, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def settings_key(settings: Mapping[str, Any], level: GroupingLevel) -> str | None:
    """The fingerprint of ``settings`` at ``level``: ``<level name>:<16 hex digits>``, or None.

    The hash covers the level's key names and the values, so changing which keys count gives new
    keys rather than silently merging groups built under other rules.
    """
    canonical = canonical_settings(settings, level.keys)
    if canonical is None:
        return None
    digest = hashlib.sha1(canonical.encode("utf-8")).hexdigest()[:16]
    return f"{level.name}:{digest}"


def parse_settings(raw: str | None) -> dict[str, Any]:
    """The settings object of a ``jobs.settings`` JSON string; {} when null, not JSON or not an object."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _normal_value(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_normal_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _normal_value(v) for k, v in sorted(value.items())}
    return value
