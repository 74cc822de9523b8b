"""Figures of a simulated fleet computed from its labels: ``python -m l4spark.simulate.stats DIR``.

Reports the share of failure-indicating *lines* (sum of ``count``) and of distinct indicating
messages by level, the fault kinds, and the indicating lines per job.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def label_stats(root: str | Path) -> dict:
    """Aggregate every ``_labels/*.json`` under root."""
    lines_by_level: Counter = Counter()
    msgs_by_level: Counter = Counter()
    kinds: Counter = Counter()
    repeated = 0
    n_jobs = 0
    for path in sorted(Path(root, "_labels").glob("*.json")):
        label = json.loads(path.read_text(encoding="utf-8"))
        n_jobs += 1
        kinds[label["fault_kind"]] += 1
        for m in label["indicating_messages"]:
            lines_by_level[m["level"]] += m["count"]
            msgs_by_level[m["level"]] += 1
            repeated += m["count"] >= 100
    total_lines = sum(lines_by_level.values()) or 1
    total_msgs = sum(msgs_by_level.values()) or 1
    return {
        "failed_jobs": n_jobs,
        "fault_kinds": dict(sorted(kinds.items())),
        "indicating_lines": sum(lines_by_level.values()),
        "indicating_messages": sum(msgs_by_level.values()),
        "messages_repeated_100_plus": repeated,
        "line_share_by_level": {k: round(v / total_lines, 4) for k, v in lines_by_level.most_common()},
        "message_share_by_level": {k: round(v / total_msgs, 4) for k, v in msgs_by_level.most_common()},
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m l4spark.simulate.stats FLEET_DIR", file=sys.stderr)
        return 2
    if not Path(argv[0], "_labels").is_dir():
        print("error: %s has no _labels folder" % argv[0], file=sys.stderr)
        return 2
    print(json.dumps(label_stats(argv[0]), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
