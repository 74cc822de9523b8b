"""The template store: Drain over distinct masked messages, stable ids, exact save/restore."""

from __future__ import annotations

import json
import random

import pytest

from l4spark.config import DrainConfig
from l4spark.errors import TemplateStoreError
from l4spark.parse.templates import TemplateStore

MESSAGES = [
    "connection to <IP> lost after <NUM> retries",
    "connection to <IP> lost after <NUM> attempts",
    "saving checkpoint to <PATH>",
    "iteration <NUM>/ <NUM> | lm loss: <NUM> |",
    "NCCL WARN NET/IB : Got completion from peer <IP> with error <NUM>",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<NUM>, OpType=ALLREDUCE)",
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<NUM>, OpType=BROADCAST)",
    "rank0 ready",
    "rank1 ready",
]


def test_known_messages_keep_their_ids_and_similar_ones_join():
    store = TemplateStore(DrainConfig())
    first = store.add(MESSAGES)
    assert first["rank0 ready"] == first["rank1 ready"]
    assert first["connection to <IP> lost after <NUM> retries"] == first["connection to <IP> lost after <NUM> attempts"]
    assert len(set(first.values())) == 6
    again = store.add(list(reversed(MESSAGES)))
    assert again == first
    assert all(event_id.startswith("E") and len(event_id) == 13 for event_id in first.values())


def test_ids_do_not_depend_on_store_instance():
    a, b = TemplateStore(DrainConfig()), TemplateStore(DrainConfig())
    assert a.add(MESSAGES) == b.add(MESSAGES)


def test_restore_is_exact_and_continues_identically():
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "<NUM>", "<IP>", "node", "failed", "ok", "retry"]
    stream = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 7))) for _ in range(600)]
    head, tail = stream[:300], stream[300:]

    continuous = TemplateStore(DrainConfig())
    continuous.add(head)
    state = json.loads(json.dumps(continuous.to_state()))  # through plain JSON
    restored = TemplateStore.from_state(state, continuous.masked_map(), DrainConfig())
    assert restored.to_state() == continuous.to_state()

    assert restored.add(tail) == continuous.add(tail)
    assert restored.to_state() == continuous.to_state()


def test_restore_refuses_other_drain_settings():
    store = TemplateStore(DrainConfig())
    store.add(MESSAGES)
    with pytest.raises(TemplateStoreError, match="Drain settings"):
        TemplateStore.from_state(store.to_state(), store.masked_map(), DrainConfig(sim_th=0.7))
    with pytest.raises(TemplateStoreError, match="format"):
        TemplateStore.from_state({**store.to_state(), "format": 99}, {}, DrainConfig())


# ---- display text: the digits of the lines, never folded ones --------------------------------


def test_template_shows_the_real_digits_of_folded_messages():
    store = TemplateStore(DrainConfig())
    folded = "jk0_init() Found child <*> in scoreboard slot <*>"
    store.add([folded])
    store.observe([(folded, "jk2_init() Found child <*> in scoreboard slot <*>")])

    assert [t.template for t in store.templates()] == ["jk2_init() Found child <*> in scoreboard slot <*>"]


def test_digits_that_differ_between_lines_show_as_wildcards():
    store = TemplateStore(DrainConfig())
    folded = "rank0 ready on mlx0_0"
    store.add([folded])
    store.observe([(folded, "rank3 ready on mlx5_0"), (folded, "rank5 ready on mlx5_0")])

    assert [t.template for t in store.templates()] == ["rank<*> ready on mlx5_0"]


def test_a_token_no_line_was_seen_for_shows_no_digit():
    store = TemplateStore(DrainConfig())
    store.add(["workers0.properties loaded"])

    assert [t.template for t in store.templates()] == ["workers<*>.properties loaded"]


def test_a_store_without_display_text_loads_with_its_ids():
    store = TemplateStore(DrainConfig())
    assignment = store.add(["jk0_init() Found child <*>", "rank0 ready"])
    old_state = store.to_state()
    for cluster in old_state["clusters"]:   # what the code before display text saved
        del cluster["display"]

    restored = TemplateStore.from_state(old_state, assignment, DrainConfig())

    assert restored.masked_map() == assignment
    assert [t.template for t in restored.templates()] == ["jk<*>_init() Found child <*>", "rank<*> ready"]
    restored.observe([("rank0 ready", "rank0 ready")])
    assert restored.templates()[1].template == "rank0 ready"


def test_display_text_survives_save_and_restore():
    store = TemplateStore(DrainConfig())
    assignment = store.add(["jk0_init() Found child <*>"])
    store.observe([("jk0_init() Found child <*>", "jk2_init() Found child <*>")])

    restored = TemplateStore.from_state(json.loads(json.dumps(store.to_state())), assignment, DrainConfig())

    assert [t.template for t in restored.templates()] == ["jk2_init() Found child <*>"]


def test_unfolded_store_shows_drain_template():
    store = TemplateStore(DrainConfig(), digits_folded=False)
    store.add(["jk2_init() Found child <*>"])

    assert [t.template for t in store.templates()] == ["jk2_init() Found child <*>"]
