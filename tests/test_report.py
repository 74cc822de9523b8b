"""The per-job report renderers (no Spark): self-contained, escaped, complete, deterministic."""

from __future__ import annotations

import dataclasses
import os
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest

from l4spark.report import (
    JobReport,
    ReportInputError,
    render_html,
    render_markdown,
    render_terminal,
    safe_file_stem,
    write_reports,
)
from l4spark.report import figures
from l4spark.report.example import example_report
from l4spark.report.view import build_view, iteration_threshold

HOSTILE_TEMPLATE = "<script>alert(\"x\")</script> & 'q' a | b"
HOSTILE_SAMPLE = "kill <script>alert(1)</script> `rm -rf` a | b & c"
CJK_SAMPLE = "NCCL 通信超时: 节点间连接中断，等待所有进程退出 " * 4

NO_NODES = "No node scores for this job."
ONE_NODE = "there is no peer to compare it with"
NO_ITERATIONS = "No iteration was logged: no iteration curve."
NO_TIMELINE = "No timestamped stage span or error line: no timeline."
NO_HEAT = "No flagged event has lines per node: no heat map."
NO_PATTERN = "No known fault pattern matched this job"
FALLBACKS = (NO_NODES, ONE_NODE, NO_ITERATIONS, NO_TIMELINE, NO_HEAT, NO_PATTERN)


def realistic_report() -> JobReport:
    """The 16-node example plus an event and a remedy full of HTML/Markdown specials and CJK."""
    report = example_report()
    hostile = {"event_id": "E9999", "template": HOSTILE_TEMPLATE, "rank": 8, "score": 0.2,
               "sources": ["cross_job"], "n_lines": 2, "n_nodes": 1, "first_ts": pd.NaT,
               "stage": "training", "sample": HOSTILE_SAMPLE, "sample_node": "node-03",
               "sample_ts": pd.Timestamp("2024-06-12 08:59:40")}
    cjk = dict(hostile, event_id="E9998", template="NCCL 通信超时 <*>", rank=9, score=0.1,
               sample=CJK_SAMPLE)
    events = pd.concat([report.events, pd.DataFrame([hostile, cjk])], ignore_index=True)
    heat = pd.concat([report.heat, pd.DataFrame([{"event_id": "E9999", "node": "node-03", "n_lines": 2}])],
                     ignore_index=True)
    patterns = [dict(p) for p in report.patterns]
    patterns[2]["remedy"] = "restart | check `dmesg` <now>"
    return dataclasses.replace(report, events=events, heat=heat, patterns=patterns)


def error_report() -> JobReport:
    return JobReport(job={"job_id": "job-err", "status": "error", "failure_stage": None,
                          "failure_iteration": None, "suspect_nodes": [], "matched_patterns": [],
                          "n_lines": 0, "n_candidate_events": 0,
                          "error": "no parsed line for job <job-err> & its 'logs'", "run_id": "r1",
                          "processed_at": "2024-06-12 10:00:00", "version": "0.1.0"})


def one_node_report() -> JobReport:
    ts = pd.Timestamp("2024-06-12 08:00:00")
    return JobReport(
        job={"job_id": "single", "status": "diagnosed", "failure_stage": "model_loading",
             "failure_iteration": None, "suspect_nodes": [], "matched_patterns": [], "n_lines": 812,
             "n_candidate_events": 3, "error": None, "n_nodes": 1, "n_ranks": 8},
        events=pd.DataFrame([{"event_id": "E1", "template": "OSError: [Errno 28] No space left on device: <*>",
                              "rank": 1, "score": 0.9, "sources": ["cross_job"], "n_lines": 4,
                              "n_nodes": 1, "first_ts": ts, "stage": "model_loading",
                              "sample": "OSError: [Errno 28] No space left on device: '/ckpt/iter_0001000'",
                              "sample_node": "gpu-a", "sample_ts": ts + pd.Timedelta(minutes=3)}]),
        nodes=pd.DataFrame([{"node": "gpu-a", "process_rank": None, "rank": 1, "score": np.nan,
                             "suspect": False, "silent": False, "silent_gap_s": None, "n_lines": 812,
                             "evidence": [], "evidence_scores": []}]),
        stages=pd.DataFrame([("gpu-a", "init", ts, ts + pd.Timedelta(minutes=1)),
                             ("gpu-a", "model_loading", ts + pd.Timedelta(minutes=1), ts + pd.Timedelta(minutes=3))],
                            columns=["node", "stage", "start_ts", "end_ts"]),
        first_errors=pd.DataFrame([("gpu-a", ts + pd.Timedelta(minutes=3), "E1", "OSError: [Errno 28]")],
                                  columns=["node", "ts", "event_id", "message"]),
        heat=pd.DataFrame([("E1", "gpu-a", 4)], columns=["event_id", "node", "n_lines"]))


