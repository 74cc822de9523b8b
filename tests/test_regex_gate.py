"""Rule regexes behind a substring test of their required literal (``regexliteral``, ``regexcolumns``)."""

from __future__ import annotations

import re

import pytest

from l4spark.config import load_config
from l4spark.regexliteral import required_literal, required_literals
from l4spark.regexsafety import FLAGS
from l4spark.spatial.ranking import COMM_NAME_PATTERN, SELF_RANK_PREFIX


@pytest.mark.parametrize("pattern, literal", [
    (r"saving checkpoint at iteration\s+(\d+)", "saving checkpoint at iteration"),
    (r"\[Torch\] Saving \S+zero_pp_rank", "[Torch] Saving "),
    (r"(validation|test) loss at iteration \d+ on (validation|test) set", " loss at iteration "),
    (r"^\s*File \".*\", line [0-9]+", '", line '),
    (r"(?:NCCL )+error", "NCCL "),                  # repeated at least once: its body is required
    (r"closed(?i: by the) peer", "closed"),          # a group with flags ends the run
    (r"localGid ::ffff:([0-9]{1,3}(?:\.[0-9]{1,3}){3})\b", "localGid ::ffff:"),
])
def test_the_longest_literal_every_match_contains(pattern, literal):
    assert required_literal(pattern) == literal


@pytest.mark.parametrize("pattern", [
    r"\bdeath signal\b|SignalException: Process",   # an alternation at the top: no single literal
    r"(?i)closed by (the )?(remote )?peer",         # ignores case: a substring test would not
    r"(?x) closed \s by",                            # white space is not literal in verbose mode
    r"\p{L}",                                        # Java only: Python cannot parse it
    r"\Qa.b.c\E",                                    # Java quoting: not read
    r"(?:optional text)?x",                          # an optional part is not required
    r"ab\vcd",                                       # \v: a vertical tab to Python, a class to Java
    r"[0-9]+",
])
def test_no_literal_where_a_match_need_not_contain_one(pattern):
    assert required_literal(pattern) is None


@pytest.mark.parametrize("pattern, literals", [
    (r"saving checkpoint at iteration\s+(\d+)", ("saving checkpoint at iteration",)),   # one literal: as before
    (r"\bdeath signal\b|SignalException: Process [0-9]+ got signal", ("death signal", "SignalException: Process ")),
    (r"^\s*(Failures|Root Cause \(first observed failure\)):\s*$|^\s*<NO_OTHER_FAILURES>\s*$",
     ("Failures", "Root Cause (first observed failure)", "<NO_OTHER_FAILURES>")),        # branches within branches
    (r"(?:\b(?:tag\[[A-Za-z]+_|commId\[)[^\]\s]+\])|(?:Discoverer:\[[^\]]*\])", ("tag[", "commId[", "Discoverer:[")),
    (r"x(?:Watchdog caught|ran for [0-9]+ milliseconds)y", ("Watchdog caught", " milliseconds")),  # each branch: its longest
])
def test_an_alternation_needs_one_of_its_branches_literals(pattern, literals):
    assert required_literals(pattern) == literals


@pytest.mark.parametrize("pattern", [
    r"(?i)closed by (the )?(remote )?peer|reset by peer",   # ignores case
    r"a|bcd",                                              # a branch too short to test
    r"(?:foo)?|bar",                                       # a branch that can match nothing
    r"[0-9]+|NCCL error",                                  # a branch without any literal
    r"(?i:Watchdog caught|ran for)",                       # a group with flags
])
def test_no_literal_set_where_a_branch_has_none(pattern):
    assert required_literals(pattern) is None


