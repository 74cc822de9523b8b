"""The template store: masked message -> event id, with the Drain state behind it (pure).

Event ids must mean the same thing in every job on every night, so they never depend on the
set of jobs a run happens to see:
- a masked message, once assigned, keeps its event id for good (``_by_masked``);
- a new masked message goes through Drain (drain3's ``Drain``, the algorithm untouched) and
  gets the id of the cluster it joins, or founds a new cluster whose id is a hash of the
  founding message (``E`` + 12 hex digits), so two stores that met the same messages in the
  same order agree byte for byte;
- the Drain state is saved as plain data (each cluster's founding tokens, current template,
  size, creation order) and rebuilt by re-inserting clusters in creation order along their
  founding tokens, which recreates the prefix tree exactly; never pickle.

Messages are fed to Drain in the order given; callers pass them in first-occurrence order
(job, file, line), which makes a run equivalent to sequential Drain over the lines, with one
difference: an exact repeat of a known masked message always gets its event back, where
sequential Drain may open a new cluster for it when the message is mostly wildcards (Drain
does not count <*> tokens as similar). Loghub-2k HDFS has one such pair.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from drain3.drain import Drain, LogCluster

from l4spark.config import DrainConfig
from l4spark.errors import TemplateStoreError

STATE_FORMAT = 1


@dataclass(frozen=True)
class EventTemplate:
    event_id: str
    template: str
    size: int


class TemplateStore:
    def __init__(self, conf: DrainConfig) -> None:
        self.conf = conf
        self._drain = Drain(
            depth=conf.depth,
            sim_th=conf.sim_th,
            max_children=conf.max_children,
            extra_delimiters=tuple(conf.extra_delimiters),
            parametrize_numeric_tokens=conf.parametrize_numeric_tokens,
        )
        self._by_masked: dict[str, str] = {}
        self._event_of_cluster: dict[int, str] = {}
        self._founding: dict[int, tuple[str, ...]] = {}
        self._used_ids: set[str] = set()

    def __len__(self) -> int:
        return len(self._event_of_cluster)

    def event_id(self, masked: str) -> str | None:
        """The event id of a masked message already in the store, else None."""
        return self._by_masked.get(masked)

    def add(self, masked_messages: Iterable[str]) -> dict[str, str]:
        """Assign event ids to ``masked_messages`` (known ones keep theirs); returns them all.

        New clusters are created in the order of the messages; the result maps each input
        message to its event id.
        """
        assigned: dict[str, str] = {}
        for masked in masked_messages:
            known = self._by_masked.get(masked)
            if known is None:
                cluster, change = self._drain.add_log_message(masked)
                if change == "cluster_created":
                    self._register(cluster)
                known = self._event_of_cluster[cluster.cluster_id]
                self._by_masked[masked] = known
            assigned[masked] = known
        return assigned

    def templates(self) -> list[EventTemplate]:
        """Every event of the store, in creation order."""
        return [
            EventTemplate(self._event_of_cluster[c.cluster_id], c.get_template(), c.size)
            for c in sorted(self._drain.clusters, key=lambda c: c.cluster_id)
        ]

    def masked_map(self) -> dict[str, str]:
        return dict(self._by_masked)

    def _register(self, cluster: LogCluster) -> None:
        founding = tuple(cluster.log_template_tokens)
        event_id = _event_id(founding, self._used_ids)
        self._used_ids.add(event_id)
        self._event_of_cluster[cluster.cluster_id] = event_id
        self._founding[cluster.cluster_id] = founding

    # ---- persistence as plain data ----------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """The Drain state as JSON-able data (the masked map is saved apart, it can be large)."""
        clusters = sorted(self._drain.clusters, key=lambda c: c.cluster_id)
        return {
            "format": STATE_FORMAT,
            "drain": {
                "depth": self.conf.depth,
                "sim_th": self.conf.sim_th,
                "max_children": self.conf.max_children,
                "extra_delimiters": list(self.conf.extra_delimiters),
                "parametrize_numeric_tokens": self.conf.parametrize_numeric_tokens,
            },
            "clusters": [
                {
                    "cluster_id": c.cluster_id,
                    "event_id": self._event_of_cluster[c.cluster_id],
                    "founding": list(self._founding[c.cluster_id]),
                    "template": list(c.log_template_tokens),
                    "size": c.size,
                }
                for c in clusters
            ],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], masked_map: Mapping[str, str], conf: DrainConfig) -> "TemplateStore":
        """Rebuild a store saved by ``to_state``; refuses a state made with other Drain settings
        (ids would silently change meaning)."""
        if state.get("format") != STATE_FORMAT:
            raise TemplateStoreError(f"template store format {state.get('format')!r} is not {STATE_FORMAT}")
        store = cls(conf)
        saved = state.get("drain", {})
        current = store.to_state()["drain"]
        if saved != current:
            raise TemplateStoreError(
                f"template store was built with Drain settings {saved}, the config now says {current}; "
                "use a new warehouse (or the old settings) so that event ids keep their meaning")
        drain = store._drain
        for item in sorted(state["clusters"], key=lambda c: c["cluster_id"]):
            cluster = LogCluster(item["founding"], item["cluster_id"])
            drain.id_to_cluster[cluster.cluster_id] = cluster
            drain.add_seq_to_prefix_tree(drain.root_node, cluster)
            cluster.log_template_tokens = tuple(item["template"])
            cluster.size = item["size"]
            drain.clusters_counter = max(drain.clusters_counter, cluster.cluster_id)
            store._event_of_cluster[cluster.cluster_id] = item["event_id"]
            store._founding[cluster.cluster_id] = tuple(item["founding"])
            store._used_ids.add(item["event_id"])
        known = set(store._used_ids)
        for masked, event_id in masked_map.items():
            if event_id not in known:
                raise TemplateStoreError(f"masked message maps to unknown event id {event_id!r}")
            store._by_masked[masked] = event_id
        return store


def _event_id(founding: tuple[str, ...], used: set[str]) -> str:
    digest = hashlib.sha1(" ".join(founding).encode("utf-8")).hexdigest()
    event_id = "E" + digest[:12]
    suffix = 2
    while event_id in used:
        event_id = f"E{digest[:12]}-{suffix}"
        suffix += 1
    return event_id
