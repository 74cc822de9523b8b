"""The node ranking of ``evaluate --dump`` folders ranked again under other settings, in seconds.

    python -m l4spark.evaluation.rerank --dump D [--dump D2 ...] [--set spatial.KEY=VALUE ...]
        [--conf F.toml] [--json OUT] [--against BASE.json]

Each ``--dump`` is a folder written by ``l4spark evaluate --fleet F --dump D`` (session 32 and
after): besides the diagnosis it holds what the node ranking ranked, as the diagnosis saw it
(``ranking_facts`` and ``ranking_activity``: ``spatial.ranking.unit_inputs`` of the candidate
events the cross-job filter kept, with the ``scored`` flag of ``ranking.with_scored_events``, taken
from the dump's ``scored`` events for dumps before session 36; ``ranking_lifts``: the lone printers of a known fault,
``scoring.known_fault_printers``). No Spark: every job is ranked again by
``spatial.ranking.rank_job``, the diagnosis's own per-job step, under the configuration
(``--conf`` files, then ``--set`` overrides, values as TOML literals:
``--set spatial.behind_weight=0.5``, ``--set spatial.normalisation=role``), and the known-fault
term added (``scoring.lift_printers``, ``diagnosis.known_fault_weight``; a claim of slowness against
a straggler measured elsewhere withheld, ``scoring.unmeasured_claims``). Unlike
``spatial_eval`` (every event a candidate, no history), this ranks what ``l4spark diagnose``
ranks: with the settings of the dump's run it gives the dump's ``nodes`` job for job.

Settings that shape the inputs themselves (``ranking.UNIT_INPUT_SETTINGS``: ``granularity``,
``remote_patterns``, ``store_client_not_blame``, ``untimed_errors_dated``, ..., those read by
``ranking.configured_unit_inputs``) are fixed by the run that wrote the dump; changing one here
is refused. Printed: per dump and in total, the jobs with a labelled faulty node whose first
node is faulty (top-1) and with one in the first five (top-5), scored as ``evaluate`` scores
them (``diagnosis_eval.node_hits``). ``--json`` writes each job's outcome; ``--against`` lists
the jobs whose top-1 differs from such a file's (won, lost).
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

import pandas as pd


def read_inputs(dump: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(facts, activity, lifts, per_job) of an ``evaluate --dump`` folder (``diagnosis_eval``
    writes the ranking's inputs as ``RANKING_INPUT_FILES``)."""
    from l4spark.evaluation.diagnosis_eval import RANKING_INPUT_FILES

    missing = [file for file in RANKING_INPUT_FILES.values() if not (dump / file).is_file()]
    if missing:
        raise SystemExit(f"{dump}: no {', '.join(missing)} (a dump of `l4spark evaluate --dump` from "
                         "session 32 on holds the ranking's inputs)")
    facts, activity, lifts = (pd.read_parquet(dump / RANKING_INPUT_FILES[name])
                              for name in ("facts", "activity", "lifts"))
    if "scored" not in facts.columns and (dump / "scored.parquet").is_file():
        # dumps before session 36: the facts' ``scored`` flag (``ranking.with_scored_events``) is
        # what the diagnosis joins, the (job, event) pairs of its scored events
        scored = pd.read_parquet(dump / "scored.parquet", columns=["job_id", "event_id"])
        pairs = pd.MultiIndex.from_frame(scored)
        facts = facts.assign(scored=pd.MultiIndex.from_frame(facts[["job_id", "event_id"]]).isin(pairs))
    return facts, activity, lifts, pd.read_parquet(dump / "per_job.parquet")


def rank_again(facts: pd.DataFrame, activity: pd.DataFrame, lifts: pd.DataFrame, config) -> pd.DataFrame:
    """``diagnosis_nodes`` rows of every job of ``activity``, as the diagnosis ranks them under
    ``config`` (``rank_job`` per job, then the known-fault term)."""
    from l4spark.diagnosis.patterns import seed_patterns
    from l4spark.diagnosis.scoring import lift_printers, slowness_claims, unmeasured_claims
    from l4spark.spatial.ranking import DIAGNOSIS_NODES_COLUMNS, rank_job

    by_job = dict(tuple(facts.groupby("job_id", sort=False)))
    parts = [rank_job(by_job.get(job_id, facts.iloc[:0]), job_activity, config.spatial)
             for job_id, job_activity in activity.groupby("job_id", sort=True)]
    nodes = pd.concat(parts, ignore_index=True)[DIAGNOSIS_NODES_COLUMNS] if parts else \
        pd.DataFrame(columns=DIAGNOSIS_NODES_COLUMNS)
    lifted = {r.job_id: (r.node, list(r.pattern_ids), getattr(r, "share", 1.0)) for r in lifts.itertuples()}
    # the shipped library's classes (a dump's lifts name pattern ids only)
    claims = slowness_claims(seed_patterns()) if config.diagnosis.measured_slowness_overrules else ()
    measured = unmeasured_claims(nodes, lifted, claims, config.diagnosis.dead_unit_overrules_slowness)
    return lift_printers(nodes, measured, config.diagnosis.known_fault_weight, config.spatial)