def large_report(n_nodes: int = 256, n_events: int = 60, n_iterations: int = 500) -> JobReport:
    rng = np.random.default_rng(3)
    names = [f"node-{i:03d}" for i in range(n_nodes)]
    scores = rng.uniform(0.4, 0.55, n_nodes)
    scores[[17, 130, 201]] = [0.81, 0.74, 0.69]
    nodes = pd.DataFrame({"node": names, "score": np.round(scores, 4), "n_lines": rng.integers(5e4, 9e4, n_nodes),
                          "silent": [i == 201 for i in range(n_nodes)],
                          "silent_gap_s": [700.0 if i == 201 else None for i in range(n_nodes)]})
    nodes = nodes.sort_values(["silent", "score"], ascending=[False, False]).reset_index(drop=True)
    nodes["rank"] = range(1, n_nodes + 1)
    nodes["suspect"] = nodes["rank"] <= 3
    nodes["evidence"] = [["E000"]] * n_nodes
    start = pd.Timestamp("2024-07-01 00:00:00")
    events = pd.DataFrame({"event_id": [f"E{i:03d}" for i in range(n_events)],
                           "template": [f"event {i} on <*> & <*>" for i in range(n_events)],
                           "rank": range(1, n_events + 1), "score": np.linspace(1, 0.1, n_events),
                           "sources": [["cross_job", "spatial"]] * n_events,
                           "n_lines": rng.integers(1, 5000, n_events), "n_nodes": rng.integers(1, n_nodes, n_events),
                           "first_ts": start, "stage": "training", "sample": "x" * 50,
                           "sample_node": names[17], "sample_ts": start})
    heat = pd.DataFrame([(f"E{e:03d}", names[n], int(rng.integers(1, 900))) for e in range(n_events)
                         for n in rng.choice(n_nodes, int(rng.integers(1, n_nodes)), replace=False)],
                        columns=["event_id", "node", "n_lines"])
    iteration_scores = rng.normal(0.95, 0.005, n_iterations)
    iteration_scores[[480, 499]] = [0.7, 0.5]
    iterations = pd.DataFrame({"iteration": range(1, n_iterations + 1), "score": iteration_scores,
                               "anomalous": [i in (480, 499) for i in range(n_iterations)],
                               "event_ids": [[]] * n_iterations, "threshold": np.nan})
    spans = [(n, s, start + pd.Timedelta(minutes=10 * k), start + pd.Timedelta(minutes=10 * k + 9))
             for n in names for k, s in enumerate(["init", "data_loading", "model_loading", "training"])]
    stages = pd.DataFrame(spans, columns=["node", "stage", "start_ts", "end_ts"])
    error_times = [start + pd.Timedelta(minutes=39, seconds=i % 60) for i in range(n_nodes)]
    first_errors = pd.DataFrame({"node": names, "ts": error_times, "event_id": "E001", "message": "NCCL error"})
    job = {"job_id": "big/../job 256", "status": "diagnosed", "failure_stage": "training",
           "failure_iteration": n_iterations, "suspect_nodes": list(nodes["node"][:3]),
           "matched_patterns": [], "n_lines": 21_000_000, "n_candidate_events": 400, "error": None,
           "n_nodes": n_nodes, "n_ranks": n_nodes * 8}
    return JobReport(job=job, events=events, nodes=nodes, iterations=iterations, stages=stages,
                     first_errors=first_errors, heat=heat)


