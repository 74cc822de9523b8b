"""Pace per unit (issue #18.2): per-rank step readings against the peers' median, and the report's view."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest

from l4spark.report import render_html, render_markdown, render_terminal
from l4spark.report.model import JobReport

EVENT_SCHEMA = "job_id string, node string, rank int, line_no long, ts timestamp, message string"


def _timer_job(job_id: str = "job-p") -> list[tuple]:
    """8 ranks on 4 nodes; the last rank (on n3) prints an iteration line then a per-rank timer
    block every 10 iterations; rank 5 (on n2) computes 1.5x slower from iteration 30 and the
    others' gradient sync absorbs the wait."""
    rows, line = [], 0
    t0 = datetime(2026, 11, 2, 7, 0, 0)
    for k, iteration in enumerate(range(10, 70, 10)):
        slow = iteration >= 30
        line += 1
        rows.append((job_id, "n3", 7, line, t0 + timedelta(seconds=60 * k),
                     f" [2026-11-02 07:00:00] iteration {iteration:8d}/    1000 | elapsed time per iteration (ms): 6000.0 |"))
        texts = ["times across ranks (ms):"]
        for timer, base in (("forward-compute", 100.0), ("backward-compute", 200.0), ("all-grads-sync", 20.0)):
            texts.append(f"  {timer}:")
            for r in range(8):
                jitter = 0.5 * ((r * 7 + k) % 5)
                if timer == "all-grads-sync":
                    value = base + jitter + (0.0 if (r == 5 or not slow) else 150.0)
                else:
                    value = base * (1.5 if (r == 5 and slow) else 1.0) + jitter
                texts.append(f"     rank {r:2d}: {value:.2f}")
        for text in texts:
            line += 1
            rows.append((job_id, "n3", 7, line, None, text))
    for r in range(8):
        rows.append((job_id, f"n{r // 2}", r, 0, t0, "start"))
    return rows


@pytest.mark.spark
def test_unit_pace_finds_the_rank_the_others_wait_for_in_per_rank_timers(spark):
    from l4spark.spatial.pace import PACE_COLUMNS, unit_pace
    from l4spark.temporal.config import TemporalConfig

    events = spark.createDataFrame(_timer_job(), EVENT_SCHEMA)
    pace = unit_pace(events, TemporalConfig()).toPandas()
    assert list(pace.columns) == PACE_COLUMNS
    assert set(pace["source"]) == {"timers"} and set(pace["node"]) == {"n0", "n1", "n2", "n3"}
    # steps are the iterations printed before each block
    assert sorted(pace["step"].unique()) == [10, 20, 30, 40, 50, 60]
    slow = pace[pace["node"] == "n2"].set_index("step")
    assert slow.loc[40, "ratio"] == pytest.approx(1.5, abs=0.02) and slow.loc[40, "timer"] in (
        "forward-compute", "backward-compute")
    assert slow.loc[10, "ratio"] < 1.05
    others = pace[pace["node"] != "n2"]
    assert others["ratio"].max() < 1.05  # the others' sync wait is the median, not slowness


@pytest.mark.spark
def test_unit_pace_reads_per_rank_progress_lines_free_of_clock_skew(spark):
    from l4spark.spatial.pace import unit_pace
    from l4spark.temporal.config import TemporalConfig

    # four ranks each print their own progress line; n2's clock is 5 s ahead (a constant offset
    # changes no duration) and its steps take 2 s instead of 1 s from iteration 20 on
    rows, t0 = [], datetime(2026, 11, 2, 7, 0, 0)
    for r in range(4):
        t = 0.0 + (5.0 if r == 2 else 0.0)
        for line, iteration in enumerate(range(1, 41), start=1):
            t += 2.0 if (r == 2 and iteration > 20) else 1.0
            rows.append(("job-q", f"n{r}", r, line, t0 + timedelta(seconds=t),
                         f" [2026-11-02 07:00:00] iteration {iteration:8d}/      40 | elapsed time per iteration (ms): 1000.0 |"))
    pace = unit_pace(spark.createDataFrame(rows, EVENT_SCHEMA), TemporalConfig()).toPandas()
    assert set(pace["source"]) == {"progress"}
    by_node = pace.groupby("node")["ratio"]
    assert by_node.median().idxmax() == "n2"
    n2 = pace[pace["node"] == "n2"].set_index("step")["ratio"]
    assert n2.loc[30] == pytest.approx(2.0) and n2.loc[10] == pytest.approx(1.0)
    assert pace[pace["node"] != "n2"]["ratio"].max() == pytest.approx(1.0)


