"""The HTML report: self-contained, escaped, with its sections and charts."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from smx_debug.evaluate import JobData, evaluate, series_frame
from smx_debug.htmlreport import ReportInput, estimate_cost, render_report
from smx_debug.htmlreport.svg import histogram, line_chart

EVIL = '<script>alert("x")</script>'


def _data() -> JobData:
    t = np.arange(1200.0)
    low = t >= 600
    system = pd.concat([
        series_frame("algo-1", "gpu0", "GPUUtilization", np.where(low, 5.0, 80.0), timestamps_s=t),
        series_frame("algo-1", "gpu0", "GPUMemoryUtilization", np.full(1200, 30.0), timestamps_s=t),
        series_frame("algo-1", "cpu0", "CPUUtilization", np.where(low, 95.0, 50.0), timestamps_s=t),
        series_frame(EVIL, "cpu0", "CPUUtilization", np.full(1200, 10.0), timestamps_s=t),
    ], ignore_index=True)
    d = np.r_[np.full(300, 1.0), np.full(20, 9.0)]
    starts = 60 + np.cumsum(np.r_[0, d[:-1]])
    steps = pd.DataFrame({"node": "algo-1", "rank": 0, "mode": "TRAIN", "step": np.arange(320, dtype=np.int64),
                          "start": pd.to_datetime((starts * 1e9).astype(np.int64), utc=True),
                          "end": pd.to_datetime(((starts + d) * 1e9).astype(np.int64), utc=True), "duration": d})
    return JobData(system=system, steps=steps)


def _html() -> str:
    data = _data()
    results = evaluate(data, overrides={"CPUBottleneck": {"threshold": 20}})  # 600 of 2400 snapshots
    cost = estimate_cost("ml.p3.8xlarge", 2, 1200, [40.0], [80.0])
    return render_report(ReportInput(job_name=EVIL, data=data, results=results, cost=cost, source=EVIL,
                                     skipped={EVIL: 1}))


def test_report_escapes_every_string_from_data():
    html = _html()
    assert "<script" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_report_is_self_contained_no_urls():
    html = _html()
    assert "http" not in html.lower()
    assert re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', html) == [
        "#summary", "#rules", "#usage", "#timeline", "#heatmap", "#steps", "#cost"]


def test_report_has_sections_charts_and_fired_rule():
    html = _html()
    for section in ("summary", "rules", "usage", "timeline", "heatmap", "steps", "cost"):
        assert f"id='{section}'" in html
    assert html.count("<svg") >= 7  # 2 timelines, 4 histograms, 2 heatmaps, 1 step histogram
    assert "<tr class='fired' data-rule='CPUBottleneck'>" in html
    assert "Right-sizing:" in html


def test_histogram_marks_bars_above_threshold_red():
    svg = histogram(np.r_[np.ones(10), [10.0]], title="t", bins=10, threshold=5.0)
    assert svg.count('fill="#d62728"') == 1 and svg.count('fill="#1f77b4"') == 1


def test_line_chart_without_data_says_so():
    assert "no data" in line_chart([("cpu", np.array([]), np.array([]))], title="empty")
