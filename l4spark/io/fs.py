"""Where a path lives: local paths keep plain file I/O; any other URI goes through Spark's readers.

A logs root or warehouse is *local* when it is a plain path or a ``file:`` URI: the driver lists it
with ``os.scandir``, tasks ``open()`` rank files, small files are replaced with ``os.replace``
(today's fast path, unchanged). Anything else (``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``)
is *remote* and reached only through the DataFrame API, so the same code runs under spark-submit
and Spark Connect, and Hadoop's file system of the cluster (its configuration, credentials,
connectors) does the I/O:

- listing: the ``binaryFile`` source's file index (``inputFiles``: names, no Spark job), with a
  scan of its ``path`` and ``length`` columns where sizes are needed; Hadoop's listing leaves out
  names starting with ``_`` or ``.``, as the local walk does;
- bytes: the ``binaryFile`` source with ``content`` (raw bytes, no decompression: a damaged .gz
  reaches the reader as it is on storage) over the files' folders, the listing filtered to the
  files asked for (no lookup per file); a file the storage refuses gives no row
  (``binary_files``, ``refused_path``);
- small documents (template store, normal-pool state): write-once *versions*, each a one-row
  Parquet folder written by Spark (``<name>-<NNNNNN>/``); the current version is the highest one
  whose folder holds a data file. No rename is needed to make a version current, so this is
  atomic on object stores too (a Parquet part file becomes visible whole, once).

Deleting (superseded versions, released lock claims, partition folders a job no longer has) is
the one thing the DataFrame API cannot do: ``delete_paths`` calls Hadoop's FileSystem of the
session through classic Spark's JVM gateway, and over Spark Connect deletes nothing (a log line
says what stays; docs/deploy.md, Storage).
"""

from __future__ import annotations

import functools
import logging
import operator
import os
import re
import string
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:  # pure callers (the layout, the reader) import this module without pyspark
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_VERSION = re.compile(r"^(?P<name>.+)-(?P<version>\d{6})$")
# Spark's error for a file its scan could not read; the path is URL-encoded (a space is %20)
_READ_FAILED = re.compile(r"\[FAILED_READ_FILE\.\w+\] Encountered error while reading file (?P<path>\S+?)\.?\s")


@dataclass(frozen=True)
class RemoteFile:
    path: str          # fully qualified, as Hadoop names it (and as tasks read it back)
    size: int | None   # None: listed without sizes
    content: bytes | None = None  # its bytes, for the files of the name ``list_root`` was asked to read


def is_local(uri: str | Path) -> bool:
    """True for a plain path or a ``file:`` URI."""
    text = str(uri)
    return not _SCHEME.match(text) or text.startswith("file:")


def local_path(uri: str | Path) -> Path:
    """The local path of a plain path or ``file:`` URI."""
    text = str(uri)
    return Path(urlparse(text).path) if text.startswith("file:") else Path(text)


def child(base: str | Path, *parts: str) -> str:
    """``base`` joined with ``parts``: an absolute local path, or the URI with ``/`` between."""
    if is_local(base):
        return str(local_path(base).resolve().joinpath(*parts))
    return "/".join([str(base).rstrip("/"), *parts])


def relative(path: str, root: str) -> str:
    """``path`` (a qualified URI from a listing) relative to ``root`` (a URI), by their paths."""
    root_path = urlparse(root).path.rstrip("/") + "/"
    return urlparse(path).path[len(root_path):] if urlparse(path).path.startswith(root_path) else path


def is_missing_error(exc: Exception) -> bool:
    """True when ``exc`` (of classic Spark or Connect) says a path does not exist."""
    text = str(exc)
    return "PATH_NOT_FOUND" in text or "does not exist" in text or "FileNotFoundException" in text


# What Spark counts a remote file's open as, in bytes, when it packs files into scan tasks
REMOTE_OPEN_COST_BYTES = 8192


