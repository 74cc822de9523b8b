"""The Airflow DAG (dags/l4spark_nightly.py), in Airflow's own environment (.venv-airflow, made by
``make airflow-setup``; ``make test`` makes it first):

- the file loads with no import error, without importing pyspark or l4spark, and says what the
  nightly task should be (schedule, catchup, retries, the run date as ``--date``);
- ``airflow dags test`` on SQLite runs the nightly job end to end: SparkSubmitOperator submits
  jobs/nightly.py with .venv's spark-submit to a ``local[2]`` master, on a small generated fleet,
  and the warehouse then holds a diagnosis per failed job and the run's row for that date.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[1]
AIRFLOW_VENV = REPO / ".venv-airflow"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
RUN_DATE = "2026-11-20"

INSPECT_DAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
dag = bag.dags.get("l4spark_nightly")
task = dag.get_task("nightly") if dag else None
print(json.dumps({
    "import_errors": {path: str(error) for path, error in bag.import_errors.items()},
    "dag_ids": sorted(bag.dag_ids),
    "loaded": sorted({name.split(".")[0] for name in sys.modules} & {"pyspark", "l4spark"}),
    "task": task and {
        "type": type(task).__name__, "schedule": str(dag.schedule), "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs, "retries": task.retries,
        "retry_delay": task.retry_delay.total_seconds(), "conn_id": task._conn_id,
        "application_args": task.application_args,
    },
}))
"""


@pytest.fixture(scope="module")
def airflow_bin() -> Path:
    """.venv-airflow/bin; made by ``make airflow-setup`` when missing, skipped only if that fails."""
    if not (AIRFLOW_VENV / ".installed").exists():
        try:
            made = subprocess.run(["make", "airflow-setup"], cwd=REPO, capture_output=True, text=True, timeout=1200)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f".venv-airflow is missing and `make airflow-setup` could not run: {exc}")
        if made.returncode != 0:
            pytest.skip(".venv-airflow is missing and `make airflow-setup` failed: " + (made.stdout + made.stderr)[-1500:])
    return AIRFLOW_VENV / "bin"


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of an Airflow command: its own home (SQLite), this checkout's dags, and no
    Airflow or l4spark setting inherited from the caller."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AIRFLOW", "L4SPARK_")) and key not in ("PYTHONPATH", "SPARK_REMOTE")}
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", SPARK_LOCAL_IP="127.0.0.1", **extra)
    return env


def test_dag_loads_without_spark_or_l4spark(airflow_bin, tmp_path):
    inspected = subprocess.run([str(airflow_bin / "python"), "-c", INSPECT_DAG, str(REPO / "dags")],
                               env=airflow_env(tmp_path / "airflow"), capture_output=True, text=True, timeout=300)
    assert inspected.returncode == 0, inspected.stderr[-3000:]
    found = json.loads(inspected.stdout.strip().splitlines()[-1])
    assert found["import_errors"] == {}
    assert found["dag_ids"] == ["l4spark_nightly"]
    assert found["loaded"] == []
    assert found["task"] == {
        "type": "SparkSubmitOperator", "schedule": "@daily", "catchup": False, "max_active_runs": 1,
        "retries": 2, "retry_delay": 900.0, "conn_id": "spark_default",
        "application_args": ["--logs-root", "{{ var.value.l4spark_logs_root }}",
                             "--warehouse", "{{ var.value.l4spark_warehouse }}", "--date", "{{ ds }}"],
    }


def run_dag_test(command: list[str], env: dict[str, str], log: Path, timeout: float, succeed: bool = True) -> str:
    """Run ``airflow dags test``; stop it as soon as the task fails (it would wait out the DAG's
    retry delay) and return its output. ``succeed``: the command must exit 0 (else it must have
    been stopped at the task's failure)."""
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout
        try:
            while process.poll() is None:
                if "[up_for_retry]" in log.read_text() or time.monotonic() > deadline:
                    break
                time.sleep(2)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    output = log.read_text()
    if succeed:
        assert process.returncode == 0, output[-6000:]
    else:
        assert "[up_for_retry]" in output, output[-6000:]
    return output


