"""The parse job runs with executors in their own JVMs and Python workers (local-cluster), as it
would on a cluster: the package is imported by workers, not only by the driver."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from l4spark.report.analysis import read_result_table

from tests.test_parse import write_job

pytestmark = [pytest.mark.spark, pytest.mark.e2e]


def test_parse_job_under_local_cluster(tmp_path):
    logs, warehouse = tmp_path / "logs", tmp_path / "warehouse"
    write_job(logs, "job-a", ["gpu-001", "gpu-002"])
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [sys.executable, "-m", "l4spark.cli", "parse", "--logs-root", str(logs), "--warehouse", str(warehouse),
         "--master", "local-cluster[2,1,1024]"],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "lines           84" in result.stdout
    events = read_result_table(str(warehouse), "events")  # Delta (the default) or Parquet
    assert len(events) == 84 and events["event_id"].notna().all()