def remote_scan_settings(spark: "SparkSession") -> dict[str, str]:
    """Session settings for scans of many small remote files (rank files, ``job.json``): at
    least two tasks per core, files packed by their bytes, and listings of many folders in as
    many tasks, not one per folder.

    - ``spark.sql.files.openCostInBytes``: Spark counts each file 4 MB more than its size by
      default, which for files of tens of KB makes tasks of equal file counts, not bytes, and
      many of them. Opening an HDFS file costs a NameNode call, about what reading
      ``REMOTE_OPEN_COST_BYTES`` does (on S3 a GET costs more). ``spark.sql.files.minPartitionNum``:
      two tasks per core at least.
    - ``spark.sql.sources.parallelPartitionDiscovery.parallelism``: above 32 paths
      (``...threshold``) Spark lists folders in a Spark job of one task per folder (up to 10,000),
      so a listing of 48 job folders was a job of 48 tasks of a few milliseconds each; two per
      core list them as fast (each task lists its folders one after the other).

    Set around the queries (``io.frames.session_settings``), from one thread: Spark reads them
    when a query is planned and run."""
    tasks = str(2 * parallelism(spark))
    return {"spark.sql.files.openCostInBytes": str(REMOTE_OPEN_COST_BYTES),
            "spark.sql.files.minPartitionNum": tasks,
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": tasks}


def parallelism(spark: "SparkSession") -> int:
    """The session's task slots: ``spark.default.parallelism``, else a local master's thread
    count, else this machine's cores."""
    value = spark.conf.get("spark.default.parallelism", None)
    if value:
        return int(value)
    master = spark.conf.get("spark.master", "local[*]")
    if master.startswith("local["):
        inner = master[len("local["):].rstrip("]").split(",")[0]
        return int(inner) if inner.isdigit() else (os.cpu_count() or 1)
    return os.cpu_count() or 1


@dataclass(frozen=True)
class RootListing:
    """One listing of a remote root (``list_root``), kept for later reads of its files: on classic
    Spark, the ``binaryFile`` relation over the root whose file index holds that listing. A later
    read of some of those files plans from that index (``binary_files(..., listing=)``) instead of
    listing their folders again: on HDFS such a listing is a Spark job (0.3-0.7 s for the storage
    bench's 48 job folders, docs/capacity.md, session 19). Over Spark Connect the client holds
    only a plan, which the server resolves again to run a query (a listing of the whole root):
    ``relation`` is None there and reads list their files' folders. The driver's JVM holds the
    index (every file's status) while the listing is referenced."""
    relation: "DataFrame | None"
    uris: tuple[str, ...]  # every file of the index, as Spark's file index names it (URIs: a space is %20)


def list_files(spark: "SparkSession", root: str, sizes: bool = False) -> list[RemoteFile] | None:
    """Every file under ``root`` (recursively, hidden names left out), or None when ``root`` does
    not exist. ``sizes``: with each file's size in bytes (a Spark job over the file statuses);
    without, the names come from the file index alone (``inputFiles``: a listing, no job), which
    is all that existence checks, versions and lock claims need."""
    try:
        files = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(root)
        every = files.inputFiles()
        rows = files.select("path", "length").collect() if sizes else []
    except Exception as exc:  # AnalysisException of classic Spark and of Connect alike
        if is_missing_error(exc):
            return None
        raise
    return _remote_files(every, rows, sizes)


def list_root(spark: "SparkSession", root: str, read_named: str) -> tuple[list[RemoteFile], RootListing] | None:
    """``list_files(spark, root, sizes=True)`` with each file's bytes (``content``) for the non-empty
    files named ``read_named`` (each job folder's ``job.json``), and the listing kept for later
    reads of the root's files (``RootListing``); None when ``root`` does not exist.

    The named files are read in the same Spark job as the sizes, from the same listing: a second
    read of such files by name lists their folders again (a listing job over the job folders, then
    the read: on the storage bench 0.8 s of a 1.3 s layout scan on HDFS). A file gone since the
    listing or one the scan skips as unreadable (an S3 object archived to Glacier) gets no
    content; when HDFS refuses one in a way that fails the scan (``refused_path``), the sizes are
    collected alone and no file gets a content. The caller reads what it lacks with
    ``read_files``, which leaves the refused file out."""
    try:  # as ``binary_files`` reads: a refused or gone file gives no row
        files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                 .option("ignoreCorruptFiles", "true").option("ignoreMissingFiles", "true").load(root))
        every = files.inputFiles()
        rows = _statuses(files, read_named)
    except Exception as exc:  # AnalysisException of classic Spark and of Connect alike
        if is_missing_error(exc):
            return None
        raise
    classic = getattr(spark, "_jsparkSession", None) is not None
    return _remote_files(every, rows, True), RootListing(files if classic else None, tuple(every))


