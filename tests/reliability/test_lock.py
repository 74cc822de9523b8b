"""The warehouse lock: one writing run at a time; stale locks of dead runs are taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from l4spark.config import StorageConfig
from l4spark.io.lock import LOCK_NAME, WarehouseLockedError, read_holder, warehouse_lock

pytestmark = pytest.mark.reliability

HOLD = """
import sys, time
from l4spark.config import StorageConfig
from l4spark.io.lock import WarehouseLockedError, warehouse_lock
storage = StorageConfig(warehouse=sys.argv[1], lock_wait_s=float(sys.argv[2]))
try:
    with warehouse_lock(storage, "child " + sys.argv[3]):
        print("got", flush=True)
        time.sleep(float(sys.argv[4]))
except WarehouseLockedError as exc:
    print("locked:", exc, flush=True)
    sys.exit(2)
"""


def _child(warehouse, wait_s: float, name: str, hold_s: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", HOLD, str(warehouse), str(wait_s), name, str(hold_s)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _plant(warehouse, **fields) -> None:
    warehouse.mkdir(parents=True, exist_ok=True)
    holder = {"token": "t0", "owner": "l4spark nightly", "pid": os.getpid(), "host": socket.gethostname(),
              "pid_start": None, "created": time.time(), **fields}
    (warehouse / LOCK_NAME).write_text(json.dumps(holder))


def test_second_holder_fails_at_once_naming_the_first(tmp_path):
    storage = StorageConfig(warehouse=str(tmp_path / "wh"))
    child = _child(storage.warehouse, 0, "A", 30)
    try:
        assert child.stdout.readline().strip() == "got"
        started = time.monotonic()
        with pytest.raises(WarehouseLockedError, match=rf"locked by child A \(pid {child.pid} on "):
            with warehouse_lock(storage, "me"):
                pass
        assert time.monotonic() - started < 2
    finally:
        child.kill()
        child.wait()


def test_waiting_run_gets_the_lock_when_the_holder_finishes(tmp_path):
    storage = StorageConfig(warehouse=str(tmp_path / "wh"), lock_wait_s=30)
    child = _child(storage.warehouse, 0, "A", 1.5)
    assert child.stdout.readline().strip() == "got"
    started = time.monotonic()
    with warehouse_lock(storage, "me") as path:
        assert read_holder(path).owner == "me" and read_holder(path).pid == os.getpid()
        assert child.wait(5) == 0
    assert 0.5 < time.monotonic() - started < 15
    assert not (tmp_path / "wh" / LOCK_NAME).exists()


def test_lock_is_reentrant_in_one_process_and_released_at_the_end(tmp_path):
    storage = StorageConfig(warehouse=str(tmp_path / "wh"))
    with warehouse_lock(storage, "outer") as path:
        with warehouse_lock(storage, "inner"):
            assert read_holder(path).owner == "outer"
        assert path.exists()
    assert not path.exists()


def test_lock_of_a_dead_process_on_this_host_is_taken_over(tmp_path):
    warehouse = tmp_path / "wh"
    _plant(warehouse, pid=_dead_pid())
    with warehouse_lock(StorageConfig(warehouse=str(warehouse)), "me") as path:
        assert read_holder(path).owner == "me"


def test_lock_of_a_reused_pid_is_taken_over(tmp_path):
    warehouse = tmp_path / "wh"
    _plant(warehouse, pid=os.getppid(), pid_start="1")  # alive, but started at another time
    with warehouse_lock(StorageConfig(warehouse=str(warehouse)), "me") as path:
        assert read_holder(path).owner == "me"


def test_lock_of_another_host_is_kept_until_it_is_older_than_the_limit(tmp_path):
    warehouse = tmp_path / "wh"
    storage = StorageConfig(warehouse=str(warehouse), lock_stale_s=3600)
    _plant(warehouse, host="other-host", pid=_dead_pid(), created=time.time() - 60)
    with pytest.raises(WarehouseLockedError, match="on other-host"):
        with warehouse_lock(storage, "me"):
            pass
    _plant(warehouse, host="other-host", created=time.time() - 7200)
    with warehouse_lock(storage, "me") as path:
        assert read_holder(path).owner == "me"


def test_many_runs_racing_for_a_stale_lock_let_exactly_one_in(tmp_path):
    warehouse = tmp_path / "wh"
    _plant(warehouse, pid=_dead_pid())
    children = [_child(warehouse, 0, str(i), 3) for i in range(4)]
    outputs = [c.communicate(timeout=60)[0].strip() for c in children]
    assert sorted(o.split(":")[0] for o in outputs) == ["got", "locked", "locked", "locked"], outputs
    assert [c.returncode for c in children].count(0) == 1


def test_release_leaves_a_lock_that_is_no_longer_ours(tmp_path):
    storage = StorageConfig(warehouse=str(tmp_path / "wh"))
    with warehouse_lock(storage, "me") as path:
        _plant(tmp_path / "wh", token="someone-else", owner="other")
    assert read_holder(path).owner == "other"


@pytest.mark.parametrize("command", [
    ["nightly", "--logs-root", "LOGS"],
    ["parse", "--logs-root", "LOGS"],
    ["diagnose", "--all-failed"],
    ["normal-pool"],
])
def test_writing_commands_exit_2_with_the_holder_before_starting_spark(tmp_path, capsys, command):
    from l4spark.cli import main

    storage = StorageConfig(warehouse=str(tmp_path / "wh"))
    (tmp_path / "logs").mkdir()
    child = _child(storage.warehouse, 0, "A", 30)
    try:
        assert child.stdout.readline().strip() == "got"
        started = time.monotonic()
        code = main([c.replace("LOGS", str(tmp_path / "logs")) for c in command] + ["--warehouse", storage.warehouse])
        elapsed = time.monotonic() - started
    finally:
        child.kill()
        child.wait()
    assert code == 2
    assert f"is locked by child A (pid {child.pid} on " in capsys.readouterr().err
    assert elapsed < 5  # refused before a JVM starts
