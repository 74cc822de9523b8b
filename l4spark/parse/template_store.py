"""The template store on the warehouse: masked message -> event id, plus the Drain state.

Small driver-side state: ``_template_store/state-<n>.json`` (Drain clusters) and
``masked-<n>.parquet`` (masked message -> event id), made current by atomically replacing the
one-line ``CURRENT`` file. A crash before that leaves the previous version in use; the last
``KEEP_STORE_VERSIONS`` versions are kept.

On a remote warehouse (``io.fs``: no rename to rely on, Spark's writers only) each version is two
write-once folders, ``masked-<n>/`` (the mapping, Parquet) then ``state-<n>/`` (the Drain state):
the newest ``state-<n>`` that exists is current, so a crash between the two leaves the previous
version current, as ``CURRENT`` does locally. Once the new ``state-<n>`` is listed, versions
older than the last ``KEEP_STORE_VERSIONS`` are deleted (classic Spark; over Spark Connect they
stay: ``fs.delete_paths``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from l4spark.config import DrainConfig, StorageConfig
from l4spark.errors import TemplateStoreError
from l4spark.killpoints import kill_point
from l4spark.parse.templates import TemplateStore
from l4spark.io import fs
from l4spark.io.storage import atomic_write_bytes

STORE_DIR = "_template_store"
KEEP_STORE_VERSIONS = 3


def load_template_store(storage: StorageConfig, conf: DrainConfig, digits_folded: bool = True,
                        spark=None) -> TemplateStore:
    """The current store of the warehouse, or an empty one for a new warehouse (``spark``: needed
    for a remote warehouse)."""
    if not fs.is_local(storage.warehouse):
        return _load_remote(spark, storage, conf, digits_folded)
    base = fs.local_path(storage.warehouse).resolve() / STORE_DIR
    current = base / "CURRENT"
    if not current.exists():
        return TemplateStore(conf, digits_folded)
    version = current.read_text("utf-8").strip()
    try:
        state = json.loads((base / f"state-{version}.json").read_text("utf-8"))
        masked = pq.read_table(base / f"masked-{version}.parquet")
    except (OSError, ValueError, pa.ArrowInvalid) as exc:
        raise TemplateStoreError(f"template store version {version} under {base} is unreadable: {exc}") from exc
    mapping = dict(zip(masked.column("masked").to_pylist(), masked.column("event_id").to_pylist()))
    return TemplateStore.from_state(state, mapping, conf, digits_folded)


def save_template_store(storage: StorageConfig, store: TemplateStore, spark=None) -> str:
    """Write a new version of the store and make it current atomically; returns the version."""
    if not fs.is_local(storage.warehouse):
        return _save_remote(spark, storage, store)
    base = fs.local_path(storage.warehouse).resolve() / STORE_DIR
    base.mkdir(parents=True, exist_ok=True)
    current = base / "CURRENT"
    previous = int(current.read_text("utf-8").strip()) if current.exists() else 0
    version = f"{previous + 1:06d}"
    atomic_write_bytes(base / f"state-{version}.json", json.dumps(store.to_state(), ensure_ascii=False).encode())
    mapping = store.masked_map()
    table = pa.table({"masked": pa.array(list(mapping), pa.string()),
                      "event_id": pa.array(list(mapping.values()), pa.string())})
    tmp = base / f".masked-{version}.parquet.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, base / f"masked-{version}.parquet")
    atomic_write_bytes(current, version.encode())
    _prune_versions(base, int(version))
    kill_point("after_template_store")
    return version


def _prune_versions(base: Path, newest: int) -> None:
    for path in base.glob("*-[0-9][0-9][0-9][0-9][0-9][0-9].*"):
        number = int(path.name.split("-")[1].split(".")[0])
        if number <= newest - KEEP_STORE_VERSIONS:
            path.unlink()


def _load_remote(spark, storage: StorageConfig, conf: DrainConfig, digits_folded: bool) -> TemplateStore:
    base = fs.child(storage.warehouse, STORE_DIR)
    found = fs.versions(spark, base, "state")
    if not found:
        return TemplateStore(conf, digits_folded)
    version = found[-1]
    try:
        state = json.loads(fs.read_version(spark, base, "state", version).decode("utf-8"))
        masked = spark.read.parquet(f"{base}/masked-{version:06d}").toPandas()
    except Exception as exc:
        raise TemplateStoreError(f"template store version {version:06d} under {base} is unreadable: {exc}") from exc
    mapping = dict(zip(masked["masked"], masked["event_id"]))
    return TemplateStore.from_state(state, mapping, conf, digits_folded)


def _save_remote(spark, storage: StorageConfig, store: TemplateStore) -> str:
    base = fs.child(storage.warehouse, STORE_DIR)
    listed = fs.listed_versions(spark, base)
    version = max(listed.get("state", []) + listed.get("masked", []), default=0) + 1
    mapping = store.masked_map()
    rows = pa.table({"masked": pa.array(list(mapping), pa.string()),
                     "event_id": pa.array(list(mapping.values()), pa.string())}).to_pandas()
    frame = spark.createDataFrame(rows, "masked string, event_id string") if len(rows) else \
        spark.createDataFrame([], "masked string, event_id string")
    fs.write_once(frame, f"{base}/masked-{version:06d}")
    fs.write_version(spark, base, "state", version, json.dumps(store.to_state(), ensure_ascii=False).encode())
    kill_point("after_template_store")
    fs.prune_versions(spark, base, ("state", "masked"), version, KEEP_STORE_VERSIONS)
    return f"{version:06d}"