def _remote_files(every: list[str], rows: list, sizes: bool) -> list[RemoteFile]:
    """The listed files: ``every`` (the file index's URIs) with the scan's ``rows`` (``path``,
    ``length``, maybe ``content``)."""
    # a scan leaves empty files out; the file index (inputFiles) has them: they are 0 bytes long
    measured = {urlparse(row.path).path: int(row.length) for row in rows}
    contents = {urlparse(row.path).path: bytes(row.content) for row in rows
                if getattr(row, "content", None) is not None}
    every = [unquote(path) for path in every]  # inputFiles gives URIs (a space is %20), the scan plain paths
    listed = {urlparse(path).path: path for path in every}
    listed.update({urlparse(row.path).path: row.path for row in rows})
    return sorted((RemoteFile(path, measured.get(key, 0) if sizes else None, contents.get(key))
                   for key, path in listed.items()), key=lambda f: f.path)


def _statuses(files: "DataFrame", read_named: str) -> list:
    """Rows (``path``, ``length``, ``content``) of the listed ``files``: content for the files
    named ``read_named`` only (a second scan of the same listing, unioned: one Spark job, and the
    other files are never opened), None for the rest; without any content when the storage
    refuses one of those files."""
    from pyspark.sql import functions as F

    sized = files.select("path", "length", F.lit(None).cast("binary").alias("content"))
    named = files.where(F.col("_metadata.file_name") == read_named).select("path", "length", "content")
    try:
        return sized.unionByName(named).collect()
    except Exception as exc:  # noqa: BLE001 -- only a refused file falls back, all else raises
        if not _refused_file(exc):
            raise
        return sized.collect()


