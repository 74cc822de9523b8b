"""Property and fuzz tests (hypothesis) of the pure core: reading lines, header peeling,
masking, template matching, settings fingerprints, path parsing. No exception escapes, and the
invariants the Spark path relies on hold for any input."""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from l4spark.config import DrainConfig, load_config
from l4spark.crossjob.fingerprint import DEFAULT_LEVELS, settings_key
from l4spark.parse.layout import RankFile, scan_logs_root
from l4spark.diagnosis.patterns import match_patterns, seed_patterns
from l4spark.parse.reader import ReadLimits, read_lines
from l4spark.parse.templates import TemplateStore
from l4spark.parse.textrules import LineStructurer, Masker, expand_parts, fold_digits

pytestmark = pytest.mark.reliability
CONFIG = load_config()
# the number of examples comes from the profile (tests/conftest.py): 150 in ``make test``, more in ``make fuzz``
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Lines that look like the real thing: wrapper and header pieces glued to random text.
PIECES = ["[default3]:", "gpu-a-017: ", "12: ", "2026-11-20T01:00:01.5Z stdout F ", "2026-11-20T01:00:01Z ",
          "[2026-11-20 01:00:01,123] [WARNING] [x.py:1:f] [Rank 7] ", "[2026-11-20 01:00:03] ",
          "2026-11-20 01:00:00,123 - INFO - ", "host:12:34 [0] NCCL WARN ", "[W1103 20:03:33.871 a.cpp:41] ",
          "[ERROR] HCCL(12,python):2024-05-01-12:00:00.123.456 [f.cc:1]", "Nov 21 09:12:13 gpu-017 kernel: ",
          "/a/b.py:4: UserWarning: ", "iteration 10/ 100 | loss 0.5 |", "10.0.0.1:29500", "0x7f3a", " ", ":"]
lines = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=30)), max_size=6).map("".join).filter(
    lambda s: "\n" not in s and "\r" not in s)


@pytest.fixture(scope="module")
def structurer():
    s = CONFIG.structure
    return LineStructurer(s.wrappers, s.headers, s.levels, s.max_wrapper_depth)


# ---- reading: every line keeps its number and its text, or is counted as set aside ---------


text_bodies = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)


@FAST
@given(records=st.lists(st.tuples(text_bodies, st.sampled_from(["\n", "\r\n", "\r"])), max_size=12),
       tail=text_bodies, chunk=st.integers(1, 200), max_line=st.integers(4, 400))
def test_reader_fast_path_lines_and_shapes(tmp_path_factory, records, tail, chunk, max_line):
    """Text without control bytes (the fast path when no line is too long): the lines are the
    file's lines, and the shapes folded on the bytes are the lines' ``fold_digits``."""
    data = ("".join(body + end for body, end in records) + tail).encode("utf-8")
    path = tmp_path_factory.mktemp("t") / "rank-0.log"
    path.write_bytes(data)
    rank_file = RankFile("j", "n", 0, str(path), "j/n/rank-0.log", len(data))
    long_lines = [line for line in data.splitlines() if len(line) > max_line]
    kept, folded_blocks = [], 0
    for item in read_lines(rank_file, ReadLimits(max_line, chunk, 0.3), fold=True):
        if isinstance(item, tuple):
            first, block, shapes = item
            assert long_lines or first == len(kept) + 1
            if shapes is not None:
                folded_blocks += 1
                assert shapes == [fold_digits(text) for text in block]
            kept += block
    if not long_lines:
        assert kept == [line.decode("utf-8") for line in data.splitlines()]
        assert folded_blocks > 0 or not data


@FAST
@given(records=st.lists(st.tuples(st.binary(max_size=40), st.sampled_from([b"\n", b"\r\n", b"\r"])), max_size=12),
       tail=st.binary(max_size=20), chunk=st.integers(1, 50), max_line=st.integers(4, 60))
