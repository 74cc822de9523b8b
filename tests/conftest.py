"""Shared fixtures: one local Spark session for the whole test run (UI off, few partitions)."""

from __future__ import annotations

import pytest

from l4spark.config import load_config


@pytest.fixture(scope="session")
def spark():
    from l4spark.session import build_session

    config = load_config(overrides={"spark.master": "local[2]", "spark.shuffle_partitions": 2,
                                    "spark.driver_memory": "2g"})
    session = build_session(config.spark)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def default_config():
    return load_config()


@pytest.fixture
def test_config(tmp_path):
    """The default config with its own warehouse under the test's tmp_path."""
    return load_config(overrides={"storage.warehouse": str(tmp_path / "warehouse"),
                                  "spark.master": "local[2]"})
