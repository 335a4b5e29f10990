"""The HTML report: verdict first, one source for every count, units, marks, escaped and self-contained."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import smx_debug.htmlreport.compare as compare
import smx_debug.htmlreport.render as render
from smx_debug.data.frames import series_frame
from smx_debug.evaluate import JobData, configured_rule, evaluate
from smx_debug.htmlreport import JobOutcome, ReportInput, build_model, estimate_cost, render_report
from smx_debug.htmlreport.fmt import duration, number
from smx_debug.htmlreport.render import render_model
from smx_debug.htmlreport.svg import line_chart

EVIL = '<script>alert("x")</script>'
T0 = 1_767_225_600  # 2026-01-01 00:00:00 UTC


def _data(node: str = "algo-1") -> JobData:
    t = T0 + np.arange(1200.0)
    low = t >= T0 + 600
    system = pd.concat([
        series_frame(node, "gpu0", "GPUUtilization", np.where(low, 5.0, 80.0), timestamps_s=t),
        series_frame(node, "gpu0", "GPUMemoryUtilization", np.full(1200, 30.0), timestamps_s=t),
        series_frame(node, "cpu0", "CPUUtilization", np.where(low, 95.0, 50.0), timestamps_s=t),
        series_frame(node, "eth0", "ReceiveBytesPerSecond", np.full(1200, 2.5e7), timestamps_s=t, type="network"),
        series_frame(EVIL, "cpu0", "CPUUtilization", np.full(1200, 10.0), timestamps_s=t),
    ], ignore_index=True)
    d = np.r_[np.full(300, 1.0), np.full(20, 9.0)]
    starts = T0 + 60 + np.cumsum(np.r_[0, d[:-1]])
    steps = pd.DataFrame({"node": node, "rank": 0, "mode": "TRAIN", "step": np.arange(320, dtype=np.int64),
                          "start": pd.to_datetime((starts * 1e9).astype(np.int64), utc=True),
                          "end": pd.to_datetime(((starts + d) * 1e9).astype(np.int64), utc=True), "duration": d})
    return JobData(system=system, steps=steps)


def _input(**kw: object) -> ReportInput:
    data = _data()
    rules = [configured_rule("CPUBottleneck", name="CPU-strict", overrides={"threshold": 20}),
             configured_rule("StepOutlier"), configured_rule("OverallSystemUsage"), configured_rule("BatchSize")]
    results = evaluate(data, rules)
    cost = estimate_cost("ml.p3.8xlarge", 2, 1200, [40.0], [80.0])
    base = {"job_name": EVIL, "data": data, "results": results, "cost": cost, "source": EVIL, "skipped": {EVIL: 1}}
    base.update(kw)
    return ReportInput(**base)  # type: ignore[arg-type]


def _counts(html: str) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = defaultdict(set)
    for key, value in re.findall(r"data-count='([^']+)'>([\d,]+)<", html):
        seen[key].add(value)
    return seen


def test_report_escapes_every_string_from_data():
    html = render_report(_input())
    assert "<script" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_report_is_self_contained_no_urls_no_script():
    html = render_report(_input())
    assert "http" not in html.lower() and "<script" not in html
    assert all(u.startswith("#") for u in re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', html))


def test_report_verdict_comes_first_and_names_the_first_rule_and_the_stop():
    stop = (T0 + 900) * 10**9
    inp = _input(outcome=JobOutcome(status="Stopped", stop_ns=stop, stopped_by="smx-stop_training (ledger)",
                                    max_runtime_s=3600, onset_ns=(T0 + 600) * 10**9))
    html = render_report(inp)
    verdict = html.index("id='verdict'")
    assert verdict < html.index("id='rules'") < html.index("id='timeline'")
    head = html[verdict:html.index("id='rules'")]
    assert "Not healthy: StepOutlier fired first at 2026-01-01 00:08:00 UTC" in head  # the 9 s steps from 00:06
    assert "then CPU-strict" in head
    assert "Stopped at 2026-01-01 00:15:00 UTC by smx-stop_training (ledger)" in head
    m = build_model(inp)
    rate = 2 * 14.688 / 3600
    assert m.verdict.cost_so_far == pytest.approx(rate * 900)
    assert m.verdict.saved == pytest.approx(rate * (3600 - 900))
    first = m.fired[0].first_trigger_ns
    assert first is not None and m.verdict.cost_after_trigger == pytest.approx(rate * (stop - first) / 1e9)
    for figure in (m.verdict.cost_so_far, m.verdict.cost_after_trigger, m.verdict.saved):
        assert f"${figure:,.2f}" in head  # the header shows the model's own figures


def test_report_marks_onset_first_trigger_and_stop_on_every_timeline():
    inp = _input(outcome=JobOutcome(status="Stopped", stop_ns=(T0 + 900) * 10**9, onset_ns=(T0 + 600) * 10**9))
    html = render_report(inp)
    timelines = html[html.index("id='timeline'"):html.index("id='dips'")]
    charts = re.findall(r"<svg class=\"chart line\".*?</svg>", timelines, re.S)
    assert len(charts) >= 8  # aggregate GPU, memory, CPU, network, steps + per node
    for chart in charts:
        for kind in ("onset", "trigger", "stop"):
            assert f"mark mark-{kind}" in chart, chart[:120]


def test_report_healthy_job_says_so_and_fills_no_why():
    data = _data()
    results = evaluate(data, [configured_rule("BatchSize"), configured_rule("OverallSystemUsage")])
    html = render_report(ReportInput(job_name="ok", data=data, results=results))
    assert "Healthy: none of the 2 rules with data fired" in html
    rows = re.findall(r"<tr class='' data-rule='[^']+'>.*?</tr>", html, re.S)
    assert len(rows) == 2
    for row in rows:  # the last two cells (why, what to do) are empty for rules that did not fire
        assert row.endswith("<td></td><td></td></tr>")


def test_report_every_count_shown_twice_is_equal():
    html = render_report(_input())
    counts = _counts(html)
    assert counts, "no tagged counts"
    for key, values in counts.items():
        assert len(values) == 1, (key, values)
    twice = [k for k in counts if len(re.findall(f"data-count='{re.escape(k)}'", html)) > 1]
    assert "step-outliers-total" in twice and "rules-fired" in counts


def test_report_step_table_outliers_are_the_step_outlier_result():
    inp = _input()
    r = inp.results["StepOutlier"]
    html = render_report(inp)
    expected = sum(v["number_of_outliers"] for v in r.details["step_details"].values())
    assert expected == 20
    assert _counts(html)["step-outliers-total"] == {str(expected)}
    assert _counts(html)["rule-StepOutlier-violations"] == {f"{r.violations:,}"}


def test_report_step_table_uses_the_typed_stddev_not_the_text():
    data = _data()
    rule = configured_rule("StepOutlier", name="steps-lax", overrides={"stddev": 50})
    html = render_report(ReportInput(job_name="j", data=data, results=evaluate(data, [rule])))
    assert _counts(html)["step-outliers-total"] == {"0"}


def test_report_units_everywhere():
    html = render_report(_input())
    usage = html[html.index("id='usage'"):html.index("id='cost'")]
    assert "MB/s" in usage and "25.0 MB/s" in usage  # network in MB/s, not bytes
    assert re.search(r"\d%</td>", usage)
    steps = html[html.index("id='steps'"):html.index("id='usage'")]
    assert "1.0 s" in steps and "9.0 s" in steps
    assert not re.search(r"\d[eE][+-]\d", html)  # no scientific notation anywhere


def test_report_rule_rows_keyed_by_configuration_name():
    html = render_report(_input())
    assert "<tr class='fired' data-rule='CPU-strict'>" in html
    assert "threshold = 20" in html  # from the typed parameters


@pytest.mark.parametrize(("seconds", "text"), [(0.25, "250 ms"), (12.5, "12.5 s"), (600, "10.0 min"),
                                                 (5400, "1.50 h")])
def test_duration_formats(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize(("value", "text"), [(1e6, "1,000,000"), (1234.5678, "1,234.6"), (0.00012, "0.000")])
def test_number_never_scientific(value, text):
    assert number(value) == text


def test_line_chart_without_data_says_so():
    assert "no data" in line_chart([("cpu", np.array([]), np.array([]))], title="empty")


def test_line_chart_marks_outside_the_range_are_dropped():
    svg = line_chart([("a", np.arange(10.0), np.arange(10.0))], title="t",
                     marks=[(5.0, "in", "stop"), (50.0, "out", "onset")])
    assert "mark-stop" in svg and "mark-onset" not in svg


def test_report_dip_table_ranks_the_injected_dataloader_stall_first(tmp_path):
    from smx_debug.data.framework_trace import framework_metrics
    from smx_debug.evaluate import load_path
    from smx_debug.simulate import Simulation, SimulationSpec

    spec = SimulationSpec(scenario="dataloader_stall", duration_s=600.0, onset_s=120.0, cpus=4, gpus=2)
    sim = Simulation(spec)
    sim.write_local(tmp_path / "profiler-output")
    data, events = load_path(tmp_path), framework_metrics(tmp_path, progress=False)
    html = render_report(ReportInput(job_name="stall", data=data, results=evaluate(data), events=events))
    dips = html[html.index("id='dips'"):html.index("id='loop'")]
    first_row = re.search(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td class='num'>(\d+)</td>", dips)
    assert first_row is not None and first_row.groups()[:2] == ("dataloader", "DataLoaderIter.__next__")
    assert "checkpoint" in dips and dips.index("DataLoaderIter.__next__") < dips.index("save_checkpoint")
    assert "GPU-s" in dips
    verdict = html[html.index("id='verdict'"):html.index("id='rules'")]
    assert "The GPUs lost most time to dataloader (DataLoaderIter.__next__)" in verdict
    loop = html[html.index("id='loop'"):html.index("id='steps'")]
    n_stalls = len(sim.stall_steps(0))
    assert f"<span data-count='slow-loading-steps'>{n_stalls}</span>" in loop


def test_report_stop_after_the_last_sample_is_still_marked():
    inp = _input(outcome=JobOutcome(status="Stopped", stop_ns=(T0 + 1260) * 10**9))  # 61 s after the last sample
    html = render_report(inp)
    timelines = html[html.index("id='timeline'"):html.index("id='dips'")]
    assert timelines.count("mark mark-stop") >= 8


def test_report_rules_without_data_are_not_called_healthy():
    data = _data()
    results = evaluate(data, [configured_rule("BatchSize"), configured_rule("LossNotDecreasing")])  # no scalars
    html = render_report(ReportInput(job_name="partial", data=data, results=results))
    assert "Healthy: none of the 1 rules with data fired" in html
    assert "1 had no data (LossNotDecreasing)." in html
    blind = evaluate(data.__class__(), [configured_rule("LossNotDecreasing")])
    html = render_report(ReportInput(job_name="blind", data=data.__class__(), results=blind))
    assert "No verdict: none of the 1 rules had data to judge" in html
    assert "class=\"verdict unknown\"" in html or "class='verdict unknown'" in html


def test_threshold_chart_draws_the_bounds_the_trigger_and_marks_non_finite_values() -> None:
    from smx_debug.htmlreport.svg import threshold_chart

    svg = threshold_chart([0, 10, 20, 30], [0.0, 0.0, float("nan"), float("inf")], title="t",
                          statistic="NaN or infinite values", upper=0.0, trigger_step=20)
    assert svg.count('class="nonfinite"') == 2 and "2 non-finite" in svg
    assert "fires above 0" in svg and "fired at step 20" in svg and "log scale" not in svg
    log = threshold_chart([0, 10, 20], [1e-2, 1e-2, 1e-10], title="g", statistic="mean absolute gradient",
                          lower=1e-7, trigger_step=20)
    assert "(log scale)" in log and "fires below 1e-07" in log
    assert 'class="nodata"' in threshold_chart([], [], title="e", statistic="s")


def test_report_tensor_section_charts_each_fired_tensor_rule_with_its_step_time() -> None:
    from smx_debug.evaluate import RuleResult
    from smx_debug.evaluate.result import Trace
    from smx_debug.htmlreport import TensorInput

    fired = RuleResult(rule="VanishingGradient", rule_triggered=2, violations=2, datapoints=6, trigger_step=20,
                       configuration_name="Grad", message=f"{EVIL} at step 20: mean absolute gradient 1e-10",
                       trace=Trace(tensor=EVIL, statistic="mean absolute gradient", steps=(0, 10, 20),
                                   values=(1e-2, 1e-2, 1e-10), lower=1e-7))
    quiet = RuleResult(rule="ExplodingTensor", datapoints=6, configuration_name="ExplodingTensor",
                       trace=Trace(tensor="x", statistic="NaN or infinite values", steps=(0,), values=(0.0,)))
    tensors = TensorInput(path="s3://b/job/debug-output/", configurations=frozenset({"Grad", "ExplodingTensor"}),
                          step_times={0: T0 * 10**9, 10: (T0 + 10) * 10**9, 20: (T0 + 20) * 10**9}, steps=3,
                          tensors=2)
    inp = _input(results={"Grad": fired, "ExplodingTensor": quiet}, tensors=tensors)
    model = build_model(inp)
    (row,) = model.tensor_rows
    assert (row.name, row.tensor, row.trigger_step, row.lower) == ("Grad", EVIL, 20, 1e-7)
    grad = next(r for r in model.rows if r.name == "Grad")
    assert grad.first_trigger_ns == (T0 + 20) * 10**9 and grad.trigger_source == "wall time of saved step 20"
    html = render_report(inp)
    section = html[html.index("<h2 id='tensors'>"):html.index("<h2 id='timeline'>")]
    assert "data-tensor-rule='Grad'" in section and EVIL not in section  # escaped
    assert "fires below 1e-07" in section and "fired at step 20" in section
    assert "data-tensor-rule='ExplodingTensor'" not in section  # did not fire: no chart


def test_report_of_a_trial_alone_says_what_was_read_not_zero_nodes() -> None:
    from smx_debug.htmlreport import TensorInput

    tensors = TensorInput(path="/trials/run-1", configurations=frozenset(),
                          step_times={0: T0 * 10**9, 500: (T0 + 50) * 10**9}, steps=2, tensors=4)
    html = render_report(_input(data=JobData(), results={}, cost=None, tensors=tensors))
    header = html[:html.index("<h2 id='rules'>")]
    assert "0 node(s)" not in header and "0 steps" not in header
    assert "no profiler data" in header and "4 tensors at 2 saved steps" in header
    both = render_report(_input(tensors=tensors))  # profiler data and a trial: the header names both
    header = both[:both.index("<h2 id='rules'>")]
    assert "2 node(s)" in header and "4 tensors at 2 saved steps" in header


def test_report_without_tensors_says_how_to_get_them() -> None:
    html = render_report(_input())
    assert "No tensors: the job has no DebugHookConfig" in html


# ------------------------------------------------------------------ the renderer reads only the view model
class _Untouchable:
    """Stands in for the raw inputs: any attribute read fails the test."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the renderer read the raw input's {name!r}")


@pytest.mark.parametrize("module", [render, compare], ids=["render", "compare"])
def test_renderer_source_has_no_inp_access(module: object) -> None:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8"))
    reads = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "inp"]
    assert reads == [], f"{Path(str(getattr(module, '__file__', ''))).name} reads .inp at lines {reads}"


def test_report_renders_from_the_model_alone() -> None:
    model = build_model(_input())
    expected = render_model(model)
    blind = replace(model, inp=_Untouchable())  # type: ignore[arg-type]
    assert render_model(blind).split("</p>", 2)[2] == expected.split("</p>", 2)[2]  # all but the generated time


def test_comparison_row_and_gpu_line_read_the_model_alone() -> None:
    model = build_model(_input())
    blind = replace(model, inp=_Untouchable())  # type: ignore[arg-type]
    assert compare._row(0, blind) == compare._row(0, model)
    assert [a.tolist() for a in compare._gpu_line(blind)] == [a.tolist() for a in compare._gpu_line(model)]
