"""The input layout: find rank files and job registries under a logs root (driver side, pure).

One walk of the logs root lists every file once (Spark never has to discover thousands of
small files itself). A path is matched against the configured pattern, whose named groups give
job_id, node and rank. Folders whose name starts with ``_`` or ``.`` are not part of any job
(``_labels`` of the simulator, ``.staging`` of collectors) and are skipped, counted in
``LayoutScan.skipped_hidden``; every other file that does not fit becomes an ``Issue``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from l4spark.errors import InputLayoutError
from l4spark.io import fs
from l4spark.io.frames import session_settings

KNOWN_STATUSES = ("succeeded", "failed")


@dataclass(frozen=True)
class Issue:
    """A counted quarantine entry: what was set aside (or repaired), where, and why."""

    job_id: str | None
    file: str | None
    reason: str
    detail: str
    n_lines: int = 0
    n_bytes: int = 0
    line_no: int | None = None
    sample: str | None = None


@dataclass(frozen=True)
class RankFile:
    job_id: str
    node: str
    rank: int
    path: str        # absolute path, as the reading task opens it
    rel_path: str    # path under the logs root, as stored in the tables
    size: int

    @property
    def compressed(self) -> bool:
        return self.path.endswith(".gz")


@dataclass(frozen=True)
class JobMeta:
    """A job's registry entry. ``status`` is ``unknown`` when job.json is missing or broken."""

    job_id: str
    status: str
    settings: dict[str, Any]
    start_time: str | None
    end_time: str | None
    error: str | None = None


@dataclass
class LayoutScan:
    files: list[RankFile] = field(default_factory=list)
    jobs: dict[str, JobMeta] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    skipped_hidden: int = 0
    # a remote root's listing, which the parse's read of these files plans from (``fs.RootListing``)
    listing: fs.RootListing | None = None

    def only(self, jobs: Iterable[str]) -> "LayoutScan":
        """The part of this listing that belongs to ``jobs`` (issues of no job are left out, as a
        scan restricted to ``jobs`` leaves them out). A job not in the listing is an error."""
        wanted = set(jobs)
        absent = wanted - set(self.jobs)
        if absent:
            raise InputLayoutError(f"jobs not in this listing of the logs root: {sorted(absent)}")
        return LayoutScan(files=[f for f in self.files if f.job_id in wanted],
                          jobs={k: v for k, v in self.jobs.items() if k in wanted},
                          issues=[i for i in self.issues if i.job_id in wanted],
                          skipped_hidden=self.skipped_hidden, listing=self.listing)

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def scan_logs_root(logs_root: str | Path, pattern: str, job_file: str = "job.json",
                   jobs: Iterable[str] | None = None, spark: Any = None) -> LayoutScan:
    """List rank files and read job registries; ``jobs`` restricts the scan to those job ids.

    A local root (a path or ``file:`` URI) is walked with ``os.scandir``; any other URI
    (``hdfs://``, ``s3a://``...) is listed through ``spark`` (``io.fs``, required then).
    Raises ``InputLayoutError`` when the root does not exist or a requested job is absent.
    """
    if not fs.is_local(logs_root):
        if spark is None:
            raise InputLayoutError(f"logs root {str(logs_root)!r} is not a local path: listing it needs Spark")
        return _scan_remote(spark, str(logs_root).rstrip("/"), re.compile(pattern), job_file, jobs)
    root = fs.local_path(logs_root)
    if not root.is_dir():
        raise InputLayoutError(f"logs root {str(root)!r} is not a directory")
    matcher = re.compile(pattern)
    wanted = set(jobs) if jobs is not None else None
    scan = LayoutScan()
    job_dirs = set()
    for top in sorted(os.scandir(root), key=lambda e: e.name):
        if top.name.startswith(("_", ".")):
            scan.skipped_hidden += 1
            continue
        if not top.is_dir(follow_symlinks=False):
            if wanted is None:
                scan.issues.append(Issue(None, top.name, "outside_layout",
                                         "file at the top of the logs root belongs to no job folder"))
            continue
        if wanted is not None and top.name not in wanted:
            continue
        job_dirs.add(top.name)
        _scan_job_dir(root, Path(top.path), matcher, job_file, scan)
    if wanted is not None and wanted - job_dirs:
        raise InputLayoutError(f"jobs not found under {str(root)!r}: {sorted(wanted - job_dirs)}")
    for job_id in sorted(job_dirs):
        scan.jobs[job_id] = read_job_meta(root / job_id / job_file, job_id)
    _finish(scan, job_file)
    return scan


def _finish(scan: LayoutScan, job_file: str) -> None:
    """Issues of the job registries and of duplicate ranks; files in path order."""
    for job_id, meta in sorted(scan.jobs.items()):
        if meta.error:
            scan.issues.append(Issue(job_id, f"{job_id}/{job_file}", "job_meta", meta.error))
        elif meta.status not in KNOWN_STATUSES:
            scan.issues.append(Issue(job_id, f"{job_id}/{job_file}", "job_status",
                                     f"status {meta.status!r} is neither 'succeeded' nor 'failed': parsed, not "
                                     "diagnosed (pooled only if normal_pool.succeeded_statuses names it)"))
    _flag_duplicate_ranks(scan)
    scan.files.sort(key=lambda f: f.rel_path)