def test_reader_accounts_for_every_line(tmp_path_factory, records, tail, chunk, max_line):
    data = b"".join(body + end for body, end in records) + tail
    path = tmp_path_factory.mktemp("r") / "rank-0.log"
    path.write_bytes(data)
    rank_file = RankFile("j", "n", 0, str(path), "j/n/rank-0.log", len(data))
    kept: dict[int, str] = {}
    set_aside_numbers: set[int] = set()
    issues = []
    for item in read_lines(rank_file, ReadLimits(max_line, chunk, 0.3), fold=True):
        if isinstance(item, tuple):
            first, block, shapes = item
            # the fast path's byte-folded shapes are exactly the lines' fold_digits
            assert shapes is None or shapes == [fold_digits(text) for text in block]
            for offset, text in enumerate(block):
                (set_aside_numbers.add if text is None else lambda n: kept.__setitem__(n, text))(first + offset)
        else:
            issues.append(item)
    expected = data.splitlines()
    set_aside = sum(i.n_lines for i in issues if i.reason in ("binary_line", "line_too_long"))
    assert len(kept) + set_aside == len(expected)
    assert set(kept) | set_aside_numbers <= set(range(1, len(expected) + 1))
    for number, text in kept.items():
        raw = expected[number - 1]
        assert len(raw) <= max_line
        assert text == raw.decode("utf-8", "replace").replace("\x01", "\ufffd").replace("\x02", "\ufffd")
    if not data:
        assert [i.reason for i in issues] == ["empty_file"]


# ---- header peeling ---------------------------------------------------------------------------


@FAST
@given(line=lines)
def test_structuring_never_fails_and_parts_rebuild_the_fields(structurer, line):
    whole = structurer.structure(line)
    parts = structurer.structure_parts(line)
    assert expand_parts(parts.message, line) == whole.message
    assert (expand_parts(parts.ts, line) or None) == whole.ts
    assert parts.level == whole.level
    # the shape path: a line's fields are its digit-folded shape's parts applied to the line
    shape = structurer.structure_parts(fold_digits(line))
    assert expand_parts(shape.message, line) == whole.message
    assert shape.level == whole.level


# ---- masking ----------------------------------------------------------------------------------


@FAST
@given(line=lines)
def test_masking_is_idempotent_and_digit_blind(line):
    masker = Masker(CONFIG.masking)
    once = masker.mask(fold_digits(line))
    assert masker.mask(once) == once
    assert masker.mask(fold_digits(line.replace("7", "3"))) == once


# ---- template matching --------------------------------------------------------------------------


messages = st.lists(st.lists(st.sampled_from(["send", "recv", "<*>", "rank", "NCCL", "WARN", "timeout", "0", "a=b",
                                               "x", "ok"]), min_size=1, max_size=7).map(" ".join), max_size=40)


@FAST
@given(first=messages, second=messages)
def test_template_store_ids_are_stable_and_survive_a_restore(first, second):
    conf = DrainConfig()
    store = TemplateStore(conf)
    ids = store.add(first)
    assert set(ids) == set(first) and all(re.fullmatch(r"E[0-9a-f]{12}(-[0-9]+)?", i) for i in ids.values())
    assert store.add(first) == ids  # a known message keeps its event
    state = json.loads(json.dumps(store.to_state()))
    restored = TemplateStore.from_state(state, store.masked_map(), conf)
    assert restored.add(second) == store.add(second)
    assert [t.event_id for t in restored.templates()] == [t.event_id for t in store.templates()]


@FAST
@given(events=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=200), st.text(max_size=200)), max_size=8))
def test_pattern_matching_never_fails_and_confidences_are_shares(events):
    for match in match_patterns(seed_patterns(), events, min_confidence=0.0):
        assert 0.0 < match.confidence <= 1.0 and set(match.matched_event_ids) <= {e[0] for e in events}


# ---- settings fingerprints ---------------------------------------------------------------------

values = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=12),
                   st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(), max_size=3))
settings_maps = st.dictionaries(st.sampled_from(["model", "framework", "image", "nodes", "tensor_parallel", "seed",
                                                 "lr", "accelerator", "launcher"]), values, max_size=9)