def binary_files(spark: "SparkSession", paths: list[str], folders: list[str] | None = None,
                 tags: list[str] | None = None, listing: RootListing | None = None) -> "DataFrame | None":
    """Spark's ``binaryFile`` source over the listed files ``paths`` (``path``, ``length``,
    ``content``...) plus ``tag``, each path's string of ``tags`` (default: the path as given),
    or None when none of them is left.

    Spark lists ``folders`` (default: the folders holding ``paths``; a reader of rank files gives
    their job folders), or, given the ``listing`` of a root that holds them (``list_root``, classic
    Spark), takes that listing's files under ``folders`` without listing again (a filter on each
    file's folder that Spark applies to the listing, as the name filter below). Two filters keep
    the files of ``paths``, and neither grows with their number in what Spark ships to each task:

    - ``_metadata.file_name`` among the paths' file names, a filter Spark applies to the listing
      before it plans tasks or opens a file (a stray 3 GB core dump beside the rank files is never
      read). Rank files repeat their names across jobs (``rank-0.log``...), so this is about as
      many names as the largest job has ranks, whatever the fleet's size. The listed files of
      such a name that are not in ``paths`` (a file the storage refused in an earlier read, an
      empty one) are left out by path in the same filter: as many as there are such files;
    - an inner join with a table of the paths and tags (broadcast), which keeps exactly the
      listed files and brings each one's tag to its row.

    Keeping the files by ``_metadata.file_path IN (every path)`` instead put every path into the
    plan that each stage's tasks deserialize (about 68 bytes a path: Spark's "large task binary"
    warning beyond about 15,000 files), and loading the files by name costs an existence check per
    path and, above 32 paths, a listing job with one task per path
    (``spark.sql.sources.parallelPartitionDiscovery``).

    A file that the storage refuses to hand over (an S3 object archived to Glacier or denied by a
    policy, an HDFS file whose blocks are lost) or that is gone since the listing gives no row
    instead of failing the query: the scan skips it (``ignoreCorruptFiles``,
    ``ignoreMissingFiles``), a file gone before the query is not listed, and a folder gone before
    the query is planned (PATH_NOT_FOUND) is left out here. Callers tell a refused file by its
    missing row."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from l4spark.io.frames import local_frame

    wanted = {uri_string(path): tag for path, tag in zip(paths, tags if tags is not None else paths)}
    # Spark's file_name is the decoded last segment (Path.getName); the encoded one is kept too
    names = sorted({name.rsplit("/", 1)[-1] for path in paths for name in (path, uri_string(path))})
    folders = sorted(set(folders if folders is not None else (path.rsplit("/", 1)[0] for path in paths)))
    if not wanted:
        return None
    if listing is not None and listing.relation is not None:
        files, listed = _listed_by_name(listing, folders, names)
    else:
        files = _scan_by_name(spark, folders, names)
        listed = files.inputFiles() if files is not None else []
    if files is None:
        return None
    # a file of such a name that was not asked for (one the storage refused in an earlier read, an
    # empty one) must not be opened either: the listing (no second one) names them
    unasked = sorted(uri for uri in listed if uri not in wanted and unquote(uri.rsplit("/", 1)[-1]) in names)
    if unasked:
        files = files.where(~F.col("_metadata.file_path").isin(unasked))
    schema = T.StructType([T.StructField("_wanted_uri", T.StringType()), T.StructField("tag", T.StringType())])
    # a checkpointed table when large: a local relation under a Python stage rides in every task
    listed = local_frame(spark, list(wanted.items()), schema)
    return (files.withColumn("_wanted_uri", F.col("_metadata.file_path"))
            .join(F.broadcast(listed), on="_wanted_uri", how="inner").drop("_wanted_uri"))


def _listed_by_name(listing: RootListing, folders: list[str], names: list[str]) -> tuple["DataFrame", list[str]]:
    """The ``binaryFile`` scan of the files named one of ``names`` under ``folders`` (each under
    the listed root), from the ``listing``'s file index: its relation filtered by each file's
    folder (the file path cut after as many ``/`` as the folder has, plus one) and name, filters
    Spark applies to the index before it plans tasks; and the index's files under ``folders``."""
    from pyspark.sql import functions as F

    by_depth: dict[int, set[str]] = {}
    for folder in folders:
        uri = uri_string(folder.rstrip("/"))
        by_depth.setdefault(uri.count("/") + 1, set()).add(uri)
    path = F.col("_metadata.file_path")
    under = functools.reduce(operator.or_, (F.substring_index(path, "/", depth).isin(sorted(group))
                                            for depth, group in sorted(by_depth.items())))
    files = listing.relation.where(under & F.col("_metadata.file_name").isin(names))
    listed = [uri for uri in listing.uris
              if any("/".join(uri.split("/")[:depth]) in group for depth, group in by_depth.items())]
    return files, listed


def _scan_by_name(spark: "SparkSession", folders: list[str], names: list[str]) -> "DataFrame | None":
    """The ``binaryFile`` scan of the files named one of ``names`` under ``folders``, leaving out
    the folders gone before planning; None when all are gone."""
    from pyspark.sql import functions as F

    remaining = list(folders)
    while remaining:
        try:
            files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                     .option("ignoreCorruptFiles", "true").option("ignoreMissingFiles", "true").load(remaining)
                     .where(F.col("_metadata.file_name").isin(names)))
            files.schema  # plan it now: Spark Connect plans lazily, and the path check is part of planning
            return files
        except Exception as exc:  # AnalysisException of classic Spark and of Connect alike
            gone = _gone_path(exc, remaining)
            if gone is None:
                raise
            remaining.remove(gone)
    return None


