"""A realistic hand-built diagnosis, for the docs and for trying the renderers without a run.

The story: a 16-node Megatron-LM job (8 GPUs per node, 128 ranks) trains for 40 iterations;
in iteration 40 a GPU of node-11 falls off the bus (Xid 79). node-11 goes quiet, node-07's
InfiniBand link to it reports completion errors, and ten minutes later every other node's NCCL
watchdog times out and torchrun tears the job down.

    python -m l4spark.report.example OUT_DIR [--terminal]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from l4spark.report.files import write_reports
from l4spark.report.model import JobReport
from l4spark.report.terminal_text import render_terminal

JOB_ID = "llama70b-pretrain-0612-0417"
NODES = [f"node-{i:02d}" for i in range(16)]
FAULTY, NEIGHBOUR = "node-11", "node-07"
START = pd.Timestamp("2024-06-12 08:00:00")
XID_AT = pd.Timestamp("2024-06-12 08:49:12")
TIMEOUT_AT = pd.Timestamp("2024-06-12 08:59:14")


def _events() -> pd.DataFrame:
    rows = [
        ("E0412", "NVRM: Xid (PCI:<*>): 79, pid=<*>, name=python, GPU has fallen off the bus.",
         0.97, ["cross_job", "spatial", "pattern"], 3, 1, "training",
         "NVRM: Xid (PCI:0000:c1:00): 79, pid=48213, name=python, GPU has fallen off the bus.",
         FAULTY, XID_AT),
        ("E0398", "RuntimeError: CUDA error: unspecified launch failure <*>",
         0.91, ["cross_job", "spatial"], 8, 1, "training",
         "RuntimeError: CUDA error: unspecified launch failure <class 'torch.cuda.CudaError'> "
         "(compile with TORCH_USE_CUDA_DSA & CUDA_LAUNCH_BLOCKING=1 to debug)",
         FAULTY, XID_AT + pd.Timedelta(seconds=2)),
        ("E0233", "NET/IB : Got completion from peer <*> with error <*>, opcode <*>, len <*>, vendor err <*> (Recv)",
         0.84, ["cross_job", "spatial", "pattern"], 24, 1, "training",
         "NET/IB : Got completion from peer 10.12.0.41<51834> with error 12, opcode 0, len 0, "
         "vendor err 129 (Recv)", NEIGHBOUR, XID_AT + pd.Timedelta(seconds=19)),
        ("E0417", "[Rank <*>] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<*>, "
                  "OpType=ALLREDUCE, NumelIn=<*>, NumelOut=<*>, Timeout(ms)=600000) ran for <*> "
                  "milliseconds before timing out.",
         0.78, ["cross_job", "temporal", "pattern"], 120, 15, "training",
         "[Rank 91] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=51213, "
         "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 "
         "milliseconds before timing out.", "node-03", TIMEOUT_AT),
        ("E0301", "iteration <*>/ <*> | consumed samples: <*> | elapsed time per iteration (ms): <*> | "
                  "learning rate: <*> | lm loss: <*> |",
         0.55, ["temporal"], 1, 1, "training",
         "iteration       40/  120000 | consumed samples:        81920 | elapsed time per "
         "iteration (ms): 612004.3 | learning rate: 2.999E-05 | lm loss: 7.412E+00 |",
         "node-15", TIMEOUT_AT + pd.Timedelta(seconds=3)),
        ("E0520", "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: <*>) "
                  "local_rank: <*> (pid: <*>) of binary: <*>",
         0.49, ["cross_job", "pattern"], 15, 15, "training",
         "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -6) local_rank: 3 "
         "(pid: 48877) of binary: /usr/bin/python3", "node-00", TIMEOUT_AT + pd.Timedelta(seconds=21)),
        ("E0087", "srun: error: <*>: task <*>: Killed", 0.31, ["cross_job"], 16, 16, "training",
         "srun: error: node-11: task 88: Killed", "node-00", TIMEOUT_AT + pd.Timedelta(seconds=25)),
    ]
    columns = ["event_id", "template", "score", "sources", "n_lines", "n_nodes", "stage", "sample",
               "sample_node", "sample_ts"]
    events = pd.DataFrame(rows, columns=columns)
    events["rank"] = range(1, len(events) + 1)
    events["first_ts"] = events["sample_ts"]
    return events


def _nodes(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for node in NODES:
        score = {FAULTY: 0.781, NEIGHBOUR: 0.634}.get(node, round(float(rng.uniform(0.43, 0.53)), 3))
        evidence = {FAULTY: ["E0412", "E0398"], NEIGHBOUR: ["E0233"]}.get(node, ["E0417"])
        rows.append({"node": node, "process_rank": None, "score": score,
                     "silent": node == FAULTY, "silent_gap_s": 599.0 if node == FAULTY else None,
                     "n_lines": 9_830 if node == FAULTY else int(rng.integers(78_000, 82_000)),
                     "evidence": evidence, "evidence_scores": [round(4.0 - i, 1) for i in range(len(evidence))]})
    nodes = pd.DataFrame(rows)
    nodes["_silent"] = ~nodes["silent"]
    nodes = nodes.sort_values(["_silent", "score", "node"], ascending=[True, False, True]).drop(columns="_silent")
    nodes["rank"] = range(1, len(nodes) + 1)
    nodes["suspect"] = nodes["node"].isin([FAULTY, NEIGHBOUR])
    return nodes.reset_index(drop=True)


def _iterations(rng: np.random.Generator) -> pd.DataFrame:
    scores = np.round(rng.normal(0.955, 0.006, 40), 4)
    scores[39] = 0.583
    iterations = pd.DataFrame({"iteration": range(1, 41), "score": scores})
    iterations["anomalous"] = iterations["iteration"] == 40
    iterations["event_ids"] = [["E0301", "E0412"] if i == 40 else [] for i in iterations["iteration"]]
    return iterations


def _stages(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    spans, errors = [], []
    for node in NODES:
        jitter = [pd.Timedelta(seconds=float(s)) for s in rng.uniform(0, 20, 5)]
        bounds = [START, START + pd.Timedelta(minutes=1) + jitter[0],
                  START + pd.Timedelta(minutes=3, seconds=40) + jitter[1],
                  START + pd.Timedelta(minutes=6, seconds=20) + jitter[2],
                  START + pd.Timedelta(minutes=26) + jitter[3],
                  START + pd.Timedelta(minutes=27, seconds=30) + jitter[4]]
        names = ["init", "data_loading", "model_loading", "training", "checkpoint_saving"]
        spans += [(node, stage, start, end) for stage, start, end in zip(names, bounds, bounds[1:])]
        if node == FAULTY:
            last = XID_AT + pd.Timedelta(seconds=3)
            first_error = (XID_AT, "E0412", "NVRM: Xid (PCI:0000:c1:00): 79, GPU has fallen off the bus.")
        elif node == NEIGHBOUR:
            last = TIMEOUT_AT + pd.Timedelta(seconds=30)
            first_error = (XID_AT + pd.Timedelta(seconds=19), "E0233",
                           "NET/IB : Got completion from peer 10.12.0.41<51834> with error 12")
        else:
            offset = pd.Timedelta(seconds=float(rng.uniform(0, 4)))
            last, first_error = TIMEOUT_AT + pd.Timedelta(seconds=30), (
                TIMEOUT_AT + offset, "E0417", "[Rank 91] Watchdog caught collective operation timeout")
        spans.append((node, "training", bounds[-1], last))
        errors.append((node, *first_error))
    stages = pd.DataFrame(spans, columns=["node", "stage", "start_ts", "end_ts"])
    first_errors = pd.DataFrame(errors, columns=["node", "ts", "event_id", "message"])
    return stages, first_errors


def _heat() -> pd.DataFrame:
    rows = [("E0412", FAULTY, 3), ("E0398", FAULTY, 8), ("E0233", NEIGHBOUR, 24),
            ("E0301", "node-15", 1), ("E0087", "node-00", 16)]
    rows += [("E0417", node, 8) for node in NODES if node != FAULTY]
    rows += [("E0520", node, 1) for node in NODES if node != FAULTY]
    return pd.DataFrame(rows, columns=["event_id", "node", "n_lines"])


def _patterns() -> list[dict]:
    return [
        {"pattern_id": "gpu-xid79", "name": "GPU fell off the bus (Xid 79)", "fault_class": "hardware/gpu",
         "confidence": 0.92,
         "root_cause": "A GPU of node-11 stopped answering on PCIe (NVIDIA Xid 79) during iteration 40; its "
                       "ranks hung and every peer's NCCL all-reduce timed out 10 minutes later.",
         "remedy": "Drain node-11 (scontrol update nodename=node-11 state=drain reason=\"xid79\"), open a "
                   "hardware ticket for the GPU and its riser, then restart from the iteration-20 "
                   "checkpoint without node-11.",
         "matched_event_ids": ["E0412", "E0398", "E0417"]},
        {"pattern_id": "nccl-watchdog-timeout", "name": "NCCL collective timeout",
         "fault_class": "network/collective", "confidence": 0.71,
         "root_cause": "A collective did not finish within Timeout(ms)=600000: usually one rank stopped "
                       "and the others waited for it.",
         "remedy": "Look at the first node that stopped logging or failed before the timeout; check its "
                   "GPUs and InfiniBand ports (ibstat, dmesg).",
         "matched_event_ids": ["E0417", "E0233"]},
        {"pattern_id": "torchrun-worker-failed", "name": "torchrun worker exited", "fault_class": "process",
         "confidence": 0.4,
         "root_cause": "torchrun stopped the job after a worker exited with a signal (SIGABRT = -6).",
         "remedy": "A consequence here: follow the earlier events.", "matched_event_ids": ["E0520", "E0087"]},
    ]


def example_report() -> JobReport:
    """The example job's report (the same every call)."""
    rng = np.random.default_rng(7)
    nodes = _nodes(rng)
    iterations = _iterations(rng)
    stages, first_errors = _stages(rng)
    patterns = _patterns()
    job = {
        "job_id": JOB_ID, "status": "diagnosed", "failure_stage": "training", "failure_iteration": 40,
        "suspect_nodes": [FAULTY, NEIGHBOUR], "matched_patterns": [p["pattern_id"] for p in patterns],
        "n_lines": 1_284_553, "n_candidate_events": 37, "error": None, "run_id": "run-20240612-0915-3f2a",
        "processed_at": "2024-06-12 09:16:41", "version": "0.1.0", "n_nodes": 16, "n_ranks": 128,
        "history": "llama-70b / 16x8 / megatron-lm (23 earlier jobs)",
        "settings": {"model": "llama-70b", "framework": "megatron-lm", "nodes": 16, "gpus_per_node": 8,
                     "tensor_parallel": 8, "pipeline_parallel": 4},
    }
    return JobReport(job=job, patterns=patterns, events=_events(), nodes=nodes, iterations=iterations,
                     stages=stages, first_errors=first_errors, heat=_heat())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m l4spark.report.example",
                                     description="Write the example job's HTML and Markdown report.")
    parser.add_argument("out_dir", help="folder for <job id>.html and <job id>.md")
    parser.add_argument("--terminal", action="store_true", help="also print the terminal summary")
    args = parser.parse_args(argv)
    report = example_report()
    html_path, md_path = write_reports(report, args.out_dir)
    if args.terminal:
        print(render_terminal(report), end="")
    print(f"wrote {html_path}\nwrote {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
