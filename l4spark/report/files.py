"""``write_reports``: the HTML and Markdown files of one job, written atomically.

The file name comes from the job id but can never leave the output folder: every character
outside ``[A-Za-z0-9._-]`` (and a leading dot) is written as ``%XX`` of its UTF-8 bytes, which
is reversible, so two job ids never share a name; a very long id is cut and suffixed with a
hash of the whole id.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path

from l4spark.io.fs import is_local, local_path
from l4spark.report.html_page import render_html
from l4spark.report.markdown_text import render_markdown
from l4spark.report.model import JobReport, ReportInputError
from l4spark.report.view import build_view

MAX_NAME_CHARS = 180   # leaves room for the suffix and the temp-file decoration under 255 bytes
_SAFE = re.compile(r"[A-Za-z0-9._-]")


def safe_file_stem(job_id: str) -> str:
    """A file name stem for ``job_id`` that is a single path component, not hidden, not empty."""
    job_id = str(job_id)
    if not job_id:
        raise ReportInputError("a report file needs a non-empty job_id; found ''")
    stem = "".join(ch if _SAFE.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
                   for ch in job_id)
    if stem.startswith("."):
        stem = "%2E" + stem[1:]
    if len(stem) > MAX_NAME_CHARS:
        digest = hashlib.sha256(job_id.encode("utf-8")).hexdigest()[:12]
        stem = stem[:MAX_NAME_CHARS] + "~" + digest
    return stem


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temp file beside ``path``, flush it to disk, then rename over ``path``."""
    # not mkstemp: its 0600 mode would make the report unreadable to others; "x" honours the umask
    temp_name = path.parent / f".tmp-{uuid.uuid4().hex}.part"
    out = open(temp_name, "x", encoding="utf-8", newline="\n")
    try:
        with out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, path)
    except BaseException:
        temp_name.unlink(missing_ok=True)
        raise


def write_reports(report: JobReport, out_dir: str | os.PathLike, spark=None) -> tuple[Path | str, Path | str]:
    """Write ``<out_dir>/<safe job id>.html`` and ``.md`` (creating ``out_dir``); returns both
    paths. Each file is replaced atomically, so a reader sees the old or the new report.

    ``out_dir`` a remote URI (``hdfs://``, ``s3a://``...: ``io.fs``): written through ``spark``'s
    text writer, each report a folder ``<stem>.html/`` holding one part file (``hadoop fs -cat
    <out_dir>/<stem>.html/part-*``), overwritten whole: a reader may find it missing during the
    rewrite, never half-written."""
    view = build_view(report)   # checks the job id; shaped once for both files
    html_text, md_text = render_html(view), render_markdown(view)
    if not is_local(out_dir):
        return _write_remote(spark, str(out_dir), safe_file_stem(str(report.job["job_id"])), html_text, md_text)
    out = local_path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = safe_file_stem(str(report.job["job_id"]))
    html_path, md_path = out / f"{stem}.html", out / f"{stem}.md"
    if html_path.resolve().parent != out.resolve():
        raise ReportInputError(f"report path {html_path} is outside {out}")
    _write_atomically(html_path, html_text)
    _write_atomically(md_path, md_text)
    return html_path, md_path


def _write_remote(spark, out_dir: str, stem: str, html_text: str, md_text: str) -> tuple[str, str]:
    if spark is None:
        raise ReportInputError(f"reports to {out_dir} are written through Spark: no session given")
    paths = []
    for suffix, text in (("html", html_text), ("md", md_text)):
        path = f"{out_dir.rstrip('/')}/{stem}.{suffix}"
        # one row holding the whole text: the writer adds a final newline, nothing else
        (spark.createDataFrame([(text.removesuffix("\n"),)], "value string").coalesce(1)
         .write.mode("overwrite").text(path))
        paths.append(path)
    return paths[0], paths[1]
