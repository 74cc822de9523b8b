"""A real Spark Connect server for the tests: the spark-connect jar that ships with pyspark,
started with spark-submit on a free 127.0.0.1 port, with Delta's jars, SQL extension and catalog
(as a platform's Connect endpoint would be) and whatever jars and settings a test adds (the s3a
connector and its endpoint, for a warehouse on S3)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyspark
import pytest

from l4spark.io.delta_jars import DELTA_SQL_SETTINGS, find_jars


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def connect_server(log: Path, jars: tuple[Path, ...] = (), settings: dict[str, str] | None = None) -> Iterator[str]:
    """Run a Spark Connect server (local[2]) for the ``with`` block and yield its ``sc://`` URL;
    its output goes to ``log``."""
    spark_home = Path(pyspark.__file__).parent
    if not sorted((spark_home / "jars").glob("spark-connect_*.jar")):
        pytest.fail(f"no spark-connect jar under {spark_home / 'jars'}: pyspark's packaging changed")
    delta = find_jars()
    if not delta:
        pytest.fail("`make jars` copies Delta's jars into jars/")
    port = _free_port()
    conf = {**DELTA_SQL_SETTINGS, **(settings or {}),
            "spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable}
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable}
    command = [str(Path(sys.executable).parent / "spark-submit"),
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--master", "local[2]", "--driver-memory", "1g", "--jars", ",".join(map(str, [*delta, *jars])),
               *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")], "spark-internal"]
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


def l4spark_over(url: str | None, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``l4spark ARGS`` in its own process, a client of the Connect server at ``url`` (classic
    Spark when None)."""
    env = {key: value for key, value in os.environ.items() if key != "SPARK_REMOTE"}
    if url:
        env["SPARK_REMOTE"] = url
    command = [str(Path(sys.executable).parent / "l4spark"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