def _scan_remote(spark: Any, root: str, matcher: re.Pattern[str], job_file: str,
                 jobs: Iterable[str] | None) -> LayoutScan:
    """``scan_logs_root`` of a remote root: one listing through Spark, the same rules as the local
    walk (Hadoop's listing already leaves out ``_`` and ``.`` names, so none is counted as skipped;
    an object store has no empty folders, so a node folder without any file is not seen). The
    registries (``job.json``) are read in the listing's own Spark job (``fs.list_root``), under
    ``fs.remote_scan_settings`` (few tasks); the scan keeps the listing for the parse's read."""
    with session_settings(spark, fs.remote_scan_settings(spark)):
        listed = fs.list_root(spark, root, read_named=job_file)
        if listed is not None:
            scan = _scan_listing(spark, root, listed[0], matcher, job_file, jobs)
            scan.listing = listed[1]
            return scan
    raise InputLayoutError(f"logs root {root!r} does not exist")


def _scan_listing(spark: Any, root: str, listing: list[fs.RemoteFile], matcher: re.Pattern[str], job_file: str,
                  jobs: Iterable[str] | None) -> LayoutScan:
    """``_scan_remote`` of ``listing``, the files listed under ``root``."""
    wanted = set(jobs) if jobs is not None else None
    scan = LayoutScan()
    by_job: dict[str, list[tuple[str, fs.RemoteFile]]] = {}
    for remote in listing:
        rel = fs.relative(remote.path, root)
        if "/" not in rel:
            if wanted is None:
                scan.issues.append(Issue(None, rel, "outside_layout",
                                         "file at the top of the logs root belongs to no job folder"))
            continue
        job_name = rel.split("/", 1)[0]
        if wanted is None or job_name in wanted:
            by_job.setdefault(job_name, []).append((rel, remote))
    if wanted is not None and wanted - set(by_job):
        raise InputLayoutError(f"jobs not found under {root!r}: {sorted(wanted - set(by_job))}")
    registries = {job_name: remote for job_name, entries in by_job.items()
                  for rel, remote in entries if rel == f"{job_name}/{job_file}"}
    # Spark's scan skips empty files: a 0-byte job.json is b"", as it reads locally; the listing
    # read the others (``read_named``) but one the storage refused, or one gone since
    texts = {remote.path: b"" if not remote.size else remote.content for remote in registries.values()
             if not remote.size or remote.content is not None}
    unread = sorted(r.path for r in registries.values() if r.path not in texts)
    if unread:
        texts.update(fs.read_files(spark, unread))
    for job_name in sorted(by_job):
        _match_job_files(job_name, [(rel, remote.path, remote.size) for rel, remote in sorted(by_job[job_name])],
                         matcher, job_file, scan)
        registry = registries.get(job_name)
        if registry is not None and registry.path not in texts:  # listed, yet not handed over
            scan.jobs[job_name] = JobMeta(job_name, "unknown", {}, None, None,
                                          f"{job_file} is unreadable: the storage refused it or it is gone "
                                          "since the listing")
        else:
            scan.jobs[job_name] = job_meta_from_bytes(None if registry is None else texts[registry.path],
                                                      job_file, job_name)
    _finish(scan, job_file)
    return scan


def _match_job_files(job_name: str, entries: list[tuple[str, str, int]], matcher: re.Pattern[str],
                     job_file: str, scan: LayoutScan) -> None:
    """Match a remote job folder's files (rel path, full path, size) against the layout pattern."""
    folders_with_ranks: set[str] = set()
    node_folders: set[str] = set()
    for rel, full, size in entries:
        if rel == f"{job_name}/{job_file}":
            continue
        parts = rel.split("/")
        if len(parts) > 2:
            node_folders.add("/".join(parts[:2]))
        match = _layout_match(rel, job_name, matcher, scan)
        if match is None:
            continue
        folders_with_ranks.update(_folders(rel))
        scan.files.append(RankFile(job_name, match.group("node"), int(match.group("rank")), full, rel, size))
    if not folders_with_ranks:
        scan.issues.append(Issue(job_name, None, "no_rank_files", "job folder holds no rank file"))
        return
    for folder in sorted(node_folders - folders_with_ranks):
        scan.issues.append(Issue(job_name, folder + "/", "no_rank_files", "node folder holds no rank file"))