@FAST
@given(mapping=settings_maps, data=st.data())
def test_fingerprint_ignores_key_order_padding_and_integral_floats(mapping, data):
    shuffled = dict(data.draw(st.permutations(list(mapping.items()))))
    for level in DEFAULT_LEVELS:
        assert settings_key(shuffled, level) == settings_key(mapping, level)
    padded = {k: (f" {v} " if isinstance(v, str) else float(v) if isinstance(v, int) and not isinstance(v, bool)
                  else v) for k, v in mapping.items()}
    assert settings_key(padded, DEFAULT_LEVELS[0]) == settings_key(mapping, DEFAULT_LEVELS[0])
    extra = {**mapping, "not_a_counted_key": 1}
    assert settings_key(extra, DEFAULT_LEVELS[0]) == settings_key(mapping, DEFAULT_LEVELS[0])


# ---- path parsing ----------------------------------------------------------------------------------

names = st.lists(st.sampled_from(list("ab-_. 0é作") + ["..", "rank-", ".log", ".gz"]), min_size=1, max_size=6).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(paths=st.lists(st.tuples(names, names, st.one_of(names, st.integers(0, 99).map(lambda r: f"rank-{r}.log"))),
                      min_size=1, max_size=8))
def test_every_path_under_the_logs_root_is_a_rank_file_an_issue_or_hidden(tmp_path_factory, paths):
    root = tmp_path_factory.mktemp("layout")
    created = set()
    for job, node, name in paths:
        assume(all(part not in (".", "..") for part in (job, node, name)))
        folder = root / job / node
        if folder.exists() and not folder.is_dir() or (root / job).is_file():
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if (folder / name).is_dir():
                continue
            (folder / name).write_text("x\n")
        except OSError:
            continue
        created.add(f"{job}/{node}/{name}")
    scan = scan_logs_root(root, CONFIG.layout.pattern)
    as_rank = {f.rel_path for f in scan.files}
    as_issue = {i.file for i in scan.issues}
    for rel in created:
        hidden = any(part.startswith(("_", ".")) for part in rel.split("/"))
        assert hidden or rel in as_rank or rel in as_issue or rel.endswith("/job.json"), rel
    for rank_file in scan.files:
        job, node, name = rank_file.rel_path.split("/")
        assert (rank_file.job_id, rank_file.node) == (job, node)
        assert re.fullmatch(r"rank-0*" + str(rank_file.rank) + r"\.log(\.gz)?", name) or rank_file.rank == 0
        assert os.path.isfile(rank_file.path)


@FAST
@given(body=st.lists(st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), max_size=30),
                     min_size=1, max_size=40),
       cut=st.floats(0.0, 1.0), members=st.integers(1, 3))
def test_a_cut_gzip_keeps_every_line_before_the_cut(tmp_path_factory, body, cut, members):
    import gzip
    import zlib

    text = "".join(line + "\n" for line in body).encode("utf-8")
    data = b"".join(gzip.compress(text) for _ in range(members))
    cut_at = int(len(data) * cut)
    path = tmp_path_factory.mktemp("gz") / "rank-0.log.gz"
    path.write_bytes(data[:cut_at])
    rank_file = RankFile("j", "n", 0, str(path), "j/n/rank-0.log.gz", cut_at)
    kept, reasons = [], []
    for item in read_lines(rank_file, ReadLimits(1 << 20, 64, 0.3)):
        if isinstance(item, tuple):
            kept += [line for line in item[1] if line is not None]
        else:
            reasons.append(item.reason)
    full = (text.decode("utf-8") * members).split("\n")[:-1]
    decompressor = zlib.decompressobj(31)
    available = len(decompressor.decompress(data[:cut_at]).splitlines()) if cut_at else 0
    # every whole line before the cut is kept, in order; the last one may be cut short
    if kept:
        assert kept[:-1] == full[:len(kept) - 1] and full[len(kept) - 1].startswith(kept[-1])
    assert len(kept) >= min(available, len(body)) - 1
    if cut_at == len(data):
        assert kept == full and reasons == []
    elif cut_at == 0:
        assert reasons == ["empty_file"]
    elif cut_at % (len(data) // members) == 0:  # cut between members: a whole, shorter file
        assert reasons == [] and kept == full[:len(kept)]
    else:
        assert reasons and set(reasons) <= {"gzip_truncated", "gzip_corrupt", "invalid_utf8"}
