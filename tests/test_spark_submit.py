"""spark-submit of the nightly batch on a ``local-cluster`` master (executors in their own JVMs
and Python workers) with l4spark shipped as the archive ``make wheel`` builds, as on a cluster.

What it proves: driver and executors run a bare interpreter that sees the project's
dependencies (a ``.pth`` line naming .venv's site-packages) but not l4spark: .venv has l4spark
installed editable, and that hook is a ``.pth`` file of .venv's own, which Python does not run
for a folder named by another ``.pth`` line; the job also starts from a folder outside the
checkout. So the only l4spark either side can import is the shipped ``.zip``; the test checks
that precondition, then that every failed job got a diagnosis whose line counts only reading
every rank file on the executors can give.

The warehouse is Delta through delta-spark, as a cluster gives it to a submitted job: Delta's two
jars on ``--jars`` and its SQL extension and catalog on ``--conf`` (docs/deploy.md), and
``storage.format = "delta"`` in the job's conf (the default ``auto`` cannot see what the submitter
put on the classpath). The tables are read back with delta-rs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import deltalake
import pytest

from l4spark import __version__
from l4spark.io.delta_jars import DELTA_SQL_SETTINGS, find_jars

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[1]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def build_package(out: Path) -> Path:
    """What ``make wheel`` does, from a copy of the sources (no build/ left in the checkout):
    the wheel, and the same archive as ``l4spark-<version>.zip`` for ``--py-files``."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "l4spark", source / "l4spark", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)],
                   check=True, capture_output=True, text=True, timeout=600)
    wheel = out / f"l4spark-{__version__}-py3-none-any.whl"
    archive = out / f"l4spark-{__version__}.zip"
    shutil.copy(wheel, archive)
    return archive


def bare_interpreter(folder: Path) -> Path:
    """A venv whose only packages are .venv's site-packages, named by a .pth line."""
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "l4spark_deps.pth").write_text("".join(f"{path}\n" for path in sorted(deps)))
    return python


def test_nightly_job_runs_from_the_shipped_package(tmp_path):
    from l4spark.simulate import FleetOptions, simulate_fleet

    logs, warehouse = tmp_path / "logs", tmp_path / "warehouse"
    simulate_fleet(logs, FleetOptions(seed=21, jobs=4, nodes=(2, 2), ranks_per_node=2, iterations=30,
                                      failed_share=0.5, fault_kinds=("oom",), frameworks=("megatron",)))
    labels = {p.stem: json.loads(p.read_text()) for p in (logs / "_labels").glob("*.json")}
    archive = build_package(tmp_path / "dist")
    python = bare_interpreter(tmp_path / "bare")
    # Few shuffle partitions for two one-core executors; on a cluster this file sets them too.
    conf = tmp_path / "spark.toml"
    conf.write_text("[spark]\nshuffle_partitions = 2\n[storage]\nformat = \"delta\"\n")
    jars = find_jars()
    assert jars, "`make jars` copies Delta's jars into jars/"
    delta = ["--jars", ",".join(map(str, jars))] + [arg for key, value in DELTA_SQL_SETTINGS.items()
                                                   for arg in ("--conf", f"{key}={value}")]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "SPARK_HOME", "SPARK_REMOTE")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))

    precondition = subprocess.run([str(python), "-c", "import pyspark, pandas, sklearn, drain3\nimport l4spark"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "No module named 'l4spark'" in precondition.stderr, precondition.stderr[-2000:]

    result = subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local-cluster[2,1,1024]", "--py-files", str(archive), *delta,
         str(REPO / "jobs" / "nightly.py"), "--logs-root", str(logs), "--warehouse", str(warehouse),
         "--date", "2026-11-20", "--conf", str(conf), "--no-reports"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]

    folders = [p for p in warehouse.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert len(folders) >= 10 and all((p / "_delta_log").is_dir() for p in folders), sorted(p.name for p in folders)
    diagnoses = deltalake.DeltaTable(str(warehouse / "diagnosis_jobs")).to_pandas()
    diagnoses["job_id"] = diagnoses["job_id"].astype(str)
    assert sorted(diagnoses["job_id"]) == sorted(labels)
    runs = deltalake.DeltaTable(str(warehouse / "runs")).to_pandas()
    assert len(runs) == 1 and runs.loc[0, "run_date"] == "2026-11-20" and runs.loc[0, "n_diagnosed"] == len(labels)
    for row in diagnoses.itertuples():
        label = labels[row.job_id]
        rank_lines = sum(len(f.read_bytes().splitlines()) for f in (logs / row.job_id).glob("*/rank-*.log"))
        assert (row.status, row.error, row.version, row.run_id) == ("diagnosed", None, __version__, runs.loc[0, "run_id"])
        assert row.n_lines == rank_lines
        assert row.failure_stage == label["failure_stage"]
        assert set(label["faulty_nodes"]) <= set(row.suspect_nodes)