def _layout_match(rel: str, job_name: str, matcher: re.Pattern[str], scan: LayoutScan) -> re.Match[str] | None:
    """The layout pattern's match of a job folder's file, or None with an ``outside_layout`` issue
    (no match, or a job_id other than its folder's)."""
    match = matcher.match(rel)
    if not match:
        scan.issues.append(Issue(job_name, rel, "outside_layout",
                                 f"path does not match the layout pattern {matcher.pattern!r}"))
        return None
    if match.group("job_id") != job_name:
        scan.issues.append(Issue(job_name, rel, "outside_layout",
                                 f"pattern gives job_id {match.group('job_id')!r} inside folder {job_name!r}"))
        return None
    return match


def _scan_job_dir(root: Path, job_dir: Path, matcher: re.Pattern[str], job_file: str, scan: LayoutScan) -> None:
    job_name = job_dir.name
    found_rank_file = False
    folders_with_ranks: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(job_dir):
        hidden = [d for d in dirnames if d.startswith(("_", "."))]
        scan.skipped_hidden += len(hidden)
        dirnames[:] = sorted(d for d in dirnames if d not in hidden)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if rel == f"{job_name}/{job_file}":
                continue
            if name.startswith(("_", ".")):
                scan.skipped_hidden += 1
                continue
            match = _layout_match(rel, job_name, matcher, scan)
            if match is None:
                continue
            try:
                size = full.stat().st_size
            except OSError as exc:
                scan.issues.append(Issue(job_name, rel, "unreadable_file", str(exc)))
                continue
            found_rank_file = True
            folders_with_ranks.update(_folders(rel))
            scan.files.append(RankFile(job_name, match.group("node"), int(match.group("rank")),
                                       str(full.resolve()), rel, size))
    if not found_rank_file:
        scan.issues.append(Issue(job_name, None, "no_rank_files", "job folder holds no rank file"))
        return
    # a node folder without any rank file: that node's logs are missing (said, not skipped silently)
    for entry in sorted(os.scandir(job_dir), key=lambda e: e.name):
        rel = f"{job_name}/{entry.name}"
        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(("_", ".")) \
                and rel not in folders_with_ranks:
            scan.issues.append(Issue(job_name, rel + "/", "no_rank_files", "node folder holds no rank file"))


def _folders(rel_path: str) -> list[str]:
    """The folders a relative path lies in: "j/n/r.log" -> ["j", "j/n"]."""
    parts = rel_path.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _flag_duplicate_ranks(scan: LayoutScan) -> None:
    seen: dict[tuple[str, int], str] = {}
    for rank_file in sorted(scan.files, key=lambda f: f.rel_path):
        key = (rank_file.job_id, rank_file.rank)
        if key in seen:
            scan.issues.append(Issue(rank_file.job_id, rank_file.rel_path, "duplicate_rank",
                                     f"rank {rank_file.rank} also in {seen[key]}; both are parsed"))
        else:
            seen[key] = rank_file.rel_path


def read_job_meta(path: Path, job_id: str) -> JobMeta:
    """Read and validate one job.json; problems give ``status='unknown'`` and an ``error``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = None
    except OSError as exc:
        return JobMeta(job_id, "unknown", {}, None, None, f"{path.name} is unreadable: {exc}")
    return job_meta_from_bytes(data, path.name, job_id)


def job_meta_from_bytes(data: bytes | None, name: str, job_id: str) -> JobMeta:
    """Validate the bytes of one job.json (None: the file is missing)."""
    if data is None:
        return JobMeta(job_id, "unknown", {}, None, None, f"{name} is missing")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return JobMeta(job_id, "unknown", {}, None, None, f"{name} is unreadable: {exc}")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return JobMeta(job_id, "unknown", {}, None, None, f"{name} is not JSON: {exc}")
    problems = validate_job_meta(raw, job_id)
    if problems:
        settings = raw.get("settings") if isinstance(raw, dict) and isinstance(raw.get("settings"), dict) else {}
        return JobMeta(job_id, "unknown", settings, None, None, f"{name}: " + "; ".join(problems))
    return JobMeta(job_id, raw["status"].strip().lower(), raw["settings"], raw.get("start_time"), raw.get("end_time"))


def validate_job_meta(raw: Any, job_id: str) -> list[str]:
    """Problems with a decoded job.json, each saying what was expected and what was found."""
    if not isinstance(raw, dict):
        return [f"expected a JSON object, found {type(raw).__name__}"]
    problems = []
    if raw.get("job_id") != job_id:
        problems.append(f"job_id {raw.get('job_id')!r} does not match its folder {job_id!r}")
    status = raw.get("status")
    if not isinstance(status, str) or not status.strip():
        problems.append(f"status must be a non-empty string, found {status!r}")
    if not isinstance(raw.get("settings"), dict):
        problems.append(f"settings must be an object, found {type(raw.get('settings')).__name__}")
    for key in ("start_time", "end_time"):
        value = raw.get(key)
        if value is None:
            if key == "start_time":
                problems.append("start_time is missing")
            continue
        if not isinstance(value, str) or _parse_iso(value) is None:
            problems.append(f"{key} must be an ISO 8601 time, found {value!r}")
    return problems


def _parse_iso(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