def outcomes(nodes: pd.DataFrame, per_job: pd.DataFrame) -> pd.DataFrame:
    """Per job with a labelled faulty node: top1 and top5 (the share of its faulty nodes within
    the first one and five distinct nodes: ``evaluate``'s ``node_hits``), first (the first node),
    fault_kind, n_units."""
    from l4spark.evaluation.diagnosis_eval import node_hits, node_rankings

    labelled = per_job[per_job["has_faulty_nodes"].astype(bool)]
    rankings = node_rankings(nodes)
    hits = node_hits(rankings, dict(zip(labelled["job_id"], labelled["faulty_nodes"]))).set_index("job_id")
    units = nodes.groupby("job_id").size().to_dict()
    rows = [{"job_id": row.job_id, "fault_kind": row.fault_kind, "top1": hits.at[row.job_id, "top1"],
             "top5": hits.at[row.job_id, "top5"], "first": rankings.get(row.job_id, [None])[0],
             "n_units": int(units.get(row.job_id, 0))} for row in labelled.itertuples()]
    return pd.DataFrame(rows, columns=["job_id", "fault_kind", "top1", "top5", "first", "n_units"])


def parse_overrides(pairs: list[str]) -> dict:
    """``KEY=VALUE`` pairs (values as TOML literals, a bare word as a string) as config overrides."""
    from l4spark.spatial.ranking import UNIT_INPUT_SETTINGS

    out = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or "." not in key:
            raise SystemExit(f"--set {pair!r}: expected SECTION.KEY=VALUE")
        try:
            out[key.strip()] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = raw
    fixed = [k for k in out if k.startswith("spatial.") and k.split(".", 1)[1] in UNIT_INPUT_SETTINGS]
    if fixed:
        raise SystemExit(f"--set {', '.join(fixed)}: shapes the ranking's inputs, which the dump's run fixed "
                         "(run `l4spark evaluate --dump` again with it)")
    return out


def dump_study_arguments(prog: str, doc: str, argv: list[str] | None, overrides) -> tuple[argparse.Namespace, object]:
    """The command line of a study of ``evaluate --dump`` folders (``rerank``, ``rescore``):
    ``--dump`` (repeated), ``--set``, ``--conf``, ``--json``, ``--against``; returns the
    arguments and the configuration (``--conf`` files, then ``overrides(args.set)``)."""
    from l4spark.config import load_config
    from l4spark.errors import ConfigError

    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    parser.add_argument("--dump", action="append", required=True, type=Path, help="an `evaluate --dump` folder")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="a setting")
    parser.add_argument("--conf", action="append", default=[], metavar="FILE", help="TOML config over the defaults")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write each job's outcome")
    parser.add_argument("--against", type=Path, metavar="BASE", help="an earlier --json: list what moved")
    args = parser.parse_args(argv)
    try:
        return args, load_config(*args.conf, overrides=overrides(args.set))
    except ConfigError as exc:
        raise SystemExit(f"configuration: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    args, config = dump_study_arguments("python -m l4spark.evaluation.rerank", __doc__, argv, parse_overrides)
    result, frames = {}, []
    for dump in args.dump:
        facts, activity, lifts, per_job = read_inputs(dump)
        got = outcomes(rank_again(facts, activity, lifts, config), per_job)
        print(f"{dump}: top-1 {_count(got['top1'])}, top-5 {_count(got['top5'])} of {len(got)}")
        frames.append(got)
        result.update({f"{dump.name}/{r['job_id']}": r for r in got.to_dict("records")})
    if len(frames) > 1:
        both = pd.concat(frames, ignore_index=True)
        print(f"total: top-1 {_count(both['top1'])}, top-5 {_count(both['top5'])} of {len(both)}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str), "utf-8")
    if args.against:
        print_moves(json.loads(args.against.read_text("utf-8")), result)
    return 0


def _count(hits: pd.Series) -> str:
    """The jobs whose every faulty node is within the k (top-k share 1), and the mean share."""
    return f"{int((hits >= 1).sum())} (mean {hits.mean():.3f})" if len(hits) else "0"


def print_moves(base: dict, now: dict) -> None:
    """The jobs whose first node is faulty in one of ``base`` and ``now`` only."""
    common = [j for j in base if j in now]
    won = [j for j in common if base[j]["top1"] < 1 <= now[j]["top1"]]
    lost = [j for j in common if now[j]["top1"] < 1 <= base[j]["top1"]]
    print(f"against the base: {len(won)} won, {len(lost)} lost ({len(common)} jobs in both)")
    for tag, jobs in (("won", won), ("lost", lost)):
        for j in jobs:
            print(f"  {tag} {j} [{now[j]['fault_kind']}] units={now[j]['n_units']} first {base[j]['first']} -> "
                  f"{now[j]['first']}")


if __name__ == "__main__":
    sys.exit(main())