def _report(pace: pd.DataFrame) -> JobReport:
    return JobReport(job={"job_id": "job-p", "status": "diagnosed"}, pace=pace)


def _pace_rows() -> pd.DataFrame:
    rows = []
    for step in range(10, 70, 10):
        for node in ("n0", "n1", "n2", "n3"):
            ratio = 1.5 if (node == "n2" and step >= 30) else 1.0 + 0.001 * int(node[1:])
            rows.append({"node": node, "process_rank": None, "source": "timers", "step": step,
                         "timer": "forward-compute", "ms": 100.0 * ratio, "peer_ms": 100.0, "ratio": ratio})
    return pd.DataFrame(rows)


def test_the_report_names_the_slowest_unit_and_draws_its_pace():
    report = _report(_pace_rows())
    page = render_html(report)
    assert "Pace per unit" in page and "<svg" in page.split("Pace per unit", 1)[1]
    assert "n2 takes 1.50x its peers&#x27; median time per step from step 30" in page
    markdown = render_markdown(report)
    assert "## Pace per unit" in markdown and "| n2 | 1.50x | 1.50x | 30 | 6 |" in markdown
    terminal = render_terminal(report)
    assert "n2 takes 1.50x its peers' median time per step from step 30" in terminal


def test_a_job_without_per_rank_readings_says_so_and_a_healthy_pace_names_no_one():
    page = render_html(_report(pd.DataFrame()))
    assert "no pace view" in page
    assert "Pace" not in render_terminal(_report(pd.DataFrame()))
    healthy = _pace_rows().assign(ratio=lambda f: 1.0 + 0.001 * f["node"].str[1:].astype(int))
    assert "No unit is slower than its peers" in render_terminal(_report(healthy))


@pytest.mark.spark
@pytest.mark.parametrize("b_first", [True, False])
def test_unit_pace_breaks_equal_ratios_by_timer_name_not_by_row_order(spark, b_first):
    """The median unit reads ratio 1.0 on every timer: its row names the greatest timer name,
    whichever timer the block prints first (the old max_by kept a row by arrival order: a
    change of plan, such as adaptive execution off, changed 3 of 148 pace rows of a fleet)."""
    from l4spark.spatial.pace import unit_pace
    from l4spark.temporal.config import TemporalConfig

    t0 = datetime(2026, 11, 2, 7, 0, 0)
    texts = ["times across ranks (ms):"]
    timers = [("b-second", (1.0, 2.0, 2.5)), ("a-first", (10.0, 20.0, 30.0))]
    for timer, values in (timers if b_first else timers[::-1]):
        texts.append(f"  {timer}:")
        texts += [f"     rank {r:2d}: {v:.2f}" for r, v in enumerate(values)]
    rows = [("job-t", "n2", 2, line, None, text) for line, text in enumerate(texts, start=1)]
    rows += [("job-t", f"n{r}", r, 0, t0, "start") for r in range(3)]
    pace = unit_pace(spark.createDataFrame(rows, EVENT_SCHEMA), TemporalConfig()).toPandas().set_index("node")
    assert pace.loc["n1", "ratio"] == 1.0
    assert (pace.loc["n1", "timer"], pace.loc["n1", "ms"]) == ("b-second", 2.0)
    assert (pace.loc["n2", "timer"], pace.loc["n2", "ratio"]) == ("a-first", 1.5)
