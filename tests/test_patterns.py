"""The fault-pattern library: seeds load, matching on real messages, unsafe patterns refused."""

from __future__ import annotations

import pytest

from l4spark.diagnosis.patterns import FaultPattern, PatternError, match_patterns, seed_patterns

EVENTS = {
    "xid79": ("E1", "NVRM: Xid (PCI:<*>): <*>, pid=<*>, GPU has fallen off the bus.",
              "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."),
    "watchdog": ("E2", "[Rank <*>] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<*>, OpType=ALLREDUCE)",
                 "[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE)"),
    "oom": ("E3", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <*> GiB.",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    "ib": ("E4", "NCCL WARN NET/IB : Got completion from peer <*> with error <*>, opcode <*>",
           "NCCL WARN NET/IB : Got completion from peer 10.3.1.17<52011> with error 12, opcode 0"),
    # NCCL 2.20 to 2.28 print "with status=N" (transport/net_ib.cc; the line as in NVIDIA/nccl#1814)
    "ib_status": ("E7", "NCCL WARN NET/IB : Got completion from peer <*> with status=<*> opcode=<*> len=<*> vendor err <*> (Recv)",
                  "NCCL WARN NET/IB : Got completion from peer 172.36.143.59<44206> with status=12 opcode=129 len=65536 "
                  "vendor err 129 (Recv) localGid ::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221"),
    "nan": ("E5", "iteration <*>/ <*> | lm loss: nan | number of nan iterations: <*> |",
            "iteration 5/ 10 | lm loss: nan | number of nan iterations:   1 |"),
    "benign": ("E6", "saving checkpoint at iteration <*> to <*>", "saving checkpoint at iteration 100 to /ckpt"),
}


def test_seed_library_is_valid_and_covers_the_common_faults():
    seeds = {p.pattern_id: p for p in seed_patterns()}
    assert len(seeds) >= 10
    assert {"nccl-watchdog-timeout", "gpu-ecc-error", "gpu-fallen-off-bus", "nic-link-down", "ib-completion-error",
            "cuda-oom", "checkpoint-load-failure", "driver-toolkit-mismatch", "loss-nan"} <= set(seeds)
    assert all(p.remedy and p.root_cause for p in seeds.values())


@pytest.mark.parametrize("event,pattern_id", [
    ("xid79", "gpu-fallen-off-bus"), ("watchdog", "nccl-watchdog-timeout"), ("oom", "cuda-oom"),
    ("ib", "ib-completion-error"), ("ib_status", "ib-completion-error"), ("nan", "loss-nan"),
])
def test_each_fault_matches_its_pattern_first(event, pattern_id):
    matches = match_patterns(seed_patterns(), [EVENTS[event]])
    assert matches[0].pattern_id == pattern_id and matches[0].confidence == 1.0
    assert matches[0].matched_event_ids == (EVENTS[event][0],)


def test_benign_events_match_nothing():
    assert match_patterns(seed_patterns(), [EVENTS["benign"]]) == []


def test_partial_signature_gives_partial_confidence():
    pattern = FaultPattern("p1", "two-part", "network", "cause", "fix", ("Got completion from peer", "Watchdog caught"))
    only_one = match_patterns([pattern], [EVENTS["ib"]])
    both = match_patterns([pattern], [EVENTS["ib"], EVENTS["watchdog"]])
    assert [(m.confidence, m.missing) for m in only_one] == [(0.5, ("Watchdog caught",))]
    assert [(m.confidence, m.matched_event_ids) for m in both] == [(1.0, ("E4", "E2"))]
    assert match_patterns([pattern], [EVENTS["ib"]], min_confidence=0.6) == []


@pytest.mark.parametrize("signature,message", [
    ((), "signature is empty"),
    (("",), "empty"),
    (("([a-z",), "does not compile"),
    (("x*",), "matches the empty string"),
    (("(a+)+b",), "nests unbounded quantifiers"),
    (("(\\w*x)*y",), "nests unbounded quantifiers"),
    (("(?:.+)+",), "nests unbounded quantifiers"),
])
def test_unsafe_or_empty_signatures_are_refused(signature, message):
    with pytest.raises(PatternError, match=message):
        FaultPattern("p1", "n", "network", "cause", "fix", signature)


def test_bad_fields_are_refused():
    with pytest.raises(PatternError, match="pattern_id"):
        FaultPattern("../etc", "n", "network", "cause", "fix", ("x",))
    with pytest.raises(PatternError, match="remedy is empty"):
        FaultPattern("p1", "n", "network", "cause", " ", ("x",))
    with pytest.raises(PatternError, match="stage must be"):
        FaultPattern("p1", "n", "network", "cause", "fix", ("x",), stage="lunch")


@pytest.mark.spark
def test_added_pattern_is_stored_and_joins_the_library(spark, test_config):
    from l4spark.diagnosis.pattern_store import pattern_library, save_pattern

    custom = FaultPattern("site-fs-quota", "Project quota exceeded", "storage", "quota", "raise the quota",
                          ("Disk quota exceeded",), stage="checkpoint_saving", source_job_id="job-9")
    save_pattern(spark, test_config.storage, custom)
    library = {p.pattern_id: p for p in pattern_library(spark, test_config.storage)}
    assert library["site-fs-quota"] == custom and "cuda-oom" in library
    with pytest.raises(PatternError, match="already exists"):
        save_pattern(spark, test_config.storage, custom)
    matches = match_patterns(library.values(), [("E9", "OSError: [Errno <*>] Disk quota exceeded: <*>",
                                                 "OSError: [Errno 122] Disk quota exceeded: '/ckpt/x'")])
    assert matches[0].pattern_id == "site-fs-quota"


def test_cli_refuses_a_bad_regex_before_starting_spark(capsys):
    from l4spark.cli import main

    code = main(["patterns", "add", "--id", "p1", "--name", "n", "--fault-class", "network", "--root-cause", "c",
                 "--remedy", "r", "--signature", "(a+)+"])
    assert code == 2
    assert "nests unbounded quantifiers" in capsys.readouterr().err