def dag_test_setup(airflow_bin: Path, tmp_path: Path) -> tuple[Path, Path, Path, dict[str, str]]:
    """A small generated fleet (4 jobs, 2 failed), a warehouse path, the l4spark conf file and the
    environment of ``airflow dags test`` (its database migrated)."""
    from l4spark.simulate import FleetOptions, simulate_fleet

    logs, warehouse = tmp_path / "logs", tmp_path / "warehouse"
    simulate_fleet(logs, FleetOptions(seed=21, jobs=4, nodes=(2, 2), ranks_per_node=2, iterations=30,
                                      failed_share=0.5, fault_kinds=("oom",), frameworks=("megatron",)))
    conf = tmp_path / "spark.toml"
    conf.write_text("[spark]\nshuffle_partitions = 2\n")
    env = airflow_env(
        tmp_path / "airflow",
        AIRFLOW_CONN_SPARK_L4SPARK_TEST=json.dumps({"conn_type": "spark", "host": "local[2]",
                                                    "extra": {"deploy-mode": "client"}}),
        L4SPARK_SPARK_CONN_ID="spark_l4spark_test",
        L4SPARK_SPARK_BINARY=str(SPARK_SUBMIT),
        L4SPARK_CONF=str(conf),
        AIRFLOW_VAR_L4SPARK_LOGS_ROOT=str(logs),
        AIRFLOW_VAR_L4SPARK_WAREHOUSE=str(warehouse),
        PYSPARK_PYTHON=sys.executable,
    )
    migrated = subprocess.run([str(airflow_bin / "airflow"), "db", "migrate"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    return logs, warehouse, conf, env


def test_dags_test_runs_the_nightly_job(airflow_bin, tmp_path):
    logs, warehouse, conf, env = dag_test_setup(airflow_bin, tmp_path)
    failed = sorted(p.stem for p in (logs / "_labels").glob("*.json"))
    output = run_dag_test([str(airflow_bin / "airflow"), "dags", "test", "l4spark_nightly", RUN_DATE],
                          env, tmp_path / "dags-test.log", timeout=900)
    assert f"--warehouse {warehouse} --date {RUN_DATE} --conf {conf}" in output
    assert "DagRun Finished: dag_id=l4spark_nightly" in output and "state=success" in output.split("DagRun Finished")[-1]

    diagnoses = pq.read_table(warehouse / "diagnosis_jobs").to_pandas()
    assert sorted(diagnoses["job_id"].astype(str)) == failed
    assert diagnoses["status"].tolist() == ["diagnosed"] * len(failed) and diagnoses["error"].isna().all()
    runs = pq.read_table(warehouse / "runs").to_pandas()
    assert runs[["run_date", "status", "n_scanned_jobs", "n_selected_jobs", "n_diagnosed", "n_errors"]].values.tolist() \
        == [[RUN_DATE, "succeeded", 4, len(failed), len(failed), 0]]
    assert set(diagnoses["run_id"]) == set(runs["run_id"])


def test_dags_test_fails_the_task_when_a_job_fails(airflow_bin, tmp_path):
    """A failed job whose logs hold no line cannot be diagnosed: the nightly finishes the other
    job, writes its tables and exits 3, spark-submit passes the code on, the task is up for retry."""
    logs, warehouse, conf, env = dag_test_setup(airflow_bin, tmp_path)
    failed = sorted(p.stem for p in (logs / "_labels").glob("*.json"))
    for rank_file in (logs / failed[0]).rglob("rank-*.log"):
        rank_file.write_text("")
    output = run_dag_test([str(airflow_bin / "airflow"), "dags", "test", "l4spark_nightly", RUN_DATE],
                          env, tmp_path / "dags-test.log", timeout=900, succeed=False)
    assert "Error code is: 3." in output, output[-4000:]
    diagnoses = pq.read_table(warehouse / "diagnosis_jobs").to_pandas().set_index("job_id")["status"].to_dict()
    assert diagnoses == {failed[0]: "error", failed[1]: "diagnosed"}
    runs = pq.read_table(warehouse / "runs").to_pandas()
    assert runs[["status", "n_diagnosed", "n_errors"]].values.tolist() == [["partial", 1, 1]]
