"""Shared fixtures: one local Spark session for the whole test run (UI off, few partitions)."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from l4spark.config import load_config

# Property tests: "ci" (the default, ``make test``) draws the same examples on every run, so a
# commit's CI result does not depend on luck; ``make fuzz`` ("fuzz") draws fresh random examples,
# many more of them, to look for new failures.
settings.register_profile("ci", max_examples=150, derandomize=True, print_blob=True)
settings.register_profile("fuzz", max_examples=3000, derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def spark():
    from l4spark.io.session import build_session
    from l4spark.io.storage_jars import s3a_jars

    # the s3a connector (make storage-jars) for the storage tests; s3a settings are set by them
    jars = {"spark.extra": {"spark.jars": ",".join(str(j) for j in s3a_jars())}} if s3a_jars() else {}
    # the product's default driver memory (4g): at 2g a late test of a clean-clone CI run once
    # found its task's execution memory empty (UNABLE_TO_ACQUIRE_MEMORY, session 53)
    config = load_config(overrides={"spark.master": "local[2]", "spark.shuffle_partitions": 2, **jars})
    session = build_session(config.spark)
    yield session
    session.stop()


@pytest.fixture(scope="module", autouse=True)
def _release_spark_memory_after_each_module():
    """After each test module, the session's cached frames are dropped and the driver's JVM
    collects its garbage, so that Spark's ContextCleaner frees the local checkpoints and shuffles
    of frames the module no longer references: one session serves every module, and without
    this what a module leaves behind stays in the block manager until a collection happens to
    run (the periodic one comes every 30 minutes)."""
    yield
    from pyspark.sql import SparkSession

    session = SparkSession._instantiatedSession  # the classic session, not a Connect client's
    if session is not None and session.sparkContext._jsc is not None:
        session.catalog.clearCache()
        session.sparkContext._jvm.System.gc()


@pytest.fixture(scope="session")
def default_config():
    return load_config()


@pytest.fixture
def test_config(tmp_path):
    """The default config with its own warehouse under the test's tmp_path, in Parquet: the
    tests that use it read the folders as Parquet (Delta has its own tests: test_delta_spark.py)."""
    return load_config(overrides={"storage.warehouse": str(tmp_path / "warehouse"),
                                  "spark.master": "local[2]", "storage.format": "parquet"})


@pytest.fixture(scope="session")
def nightly_logs(tmp_path_factory):
    """The nightly tests' small generated fleet (tests/nightly_support.py NIGHTLY_FLEET)."""
    from l4spark.simulate import simulate_fleet
    from tests.nightly_support import NIGHTLY_FLEET

    root = tmp_path_factory.mktemp("nightly") / "logs"
    simulate_fleet(root, NIGHTLY_FLEET)
    return root


@pytest.fixture(scope="session")
def nightly_clean(spark, nightly_logs, tmp_path_factory):
    """One clean nightly run over ``nightly_logs``: (warehouse, run, snapshot of its tables)."""
    import time

    from l4spark.nightly.batch import run_nightly
    from tests.nightly_support import nightly_config, snapshot

    warehouse = tmp_path_factory.mktemp("clean") / "warehouse"
    started = time.perf_counter()
    run = run_nightly(spark, nightly_config(warehouse), nightly_logs)
    run.seconds["test_total"] = time.perf_counter() - started
    return warehouse, run, snapshot(spark, warehouse)