REPORTS = {"realistic": realistic_report, "error": error_report, "one_node": one_node_report,
           "large": large_report}


@pytest.fixture(scope="module")
def html_pages() -> dict[str, str]:
    return {name: render_html(build()) for name, build in REPORTS.items()}


@pytest.fixture(scope="module")
def markdown_pages() -> dict[str, str]:
    return {name: render_markdown(build()) for name, build in REPORTS.items()}


# --- HTML -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(REPORTS))
def test_html_is_self_contained(html_pages, name):
    page = html_pages[name]
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"<script|<link|<iframe|@import|url\(\s*['\"]?(?!#)", page, re.I)
    assert re.findall(r"url\([^)]*\)", page) == re.findall(r"url\(#[\w-]+\)", page)
    assert "<!DOCTYPE svg" not in page and "<?xml" not in page


def test_html_escapes_log_text(html_pages):
    page = html_pages["realistic"]
    assert "alert" in page
    assert "<script" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;q&#x27; a | b" in page
    assert "kill &lt;script&gt;alert(1)&lt;/script&gt; `rm -rf` a | b &amp; c" in page
    assert "&lt;class &#x27;torch.cuda.CudaError&#x27;&gt;" in page
    error = html_pages["error"]
    assert "no parsed line for job &lt;job-err&gt; &amp; its &#x27;logs&#x27;" in error


def test_html_realistic_has_every_section_and_picture(html_pages):
    page = html_pages["realistic"]
    for heading in ("Root cause and remedy", "Matched fault patterns (3), best first",
                    "Failure-indicating events", "Node anomaly scores", "Iteration similarity",
                    "Timeline", "Flagged events by node"):
        assert f">{heading}</h" in page
    assert "llama70b-pretrain-0612-0417" in page and 'class="badge diagnosed"' in page
    assert "GPU fell off the bus (Xid 79)" in page and "confidence 92%" in page
    assert "Drain node-11 (scontrol update nodename=node-11" in page
    assert "<dt>Suspect nodes</dt><dd>node-11, node-07</dd>" in page
    assert "<dt>Failure iteration</dt><dd>40</dd>" in page
    assert "<dt>History group</dt><dd>llama-70b / 16x8 / megatron-lm (23 earlier jobs)</dd>" in page
    assert page.count("<svg") == 4
    assert "anomalous: 40 (0.583)" in page
    for sentence in FALLBACKS:
        assert sentence not in page
    ranks = [int(r) for r in re.findall(r'<tr id="event-\d+"><td class="num">(\d+)</td>', page)]
    assert ranks == list(range(1, 10))


def test_html_error_job_renders_sentences_instead_of_pictures(html_pages):
    page = html_pages["error"]
    assert 'class="badge error"' in page and "The job could not be diagnosed" in page
    assert "<svg" not in page
    for sentence in (NO_NODES, NO_ITERATIONS, NO_TIMELINE, NO_HEAT, NO_PATTERN,
                     "No event was flagged as failure-indicating."):
        assert sentence in page


def test_html_one_node_job(html_pages):
    page = html_pages["one_node"]
    assert "The job ran on one node (gpu-a): there is no peer to compare it with." in page
    assert NO_ITERATIONS in page and NO_PATTERN in page
    assert page.count("<svg") == 2     # timeline and heat map
    assert NO_TIMELINE not in page and NO_HEAT not in page


