"""Where a path lives: local paths keep plain file I/O; any other URI goes through Spark's readers.

A logs root or warehouse is *local* when it is a plain path or a ``file:`` URI: the driver lists it
with ``os.scandir``, tasks ``open()`` rank files, small files are replaced with ``os.replace``
(today's fast path, unchanged). Anything else (``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``)
is *remote* and reached only through the DataFrame API, so the same code runs under spark-submit
and Spark Connect, and Hadoop's file system of the cluster (its configuration, credentials,
connectors) does the I/O:

- listing: the ``binaryFile`` source without its ``content`` column (``path``, ``length``);
  Hadoop's listing leaves out names starting with ``_`` or ``.``, as the local walk does;
- bytes: the ``binaryFile`` source with ``content`` (raw bytes, no decompression: a damaged .gz
  reaches the reader as it is on storage);
- small documents (template store, normal-pool state): write-once *versions*, each a one-row
  Parquet folder written by Spark (``<name>-<NNNNNN>/``); the current version is the highest one
  whose folder holds a data file. No rename is needed to make a version current, so this is
  atomic on object stores too (a Parquet part file becomes visible whole, once).

Nothing here deletes: a remote warehouse keeps old versions (a few KB to MB each).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:  # pure callers (the layout, the reader) import this module without pyspark
    from pyspark.sql import SparkSession

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_VERSION = re.compile(r"^(?P<name>.+)-(?P<version>\d{6})$")


@dataclass(frozen=True)
class RemoteFile:
    path: str   # fully qualified, as Hadoop names it (and as tasks read it back)
    size: int


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


def _missing(exc: Exception) -> bool:
    text = str(exc)
    return "PATH_NOT_FOUND" in text or "does not exist" in text or "FileNotFoundException" in text


def list_files(spark: "SparkSession", root: str) -> list[RemoteFile] | None:
    """Every file under ``root`` (recursively, hidden names left out), or None when ``root`` does
    not exist."""
    try:
        files = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(root)
        rows = files.select("path", "length").collect()
        every = files.inputFiles()
    except Exception as exc:  # AnalysisException of classic Spark and of Connect alike
        if _missing(exc):
            return None
        raise
    # a scan leaves empty files out; the file index (inputFiles) has them: they are 0 bytes long
    sizes = {urlparse(row.path).path: int(row.length) for row in rows}
    every = [unquote(path) for path in every]  # inputFiles gives URIs (a space is %20), the scan plain paths
    listed = {urlparse(path).path: path for path in every}
    listed.update({urlparse(row.path).path: row.path for row in rows})
    return sorted((RemoteFile(path, sizes.get(key, 0)) for key, path in listed.items()), key=lambda f: f.path)


def read_files(spark: "SparkSession", paths: list[str]) -> dict[str, bytes]:
    """The bytes of the small files ``paths`` (which must exist), by path as given."""
    if not paths:
        return {}
    rows = spark.read.format("binaryFile").load(paths).select("path", "content").collect()
    by_path = {urlparse(row.path).path: bytes(row.content) for row in rows}
    return {path: by_path[urlparse(path).path] for path in paths if urlparse(path).path in by_path}


def versions(spark: "SparkSession", folder: str, name: str) -> list[int]:
    """The complete versions of document ``name`` under ``folder``, ascending."""
    found = set()
    for remote in list_files(spark, folder) or []:
        parent = relative(remote.path, folder).split("/")[0]
        match = _VERSION.match(parent)
        if match and match.group("name") == name:
            found.add(int(match.group("version")))
    return sorted(found)


def write_version(spark: "SparkSession", folder: str, name: str, version: int, payload: bytes) -> str:
    """Write ``payload`` as version ``version`` of document ``name`` (a new folder; never replaced)."""
    from pyspark.sql import types as T

    target = f"{folder.rstrip('/')}/{name}-{version:06d}"
    frame = spark.createDataFrame([(bytearray(payload),)], T.StructType([T.StructField("content", T.BinaryType())]))
    frame.coalesce(1).write.mode("errorifexists").parquet(target)
    return target


def read_version(spark: "SparkSession", folder: str, name: str, version: int) -> bytes:
    rows = spark.read.parquet(f"{folder.rstrip('/')}/{name}-{version:06d}").select("content").collect()
    return bytes(rows[0].content)


def read_latest(spark: "SparkSession", folder: str, name: str) -> bytes | None:
    """The newest complete version of document ``name``, or None when there is none."""
    found = versions(spark, folder, name)
    return read_version(spark, folder, name, found[-1]) if found else None
