"""Airflow DAG: the l4spark nightly batch, once a day, through spark-submit.

One task submits ``jobs/nightly.py`` with the run's date as ``--date``: every failed training
job that ended on or before that date and has no current diagnosis is parsed and diagnosed.
The job is idempotent (a rerun replaces the same rows and picks up what a killed run left), so
the task retries safely. One run at a time: two runs must not write the same warehouse at once.

Settings, read when the task runs (Airflow Variables, set in the metadata database or as
``AIRFLOW_VAR_<NAME>`` environment variables):

- ``l4spark_logs_root`` (required): folder holding ``<job_id>/<node>/rank-<r>.log[.gz]``.
- ``l4spark_warehouse`` (required): warehouse root of the result tables.
- ``l4spark_py_files``: the package for executors, ``dist/l4spark-<version>.zip`` from
  ``make wheel`` (empty when the executors' environment has l4spark installed).
- ``l4spark_application``: path of ``jobs/nightly.py`` as spark-submit sees it (default: the
  one in the checkout holding this folder).

Settings read when the file is parsed, from the environment (they are operator arguments that
Airflow does not template, and a Variable read at parse time would cost a metadata round trip
on every parse):

- ``L4SPARK_SPARK_CONN_ID``: the Spark connection (default ``spark_default``): master, deploy
  mode, queue or namespace.
- ``L4SPARK_SPARK_BINARY``: the spark-submit to run (default: the connection's, ``spark-submit``
  on the PATH).
- ``L4SPARK_CONF``: l4spark TOML files for the job, comma-separated, each passed as ``--conf``
  (paths as the driver sees them); cluster settings such as ``[spark] shuffle_partitions`` go
  there. Read at parse time because it changes the shape of the argument list.
- ``L4SPARK_YARN_TRACK_VIA_RM_API``: ``1`` when the connection is YARN in cluster mode (its extra
  then needs ``yarn_resourcemanager_webapp_address``): the provider follows the application
  through the ResourceManager, and a retry after a lost worker reconnects to a still-running
  application instead of starting a second writer. Without it the provider refuses YARN
  cluster mode (it is durable by default on Airflow 3.3).

This file imports Airflow only: no pyspark and no l4spark (the scheduler parses it often; the
work happens in the submitted application).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG

DAG_ID = "l4spark_nightly"
DEFAULT_APPLICATION = str(Path(__file__).resolve().parents[1] / "jobs" / "nightly.py")


def variable(name: str, default: str | None = None) -> str:
    """A Jinja expression for Airflow Variable ``name``, rendered when the task runs; without a
    default a missing Variable fails the task with an error naming it."""
    if default is None:
        return "{{ var.value.%s }}" % name
    return "{{ var.value.get(%s, %s) }}" % (json.dumps(name), json.dumps(default))


def conf_args(files: str) -> list[str]:
    """``--conf FILE`` for each name in a comma-separated list."""
    return [arg for name in files.split(",") if name.strip() for arg in ("--conf", name.strip())]


with DAG(
    dag_id=DAG_ID,
    description="Parse new training-job logs and diagnose every failed job without a current diagnosis",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={
        "owner": "l4spark",
        "retries": 2,
        "retry_delay": timedelta(minutes=15),
        "execution_timeout": timedelta(hours=8),
    },
    tags=["l4spark", "spark"],
    doc_md=__doc__,
) as dag:
    SparkSubmitOperator(
        task_id="nightly",
        conn_id=os.environ.get("L4SPARK_SPARK_CONN_ID", "spark_default"),
        spark_binary=os.environ.get("L4SPARK_SPARK_BINARY") or None,
        yarn_track_via_rm_api=os.environ.get("L4SPARK_YARN_TRACK_VIA_RM_API") == "1",
        application=variable("l4spark_application", DEFAULT_APPLICATION),
        py_files=variable("l4spark_py_files", ""),
        name="l4spark-nightly-{{ ds }}",
        application_args=[
            "--logs-root", variable("l4spark_logs_root"),
            "--warehouse", variable("l4spark_warehouse"),
            "--date", "{{ ds }}",
            *conf_args(os.environ.get("L4SPARK_CONF", "")),
        ],
    )
