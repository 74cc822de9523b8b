"""The whole diagnosis over Spark Connect: a real Spark Connect server (the spark-connect jar that
ships with pyspark, started with spark-submit on a free 127.0.0.1 port) runs ``l4spark diagnose``
on a small generated fleet, and its tables equal those of the same run on classic Spark.

Why a test: the PySpark Connect client copies a plan into its checkpoint command with Python
protobuf, which refuses plans nested more than 100 levels; the diagnosis' per-line plans are
deeper, so every job used to end as an error row over Connect (``frames.materialize``). The two
runs are separate processes (one process holds either a classic or a Connect session).

The tables are Delta through delta-spark on both sides: the Connect server is started with Delta's
jars, SQL extension and catalog (as a platform's Connect endpoint would be), the client asks for
``--format delta`` (the default ``auto`` cannot see the server's classpath), and delta-rs reads
the tables back.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import deltalake
import pandas as pd
import pytest

from tests.connect_server import connect_server, l4spark_over

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

TABLES = ("diagnosis_jobs", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations")
PER_RUN = ("run_id", "processed_at")


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    with connect_server(tmp_path_factory.mktemp("connect-server") / "server.log") as url:
        yield url


def _diagnose(fleet: Path, warehouse: Path, remote: str | None):
    return l4spark_over(remote, "diagnose", "--logs-root", str(fleet), "--warehouse", str(warehouse),
                        "--all-failed", "--format", "delta")


def _table(warehouse: Path, name: str) -> pd.DataFrame:
    frame = deltalake.DeltaTable(str(warehouse / name)).to_pandas()
    frame = frame.drop(columns=[c for c in PER_RUN if c in frame.columns]).astype(str)
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def test_diagnosis_over_spark_connect_equals_classic(connect_url, tmp_path):
    from l4spark.simulate import FleetOptions, simulate_fleet

    fleet = tmp_path / "fleet"
    simulate_fleet(fleet, FleetOptions(seed=5, jobs=6, nodes=(2, 2), ranks_per_node=1, iterations=30,
                                       failed_share=0.4))
    over_connect = _diagnose(fleet, tmp_path / "wh-connect", connect_url)
    assert over_connect.returncode == 0, over_connect.stdout[-3000:] + over_connect.stderr[-3000:]
    assert "errors 0" in over_connect.stdout, over_connect.stdout[-3000:]
    jobs = deltalake.DeltaTable(str(tmp_path / "wh-connect" / "diagnosis_jobs")).to_pandas()
    assert len(jobs) >= 2 and set(jobs["status"]) == {"diagnosed"}

    # the same warehouse state (parsed, pooled) diagnosed again on classic Spark
    shutil.copytree(tmp_path / "wh-connect", tmp_path / "wh-classic")
    classic = _diagnose(fleet, tmp_path / "wh-classic", None)
    assert classic.returncode == 0, classic.stderr[-3000:]
    for name in TABLES:
        pd.testing.assert_frame_equal(_table(tmp_path / "wh-connect", name), _table(tmp_path / "wh-classic", name))