def test_html_large_job_is_capped_and_small(html_pages):
    page = html_pages["large"]
    assert len(page.encode("utf-8")) < 2_000_000
    assert page.count("<svg") == 4
    assert "Top 40 of 256 nodes by rank." in page
    assert "20 of 256 nodes (suspects first, then by rank)" in page
    assert "the 30 best of 60 events (cap 30)" in page and "of 256 nodes (cap 40)" in page
    assert "The 100 best of" not in page and page.count('<tr id="event-') == 60


def test_node_chart_shows_the_top_ranked_nodes_only():
    view = build_view(large_report())
    svg = figures.node_scores_svg(view)
    top = list(view.nodes["node"])
    assert all(f">{node}<" in svg for node in top[:40])
    assert not any(f">{node}<" in svg for node in top[40:])
    assert "silent 700 s" in svg


def test_pictures_hold_their_marks():
    view = build_view(realistic_report())
    assert "threshold 0.770" in figures.iteration_curve_svg(view)
    assert "failure iteration 40" in figures.iteration_curve_svg(view)
    timeline = figures.timeline_svg(view)
    assert "first ERROR/FATAL" in timeline and "checkpoint_saving" in timeline
    heat = figures.heatmap_svg(view)
    assert "#1 E0412" in heat and "mathdefault" not in heat and "lines (log scale)" in heat


# --- Markdown ---------------------------------------------------------------------------------

def _tables(text: str) -> list[list[str]]:
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_markdown_tables_are_well_formed(markdown_pages, name):
    tables = _tables(markdown_pages[name])
    assert tables
    for table in tables:
        assert re.fullmatch(r"\|( -{3}:? \|)+", table[1]), table[1]
        assert {_cells(row) for row in table} == {_cells(table[0])}, table


def test_markdown_escapes_cells_and_replaces_pictures(markdown_pages):
    text = markdown_pages["realistic"]
    assert "``kill <script>alert(1)</script> `rm -rf` a \\| b & c``" in text
    assert "restart \\| check \\`dmesg\\` \\<now\\>" in text
    assert "| 40 | 0.583 | `E0301, E0412` |" in text
    assert "| 1 | `node-11` | 0.781 | yes | silent 599 s |" in text
    assert "| `node-11` | 2024-06-12 08:49:12 | `E0412` |" in text
    assert "## Flagged events by node" in text
    assert "| 4 | `E0417` | 15 | `node-00 (8), node-01 (8), node-02 (8), node-03 (8), node-04 (8), …` |" in text
    for sentence in FALLBACKS:
        assert sentence not in text


def test_markdown_fallbacks(markdown_pages):
    error, single = markdown_pages["error"], markdown_pages["one_node"]
    assert "> **The job could not be diagnosed:** no parsed line for job \\<job-err\\> & its 'logs'" in error
    assert NO_NODES in error and "No iteration was logged" in error
    assert "No node logged an ERROR/FATAL line." in error
    assert "The job ran on one node (`gpu-a`)" in single and "No iteration was logged" in single
    assert "Top 20 of 256 nodes by rank." in markdown_pages["large"]


# --- Terminal ---------------------------------------------------------------------------------

def _columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


@pytest.mark.parametrize("name", sorted(REPORTS))
@pytest.mark.parametrize("width", [40, 72, 100])
def test_terminal_lines_fit_the_width(name, width):
    text = render_terminal(REPORTS[name](), width=width)
    lines = text.splitlines()
    assert len(lines) > 10
    assert max(_columns(line) for line in lines) <= width
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text)


def test_terminal_summary_content():
    text = render_terminal(realistic_report(), width=100)
    assert text.startswith("l4spark diagnosis [DIAGNOSED] job llama70b-pretrain-0612-0417\n")
    assert "Suspect: node-11, node-07" in text and "Failure stage: training" in text
    assert "  Remedy: Drain node-11" in text and "also matched: NCCL collective timeout" in text
    assert "> [node-11 2024-06-12 08:49:12] NVRM: Xid (PCI:0000:c1:00): 79" in text
    assert "anomalous: 40 (0.583)" in text
    large = render_terminal(large_report())
    assert "#10 E009" in large and "#11 E010" not in large
    assert "Top events (10 of 60)" in large


