"""Files of the fleet: rank logs (plain or deterministic gzip), job.json and labels.

Layout: ``<out>/<job_id>/<node>/rank-<global_rank>.log[.gz]``, ``<out>/<job_id>/job.json`` and,
for failed jobs only, ``<out>/_labels/<job_id>.json`` (outside every job folder).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


class JobFiles:
    """Writes the files of one job."""

    def __init__(self, root: Path, job_id: str, use_gzip: bool) -> None:
        self.dir = root / job_id
        self.dir.mkdir(parents=True, exist_ok=True)
        self.use_gzip = use_gzip
        self._made: set[str] = set()

    def write_rank(self, node: str, rank: int, lines: list[str]) -> tuple[int, int]:
        """Write one rank file; return (uncompressed bytes, bytes on disk)."""
        if node not in self._made:
            (self.dir / node).mkdir(exist_ok=True)
            self._made.add(node)
        data = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
        if self.use_gzip:
            path = self.dir / node / ("rank-%d.log.gz" % rank)
            with open(path, "wb") as raw:
                # no file name and mtime 0 in the header: same input, same bytes
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) as gz:
                    gz.write(data)
                written = raw.tell()
        else:
            path = self.dir / node / ("rank-%d.log" % rank)
            with open(path, "wb") as f:
                f.write(data)
            written = len(data)
        return len(data), written

    def write_json(self, name: str, obj: dict) -> None:
        (self.dir / name).write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n", encoding="utf-8")

    @staticmethod
    def write_label(root: Path, job_id: str, label: dict) -> None:
        folder = root / "_labels"
        folder.mkdir(exist_ok=True)
        (folder / (job_id + ".json")).write_text(json.dumps(label, indent=1) + "\n", encoding="utf-8")
