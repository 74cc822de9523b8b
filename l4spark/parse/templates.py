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

Display text (``EventTemplate.template``, what the ``templates`` table stores): with
``structure.fold_digits`` the masked messages have every digit folded to 0, so Drain's template
would show false digits (``jk0_init()`` for ``jk2_init()``). Grouping and ids stay on the folded
text; the template shown is rebuilt from the *originals* (the same masking on the line's real
text, ``observe``): a template token with digits shows the real digits of every original seen
for the event where they agree, and ``<*>`` for a digit run where they differ or where no
original was seen (a store saved before display text existed). It never shows a digit that no
line had. A store over unfolded messages (``digits_folded=False``) shows Drain's template.

Messages are fed to Drain in the order given; callers pass them in first-occurrence order
(job, file, line), which makes a run equivalent to sequential Drain over the lines, with one
difference: an exact repeat of a known masked message always gets its event back, where
sequential Drain may open a new cluster for it when the message is mostly wildcards (Drain
does not count <*> tokens as similar). Loghub-2k HDFS has one such pair.
"""

from __future__ import annotations

import hashlib
import re
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


_DIGIT_RUN = re.compile(r"[0-9]+")
WILDCARD = "<*>"


class TemplateStore:
    def __init__(self, conf: DrainConfig, digits_folded: bool = True) -> None:
        self.conf = conf
        self.digits_folded = digits_folded
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
        # cluster id -> per template token: the original token seen (digit runs that differed
        # between originals as <*>), None where no original was seen yet
        self._display: dict[int, list[str | None]] = {}

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

    def observe(self, originals: Iterable[tuple[str, str]]) -> None:
        """Record (masked message, original) pairs for the display text: the original is the
        masking of the line's real message (digits not folded). Pairs whose masked message is
        not in the store, or whose original does not fold to it token for token, are ignored."""
        if not self.digits_folded:
            return
        by_id = {event_id: cluster_id for cluster_id, event_id in self._event_of_cluster.items()}
        for masked, original in originals:
            event_id = self._by_masked.get(masked)
            if event_id is None:
                continue
            cluster_id = by_id[event_id]
            masked_tokens = self._drain.get_content_as_tokens(masked)
            tokens = self._drain.get_content_as_tokens(original)
            if len(tokens) != len(masked_tokens) or any(
                    _folded(o) != m for o, m in zip(tokens, masked_tokens)):
                continue
            seen = self._display.setdefault(cluster_id, [None] * len(tokens))
            if len(seen) != len(tokens):
                continue
            self._display[cluster_id] = [_merged_token(old, new) for old, new in zip(seen, tokens)]

    def display_template(self, cluster: LogCluster) -> str:
        """The template of ``cluster`` as shown: Drain's tokens, digits from the originals."""
        tokens = list(cluster.log_template_tokens)
        if not self.digits_folded:
            return " ".join(tokens)
        seen = self._display.get(cluster.cluster_id)
        if seen is None or len(seen) != len(tokens):
            seen = [None] * len(tokens)
        return " ".join(_shown_token(token, original) for token, original in zip(tokens, seen))

    def templates(self) -> list[EventTemplate]:
        """Every event of the store, in creation order, with its display text."""
        return [
            EventTemplate(self._event_of_cluster[c.cluster_id], self.display_template(c), c.size)
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
                    "display": self._display.get(c.cluster_id),
                }
                for c in clusters
            ],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], masked_map: Mapping[str, str], conf: DrainConfig,
                   digits_folded: bool = True) -> "TemplateStore":
        """Rebuild a store saved by ``to_state``; refuses a state made with other Drain settings
        (ids would silently change meaning). A state saved before display text existed (no
        ``display``) loads with the same ids; its templates show <*> for folded digits until
        lines of the event are parsed again."""
        if state.get("format") != STATE_FORMAT:
            raise TemplateStoreError(f"template store format {state.get('format')!r} is not {STATE_FORMAT}")
        store = cls(conf, digits_folded)
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
            if item.get("display") is not None:
                store._display[cluster.cluster_id] = list(item["display"])
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


def _folded(token: str) -> str:
    return _DIGIT_RUN.sub(lambda m: "0" * len(m.group()), token)


def _merged_token(seen: str | None, token: str) -> str:
    """Two originals of one folded token: digit runs that agree stay, others become <*>."""
    if seen is None or seen == token:
        return token
    seen_parts, parts = _split_digit_runs(seen), _split_digit_runs(token)
    if len(seen_parts) != len(parts):
        return _DIGIT_RUN.sub(WILDCARD, token)
    return "".join(a if a == b or not b[:1].isdigit() else WILDCARD for a, b in zip(seen_parts, parts))


def _split_digit_runs(token: str) -> list[str]:
    """``token`` cut into digit runs, text between them and earlier <*> (kept as one piece)."""
    return [piece for piece in re.split(r"([0-9]+|<\*>)", token) if piece]


def _shown_token(token: str, original: str | None) -> str:
    """A template token as shown: unchanged without digits; else the original if it fits the
    token (same text, digit runs where the token has them), else every digit run as <*>."""
    if token == WILDCARD or not _DIGIT_RUN.search(token):
        return token
    if original is not None and _fits(original, token):
        return original
    return _DIGIT_RUN.sub(WILDCARD, token)


def _fits(original: str, token: str) -> bool:
    pattern = "".join("0+" if piece == WILDCARD else re.escape(_folded(piece))
                      for piece in _split_digit_runs(original))
    return re.fullmatch(pattern, token) is not None
