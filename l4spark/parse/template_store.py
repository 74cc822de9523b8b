"""The template store on the warehouse: masked message -> event id, plus the Drain state.

Small driver-side state: ``_template_store/state-<n>.json`` (Drain clusters) and
``masked-<n>.parquet`` (masked message -> event id), made current by atomically replacing the
one-line ``CURRENT`` file. A crash before that leaves the previous version in use; the last
``KEEP_STORE_VERSIONS`` versions are kept.

On a remote warehouse (``io.fs``: no rename to rely on, Spark's writers only) each version is one
write-once folder, ``store-<n>/``, holding one Parquet file: a row per masked message (``masked``,
``event_id``) and one row with the Drain state (``state``, its JSON). A Parquet file appears
whole, once, so the newest ``store-<n>`` listed is current and a crash during the write leaves
the previous version current, as ``CURRENT`` does locally. One file, not two: on HDFS every
closed file waits for the NameNode (about 260 ms, docs/deploy.md), and the save lies on the
parse's critical path. Versions written before (two folders, ``masked-<n>/`` then ``state-<n>/``,
the newest ``state-<n>`` current) are still read, and numbered past. Once the new ``store-<n>`` is
listed, versions older than the last ``KEEP_STORE_VERSIONS`` are deleted (classic Spark; over
Spark Connect they stay: ``fs.delete_paths``).
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
    listed = fs.listed_versions(spark, base)
    newest = max(listed.get("store", []), default=0)
    before = max(listed.get("state", []), default=0)  # a version of the two-folder layout
    if not newest and not before:
        return TemplateStore(conf, digits_folded)
    version = max(newest, before)
    try:
        if newest >= before:
            rows = spark.read.parquet(fs.version_folder(base, "store", version)).toPandas()
            is_state = rows["state"].notna()
            state = json.loads(bytes(rows.loc[is_state, "state"].iloc[0]).decode("utf-8"))
            masked = rows[~is_state]
        else:
            state = json.loads(fs.read_version(spark, base, "state", version).decode("utf-8"))
            masked = spark.read.parquet(fs.version_folder(base, "masked", version)).toPandas()
    except Exception as exc:
        raise TemplateStoreError(f"template store version {version:06d} under {base} is unreadable: {exc}") from exc
    mapping = dict(zip(masked["masked"], masked["event_id"]))
    return TemplateStore.from_state(state, mapping, conf, digits_folded)


def _save_remote(spark, storage: StorageConfig, store: TemplateStore) -> str:
    base = fs.child(storage.warehouse, STORE_DIR)
    listed = fs.listed_versions(spark, base)
    version = max((number for numbers in listed.values() for number in numbers), default=0) + 1
    mapping = store.masked_map()
    state = json.dumps(store.to_state(), ensure_ascii=False).encode()
    rows = pa.table({"masked": pa.array([*mapping, None], pa.string()),
                     "event_id": pa.array([*mapping.values(), None], pa.string()),
                     "state": pa.array([None] * len(mapping) + [state], pa.binary())})
    fs.write_once(spark.createDataFrame(rows.to_pandas(), "masked string, event_id string, state binary"),
                  fs.version_folder(base, "store", version))
    kill_point("after_template_store")
    fs.prune_versions(spark, base, ("store", "state", "masked"), version, KEEP_STORE_VERSIONS)
    return f"{version:06d}"