def test_terminal_rejects_a_narrow_width():
    with pytest.raises(ValueError, match="width >= 40; got 20"):
        render_terminal(error_report(), width=20)


# --- Input contract ---------------------------------------------------------------------------

def test_missing_required_column_is_named():
    report = dataclasses.replace(error_report(), events=pd.DataFrame({"event_id": ["E1"]}))
    with pytest.raises(ReportInputError, match=r"JobReport.events lacks column\(s\) \['rank'\]"):
        render_html(report)
    with pytest.raises(ReportInputError, match="non-empty 'job_id'"):
        render_markdown(JobReport(job={"status": "error"}))


def test_threshold_is_computed_when_missing_or_nan():
    scores = [0.9, 0.92, 0.91, 0.5]
    expected = float(np.mean(scores) - 3 * np.std(scores))
    without = pd.DataFrame({"iteration": [1, 2, 3, 4], "score": scores})
    assert iteration_threshold(without.assign(threshold=np.nan)) == pytest.approx(expected)
    assert iteration_threshold(without.assign(threshold=0.8)) == 0.8
    view = build_view(JobReport(job={"job_id": "j"}, iterations=without))
    assert view.threshold == pytest.approx(expected) and view.anomalous.empty
    flagged = build_view(JobReport(job={"job_id": "j"}, iterations=without.assign(threshold=0.8)))
    assert list(flagged.anomalous["iteration"]) == [4]


def test_output_is_deterministic_and_independent_of_row_order():
    report = realistic_report()
    shuffled = dataclasses.replace(report, **{
        name: getattr(report, name).sample(frac=1.0, random_state=5)
        for name in ("events", "nodes", "iterations", "stages", "first_errors", "heat")})
    first = render_html(report)
    assert render_html(report) == first
    assert render_html(shuffled) == first
    assert render_markdown(shuffled) == render_markdown(report)
    assert render_terminal(shuffled) == render_terminal(report)


# --- Files ------------------------------------------------------------------------------------

HOSTILE_IDS = ["../../etc/passwd", "..", ".", "/abs/job", "a/b\\c d", "ジョブ 1", ".hidden",
               "%2E", "x" * 400, "job-1.2_ok"]


def test_write_reports_stays_inside_out_dir(tmp_path):
    out_dir = tmp_path / "reports"
    written = set()
    for job_id in HOSTILE_IDS:
        report = dataclasses.replace(error_report(), job={**error_report().job, "job_id": job_id})
        html_path, md_path = write_reports(report, out_dir)
        for path in (html_path, md_path):
            assert path.resolve().parent == out_dir.resolve()
            assert not path.name.startswith(".")
            assert len(path.name.encode()) <= 255
        assert html_path.read_text(encoding="utf-8") == render_html(report)
        assert md_path.read_text(encoding="utf-8") == render_markdown(report)
        written |= {html_path.name, md_path.name}
    assert len(written) == 2 * len(HOSTILE_IDS)
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(written)   # no temp file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert (out_dir / "job-1.2_ok.html").stat().st_mode & 0o777 == 0o666 & ~umask


def test_safe_file_stem_is_reversible():
    for job_id in HOSTILE_IDS[:-2]:
        assert unquote(safe_file_stem(job_id)) == job_id
    assert safe_file_stem("..") == "%2E."
    assert safe_file_stem("a/b c") == "a%2Fb%20c"
    assert safe_file_stem("x" * 400) != safe_file_stem("x" * 401)


def test_example_command_writes_both_files(tmp_path, capsys):
    from l4spark.report.example import main

    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"wrote {Path(tmp_path) / 'llama70b-pretrain-0612-0417.html'}",
        f"wrote {Path(tmp_path) / 'llama70b-pretrain-0612-0417.md'}"]
