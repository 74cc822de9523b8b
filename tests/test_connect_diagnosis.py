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

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import deltalake
import pandas as pd
import pytest

import pyspark

from l4spark.io.delta_jars import DELTA_SQL_SETTINGS, find_jars

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

TABLES = ("diagnosis_jobs", "diagnosis_events", "diagnosis_nodes", "diagnosis_iterations")
PER_RUN = ("run_id", "processed_at")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    spark_home = Path(pyspark.__file__).parent
    jars = sorted((spark_home / "jars").glob("spark-connect_*.jar"))
    if not jars:
        pytest.fail(f"no spark-connect jar under {spark_home / 'jars'}: pyspark's packaging changed")
    delta = find_jars()
    if not delta:
        pytest.fail("`make jars` copies Delta's jars into jars/")
    port = _free_port()
    log = tmp_path_factory.mktemp("connect-server") / "server.log"
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable}
    command = [str(Path(sys.executable).parent / "spark-submit"),
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--master", "local[2]", "--driver-memory", "1g", "--jars", ",".join(map(str, delta)),
               *[arg for key, value in DELTA_SQL_SETTINGS.items() for arg in ("--conf", f"{key}={value}")],
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.session.timeZone=UTC",
               "--conf", f"spark.pyspark.python={sys.executable}", "spark-internal"]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Spark Connect server started" not in log.read_text():
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Spark Connect server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _diagnose(fleet: Path, warehouse: Path, remote: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "SPARK_REMOTE"}
    if remote:
        env["SPARK_REMOTE"] = remote
    command = [str(Path(sys.executable).parent / "l4spark"), "diagnose", "--logs-root", str(fleet),
               "--warehouse", str(warehouse), "--all-failed", "--format", "delta"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


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
