"""The self-contained HTML report: verdict first, then the evidence. One file, inline CSS and SVG, no script.

Every figure comes from :func:`smx_debug.htmlreport.model.build_model`; this module only formats. Timelines
share one time axis with marks for onset, first trigger and stop; the cluster view is aggregated and each
node (every GPU) opens on click (``<details>``), so a 16-node, 8-GPU job stays readable and light.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.htmlreport.fmt import count, duration, money, number, percent, rate_mb, utc
from smx_debug.htmlreport.model import DeviceSeries, ReportInput, ReportModel, Series, build_model
from smx_debug.htmlreport.svg import line_chart, threshold_chart

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:18px;border-bottom:2px solid #1f77b4;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:16px 0 6px}.muted{color:#666;font-size:13px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f5f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.fired{background:#fdecea}.ok{color:#2e7d32}.bad{color:#c62828;font-weight:600}.na{color:#888}
.verdict{border-radius:8px;padding:12px 16px;margin:12px 0;font-size:16px}
.verdict.unhealthy{background:#fdecea;border:2px solid #c62828}.verdict.healthy{background:#e8f5e9;border:2px solid #2e7d32}.verdict.unknown{background:#f5f5f5;border:2px solid #757575}
.verdict p{margin:4px 0}.verdict .headline{font-size:19px;font-weight:700}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:140px}
.card b{display:block;font-size:18px}.charts{display:flex;flex-wrap:wrap;gap:8px}svg.chart{background:#fff}
details{border:1px solid #ddd;border-radius:6px;margin:6px 0;padding:4px 8px}summary{cursor:pointer;font-weight:600}
.legend span{margin-right:14px}.legend i{display:inline-block;width:14px;border-top:2px dashed;margin-right:4px;vertical-align:middle}
"""
_NAV = (("verdict", "verdict"), ("rules", "rules"), ("tensors", "tensors"), ("timeline", "timelines"),
        ("dips", "GPU dips"), ("loop", "dataloader & framework"), ("steps", "steps"), ("usage", "usage"),
        ("cost", "cost"))
_BINS = 240


# ------------------------------------------------------------------------------------------- header
def verdict_header(m: ReportModel) -> str:
    v = m.verdict
    cls = {True: "healthy", False: "unhealthy", None: "unknown"}[v.healthy]
    out = [f"<section id='verdict' class='verdict {cls}'><p class='headline'>{escape(v.headline)}</p>"]
    out += [f"<p>{escape(line)}</p>" for line in v.details]
    out.append("</section>")
    fired = m.fired
    first = fired[0] if fired else None
    out_ = m.outcome
    cards = [
        ("Status", escape(out_.status or ("stopped" if out_.stopped else "unknown"))),
        ("Rules fired", f"{count('rules-fired', len(fired))} of {count('rules-evaluated', len(m.rows))}"),
        ("First trigger", escape(first.name) + (f"<br>{escape(utc(first.first_trigger_ns))}"
                                                  if first and first.first_trigger_ns else "") if first else "none"),
        ("Stopped", escape(utc(out_.stop_ns)) if out_.stop_ns is not None else ("yes" if out_.stopped else "no")),
    ]
    if v.cost_so_far is not None:
        cards.append(("Cost so far", money(v.cost_so_far)))
    if v.cost_after_trigger is not None:
        cards.append(("Cost after first trigger", money(v.cost_after_trigger)))
    if v.saved is not None:
        cards.append(("Stopping saved (up to)", money(v.saved)))
    out.append("<div class='cards'>" + "".join(f"<div class='card'>{k}<b>{val}</b></div>" for k, val in cards)
               + "</div>")
    if m.start_ns is not None and m.end_ns is not None:
        read = []  # what the report was built from: profiler data, a trial, or both
        if m.facts.nodes or m.facts.step_count:
            read.append(f"{len(m.facts.nodes)} node(s); {count('steps-total', m.facts.step_count)} steps")
        if m.tensors is not None:
            read.append(f"{m.tensors.tensors:,} tensors at {m.tensors.steps:,} saved steps")
        if not m.facts.nodes and not m.facts.step_count:
            read.insert(0, "no profiler data")
        out.append(f"<p class='muted'>From {utc(m.start_ns)} to {utc(m.end_ns)} ({duration((m.end_ns - m.start_ns) / 1e9)})"
                   f"; {'; '.join(read)}. Source: {escape(m.facts.source)}.</p>")
    return "".join(out)


