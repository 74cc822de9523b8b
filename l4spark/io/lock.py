"""The warehouse lock: one writing run at a time per warehouse.

Two runs that write the same warehouse at once would interleave partition overwrites and
template-store versions. Every command that writes (``parse``, ``nightly``, ``diagnose``,
``normal-pool``, ``spatial``, ``patterns add|confirm``) holds the lock from before Spark starts
until it stops (``cli.locked_session``).

The lock is the file ``<warehouse>/_lock``, created atomically: its content (pid, host, pid
start time, owner, creation time) is written to a temporary file first and hard-linked to the
lock name, which fails when the name exists, so a lock file is never seen half-written. A run
that finds the lock held waits up to ``storage.lock_wait_s`` seconds (default 0: it fails at
once) and then raises ``WarehouseLockedError`` naming the holder; the CLI exits with status 2.

A lock is stale, and taken over, when its holder is on this host and its process is gone (or
is another process that reused the pid, or a zombie), or when it is older than
``storage.lock_stale_s`` seconds (a holder on another host cannot be checked). Taking over is
serialised by a second, short-lived guard file, so two runs that find the same stale lock
cannot both win. Within one process the lock is re-entrant (a nightly run that parses).

A remote warehouse (``hdfs://``, ``s3a://``...; ``io/fs.py``) has no hard link and no
``O_EXCL`` that Spark's DataFrame API could reach, and nothing can be deleted through it. There
the lock is a *claim* protocol over write-once folders under ``<warehouse>/_lock/``: a run writes
``claim-<token>/`` (its holder record, one Parquet file) and then lists the folder; it holds the
lock only if no other live claim (one without a ``release-<token>/`` and not stale) is listed.
Two runs that claim at the same time both see each other and both step back (refused, never
both holding). It relies only on what HDFS and S3 both give: a file written whole becomes visible
at once, and a listing after a completed write shows it (S3 is strongly consistent for both since
December 2020). A release is a ``release-<token>/`` folder. On classic Spark a run deletes its own
claim and then its release when it lets go (``_withdraw``), and the run that gets the lock deletes
the claims that are released or stale (each before its release record) and release records whose
claim is gone; a live claim of another run is never deleted. Over Spark Connect nothing can be
deleted (``fs.delete_paths``): the folders stay, a few KB a run.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from l4spark.config import StorageConfig
from l4spark.errors import L4SparkError
from l4spark.io import fs

log = logging.getLogger(__name__)

LOCK_NAME = "_lock"
GUARD_STALE_S = 30.0
POLL_S = 0.5
_held: dict[str, tuple[int, str]] = {}  # lock path -> (depth, token) held by this process


class WarehouseLockedError(L4SparkError):
    """Another run holds the warehouse lock (the message names it)."""


@dataclass(frozen=True)
class LockHolder:
    token: str
    owner: str
    pid: int
    host: str
    pid_start: str | None
    created: float

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.created, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.owner} (pid {self.pid} on {self.host}, since {since})"


def lock_path(storage: StorageConfig) -> Path:
    return fs.local_path(storage.warehouse).resolve() / LOCK_NAME


@contextmanager
def warehouse_lock(storage: StorageConfig, owner: str, spark=None) -> Iterator[Path | str]:
    """Hold the warehouse lock for the block (re-entrant within a process). ``spark``: needed
    for a remote warehouse (the claim protocol above)."""
    if not fs.is_local(storage.warehouse):
        with _remote_lock(spark, storage, owner) as folder:
            yield folder
        return
    path = lock_path(storage)
    key = str(path)
    if key in _held:
        depth, token = _held[key]
        _held[key] = (depth + 1, token)
        try:
            yield path
        finally:
            _held[key] = (_held[key][0] - 1, token)
        return
    token = _acquire(path, owner, storage.lock_wait_s, storage.lock_stale_s)
    _held[key] = (1, token)
    try:
        yield path
    finally:
        del _held[key]
        _release(path, token)


def _acquire(path: Path, owner: str, wait_s: float, stale_s: float) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    me = LockHolder(uuid.uuid4().hex, owner, os.getpid(), socket.gethostname(), _process_start(os.getpid()),
                    time.time())
    deadline = time.monotonic() + max(wait_s, 0.0)
    waited = False
    while True:
        if _create(path, me):
            if waited:
                log.info("warehouse lock %s taken after waiting", path)
            return me.token
        holder = read_holder(path)
        reason = stale_reason(holder, path, stale_s)
        if reason:
            _break(path, holder, reason, stale_s)
            continue
        if time.monotonic() >= deadline:
            who = holder.describe() if holder else "a run whose lock file is being written"
            raise WarehouseLockedError(
                f"warehouse {path.parent} is locked by {who}: another run is writing it. Wait for it to "
                f"finish (--lock-wait SECONDS waits up to that long); a lock whose process is gone is taken "
                f"over automatically, so remove {path} by hand only if you are sure no run is writing")
        waited = True
        time.sleep(min(POLL_S, max(deadline - time.monotonic(), 0.01)))


def _create(path: Path, holder: LockHolder) -> bool:
    """Create the lock file with ``holder`` in it, atomically; False when it exists."""
    temp = path.with_name(f".{LOCK_NAME}.{holder.token}.tmp")
    temp.write_text(json.dumps(holder.__dict__), "utf-8")
    try:
        os.link(temp, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: exclusive create (written right after)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(holder.__dict__))
        return True
    finally:
        temp.unlink(missing_ok=True)


def read_holder(path: Path) -> LockHolder | None:
    """The lock's holder, or None when the file is gone or unreadable."""
    try:
        return LockHolder(**json.loads(path.read_text("utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def stale_reason(holder: LockHolder | None, path: Path, stale_s: float) -> str | None:
    """Why the lock at ``path`` (held by ``holder``) may be taken over, or None while it is live."""
    if holder is None:
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return None  # released meanwhile: the next attempt creates it
        return f"unreadable lock file {age:.0f}s old" if age > GUARD_STALE_S else None
    return holder_stale_reason(holder, stale_s)


def holder_stale_reason(holder: LockHolder, stale_s: float) -> str | None:
    """Why ``holder``'s lock (a lock file, or a remote warehouse's claim) is no longer live:
    held longer than ``stale_s``, or its process on this host gone or replaced; None while live."""
    age = time.time() - holder.created
    if age > stale_s:
        return f"held for {age:.0f}s, more than storage.lock_stale_s={stale_s:.0f}"
    if holder.host == socket.gethostname():
        if not _alive(holder.pid):
            return f"process {holder.pid} on {holder.host} is gone"
        start = _process_start(holder.pid)
        if holder.pid_start and start and start != holder.pid_start:
            return f"pid {holder.pid} now belongs to another process"
    return None


def _break(path: Path, holder: LockHolder | None, reason: str, stale_s: float) -> None:
    """Remove a stale lock, unless another run replaced it meanwhile (checked under the guard)."""
    guard = path.with_name(LOCK_NAME + ".break")
    try:
        fd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            if time.time() - guard.stat().st_mtime > GUARD_STALE_S:
                guard.unlink(missing_ok=True)  # a run died while taking over: drop its guard
        except FileNotFoundError:
            pass
        time.sleep(0.05)
        return
    os.close(fd)
    try:
        current = read_holder(path)
        if current == holder and stale_reason(current, path, stale_s):
            log.warning("taking over the stale warehouse lock of %s: %s",
                        holder.describe() if holder else "an unknown run", reason)
            path.unlink(missing_ok=True)
    finally:
        guard.unlink(missing_ok=True)


def _release(path: Path, token: str) -> None:
    holder = read_holder(path)
    if holder is not None and holder.token == token:
        path.unlink(missing_ok=True)
    else:
        log.warning("warehouse lock %s was no longer ours at release (taken over as stale?)", path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child its parent has not reaped yet still answers signals
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _process_start(pid: int) -> str | None:
    """The process start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


# ---- a remote warehouse: claims in write-once folders (see the module's docstring) ----------


@contextmanager
def _remote_lock(spark, storage: StorageConfig, owner: str) -> Iterator[str]:
    folder = fs.child(storage.warehouse, LOCK_NAME)
    if folder in _held:
        depth, token = _held[folder]
        _held[folder] = (depth + 1, token)
        try:
            yield folder
        finally:
            _held[folder] = (_held[folder][0] - 1, token)
        return
    if spark is None:
        raise WarehouseLockedError(f"the lock of the remote warehouse {storage.warehouse} is taken through Spark: "
                                   "no session given")
    token = _remote_acquire(spark, folder, owner, storage.lock_wait_s, storage.lock_stale_s)
    _held[folder] = (1, token)
    try:
        yield folder
    finally:
        del _held[folder]
        _withdraw(spark, folder, token)


def _remote_acquire(spark, folder: str, owner: str, wait_s: float, stale_s: float) -> str:
    deadline = time.monotonic() + max(wait_s, 0.0)
    while True:
        me = LockHolder(uuid.uuid4().hex, owner, os.getpid(), socket.gethostname(), _process_start(os.getpid()),
                        time.time())
        fs.write_version(spark, folder, f"claim-{me.token}", 0, json.dumps(me.__dict__).encode())
        live, finished = _claims(spark, folder, stale_s)
        others = [holder for holder in live if holder.token != me.token]
        if not others:
            fs.delete_paths(spark, [f"{folder}/{name}" for name in finished], "finished lock claims")
            return me.token
        _withdraw(spark, folder, me.token)  # step back
        if time.monotonic() >= deadline:
            first = min(others, key=lambda h: h.created)
            raise WarehouseLockedError(
                f"warehouse {folder.rsplit('/', 1)[0]} is locked by {first.describe()}: another run is writing it. "
                f"Wait for it to finish (--lock-wait SECONDS waits up to that long); a claim whose process is "
                f"gone is taken over automatically")
        time.sleep(POLL_S + random.random())


def _withdraw(spark, folder: str, token: str) -> None:
    """Give up the claim ``token``: its release record, then (classic Spark: ``fs.delete_paths``)
    the claim and the record deleted, the claim first, so that a claim never outlives its release
    (a crash in between leaves a release without a claim, which the next holder deletes)."""
    fs.write_version(spark, folder, f"release-{token}", 0, b"")
    fs.delete_paths(spark, [fs.version_folder(folder, f"{kind}-{token}", 0) for kind in ("claim", "release")],
                    "lock claim folders")


def _claim_name(kind: str, token: str) -> str:
    """The folder name (under the lock folder) of a claim's or release's one version."""
    return fs.version_folder("", f"{kind}-{token}", 0).lstrip("/")


def _claims(spark, folder: str, stale_s: float) -> tuple[list[LockHolder], list[str]]:
    """The holders of the live claims under ``folder`` (neither released nor stale), and the
    folders that may go: each released or stale claim followed by its release record, then release
    records whose claim is gone. A claim deleted between the listing and its read was released."""
    names = {fs.relative(f.path, folder).split("/")[0] for f in fs.list_files(spark, folder) or []}
    tokens = {kind: {name[len(kind) + 1:].rsplit("-", 1)[0] for name in names if name.startswith(kind + "-")}
              for kind in ("claim", "release")}
    live, finished = [], []
    for token in sorted(tokens["claim"]):
        if token in tokens["release"]:
            finished += [_claim_name("claim", token), _claim_name("release", token)]
            continue
        try:
            holder = LockHolder(**json.loads(fs.read_version(spark, folder, f"claim-{token}", 0)))
        except (ValueError, TypeError):
            continue
        except Exception as exc:  # noqa: BLE001 -- a claim gone since the listing was released; all else raises
            if fs.is_missing_error(exc):
                continue
            raise
        reason = holder_stale_reason(holder, stale_s)
        if reason:
            log.warning("ignoring the stale claim on %s of %s: %s", folder, holder.describe(), reason)
            finished.append(_claim_name("claim", token))
            continue
        live.append(holder)
    finished += [_claim_name("release", token) for token in sorted(tokens["release"] - tokens["claim"])]
    return live, finished
