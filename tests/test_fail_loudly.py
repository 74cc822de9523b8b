"""A bad setting or a failed job never passes as success (issue #23).

- a typo in any step section exits 2 with one line naming the key and the file, before a Spark
  session exists (no stack trace unless ``-v``);
- a job whose diagnosis fails keeps its last good diagnosis, and the failure is recorded in
  ``diagnosis_attempts``;
- the nightly exits 3 when some jobs failed, retries exactly those jobs on the next run, and
  gives up on a job after ``nightly.max_attempts`` failures on the same input, listing it by name.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

import l4spark.diagnosis.assemble as assemble
from l4spark.cli import main
from l4spark.errors import EXIT_PARTIAL, EXIT_USAGE
from l4spark.report.diagnosed import write_job_reports
from l4spark.io.storage import read_table

from tests.nightly_support import DIAGNOSIS_TABLES, nightly_config, snapshot

DIAGNOSE_BATCH = assemble._diagnose_batch
TYPOS = {
    "spatial": "[spatial]\ntop_kk = 5\n",
    "temporal": "[temporal]\nwindw = 4\n",
    "diagnosis": "[diagnosis]\nmin_scor = 0.7\n",
    "normal_pool": "[normal_pool]\nmin_suport = 0.5\n",
}


@pytest.fixture
def no_spark(monkeypatch):
    """Starting Spark fails the test: a config error must be found before."""
    import l4spark.io.session as session

    def refuse(*args, **kwargs):
        raise AssertionError("a SparkSession was started")

    monkeypatch.setattr(session, "build_session", refuse)


@pytest.mark.parametrize("section", sorted(TYPOS))
@pytest.mark.parametrize("command", [["nightly", "--logs-root", "LOGS"], ["diagnose", "--job", "j1"]])
def test_a_typo_in_a_step_section_exits_2_before_spark_starts(tmp_path, capsys, no_spark, section, command):
    conf = tmp_path / "site.toml"
    conf.write_text("[spark]\nshuffle_partitions = 2\n" + TYPOS[section])
    args = [a.replace("LOGS", str(tmp_path)) for a in command]
    code = main([*args, "--warehouse", str(tmp_path / "warehouse"), "--conf", str(conf)])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    key = TYPOS[section].splitlines()[1].split(" =")[0]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{section}.{key}" in lines[0] and str(conf) in lines[0], err
    assert not (tmp_path / "warehouse").exists()  # not even the lock was taken


def test_verbose_shows_the_stack_trace_of_a_config_error(tmp_path, capsys, no_spark):
    conf = tmp_path / "site.toml"
    conf.write_text(TYPOS["spatial"])
    assert main(["-v", "nightly", "--logs-root", str(tmp_path), "--conf", str(conf)]) == EXIT_USAGE
    assert "Traceback" in capsys.readouterr().err
    assert main(["nightly", "--logs-root", str(tmp_path), "--conf", str(conf), "-v"]) == EXIT_USAGE
    assert "Traceback" in capsys.readouterr().err


def failing_for(jobs: set[str]):
    """``_diagnose_batch`` that raises for any batch holding one of ``jobs`` (a step failing on
    that job's data), as the real one does when a step meets data it cannot handle."""
    def batch(spark, config, job_ids, *args, **kwargs):
        broken = sorted(jobs & set(job_ids))
        if broken:
            raise RuntimeError(f"step failed on {broken[0]}")
        return DIAGNOSE_BATCH(spark, config, job_ids, *args, **kwargs)

    return batch


def test_a_failed_diagnosis_keeps_the_last_good_one(spark, nightly_clean, tmp_path, monkeypatch):
    clean_warehouse, run, _ = nightly_clean
    warehouse = tmp_path / "warehouse"
    shutil.copytree(clean_warehouse, warehouse)
    config = nightly_config(warehouse)
    job = run.diagnosed[0]
    before = snapshot(spark, warehouse, DIAGNOSIS_TABLES, jobs=[job])
    assert len(before["diagnosis_events"]) and before["diagnosis_jobs"]["status"].tolist() == ["diagnosed"]

    monkeypatch.setattr(assemble, "_diagnose_batch", failing_for({job}))
    diagnosis = assemble.diagnose_jobs(spark, config, [job])
    assert diagnosis.jobs["status"].tolist() == ["error"]
    kept = assemble.write_diagnosis(spark, config, diagnosis)
    assert kept == [job]
    assert write_job_reports(diagnosis, tmp_path / "reports", skip=kept) == {}  # its good report stays too

    after = snapshot(spark, warehouse, DIAGNOSIS_TABLES, jobs=[job])
    for table in DIAGNOSIS_TABLES:
        assert after[table].equals(before[table]), table
    attempts = read_table(spark, config.storage, "diagnosis_attempts").toPandas().set_index("job_id")
    assert attempts.loc[job, ["status", "failed_attempts"]].tolist() == ["error", 1]
    assert attempts.loc[job, "error"].startswith("diagnosis failed: RuntimeError: step failed on")


@contextmanager
def shared_session(spark):
    yield spark


def nightly(logs: Path, warehouse: Path, conf: Path, capsys) -> tuple[int, str]:
    code = main(["nightly", "--logs-root", str(logs), "--warehouse", str(warehouse), "--conf", str(conf)])
    return code, capsys.readouterr().out


def test_nightly_exits_3_retries_exactly_the_failed_jobs_then_gives_up(spark, nightly_logs, tmp_path,
                                                                       monkeypatch, capsys):
    import l4spark.cli.nightly as nightly_command

    logs, warehouse = tmp_path / "logs", tmp_path / "warehouse"
    shutil.copytree(nightly_logs, logs)
    failed = sorted(p.stem for p in (logs / "_labels").glob("*.json"))
    transient, empty = failed[0], failed[1]
    for rank_file in (logs / empty).rglob("rank-*.log"):
        rank_file.write_text("")  # no line to diagnose: a failure that no retry can mend
    conf = tmp_path / "site.toml"
    conf.write_text("[nightly]\nmax_attempts = 2\n")
    monkeypatch.setattr(nightly_command, "locked_session", lambda config, command: shared_session(spark))
    storage = nightly_config(warehouse).storage

    def last_run():
        runs = read_table(spark, storage, "runs").toPandas().sort_values("started_at")
        attempts = read_table(spark, storage, "diagnosis_attempts").toPandas()
        row = runs.iloc[-1]
        return row, attempts[attempts["run_id"] == row["run_id"]].set_index("job_id")["status"].to_dict()

    monkeypatch.setattr(assemble, "_diagnose_batch", failing_for({transient}))
    code, out = nightly(logs, warehouse, conf, capsys)
    row, attempted = last_run()
    assert code == EXIT_PARTIAL, out
    assert attempted == {**{j: "diagnosed" for j in failed}, transient: "error", empty: "error"}
    assert row["n_errors"] == 2 and row["status"] == "partial" and transient in out and empty in out

    monkeypatch.setattr(assemble, "_diagnose_batch", DIAGNOSE_BATCH)
    code, out = nightly(logs, warehouse, conf, capsys)
    row, attempted = last_run()
    assert code == EXIT_PARTIAL, out
    assert attempted == {transient: "diagnosed", empty: "error"}  # exactly the two that failed
    jobs = read_table(spark, storage, "diagnosis_jobs").toPandas().set_index("job_id")["status"].to_dict()
    assert jobs == {**{j: "diagnosed" for j in failed}, empty: "error"}

    code, out = nightly(logs, warehouse, conf, capsys)
    row, attempted = last_run()
    assert code == 0, out
    assert row["n_selected_jobs"] == 0 and row["status"] == "succeeded" and attempted == {}
    assert f"{empty}: given up after 2 failed attempts: no log line to diagnose" in out


def test_a_misspelt_disabled_pattern_fails_the_nightly_before_it_parses(spark, nightly_logs, tmp_path,
                                                                        monkeypatch, capsys):
    """``diagnosis.disabled_patterns`` names a pattern id the library lacks (a typo): the nightly
    exits 2 with one line naming the id and the key, before any job is parsed; a site's own
    pattern of the fault_patterns table may be named."""
    import l4spark.cli.nightly as nightly_command
    from l4spark.io.storage import table_exists

    monkeypatch.setattr(nightly_command, "locked_session", lambda config, command: shared_session(spark))
    warehouse, conf = tmp_path / "warehouse", tmp_path / "site.toml"
    conf.write_text('[diagnosis]\ndisabled_patterns = ["host-oom-kill", "host-om-kill"]\n')
    code = main(["nightly", "--logs-root", str(nightly_logs), "--warehouse", str(warehouse), "--conf", str(conf)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE
    assert len(err) == 1 and "disabled_patterns" in err[0] and "'host-om-kill'" in err[0]
    assert "'host-oom-kill'" not in err[0]    # a seed's id is known (listed, not refused)
    assert not table_exists(nightly_config(warehouse).storage, "jobs")


def test_a_query_that_does_not_run_is_one_line_and_exit_2(tmp_path):
    """``l4spark sql`` on a misspelt table: the user's input is wrong, so one line naming the
    problem and the tables there are, exit 2, no stack trace (it printed Spark's whole trace)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "l4spark.cli", "sql", "--warehouse", str(tmp_path / "wh"),
                           "--master", "local[1]", "SELECT * FROM l4spark.diagnosis_jbos"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_USAGE, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("l4spark: error:")]
    assert len(errors) == 1 and "diagnosis_jbos" in errors[0] and "tables and views by name" in errors[0]
    assert "Traceback" not in done.stderr and "SQLQueryContextLogger" not in done.stderr