# ------------------------------------------------------------------------------------------- rules
def _param(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return escape(str(v))
    if isinstance(v, int | float):
        if 0 < abs(v) < 0.01:  # thresholds like VanishingGradient's 1e-07 (three decimals would show 0.000)
            return escape(f"{v:.3g}")
        return number(float(v), 3)
    return escape(str(v))


def rules_section(m: ReportModel) -> str:
    out = ["<h2 id='rules'>Rules</h2><p class='muted'>Evaluated locally with Debugger's definitions; each row is one "
           "rule configuration. <b>Why</b> and <b>what to do</b> are filled only for rules that fired.</p>",
           "<table><tr><th>Configuration</th><th>Rule</th><th>Status</th><th>Triggered (scans)</th><th>Violations</th>"
           "<th>Datapoints</th><th>First trigger</th><th>Parameters</th><th>Why it fired</th><th>What to do</th></tr>"]
    order = m.fired + [r for r in m.rows if not r.triggered]
    for r in order:
        key = f"rule-{r.name}"
        if r.triggered:
            status = "<span class='bad'>Issues found</span>"
        elif not r.has_data:
            status = "<span class='na'>No data</span>"
        else:
            status = "<span class='ok'>No issues</span>"
        first = (f"{utc(r.first_trigger_ns)}<br><span class='muted'>{escape(r.trigger_source)}</span>"
                 if r.first_trigger_ns is not None else escape(r.trigger_source) if r.triggered else "")
        params = "<br>".join(f"{escape(k)} = {_param(v)}" for k, v in r.parameters.items() if k != "scan_interval_us")
        extra = ""
        if r.rule == "StepOutlier" and m.step_rule == r.name:
            extra = f"<br>outlier steps in the final data: {count('step-outliers-total', sum(s.outliers for s in m.step_rows))}"
        out.append(
            f"<tr class='{'fired' if r.triggered else ''}' data-rule='{escape(r.name)}'><td><b>{escape(r.name)}</b></td>"
            f"<td title='{escape(r.description)}'>{escape(r.rule)}</td><td>{status}</td>"
            f"<td class='num'>{count(key + '-triggered', r.trigger_count)}</td>"
            f"<td class='num'>{count(key + '-violations', r.violations)}{extra}</td>"
            f"<td class='num'>{count(key + '-datapoints', r.datapoints)}</td><td>{first}</td>"
            f"<td class='muted'>{params}</td><td>{escape(r.why) if r.why else ''}</td>"
            f"<td>{escape(r.advice) if r.advice else ''}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


# ------------------------------------------------------------------------------------------- tensors
def _tensors(m: ReportModel) -> str:
    t = m.tensors
    if t is None:
        return ("<h2 id='tensors'>Tensor rules</h2><p class='na'>No tensors: the job has no DebugHookConfig or its "
                "hook saved nothing yet (tensor rules need the hook's trial).</p>")
    judged = [r for r in m.rows if r.name in t.configurations]
    out = [f"<h2 id='tensors'>Tensor rules</h2><p class='muted'>{count('tensor-rules', len(judged))} tensor rules "
           f"evaluated on the trial at {escape(t.path)} ({t.steps:,} saved steps, {t.tensors:,} tensors); each fired "
           "rule's chart shows the statistic it judged for the first tensor that met its condition, per saved "
           "step, against the bound outside which it fires (dashed), the first trigger marked.</p>"]
    if not m.tensor_rows:
        fired = [r.name for r in judged if r.triggered]
        out.append("<p class='ok'>No tensor rule fired.</p>" if not fired else
                   f"<p>Fired without a chart: {escape(', '.join(fired))}.</p>")
        return "".join(out)
    out.append("<div class='charts'>")
    for row in m.tensor_rows:
        chart = threshold_chart(row.steps, row.values, title=f"{row.name}: {row.tensor}", statistic=row.statistic,
                                lower=row.lower, upper=row.upper, trigger_step=row.trigger_step)
        out.append(f"<div data-tensor-rule='{escape(row.name)}'><h3>{escape(row.name)} ({escape(row.rule)}) on "
                   f"{escape(row.tensor)}</h3><p class='muted'>{escape(row.why)}</p>{chart}</div>")
    out.append("</div>")
    return "".join(out)


# ------------------------------------------------------------------------------------------- timelines
def _bin(ts: np.ndarray, values: np.ndarray, t0: int, t1: int, bins: int = _BINS) -> np.ndarray:
    idx = np.clip(((ts - t0) * bins // max(t1 - t0, 1)).astype(np.int64), 0, bins - 1)
    cnt = np.bincount(idx, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.bincount(idx, weights=values, minlength=bins) / cnt)


def _unit(span: tuple[int, int] | None) -> tuple[float, str]:
    """The time axis unit: seconds for jobs under 3 minutes, hours over 5 hours, else minutes."""
    length = (span[1] - span[0]) if span else 0
    if length < 180e9:
        return 1e9, "seconds"
    if length > 5 * 3600e9:
        return 3600e9, "hours"
    return 60e9, "minutes"


def _marks(m: ReportModel, t0: int, t1: int) -> list[tuple[float, str, str]]:
    return [((mk.time_ns - t0) / _unit((t0, t1))[0], f"{mk.label} at {utc(mk.time_ns)}", mk.kind) for mk in m.marks]


def _aggregate_chart(per_node: Mapping[str, Series], title: str, unit: str, t0: int, t1: int,
                     marks: list[tuple[float, str, str]], scale: float = 1.0, y_max: float | None = None) -> str:
    if not per_node:
        return ""
    div, label = _unit((t0, t1))
    if len(per_node) <= 3 and all(len(ts) <= 2 * _BINS for ts, _ in per_node.values()):
        # sparse series (few steps, 1-minute CloudWatch data): every point, no bins to bridge gaps between
        raw = [(node, (ts - t0) / div, v * scale) for node, (ts, v) in per_node.items()]
        return line_chart(raw, title=title, unit=unit, y_max=y_max, marks=marks, x_range=(0.0, (t1 - t0) / div),
                          x_label=label, width=560, height=200)
    x = (np.arange(_BINS) + 0.5) * (t1 - t0) / _BINS / div
    grid = np.vstack([_bin(ts, v * scale, t0, t1) for ts, v in per_node.values()])
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN bins (no sample) stay NaN
        lines = [("mean of nodes", np.nanmean(grid, axis=0))]
        if len(per_node) > 1:
            lines += [("lowest node", np.nanmin(grid, axis=0)), ("highest node", np.nanmax(grid, axis=0))]
    series = [(label, x[~np.isnan(y)], y[~np.isnan(y)]) for label, y in lines]
    return line_chart(series, title=title, unit=unit, y_max=y_max, marks=marks, x_range=(0.0, (t1 - t0) / div),
                      x_label=label,
                      width=560, height=200)


def _device_chart(devices: tuple[DeviceSeries, ...], title: str, t0: int, t1: int,
                  marks: list[tuple[float, str, str]]) -> str:
    if not devices:
        return ""
    div, label = _unit((t0, t1))
    series = [(name, (ts - t0) / div, values) for name, ts, values in devices]
    return line_chart(series, title=title, unit="%", y_max=100.0, marks=marks, x_range=(0.0, (t1 - t0) / div),
                      x_label=label,
                      width=560, height=max(200, 40 + 14 * len(devices)), points=200)


def _timelines(m: ReportModel) -> str:
    if m.span is None or not m.facts.has_metrics:
        return "<h2 id='timeline'>Timelines</h2><p class='na'>No system metrics or steps.</p>"
    # the time axis covers the data and every mark (a stop a minute after the last sample is still drawn)
    t0 = min([m.span[0], *(mk.time_ns for mk in m.marks)])
    t1 = max([m.span[1], *(mk.time_ns for mk in m.marks)])
    marks = _marks(m, t0, t1)
    legend = "".join(f"<span><i style='border-color:{c}'></i>{k}</span>"
                     for k, c in (("onset", "#ff7f0e"), ("trigger", "#d62728"), ("stop", "#111111"))
                     if any(mk.kind == k for mk in m.marks))
    out = [f"<h2 id='timeline'>Timelines</h2><p class='muted'>{_unit((t0, t1))[1].capitalize()} since {utc(t0)}. "
           "All nodes aggregated "
           "(mean, lowest and highest node); open a node below for every GPU."
           + (f"</p><p class='legend'>{legend}</p>" if legend else "</p>"), "<div class='charts'>"]
    tl = m.timelines
    gpu, gmem, cpu, io, net, steps = tl.gpu, tl.gpu_memory, tl.cpu, tl.io, tl.network, tl.steps
    charts = [
        _aggregate_chart(gpu, "GPU utilization (%)", "%", t0, t1, marks, y_max=100.0),
        _aggregate_chart(gmem, "GPU memory (%)", "%", t0, t1, marks, y_max=100.0),
        _aggregate_chart(cpu, "CPU utilization (%)", "%", t0, t1, marks, y_max=100.0),
        _aggregate_chart(io, "Disk I/O, read + write (MB/s)", " MB/s", t0, t1, marks, scale=1e-6),
        _aggregate_chart(net, "Network, receive + transmit (MB/s)", " MB/s", t0, t1, marks, scale=1e-6),
        _aggregate_chart(steps, "Step duration (s)", " s", t0, t1, marks),
    ]
    out += [c for c in charts if c]
    out.append("</div><h3>Per node</h3>")
    for node in m.facts.nodes:
        g = gpu.get(node)
        summary = [f"{escape(node)}"]
        if g is not None and len(g[1]):
            summary.append(f"GPU {percent(float(g[1].mean()))} mean")
        if node in cpu and len(cpu[node][1]):
            summary.append(f"CPU {percent(float(cpu[node][1].mean()))} mean")
        if node in steps:
            summary.append(f"{len(steps[node][1]) // 2:,} steps, median {duration(float(np.median(steps[node][1])))}")
        inner = [
            _device_chart(tl.gpu_devices.get(node, ()), f"{node}: GPU utilization per GPU (%)", t0, t1, marks),
            _device_chart(tl.gpu_memory_devices.get(node, ()), f"{node}: GPU memory per GPU (%)", t0, t1, marks),
            _aggregate_chart({node: cpu[node]}, f"{node}: CPU utilization, mean of cores (%)", "%", t0, t1, marks,
                             y_max=100.0) if node in cpu else "",
            _aggregate_chart({node: io[node]}, f"{node}: disk I/O (MB/s)", " MB/s", t0, t1, marks, scale=1e-6)
            if node in io else "",
            _aggregate_chart({node: net[node]}, f"{node}: network (MB/s)", " MB/s", t0, t1, marks, scale=1e-6)
            if node in net else "",
            _aggregate_chart({node: steps[node]}, f"{node}: step duration (s)", " s", t0, t1, marks)
            if node in steps else "",
        ]
        out.append(f"<details data-node='{escape(node)}'><summary>{' · '.join(summary)}</summary>"
                   f"<div class='charts'>{''.join(c for c in inner if c)}</div></details>")
    return "".join(out)


# ------------------------------------------------------------------------------------------- analysis
# unit -> how one cell of _frame_table shows a value (any other unit: the value as text)
_CELLS: dict[str, Callable[[Any], str]] = {
    "%": lambda v: f"<td class='num'>{percent(float(v))}</td>",
    "frac": lambda v: f"<td class='num'>{percent(100 * float(v))}</td>",
    "s": lambda v: f"<td class='num'>{duration(float(v))}</td>",
    "ms": lambda v: f"<td class='num'>{number(float(v), 1)} ms</td>",
    "GPU-s": lambda v: f"<td class='num'>{number(float(v), 1)} GPU-s</td>",
    "int": lambda v: f"<td class='num'>{int(v):,}</td>",
    "time": lambda v: f"<td>{utc(int(pd.Timestamp(v).value))}</td>",
    "list": lambda v: f"<td>{escape(', '.join(str(x) for x in v))}</td>",
}


def _text_cell(v: Any) -> str:
    return f"<td>{escape('' if v is None or v is pd.NA else str(v))}</td>"


def _frame_table(df: pd.DataFrame, columns: list[tuple[str, str, str]], limit: int = 10) -> str:
    """Rows of ``df`` as a table; columns are (column, header, unit), unit a key of ``_CELLS`` or '' (text)."""
    head = "".join(f"<th>{escape(h)}</th>" for _, h, _ in columns)
    body = []
    for _, row in df.head(limit).iterrows():
        cells = [_CELLS.get(unit, _text_cell)(row[col]) for col, _, unit in columns]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _dips(m: ReportModel) -> str:
    out = ["<h2 id='dips'>Why the GPUs dipped</h2><p class='muted'>Each period during training where a node's mean "
           "GPU utilization fell below half its busy level (its 90th percentile in training), matched to the "
           "framework event that overlaps it most; GPU time lost = (busy level - utilization) x GPUs x time. "
           "Ranked by GPU time lost.</p>"]
    if m.dips.empty:
        out.append("<p class='ok'>No GPU dips during training.</p>" if m.facts.has_gpu
                   else "<p class='na'>No GPU utilization metrics in this data.</p>")
        return "".join(out)
    total = float(m.dips["gpu_seconds_lost"].sum())
    out.append(f"<p>{count('gpu-dips', len(m.dips))} dips cost {number(total)} GPU-seconds "
               f"({duration(total)} of GPU time).</p>")
    out.append(_frame_table(m.causes, [("cause", "Cause", ""), ("cause_event", "Framework event", ""),
                                       ("dips", "Dips", "int"), ("gpu_seconds_lost", "GPU time lost", "GPU-s"),
                                       ("share_percent", "Share", "%"), ("duration_s", "Time in dips", "s"),
                                       ("example_steps", "Example steps", "list")]))
    out.append("<h3>Largest dips</h3>")
    out.append(_frame_table(m.dips, [("node", "Node", ""), ("start", "Start", "time"), ("duration_s", "Length", "s"),
                                     ("gpu_util_mean", "GPU util", "%"), ("baseline", "Busy level", "%"),
                                     ("gpu_seconds_lost", "GPU time lost", "GPU-s"), ("step", "Step", ""),
                                     ("cause", "Cause", ""), ("cause_event", "Event", ""),
                                     ("cause_share", "Event covers", "frac")]))
    return "".join(out)


def _loop(m: ReportModel) -> str:
    out = ["<h2 id='loop'>Dataloader and framework</h2>"]
    if m.loader_share.empty and m.operators.empty:
        return "".join([*out, "<p class='na'>No framework trace (framework profiling was off or found no events).</p>"])
    if not m.loader_share.empty:
        out.append("<h3>Dataloader time share per node</h3>")
        out.append(_frame_table(m.loader_share, [("node", "Node", ""), ("steps", "Steps", "int"),
                                                 ("training_s", "Time in steps", "s"),
                                                 ("dataloader_s", "Data loading", "s"), ("compute_s", "Compute", "s"),
                                                 ("dataloader_percent", "Data loading share", "%")], limit=64))
    out.append(f"<h3>Steps where data loading took longer than compute: {count('slow-loading-steps', len(m.slow_loads))}"
               "</h3>")
    if len(m.slow_loads):
        out.append(_frame_table(m.slow_loads, [("node", "Node", ""), ("step", "Step", "int"), ("step_s", "Step", "s"),
                                               ("dataloader_s", "Data loading", "s"), ("compute_s", "Compute", "s")]))
    if not m.operators.empty:
        out.append("<h3>Slowest operators (total time)</h3>")
        out.append(_frame_table(m.operators, [("name", "Operator", ""), ("category", "Phase", ""),
                                              ("count", "Calls", "int"), ("total_s", "Total", "s"),
                                              ("mean_ms", "Mean", "ms"), ("max_ms", "Max", "ms"),
                                              ("share_percent", "Share", "%")]))
    return "".join(out)


def _steps(m: ReportModel) -> str:
    out = ["<h2 id='steps'>Step durations</h2>"]
    if not m.step_rows:
        return "".join([*out, "<p class='na'>No step timeline was found.</p>"])
    src = (f"Outliers are the {escape(m.step_rule)} result's own (steps above mean + stddev x std over the final data)."
           if m.step_rule else "Outliers: steps above mean + 3 x std (StepOutlier was not evaluated).")
    out.append(f"<p class='muted'>{src}</p><table><tr><th>Node</th><th>Phase</th><th>Steps</th><th>Mean</th>"
               "<th>p50</th><th>p95</th><th>Max</th><th>Outlier above</th><th>Outlier steps</th><th>First outliers</th></tr>")
    for s in m.step_rows:
        out.append(
            f"<tr><td>{escape(s.node)}</td><td>{escape(s.phase)}</td><td class='num'>{s.steps:,}</td>"
            f"<td class='num'>{duration(s.mean_s)}</td><td class='num'>{duration(s.p50_s)}</td>"
            f"<td class='num'>{duration(s.p95_s)}</td><td class='num'>{duration(s.max_s)}</td>"
            f"<td class='num'>{duration(s.threshold_s)}</td>"
            f"<td class='num'>{count(f'step-outliers-{s.node}-{s.phase}', s.outliers)}</td>"
            f"<td>{escape(', '.join(map(str, s.outlier_steps[:12])))}</td></tr>"
        )
    total = sum(s.outliers for s in m.step_rows)
    out.append(f"<tr><td colspan='8'><b>All nodes</b></td><td class='num'><b>{count('step-outliers-total', total)}"
               "</b></td><td></td></tr></table>")
    return "".join(out)


_USAGE_LABEL = {"I/O": "I/O wait", "Network": "Network (receive + transmit)"}


def _usage(m: ReportModel) -> str:
    out = ["<h2 id='usage'>System usage per node</h2>"]
    if not m.usage:
        return "".join([*out, "<p class='na'>OverallSystemUsage was not evaluated or found no metrics.</p>"])
    out.append("<table><tr><th>Node</th><th>Metric</th><th>Unit</th><th>max</th><th>p99</th><th>p95</th><th>p50</th>"
               "<th>min</th></tr>")
    for row in m.usage:
        unit = row.unit
        shown = [rate_mb(v) if unit == "MB/s" else percent(v) if unit == "%" else number(v) for v in row.values]
        cells = "".join(f"<td class='num'>{c}</td>" for c in shown)
        out.append(f"<tr><td>{escape(row.node)}</td><td>{escape(_USAGE_LABEL.get(row.metric, row.metric))}</td>"
                   f"<td>{unit}</td>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def _cost(m: ReportModel) -> str:
    c = m.cost
    out = ["<h2 id='cost'>Cost</h2>"]
    if c is None:
        return "".join([*out, "<p class='na'>Pass --instance-type (and --instance-count, --price) to see costs.</p>"])
    v = m.verdict
    rows = [("Instances", f"{c.instance_count} x {escape(c.instance_type)}"),
            ("Price", f"{money(c.price_per_hour)} per instance-hour" if c.price_per_hour is not None
             else "unknown (pass --price)")]
    if v.cost_so_far is not None:
        rows.append(("Cost so far", money(v.cost_so_far)))
    if v.cost_after_trigger is not None:
        rows.append(("Cost after the first trigger", money(v.cost_after_trigger)))
    if v.saved is not None:
        rows.append(("What stopping saved (up to)", f"{money(v.saved)} ({escape(v.saved_basis)})"))
    elif v.saved_basis:
        rows.append(("What stopping saved", escape(v.saved_basis)))
    if c.gpu_utilization_mean is not None:
        rows.append(("Mean GPU utilization", percent(c.gpu_utilization_mean)))
    if c.idle_gpu_cost is not None:
        rows.append(("Cost of idle GPU time", money(c.idle_gpu_cost)))
    out.append("<table>" + "".join(f"<tr><th>{k}</th><td>{val}</td></tr>" for k, val in rows) + "</table>")
    s = c.suggestion
    if s is not None:
        out.append(f"<p><b>Right-sizing:</b> {s.instance_count} x {escape(s.instance_type)} would cost about "
                   f"{money(s.cost)} for the same duration, {s.saving_percent:.0f}% less ({escape(s.reason)}). "
                   "A smaller instance also has fewer vCPUs: check the CPU figures first.</p>")
    out.append(f"<p class='muted'>Prices: {escape(c.price_source)}.</p>")
    return "".join(out)


def render_model(m: ReportModel) -> str:
    """The report of a built model as one HTML string."""
    nav = " · ".join(f"<a href='#{k}'>{label}</a>" for k, label in _NAV)
    body = [
        f"<h1>{escape(m.facts.job_name)}</h1>",
        f"<p class='muted'>smx-debug report, generated {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}. {nav}</p>",
        verdict_header(m), rules_section(m), _tensors(m), _timelines(m), _dips(m), _loop(m), _steps(m), _usage(m), _cost(m),
    ]
    if m.facts.skipped:
        items = "".join(f"<li>{escape(k)}: {v:,}</li>" for k, v in m.facts.skipped.items())
        body.append(f"<h2>Data notes</h2><p>Skipped while reading:</p><ul>{items}</ul>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>smx-debug report - {escape(m.facts.job_name)}</title><style>{CSS}</style></head><body>"
        + "".join(body) + "</body></html>"
    )


def render_report(inp: ReportInput) -> str:
    """The report as one HTML string."""
    return render_model(build_model(inp))


def write_report(inp: ReportInput, path: str | Path) -> Path:
    """Write the report to ``path`` and return it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(inp), encoding="utf-8")
    return out
