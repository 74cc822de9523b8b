"""Settings fingerprints (pure, no Spark)."""

from __future__ import annotations

import pytest

from l4spark.errors import ConfigError
from l4spark.crossjob.fingerprint import (
    DEFAULT_LEVELS,
    EXACT_KEYS,
    GroupingLevel,
    canonical_settings,
    parse_settings,
    settings_key,
)

LEVEL = GroupingLevel("exact", ("model", "framework", "nodes"))


def test_key_ignores_order_and_keys_that_do_not_count():
    a = {"model": "llama3-8b", "framework": "megatron", "nodes": 8, "global_batch_size": 512}
    b = {"nodes": 8, "global_batch_size": 1024, "framework": "megatron", "model": "llama3-8b"}
    assert settings_key(a, LEVEL) == settings_key(b, LEVEL)
    assert settings_key(a, LEVEL).startswith("exact:") and len(settings_key(a, LEVEL)) == len("exact:") + 16


def test_key_changes_with_a_counted_value():
    a = {"model": "llama3-8b", "framework": "megatron", "nodes": 8}
    assert settings_key(a, LEVEL) != settings_key({**a, "nodes": 16}, LEVEL)


def test_values_are_normalised():
    a = {"model": " llama3-8b ", "framework": "megatron", "nodes": 8.0}
    b = {"model": "llama3-8b", "framework": "megatron", "nodes": 8}
    assert canonical_settings(a, LEVEL.keys) == '{"framework":"megatron","model":"llama3-8b","nodes":8}'
    assert settings_key(a, LEVEL) == settings_key(b, LEVEL)


def test_missing_counted_key_is_part_of_the_key():
    with_nodes = {"model": "m", "framework": "f", "nodes": None}
    without = {"model": "m", "framework": "f"}
    assert canonical_settings(without, LEVEL.keys) == '{"framework":"f","model":"m","nodes":null}'
    assert settings_key(with_nodes, LEVEL) == settings_key(without, LEVEL)
    assert settings_key(without, LEVEL) != settings_key({**without, "nodes": 4}, LEVEL)


def test_no_counted_key_means_no_key():
    assert settings_key({}, LEVEL) is None
    assert settings_key({"global_batch_size": 512, "model": None}, LEVEL) is None


def test_levels_give_different_keys_for_the_same_values():
    coarse = GroupingLevel("framework", ("model", "framework", "nodes"))
    settings = {"model": "m", "framework": "f", "nodes": 2}
    assert settings_key(settings, LEVEL) != settings_key(settings, coarse)


def test_default_levels_start_exact_and_get_coarser():
    assert DEFAULT_LEVELS[0].keys == EXACT_KEYS
    assert set(DEFAULT_LEVELS[1].keys) < set(EXACT_KEYS)


@pytest.mark.parametrize("raw, expected", [
    (None, {}), ("not json", {}), ("[1, 2]", {}), ('{"model": "m"}', {"model": "m"}),
])
def test_parse_settings(raw, expected):
    assert parse_settings(raw) == expected


def test_bad_levels_are_config_errors():
    with pytest.raises(ConfigError, match="at least one key"):
        GroupingLevel("exact", ())
    with pytest.raises(ConfigError, match="duplicate keys"):
        GroupingLevel("exact", ("model", "model"))