# java.net.URI's characters that stay as they are in a path (RFC 2396 pchar, ";" and "/")
_URI_PATH_KEEP = frozenset(string.ascii_letters + string.digits + "-_.!~*'()" + ":@&=+$," + ";/")


def uri_string(path: str) -> str:
    """``path`` (a qualified path as Hadoop lists it, e.g. ``hdfs://nn:8020/logs/job a/rank-0.log``)
    written as Hadoop's ``Path.toUri().toString()`` writes it, which is the form of Spark's
    ``_metadata.file_path`` and of ``inputFiles()``: java.net.URI escapes (as UTF-8, %XX) the ASCII
    characters a URI path may not hold, a space among them, and non-ASCII space and control
    characters; other non-ASCII characters stay as they are."""
    # split by hand: urlparse would take "#" and "?" for a fragment and a query, and drop tabs
    scheme, _, rest = path.partition("://")
    authority, slash, rest = rest.partition("/")
    out = []
    for char in slash + rest:
        if (char in _URI_PATH_KEEP if ord(char) < 0x80 else
                not (unicodedata.category(char) in ("Zs", "Zl", "Zp") or ord(char) <= 0x9F)):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return f"{scheme}://{authority}{''.join(out)}"


def _gone_path(exc: Exception, paths: list[str]) -> str | None:
    """The path of ``paths`` that a PATH_NOT_FOUND error names, or None."""
    named = getattr(exc, "getMessageParameters", lambda: None)() or {}
    if "PATH_NOT_FOUND" not in str(exc) or "path" not in named:
        return None
    by_path = {urlparse(path).path: path for path in paths}
    return by_path.get(urlparse(named["path"]).path)


def refused_path(error: Exception, paths: list[str]) -> str | None:
    """The path of ``paths`` that failed a Spark query because HDFS refused it (a
    FAILED_READ_FILE error naming it, caused by a BlockMissingException or an
    AccessControlException), or None for any other error. ``binary_files`` skips other
    unreadable files, but Spark's scan fails on these two: the caller reads again without it."""
    named = _refused_file(error)
    return None if named is None else next((path for path in paths if urlparse(path).path == named), None)


def _refused_file(error: Exception) -> str | None:
    """The path (decoded, no scheme) of the file whose refusal by HDFS failed a Spark query
    (``refused_path``), or None."""
    text = str(error)
    match = _READ_FAILED.search(text)
    if match is None or not any(name in text for name in ("BlockMissingException", "AccessControlException")):
        return None
    return urlparse(unquote(match.group("path"))).path


def read_files(spark: "SparkSession", paths: list[str]) -> dict[str, bytes]:
    """The bytes of the small files ``paths``, by path as given. A file the storage refuses (or
    one gone since it was listed) is left out, not an error: the caller says what is missing."""
    remaining = list(paths)
    while True:
        files = binary_files(spark, remaining)
        if files is None:
            return {}
        try:
            rows = files.select("tag", "content").collect()
            break
        except Exception as exc:  # noqa: BLE001 -- only a refused file is left out, all else raises
            refused = refused_path(exc, remaining)
            if refused is None:
                raise
            remaining.remove(refused)
    return {row.tag: bytes(row.content) for row in rows}


def versions(spark: "SparkSession", folder: str, name: str) -> list[int]:
    """The complete versions of document ``name`` under ``folder``, ascending."""
    return listed_versions(spark, folder).get(name, [])


def listed_versions(spark: "SparkSession", folder: str) -> dict[str, list[int]]:
    """Every document under ``folder`` with its complete versions, ascending (one listing)."""
    found: dict[str, set[int]] = {}
    for remote in list_files(spark, folder) or []:
        parent = relative(remote.path, folder).split("/")[0]
        match = _VERSION.match(parent)
        if match:
            found.setdefault(match.group("name"), set()).add(int(match.group("version")))
    return {name: sorted(numbers) for name, numbers in found.items()}


