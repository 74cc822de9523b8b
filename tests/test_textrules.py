"""The Python reference of structuring and masking, on real-format lines."""

from __future__ import annotations

import pytest

from l4spark.parse.textrules import HeaderRule, LineStructurer, Masker, MaskRule, WrapperRule, java_regex
from tests.lines_corpus import CORPUS


@pytest.fixture(scope="module")
def structurer(default_config):
    s = default_config.structure
    return LineStructurer(s.wrappers, s.headers, s.levels, s.max_wrapper_depth)


@pytest.mark.parametrize("raw,expected", CORPUS)
def test_structure_real_formats(structurer, raw, expected):
    result = structurer.structure(raw)
    assert (result.ts, result.level, result.message) == expected


def test_wrapper_never_reaches_the_message(structurer):
    bare = structurer.structure("[2026-11-20 01:00:01,123] [WARNING] [x.py:1:f] [Rank 7] retrying save")
    for prefix in ("gpu-a-001: ", "[default7]:", "7: ", "2026-11-20T01:00:01.5Z stdout F ",
                   "2026-11-20T01:00:01.5Z stderr P [default7]:"):
        wrapped = structurer.structure(prefix + "[2026-11-20 01:00:01,123] [WARNING] [x.py:1:f] [Rank 7] retrying save")
        assert wrapped.message == bare.message == "retrying save"
        assert wrapped.level == "WARN"


def test_masking_generic_variables(default_config):
    masker = Masker(default_config.masking)
    assert masker.mask("Got completion from peer 10.3.1.17<52011> with error 12, vendor err 129") == \
        "Got completion from peer <*> with error <*>, vendor err <*>"
    assert masker.mask("saving checkpoint to /ckpt/run-1/iter_0000100 took 12.5s") == \
        "saving checkpoint to <*> took <*>s"
    assert masker.mask("NVRM: Xid (PCI:0000:3b:00): 79, pid=4242") == "NVRM: Xid (PCI:<*>): <*>, pid=<*>"
    assert masker.mask("connection to node-017 lost at 2026-11-20 01:00:00,123") == \
        "connection to node-<*> lost at <*>"
    # identifiers with digits glued to letters stay (they name things, not values)
    assert masker.mask("dtype fp16 on sm_80 rank3 cuda:0 a/b/c") == "dtype fp16 on sm_80 rank3 cuda:<*> a/b/c"
    assert masker.mask("lr=1.5e-04 loss 2.345678E+00") == "lr=<*> loss <*>"
    assert masker.mask("ptr 0x7f3a2b00 id 3f2a9c1d0e a3f2a9c1d0e deadbeef") == "ptr <*> id <*> <*> deadbeef"
    assert masker.mask("uuid 123e4567-e89b-12d3-a456-426614174000") == "uuid <*>"


def test_masks_fuse_into_one_guarded_pass(default_config):
    from l4spark.parse.textrules import fuse_masks
    passes = fuse_masks(default_config.masking)
    assert len(passes) == 1 and passes[0][0].startswith("(?=[")
    two = fuse_masks([MaskRule("a", "[0-9]+", "<N>"), MaskRule("b", "x|y", "<N>"), MaskRule("c", "z", "<Z>")])
    assert two == [("(?:[0-9]+)|(?:x|y)", "<N>"), ("z", "<Z>")]


def test_masking_is_idempotent(default_config):
    masker = Masker(default_config.masking)
    for raw, _ in CORPUS:
        once = masker.mask(raw)
        assert masker.mask(once) == once


def test_java_regex_conversion():
    assert java_regex(r"(?P<ab1>x)(?P=ab1)") == r"(?s)(?<ab1>x)\k<ab1>"


def test_rules_refuse_bad_definitions():
    with pytest.raises(ValueError, match="letters and digits"):
        HeaderRule("h", r"(?P<my_msg>.*)", message="{my_msg}")
    with pytest.raises(ValueError, match="lacks"):
        HeaderRule("h", r"(?P<msg>.*)", level="{level}")
    with pytest.raises(ValueError, match="does not compile"):
        WrapperRule("w", r"([a-z")
    with pytest.raises(ValueError, match="empty string"):
        MaskRule("m", r"[0-9]*", "<NUM>")
