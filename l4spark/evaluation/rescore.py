"""The candidate events of ``evaluate --dump`` folders scored again under other settings, in seconds.

    python -m l4spark.evaluation.rescore --dump D [--dump D2 ...] [--set diagnosis.KEY=VALUE ...]
        [--conf F.toml] [--json OUT] [--against BASE.json]

Each ``--dump`` is a folder written by ``l4spark evaluate --fleet F --dump D`` (session 38 and
after): besides the diagnosis it holds what the event score scored, as the diagnosis saw it
(``score_evidence``, ``score_timing``, ``score_spatial``, ``score_temporal``, ``score_hits``,
``score_shares``: ``assemble.score_inputs``) and the ranking it scored with (``nodes``). No Spark:
``scoring.score_events``, the diagnosis's own step, scores every candidate event again under the
configuration (``--conf`` files, then ``--set`` overrides, values as TOML literals:
``--set diagnosis.min_score=0.8``, ``--set diagnosis.weights.cross_job=0.2``,
``--set 'diagnosis.cross_job_reasons=["not_in_pool"]'``). With the settings of the dump's run it
flags the dump's events job for job.

Only the settings ``score_events`` reads (``scoring.SCORE_SETTINGS``) can change here, and of
those not the ones that also shaped its inputs (``INPUT_SHAPING``: ``suspect_exit_lines``,
``exit_line_patterns`` and ``nonfinite_lines`` decide what the evidence holds, ``consequence_patterns`` what the cross-job
filter dropped as boilerplate); every other setting was fixed by the run that wrote the dump,
and changing one with ``--set`` is refused (a ``--conf`` file is not checked: give it the dump's
run's settings, or only free ones). Printed: per dump and in total, the flagged events against the
labelled ones (TP / FP / FN, precision, recall, F1), counted as ``evaluate`` counts them
(``diagnosis_eval.event_scores``). ``--json`` writes each job's counts and its flagged and
labelled events; ``--against`` lists the events that one of two runs flags (won and lost true
events, added and removed false ones).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

# of ``scoring.SCORE_SETTINGS``, the ones that also shaped the dump's inputs
INPUT_SHAPING = ("suspect_exit_lines", "exit_line_patterns", "nonfinite_lines", "consequence_patterns")


def read_score_inputs(dump: Path) -> dict[str, pd.DataFrame]:
    """``score_events``' inputs kept in an ``evaluate --dump`` folder, by their names in
    ``assemble.score_inputs``, plus ``nodes``, ``indicating`` and ``per_job``."""
    from l4spark.evaluation.diagnosis_eval import SCORE_INPUT_FILES

    missing = [file for file in SCORE_INPUT_FILES.values() if not (dump / file).is_file()]
    if missing:
        raise SystemExit(f"{dump}: no {', '.join(missing)} (a dump of `l4spark evaluate --dump` from "
                         "session 38 on holds the event score's inputs)")
    inputs = {name: pd.read_parquet(dump / file) for name, file in SCORE_INPUT_FILES.items()}
    for name in ("nodes", "indicating", "per_job"):
        inputs[name] = pd.read_parquet(dump / f"{name}.parquet")
    return inputs


def score_again(inputs: dict[str, pd.DataFrame], config) -> pd.DataFrame:
    """Every candidate event scored by ``score_events`` under ``config.diagnosis``."""
    from l4spark.diagnosis.assemble import kept_shares
    from l4spark.diagnosis.scoring import score_events

    return score_events(inputs["score_evidence"], inputs["score_timing"], inputs["score_spatial"],
                        inputs["score_temporal"], inputs["score_hits"], kept_shares(inputs["score_shares"]),
                        config.diagnosis, nodes=inputs["nodes"], peer_failure_patterns=config.spatial.remote_patterns)


def event_outcomes(scored: pd.DataFrame, indicating: pd.DataFrame, per_job: pd.DataFrame) -> pd.DataFrame:
    """Per labelled job: tp, fp, fn of the flagged events of ``scored`` (``diagnosis_events``'
    rows: ``score_events`` keeps no flagged event past ``max_events``), as ``evaluate`` counts them."""
    from l4spark.evaluation.diagnosis_eval import event_scores

    return event_scores(scored[scored["flagged"]], indicating, sorted(per_job["job_id"]))


def parse_overrides(pairs: list[str]) -> dict:
    """``KEY=VALUE`` pairs as config overrides (``rerank.parse_overrides``); refuses a setting
    the dump's run fixed (not a ``diagnosis`` setting of ``SCORE_SETTINGS``, or one of
    ``INPUT_SHAPING``)."""
    from l4spark.diagnosis.scoring import SCORE_SETTINGS
    from l4spark.evaluation.rerank import parse_overrides as parse_pairs

    out = parse_pairs(pairs)
    free = set(SCORE_SETTINGS) - set(INPUT_SHAPING)
    fixed = [k for k in out if not (k.startswith("diagnosis.") and k.split(".")[1] in free)]
    if fixed:
        raise SystemExit(f"--set {', '.join(fixed)}: not a setting of the event score alone; the dump's run fixed "
                         f"it (run `l4spark evaluate --dump` again with it). Free here: {', '.join(sorted(free))}")
    return out


def main(argv: list[str] | None = None) -> int:
    from l4spark.evaluation.rerank import dump_study_arguments

    args, config = dump_study_arguments("python -m l4spark.evaluation.rescore", __doc__, argv, parse_overrides)
    result, totals = {}, [0, 0, 0]
    for dump in args.dump:
        inputs = read_score_inputs(dump)
        scored = score_again(inputs, config)
        counts = event_outcomes(scored, inputs["indicating"], inputs["per_job"])
        tp, fp, fn = (int(counts[k].sum()) for k in ("tp", "fp", "fn"))
        totals = [totals[0] + tp, totals[1] + fp, totals[2] + fn]
        print(f"{dump}: {_line(tp, fp, fn)}")
        flagged = scored[scored["flagged"]]
        for row in counts.itertuples():
            result[f"{dump.name}/{row.job_id}"] = {
                "tp": row.tp, "fp": row.fp, "fn": row.fn,
                "flagged": sorted(flagged.loc[flagged["job_id"] == row.job_id, "event_id"]),
                "labelled": sorted(inputs["indicating"].loc[inputs["indicating"]["job_id"] == row.job_id,
                                                            "event_id"].dropna())}
    if len(args.dump) > 1:
        print(f"total: {_line(*totals)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), "utf-8")
    if args.against:
        print_moves(json.loads(args.against.read_text("utf-8")), result)
    return 0


def _line(tp: int, fp: int, fn: int) -> str:
    from l4spark.evaluation.diagnosis_eval import prf

    figures = prf(tp, fp, fn)
    return (f"TP/FP/FN {tp}/{fp}/{fn}, precision {figures['precision']:.3f}, recall {figures['recall']:.3f}, "
            f"F1 {figures['f1']:.3f}")


def print_moves(base: dict, now: dict) -> None:
    """The (job, event) pairs flagged in one of ``base`` and ``now`` only, true and false ones."""
    moves = {"won": [], "lost": [], "added false": [], "removed false": []}
    for job in (j for j in base if j in now):
        labelled = set(now[job]["labelled"])
        before, after = set(base[job]["flagged"]), set(now[job]["flagged"])
        for event in sorted(after - before):
            moves["won" if event in labelled else "added false"].append((job, event))
        for event in sorted(before - after):
            moves["lost" if event in labelled else "removed false"].append((job, event))
    print("against the base: " + ", ".join(f"{len(pairs)} {tag}" for tag, pairs in moves.items()))
    for tag, pairs in moves.items():
        for job, event in pairs:
            print(f"  {tag} {job} {event}")


if __name__ == "__main__":
    sys.exit(main())