def test_every_rule_regex_that_matches_a_line_finds_its_literal_in_it(tmp_path):
    """Exactness on the lines of a simulated fleet (every framework, failures of every kind):
    wherever one of the shipped rule regexes matches (Python's engine, Java's flags), the line
    holds the literal the gate tests."""
    from l4spark.simulate import FleetOptions, simulate_fleet

    simulate_fleet(tmp_path, FleetOptions(seed=28, jobs=12, failed_share=1.0, nodes=(2, 3), iterations=60,
                                          ranks_per_node=2))
    lines = [line for path in sorted(tmp_path.rglob("rank-*.log")) for line in path.read_text("utf-8").splitlines()]
    config = load_config()
    t, d, s = config.temporal, config.diagnosis, config.spatial
    patterns = ([r.pattern for r in t.stage_rules] + [r.pattern for r in t.iteration_rules]
                + list(t.elapsed_rules) + list(d.line_frame_patterns) + list(d.consequence_patterns)
                + list(s.store_client_patterns) + list(s.self_address_patterns) + list(d.exit_line_patterns)
                + list(d.failed_call_patterns)
                + [SELF_RANK_PREFIX])
    checked, alternations = 0, 0
    for pattern in [*patterns, *s.remote_patterns, *s.reporter_patterns,
                    "|".join(f"(?:{p})" for p in (COMM_NAME_PATTERN, *s.reporter_patterns))]:
        literals = required_literals(pattern)
        if literals is None:
            continue
        compiled = re.compile(pattern, FLAGS)
        for line in lines:
            if compiled.search(line):
                assert any(literal in line for literal in literals), (pattern, literals, line)
                checked += 1
                alternations += len(literals) > 1
    assert checked >= 20 and alternations >= 5


def test_gated_columns_equal_sparks_own_on_every_row(spark):
    from pyspark.sql import functions as F

    from l4spark.regexcolumns import extract_all, replace_all, rlike

    rows = [("saving checkpoint at iteration    1200 to /ckpt",), ("iteration 12/ 100 |",), (None,), ("",),
            ("NET/IB : Got completion from peer 10.0.0.2<5> with error 12 (Recv) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2",),
            ("localGid ::ffff:300.1.1.1",),
            ("[PG ID 4 PG GUID 7(DATA_PARALLEL_GROUP) Rank 9] Timeout at NCCL work: 12, from rank 3",)]
    lines = spark.createDataFrame(rows, "message string")
    regexes = [r"saving checkpoint at iteration\s+(\d+)", r"localGid ::ffff:([0-9]{1,3}(?:\.[0-9]{1,3}){3})\b",
               r"\biteration\s+(\d+)\s*/\s*\d+\s*\|", r"(?:Timeout at NCCL work|Got completion from peer): (\d+)"]
    got = lines.select(*[rlike("message", p).alias(f"gated_{i}") for i, p in enumerate(regexes)],
                       *[F.col("message").rlike(p).alias(f"plain_{i}") for i, p in enumerate(regexes)],
                       *[extract_all("message", p, 1).alias(f"gated_all_{i}") for i, p in enumerate(regexes)],
                       *[F.regexp_extract_all("message", F.lit(p), 1).alias(f"plain_all_{i}")
                         for i, p in enumerate(regexes)]).collect()
    for row in got:
        for i in range(len(regexes)):
            assert row[f"gated_{i}"] == row[f"plain_{i}"]
            assert row[f"gated_all_{i}"] == row[f"plain_all_{i}"]
    assert [r["gated_0"] for r in got] == [True, False, None, False, False, False, False]
    assert [r["gated_all_3"] for r in got][-1] == ["12"]
    assert [r["gated_all_1"] for r in got][4] == ["10.0.0.1"]
    replaced = lines.select(replace_all("message", SELF_RANK_PREFIX, "").alias("gated"),
                            F.regexp_replace("message", F.lit(SELF_RANK_PREFIX), F.lit("")).alias("plain"),
                            replace_all("message", r"\[PG ID \d+|Got completion", "").alias("gated_any"),
                            F.regexp_replace("message", F.lit(r"\[PG ID \d+|Got completion"), F.lit("")).alias("plain_any"),
                            ).collect()
    assert all(r["gated"] == r["plain"] and r["gated_any"] == r["plain_any"] for r in replaced)
    assert replaced[4]["gated_any"].startswith("NET/IB :  from peer")
    assert replaced[-1]["gated"] == " Timeout at NCCL work: 12, from rank 3"
