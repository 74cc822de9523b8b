"""The pattern library's and the known-fault term's effect, recomputed from evaluation dumps.

    python -m l4spark.evaluation.known_faults --dump D [--dump D2 ...]
        [--without PATTERN_ID ...] [--classes C1,C2,...] [--weight W] [--conf F.toml] [--base-conf B.toml]
        [--rerank]

Each ``--dump`` is a folder written by ``l4spark evaluate --fleet F --dump D`` (``scored``,
``nodes`` and ``per_job`` Parquet; ``scored`` with each event's ``nodes``, sessions 25 and
after). No Spark: the library is matched again over each job's candidate events
(``scoring.job_patterns``), the known-fault term applied to the dump's node ranking
(``scoring.with_known_fault_printers``), the matches ordered as the diagnosis orders them
(``rank_matches``, then ``with_unit_faults``), in seconds.

Two settings are compared: the configuration's (``--conf``, default the defaults) and a
baseline that differs from it by ``--without`` (seed patterns left out), ``--classes`` (the
baseline's ``known_fault_classes``), ``--weight`` (its ``known_fault_weight``) and ``--base-conf``
(its diagnosis configuration otherwise: the unit faults, say). Printed per
dump and in total: the jobs with a faulty node whose first-ranked node is faulty (node top-1)
and the failed jobs whose first match's class is the label's (fault class), under both; then
every job that one setting gets right and the other not. A dump's ranking already holds the
term of the code that wrote it; applying it again lifts a node that was lifted already and
moves nothing else (docs/diagnosis.md, "A node whose CPUs throttle").

``--rerank`` (session 48) ranks the nodes again instead, each side under its own configuration
(``--conf``, ``--base-conf``): ``rerank.rank_again`` of the dump's ranking inputs, with the lone
printers the dump's run found (``ranking_lifts``), so a change of the ranking's words or weights
is measured by class and top-1 as the diagnosis would rank, and the known-fault term is applied
once. With it, ``--without``, ``--classes`` and ``--weight`` change the matches only, not which
nodes were lifted (those are the dump's). It needs a dump of session 32 or later.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Setting:
    library: tuple
    classes: tuple
    weight: float


def read_dump(dump: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(scored, nodes, per_job) of an ``evaluate --dump`` folder."""
    scored = pd.read_parquet(dump / "scored.parquet")
    if "nodes" not in scored.columns:
        raise SystemExit(f"{dump}: scored.parquet has no nodes column (a dump of session 25 or later is needed)")
    return scored, pd.read_parquet(dump / "nodes.parquet"), pd.read_parquet(dump / "per_job.parquet")


def read_slowed(dump: Path) -> set[str]:
    """The jobs of a dump whose iterations slowed (``scoring.slowed_jobs`` of its
    ``iterations.parquet``; none without the file)."""
    from l4spark.diagnosis.scoring import slowed_jobs

    path = dump / "iterations.parquet"
    return slowed_jobs(pd.read_parquet(path, columns=["job_id", "reason"])) if path.is_file() else set()


def outcomes(frames: tuple, setting: Setting, conf, spatial, lifted: bool = False,
             slowed: set | None = None) -> pd.DataFrame:
    """Per failed job of a dump (``read_dump``): node_first (None without a labelled faulty node)
    and class_ok. ``conf``: the diagnosis configuration (its confidence threshold and unit faults).
    ``lifted``: the frames' nodes hold the known-fault term already (``rerank.rank_again``), so it
    is not applied again. ``slowed``: the jobs whose iterations slowed (``slowed_jobs`` of the
    dump's ``iterations``), for ``slowness_needs_measuring``; None: none did."""
    from l4spark.diagnosis.scoring import (job_patterns, rank_matches, slowness_claims, with_known_fault_printers,
                                          with_unborne_claims_last, with_unit_faults)

    scored, nodes, per_job = frames
    templates = dict(zip(scored["event_id"], scored["template"]))
    matches = job_patterns(scored, templates, list(setting.library), conf.pattern_min_confidence)
    claims = slowness_claims(setting.library) if conf.measured_slowness_overrules else ()
    ranked = nodes if lifted else with_known_fault_printers(nodes, matches, scored, setting.weight, setting.classes,
                                                           spatial, conf.known_fault_share, claims,
                                                           conf.known_fault_per_pattern,
                                                           conf.dead_unit_overrules_slowness,
                                                           conf.known_fault_local_patterns)
    ordered = rank_matches(matches, scored, ranked, conf.matches_by_shown_time)
    if conf.slowness_needs_measuring:
        ordered = with_unborne_claims_last(ordered, slowness_claims(setting.library), slowed or set(), ranked)
    stages = ({r.job_id: r.got_stage for r in per_job.itertuples() if isinstance(r.got_stage, str)}
              if "got_stage" in per_job.columns else None)
    ordered = with_unit_faults(ordered, ranked, conf, scored, claims, stages)
    first = ranked[ranked["rank"] == 1].drop_duplicates("job_id").set_index("job_id")["node"]
    rows = []
    for job in per_job.itertuples():
        found = ordered.get(job.job_id) or []
        node_first = bool(first.get(job.job_id) in set(job.faulty_nodes)) if job.has_faulty_nodes else None
        rows.append({"job_id": job.job_id, "fault_kind": job.fault_kind, "node_first": node_first,
                     "class_ok": bool(found) and found[0].fault_class == job.fault_class})
    return pd.DataFrame(rows)