def prune_versions(spark: "SparkSession", folder: str, names: tuple[str, ...], written: int, keep: int) -> int:
    """Delete the versions of documents ``names`` under ``folder`` older than the ``keep`` newest,
    counted back from ``written`` (the version just written), and only once a listing shows
    ``written`` of ``names[0]`` (the document whose presence makes a version current): readers
    never lose the current version or the ``keep - 1`` before it. Returns how many folders were
    deleted (0 over Spark Connect: ``delete_paths``)."""
    listed = listed_versions(spark, folder)
    if written not in listed.get(names[0], []):
        log.warning("version %06d of %s is not listed under %s yet: older versions are kept", written, names[0], folder)
        return 0
    old = [version_folder(folder, name, version) for name in names
           for version in listed.get(name, []) if version <= written - keep]
    return len(old) if old and delete_paths(spark, old, f"superseded versions of {'/'.join(names)}") else 0


def delete_paths(spark: "SparkSession", paths: list[str], what: str) -> bool:
    """Delete ``paths`` (files, or folders with all they hold) on their Hadoop file system, in the
    order given; True when done. Classic Spark only: the DataFrame API has no delete, so this goes
    through the JVM gateway to Hadoop's ``FileSystem`` with the session's Hadoop configuration (the
    cluster's, plus any ``fs.*`` session settings such as s3a credentials). Over Spark Connect
    there is no gateway: nothing is deleted, a log line says what stays, and False is returned. A
    path already gone is not an error (another run may have deleted it first). A delete that fails
    stops the rest (callers order paths so that what is left stays consistent), is logged as a
    warning and gives False: leftovers are housekeeping, never a reason to fail a run."""
    if not paths:
        return True
    session = getattr(spark, "_jsparkSession", None)
    if session is None:
        log.info("Spark Connect: %d %s stay on storage (deleting needs classic Spark: docs/deploy.md, Storage)",
                 len(paths), what)
        return False
    hadoop_path = spark._jvm.org.apache.hadoop.fs.Path
    conf = session.sessionState().newHadoopConf()
    for done, path in enumerate(paths):
        try:
            target = hadoop_path(path)
            target.getFileSystem(conf).delete(target, True)
        except Exception as exc:  # noqa: BLE001 -- py4j's error of any Hadoop IOException; logged, see above
            log.warning("could not delete %s (%d of %d %s left): %s", path, len(paths) - done, len(paths), what,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return False
    log.debug("deleted %d %s", len(paths), what)
    return True


def version_folder(folder: str, name: str, version: int) -> str:
    """The folder of version ``version`` of document ``name`` under ``folder`` (``_VERSION``'s form)."""
    return f"{folder.rstrip('/')}/{name}-{version:06d}"


def write_version(spark: "SparkSession", folder: str, name: str, version: int, payload: bytes) -> str:
    """Write ``payload`` as version ``version`` of document ``name`` (a new folder; never replaced)."""
    from pyspark.sql import types as T

    target = version_folder(folder, name, version)
    frame = spark.createDataFrame([(bytearray(payload),)], T.StructType([T.StructField("content", T.BinaryType())]))
    write_once(frame, target)
    return target


def write_once(frame: "DataFrame", target: str) -> None:
    """``frame`` as one Parquet file in the new folder ``target`` (a write-once version). Without
    the committer's ``_SUCCESS`` marker: Hadoop's listing hides it, so nothing here reads it (a
    version is complete once its data file is listed), and on HDFS each file costs a wait at its
    close (docs/deploy.md, "HDFS makes every file's writer wait"). The mode is spelt ``error``:
    PySpark 4.2's Connect client refuses its alias ``errorifexists`` (UNSUPPORTED_OPERATION)."""
    (frame.coalesce(1).write.mode("error")
     .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false").parquet(target))


def read_version(spark: "SparkSession", folder: str, name: str, version: int) -> bytes:
    rows = spark.read.parquet(version_folder(folder, name, version)).select("content").collect()
    return bytes(rows[0].content)


def read_latest(spark: "SparkSession", folder: str, name: str) -> bytes | None:
    """The newest complete version of document ``name``, or None when there is none."""
    found = versions(spark, folder, name)
    return read_version(spark, folder, name, found[-1]) if found else None
