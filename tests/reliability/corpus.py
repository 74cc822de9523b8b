"""The bad-input corpus: job folders that break the rules, written at test time next to good jobs.

``python -m tests.reliability.corpus OUT`` writes it to a folder (to look at); the tests call
``write_bad_corpus``. Everything is generated (nothing binary is checked in); the 50 MB line
and the 4,096 rank files are made here, at test time.

Each bad job is its own job folder, so the good jobs of the batch must be diagnosed exactly as
without it. Job ids start with ``zz`` (or a non-ASCII letter) so that they sort after the
simulator's ``job-...`` ids: the template store meets their messages after the good jobs'
(Drain clusters are shared by design; a job seen first founds them). Their log text uses its own
words ("corpus ...") so that no Drain cluster or cross-job count of a good job changes.
``EXPECTED`` says what each must give: quarantine reasons with line counts, the jobs row's
status, and the diagnosis_jobs status (or None: not diagnosed).
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

START = "2026-11-10T08:00:00Z"
END = "2026-11-10T09:00:00Z"
GIANT_LINE_BYTES = 50 * 1024 * 1024
MANY_RANKS = 4096
MANY_RANKS_NODES = 64


@dataclass(frozen=True)
class Expected:
    """What a bad job must give. ``issues``: reason -> lines it covers (per the quarantine
    table's n_lines summed over the job's rows; 0 for per-file reasons); ``status``: the jobs
    table status; ``diagnosis``: diagnosis_jobs status, or None when the job is not selected;
    ``error``: a fragment of the diagnosis error; ``lines``: lines in the events table."""

    what: str
    issues: dict[str, int] = field(default_factory=dict)
    status: str = "failed"
    diagnosis: str | None = "diagnosed"
    error: str | None = None
    lines: int | None = None


def _line(i: int, text: str, minute: int = 0, level: str = "INFO") -> str:
    return f"[2026-11-10 08:{minute:02d}:{i % 60:02d}] {level} corpus {text} step {i}"


def _body(n: int, tag: str, fail: bool = True) -> list[str]:
    lines = [_line(i, f"{tag} training progress", minute=i // 60 % 50) for i in range(n)]
    if fail:
        lines.append(_line(n, f"{tag} fatal device fault on accelerator", minute=55, level="ERROR"))
    return lines


def _meta(job_id: str, status: str = "failed", **extra) -> dict:
    return {"job_id": job_id, "status": status, "settings": {"model": "corpus", "framework": "corpus"},
            "start_time": START, "end_time": END, **extra}


def _job(root: Path, job_id: str, files: dict[str, bytes], meta: dict | str | None = "default") -> None:
    folder = root / job_id
    folder.mkdir(parents=True)
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if meta == "default":
        meta = _meta(job_id)
    if isinstance(meta, dict):
        (folder / "job.json").write_text(json.dumps(meta), "utf-8")
    elif isinstance(meta, str):
        (folder / "job.json").write_text(meta, "utf-8")


def _text(lines: list[str], end: str = "\n") -> bytes:
    return "".join(line + end for line in lines).encode("utf-8")


def write_bad_corpus(root: Path) -> dict[str, Expected]:
    """Write every bad job under ``root`` (a logs root); returns job id -> Expected."""
    root = Path(root)
    expected: dict[str, Expected] = {}

    # --- bytes -----------------------------------------------------------------------------
    latin1 = [_line(i, "encoding latin1 caf\u00e9 na\u00efve").encode("latin-1") for i in range(3)]
    cp1252 = [_line(9, "encoding cp1252 \u201cquoted\u201d").encode("cp1252")]
    utf16 = [_line(10, "encoding utf16 wide").encode("utf-16-le")]  # NUL bytes in every other place
    good = [_line(i, "encoding plain utf8 \u00fc\u00f1\u00ee") .encode("utf-8") for i in range(4, 9)]
    _job(root, "zz-encoding", {
        "node-a/rank-0.log": b"\n".join(latin1 + good + cp1252) + b"\n",
        "node-a/rank-1.log": b"\n".join(good + utf16 + [_text(_body(3, "encoding"))]),
    })
    expected["zz-encoding"] = Expected("non-UTF-8 and mixed encodings (latin-1, cp1252, UTF-16 in a UTF-8 file)",
                                       {"invalid_utf8": 4, "binary_line": 1}, lines=3 + 5 + 1 + 5 + 4)

    nul = [_line(i, "nul bytes").encode() for i in range(5)]
    nul[2] = b"corpus \x00\x00\x00 torn write \x00"
    nul[4] = b"\x00" * 64
    _job(root, "zz-nul", {"node-a/rank-0.log": b"\n".join(nul) + b"\n" + _text(_body(2, "nul"))})
    expected["zz-nul"] = Expected("NUL bytes (a torn write, a run of NULs)", {"binary_line": 2}, lines=3 + 3)

    giant = root / "zz-giant-line" / "node-a" / "rank-0.log"
    giant.parent.mkdir(parents=True)
    with open(giant, "wb") as handle:
        handle.write(_text(_body(2, "giant", fail=False)))
        chunk = b"x" * (1024 * 1024)
        for _ in range(GIANT_LINE_BYTES // len(chunk)):
            handle.write(chunk)
        handle.write(b"\n" + _text([_line(3, "giant after the long line"), _line(4, "giant fatal device fault",
                                                                                   minute=55, level="ERROR")]))
    (root / "zz-giant-line" / "job.json").write_text(json.dumps(_meta("zz-giant-line")))
    expected["zz-giant-line"] = Expected("a 50 MB single line between normal lines", {"line_too_long": 1}, lines=4)

    crlf = _text(_body(4, "crlf"), end="\r\n")
    lone_cr = _text([_line(i, f"progress bar {i * 10}%") for i in range(5)], end="\r") + _text(_body(1, "cr"))
    _job(root, "zz-line-ends", {"node-a/rank-0.log": crlf, "node-a/rank-1.log": lone_cr})
    expected["zz-line-ends"] = Expected("CRLF line ends, and lone CR (progress bar redraws)", {}, lines=5 + 5 + 2)

    whole = gzip.compress(_text(_body(40, "gzip")))
    corrupt = bytearray(whole)
    corrupt[len(corrupt) // 2: len(corrupt) // 2 + 16] = b"\xff" * 16
    _job(root, "zz-gzip", {"node-a/rank-0.log.gz": whole[: len(whole) * 2 // 3],
                           "node-a/rank-1.log.gz": bytes(corrupt),
                           "node-a/rank-2.log.gz": whole,
                           "node-a/rank-3.log.gz": b"this is not gzip at all\n"})
    expected["zz-gzip"] = Expected("truncated .gz, corrupt .gz, a .gz name on plain text, and a good .gz",
                                   {"gzip_truncated": 0, "gzip_corrupt": 0}, lines=41 + 26)

    _job(root, "zz-empty-files", {"node-a/rank-0.log": b"", "node-a/rank-1.log.gz": b""})
    expected["zz-empty-files"] = Expected("zero-byte rank files only (plain and .gz)", {"empty_file": 0},
                                          diagnosis="error", error="no log line to diagnose", lines=0)

    # --- content -----------------------------------------------------------------------------
    traceback = ["Traceback (most recent call last):",
                 '  File "/opt/corpus/launch_corpus.py", line 7, in <module>',
                 "    corpus_main(corpus_args)",
                 '  File "/opt/corpus/corpus_main.py", line 31, in corpus_main',
                 "    raise CorpusDeviceError(corpus_code)",
                 "CorpusDeviceError: corpus device fault 7"]
    _job(root, "zz-traceback-only", {"node-a/rank-0.log": _text(traceback * 3)})
    expected["zz-traceback-only"] = Expected("a rank file with only tracebacks (no timestamps)", {}, lines=18)

    clock = _body(6, "clock")
    clock[1], clock[4] = clock[4], clock[1]  # out of order
    clock += ["[2099-01-01 00:00:00] ERROR corpus clock from the future step 1",
              "[1999-12-31 23:59:59] INFO corpus clock from the past step 2"]
    _job(root, "zz-clock", {"node-a/rank-0.log": _text(clock), "node-b/rank-1.log": _text(_body(6, "clock"))})
    expected["zz-clock"] = Expected("timestamps out of order, in the future (2099) and the past (1999)",
                                    {"ts_outside_job": 2}, lines=9 + 7)

    # --- layout ------------------------------------------------------------------------------
    _job(root, "zz-duplicate-rank", {"node-a/rank-0.log": _text(_body(3, "duplicate")),
                                     "node-b/rank-0.log": _text(_body(3, "duplicate"))})
    expected["zz-duplicate-rank"] = Expected("the same rank number on two nodes", {"duplicate_rank": 0}, lines=8)

    _job(root, "zz-empty-node", {"node-a/rank-0.log": _text(_body(3, "emptynode")),
                                 "node-b/notes.txt": b"operator notes\n"})
    (root / "zz-empty-node" / "node-c").mkdir()
    expected["zz-empty-node"] = Expected("node folders with no rank file (one empty, one with a stray file)",
                                         {"no_rank_files": 0, "outside_layout": 0}, lines=4)

    _job(root, "zz-one-node", {"node-a/rank-0.log": _text(_body(5, "onenode")),
                               "node-a/rank-1.log": _text(_body(5, "onenode"))})
    expected["zz-one-node"] = Expected("a job with one node", {}, lines=12)

    many = {f"node-{r // (MANY_RANKS // MANY_RANKS_NODES):03d}/rank-{r}.log":
            _text(_body(2, "many", fail=r == 77)) for r in range(MANY_RANKS)}
    _job(root, "zz-4096-ranks", many)
    expected["zz-4096-ranks"] = Expected(f"{MANY_RANKS:,} ranks of tiny files on {MANY_RANKS_NODES} nodes", {},
                                         lines=2 * MANY_RANKS + 1)

    # --- job.json ----------------------------------------------------------------------------
    rank = {"node-a/rank-0.log": _text(_body(3, "meta"))}
    _job(root, "zz-meta-missing", rank, meta=None)
    expected["zz-meta-missing"] = Expected("job.json missing", {"job_meta": 0}, status="unknown", diagnosis=None)
    _job(root, "zz-meta-not-json", rank, meta="{'job_id': 'zz-meta-not-json',")
    expected["zz-meta-not-json"] = Expected("job.json not JSON", {"job_meta": 0}, status="unknown", diagnosis=None)
    _job(root, "zz-meta-types", rank, meta={"job_id": "zz-meta-types", "status": ["failed"], "settings": "big",
                                            "start_time": 1731225600, "end_time": None})
    expected["zz-meta-types"] = Expected("job.json with wrong types", {"job_meta": 0}, status="unknown",
                                         diagnosis=None)
    _job(root, "zz-meta-status", rank, meta=_meta("zz-meta-status", status="exploded"))
    expected["zz-meta-status"] = Expected("job.json with an unknown status", {"job_status": 0}, status="exploded",
                                          diagnosis=None)
    _job(root, "zz-meta-escape", rank, meta=_meta("../../../etc/escape"))
    expected["zz-meta-escape"] = Expected("job.json whose job_id is a path ('../../../etc/escape')",
                                          {"job_meta": 0}, status="unknown", diagnosis=None)

    # --- names -------------------------------------------------------------------------------
    for job_id, node in (("zz..dots", "node..1"), ("zz job with spaces", "node 01"),
                         ("\u00fcnicode-\u4f5c\u696d-\u00e9", "\u8282\u70b9-\u00e9")):
        _job(root, job_id, {f"{node}/rank-0.log": _text(_body(3, "names")),
                            f"{node}/rank-1.log": _text(_body(3, "names"))})
        expected[job_id] = Expected(f"job id {job_id!r}, node name {node!r}", {}, lines=8)
    _job(root, "zz-nested", {"a/b/rank-0.log": _text(_body(3, "nested")),
                             "node-a/rank-1.log": _text(_body(3, "nested"))})
    expected["zz-nested"] = Expected("a '/' in the node part (a rank file one folder too deep)",
                                     {"outside_layout": 0, "no_rank_files": 0}, lines=4)
    hidden = root / "..zz-hidden" / "node-a"
    hidden.mkdir(parents=True)
    (hidden / "rank-0.log").write_bytes(_text(_body(3, "hidden")))
    return expected


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for job_id, item in write_bad_corpus(out).items():
        print(f"{job_id:<28} {item.what}")