def compare(dumps: list[Path], base: Setting, current: Setting, conf, spatial,
            base_conf=None, rerank: tuple | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-dump totals, the jobs whose outcome differs) of ``base`` under ``base_conf`` (default
    ``conf``) against ``current`` under ``conf`` (diagnosis configurations). ``rerank``: (the
    baseline's whole configuration, the current one) to rank each dump's nodes again under."""
    from l4spark.evaluation.rerank import rank_again, read_inputs

    totals, changed = [], []
    for dump in dumps:
        frames = read_dump(dump)
        slowed = read_slowed(dump)
        if rerank:
            facts, activity, lifts, _ = read_inputs(dump)
            scored, _, per_job = frames
            before, after = (outcomes((scored, rank_again(facts, activity, lifts, full), per_job), setting,
                                      full.diagnosis, full.spatial, lifted=True, slowed=slowed)
                             for setting, full in zip((base, current), rerank))
        else:
            before = outcomes(frames, base, base_conf or conf, spatial, slowed=slowed)
            after = outcomes(frames, current, conf, spatial, slowed=slowed)
        with_nodes = before["node_first"].notna()
        totals.append({"dump": str(dump), "node_jobs": int(with_nodes.sum()), "jobs": len(before),
                       "node_first_base": int(before.loc[with_nodes, "node_first"].astype(bool).sum()),
                       "node_first": int(after.loc[with_nodes, "node_first"].astype(bool).sum()),
                       "class_ok_base": int(before["class_ok"].sum()), "class_ok": int(after["class_ok"].sum())})
        for what in ("node_first", "class_ok"):
            differs = before[what].ne(after[what]) & before[what].notna()
            for i in before.index[differs]:
                changed.append({"dump": str(dump), "job_id": before.at[i, "job_id"],
                                "fault_kind": before.at[i, "fault_kind"], "what": what,
                                "change": "gained" if after.at[i, what] else "lost"})
    return pd.DataFrame(totals), pd.DataFrame(changed, columns=["dump", "job_id", "fault_kind", "what", "change"])


def main(argv: list[str] | None = None) -> int:
    from l4spark.config import load_config
    from l4spark.diagnosis.patterns import seed_patterns

    parser = argparse.ArgumentParser(prog="python -m l4spark.evaluation.known_faults",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--dump", type=Path, action="append", required=True,
                        help="an evaluate --dump folder; repeatable")
    parser.add_argument("--without", action="append", default=[], metavar="PATTERN_ID",
                        help="a seed pattern the baseline leaves out; repeatable")
    parser.add_argument("--classes", help="the baseline's known_fault_classes, comma-separated (default: the conf's)")
    parser.add_argument("--weight", type=float, help="the baseline's known_fault_weight (default: the conf's)")
    parser.add_argument("--conf", type=Path, help="a configuration file over the defaults")
    parser.add_argument("--base-conf", type=Path, help="the baseline's configuration file over the defaults "
                        "(default: --conf's); e.g. a unit fault switched off")
    parser.add_argument("--rerank", action="store_true",
                        help="rank the nodes again under each side's configuration (the dump's lifts), instead "
                        "of applying the known-fault term to the dump's ranking")
    args = parser.parse_args(argv)
    config = load_config(args.conf) if args.conf else load_config()
    conf = config.diagnosis
    library = tuple(seed_patterns())
    unknown = set(args.without) - {p.pattern_id for p in library}
    if unknown:
        parser.error(f"--without: no seed pattern {sorted(unknown)}")
    missing = [d for d in args.dump if not (d / "per_job.parquet").is_file()]
    if missing:
        parser.error(f"--dump: no per_job.parquet in {', '.join(map(str, missing))}")
    current = Setting(library, tuple(conf.known_fault_classes), conf.known_fault_weight)
    base = Setting(tuple(p for p in library if p.pattern_id not in set(args.without)),
                   tuple(c.strip() for c in args.classes.split(",") if c.strip()) if args.classes else current.classes,
                   conf.known_fault_weight if args.weight is None else args.weight)
    base_config = load_config(args.base_conf) if args.base_conf else config
    totals, changed = compare(args.dump, base, current, conf, config.spatial, base_config.diagnosis,
                              (base_config, config) if args.rerank else None)
    print(f"baseline: without {sorted(args.without) or 'nothing'}, classes {list(base.classes)}, weight {base.weight}")
    print(f"current:  the seed library ({len(library)}), classes {list(current.classes)}, weight {current.weight}")
    print("nodes:    " + ("ranked again under each side's configuration, the dump's lifts\n" if args.rerank
                          else "the dump's ranking, the known-fault term applied to it\n"))
    print(totals.to_string(index=False))
    total = totals.drop(columns=["dump"]).sum()
    print(f"\ntotal: node top-1 {total['node_first_base']} -> {total['node_first']} of {total['node_jobs']}, "
          f"fault class {total['class_ok_base']} -> {total['class_ok']} of {total['jobs']}")
    if len(changed):
        print("\n" + changed.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
