"""The self-contained HTML profiler report: one file, inline CSS and SVG, no external URL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import numpy as np

from smx_debug.evaluate import JobData, RuleResult
from smx_debug.evaluate.data import ns
from smx_debug.htmlreport.advice import ADVICE, DESCRIPTION
from smx_debug.htmlreport.cost import CostEstimate
from smx_debug.htmlreport.svg import heatmap, histogram, line_chart

__all__ = ["ReportInput", "render_report", "write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 16px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:18px;border-bottom:2px solid #1f77b4;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:16px 0 6px}.muted{color:#666;font-size:13px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f5f9}td.num{text-align:right;font-variant-numeric:tabular-nums}
.fired{background:#fdecea}.ok{color:#2e7d32}.bad{color:#c62828;font-weight:600}.na{color:#888}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:20px}.charts{display:flex;flex-wrap:wrap;gap:8px}svg.chart{background:#fff}
.phase{display:flex;height:22px;border-radius:4px;overflow:hidden;margin:6px 0;font-size:12px;color:#fff}
.phase div{display:flex;align-items:center;justify-content:center;white-space:nowrap;overflow:hidden}
"""


@dataclass
class ReportInput:
    """Everything the report shows."""

    job_name: str
    data: JobData
    results: Mapping[str, RuleResult]
    cost: CostEstimate | None = None
    source: str = ""
    skipped: Mapping[str, int] = field(default_factory=dict)


def _fmt_s(seconds: float) -> str:
    seconds = float(seconds)
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def _utc(ns_value: int) -> str:
    return datetime.fromtimestamp(ns_value / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(data: JobData) -> tuple[int, int] | None:
    pts: list[int] = []
    if data.system_span_ns is not None:
        pts.extend(data.system_span_ns)
    if not data.steps.empty:
        pts += [int(ns(data.steps["start"]).min()), int(ns(data.steps["end"]).max())]
    return (min(pts), max(pts)) if pts else None


def _summary(inp: ReportInput) -> str:
    data = inp.data
    span = _span(data)
    out = ["<h2 id='summary'>Training job summary</h2>"]
    if span is None:
        return "".join([*out, "<p class='na'>No system metrics or steps were found.</p>"])
    t0, t1 = span
    dur = (t1 - t0) / 1e9
    nodes = data.nodes
    fired = [r for r in inp.results.values() if r.triggered]
    cards = [
        ("Job", escape(inp.job_name)), ("Duration", _fmt_s(dur)), ("Nodes", str(len(nodes))),
        ("Steps", f"{len(data.steps):,}"), ("Rules fired", f"{len(fired)} of {len(inp.results)}"),
    ]
    if inp.cost is not None:
        cards.append(("Cost", f"${inp.cost.cost:,.2f}"))
    out.append("<div class='cards'>" + "".join(f"<div class='card'>{k}<b>{v}</b></div>" for k, v in cards) + "</div>")
    out.append(f"<p class='muted'>From {_utc(t0)} to {_utc(t1)}. Source: {escape(inp.source)}</p>")
    if not data.steps.empty:
        first, last = int(ns(data.steps["start"]).min()), int(ns(data.steps["end"]).max())
        phases = [("Initialization", (first - t0) / 1e9, "#9467bd"), ("Training loop", (last - first) / 1e9, "#1f77b4"),
                  ("Finalization", (t1 - last) / 1e9, "#7f7f7f")]
        out.append("<h3>Phases</h3><div class='phase'>")
        for name, secs, color in phases:
            pct = 100 * secs / dur if dur else 0
            if pct > 0:
                out.append(f"<div style='width:{pct:.2f}%;background:{color}' title='{name}'>{name} {pct:.0f}%</div>")
        out.append("</div><table><tr><th>Phase</th><th>Duration</th><th>Share</th></tr>")
        for name, secs, _ in phases:
            out.append(f"<tr><td>{name}</td><td class='num'>{_fmt_s(secs)}</td>"
                       f"<td class='num'>{100 * secs / dur if dur else 0:.1f}%</td></tr>")
        out.append("</table>")
    return "".join(out)


def _status(r: RuleResult) -> str:
    if r.triggered:
        return "<span class='bad'>Issues found</span>"
    if r.datapoints == 0 and r.rule != "OverallSystemUsage":
        return "<span class='na'>No data</span>"
    return "<span class='ok'>No issues</span>"


def _rules(inp: ReportInput) -> str:
    out = ["<h2 id='rules'>Rules</h2><table class='rules'><tr><th>Rule</th><th>Status</th><th>Triggered</th>"
           "<th>Violations</th><th>Datapoints</th><th>Why it fired</th><th>What to do</th><th>Parameters</th></tr>"]
    order = sorted(inp.results.values(), key=lambda r: (not r.triggered, r.rule))
    for r in order:
        cls = " class='fired'" if r.triggered else ""
        reason = escape(r.message) if r.triggered else escape(DESCRIPTION.get(r.rule, ""))
        todo = escape(ADVICE.get(r.rule, "")) if r.triggered else ""
        params = escape(r.rule_parameters).replace("\n", "<br>")
        out.append(
            f"<tr{cls} data-rule='{escape(r.rule)}'><td>{escape(r.rule)}</td><td>{_status(r)}</td>"
            f"<td class='num'>{r.rule_triggered}</td><td class='num'>{r.violations}</td>"
            f"<td class='num'>{r.datapoints}</td><td>{reason}</td><td>{todo}</td><td class='muted'>{params}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _usage(inp: ReportInput) -> str:
    res = inp.results.get("OverallSystemUsage")
    out = ["<h2 id='usage'>System usage statistics per node</h2>"]
    if res is None or not any(res.details.values()):
        return "".join([*out, "<p class='na'>No system metrics.</p>"])
    out.append("<table><tr><th>Node</th><th>Metric</th><th>max</th><th>p99</th><th>p95</th><th>p50</th><th>min</th></tr>")
    for metric, per_node in res.details.items():
        for node, st in sorted(per_node.items()):
            cells = "".join(f"<td class='num'>{st[k]:g}</td>" for k in ("max", "p99", "p95", "p50", "min"))
            out.append(f"<tr><td>{escape(node)}</td><td>{escape(metric)}</td>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def _node_series(data: JobData, dimension: str, t0: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {node: ((ts - t0) / 60e9, total / max(n, 1)) for node, (ts, total, n) in data.totals(dimension).items()}


def _over_time(inp: ReportInput, t0: int) -> str:
    data = inp.data
    cpu = _node_series(data, "CPUUtilization", t0)
    gpu = _node_series(data, "GPUUtilization", t0)
    mem = _node_series(data, "GPUMemoryUtilization", t0)
    out = ["<h2 id='timeline'>Utilization over time per node</h2><div class='charts'>"]
    for node in data.nodes:
        lines = [(label, *src[node]) for label, src in (("CPU", cpu), ("GPU", gpu), ("GPU memory", mem)) if node in src]
        if lines:
            out.append(line_chart(lines, title=f"{node}: mean utilization (%)"))
    out.append("</div>")
    out.append("<h3>Utilization histograms</h3><div class='charts'>")
    for node in data.nodes:
        if node in cpu:
            out.append(histogram(cpu[node][1], title=f"{node}: CPU utilization", bins=np.arange(0, 102, 2), x_label="%"))
        g = [s.values for s in data.series("GPUUtilization") if s.node == node]
        if g:
            out.append(histogram(np.concatenate(g), title=f"{node}: GPU utilization (all GPUs)",
                                 bins=np.arange(0, 102, 2), x_label="%"))
    out.append("</div>")
    return "".join(out)


def _heatmaps(inp: ReportInput, t0: int, t1: int, cols: int = 60) -> str:
    data = inp.data
    out = ["<h2 id='heatmap'>Utilization heatmap</h2><p class='muted'>Rows are devices, columns are "
           f"{_fmt_s((t1 - t0) / 1e9 / cols)} bins; darker is busier.</p>"]
    edges_n = max(t1 - t0, 1)

    def row(ts: np.ndarray, values: np.ndarray) -> np.ndarray:
        idx = np.clip(((ts - t0) * cols // edges_n).astype(np.int64), 0, cols - 1)
        cnt = np.bincount(idx, minlength=cols)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.bincount(idx, weights=values, minlength=cols) / cnt)

    nodes = data.nodes[:4]  # a row per core gets large: show the first nodes in full
    for node in nodes:
        devices = [s for dim in ("GPUUtilization", "CPUUtilization") for s in data.series(dim) if s.node == node]
        if not devices:
            continue
        matrix = np.vstack([row(s.ts, s.values) for s in devices])
        out.append(heatmap(matrix, [s.name for s in devices], title=f"{node}: GPUs and CPU cores",
                           x_range=(0.0, (t1 - t0) / 60e9)))
    if len(data.nodes) > len(nodes):
        out.append(f"<p class='muted'>{len(data.nodes) - len(nodes)} more nodes not shown.</p>")
    return "".join(out)


def _steps(inp: ReportInput) -> str:
    steps = inp.data.steps
    out = ["<h2 id='steps'>Step durations</h2>"]
    if steps.empty:
        return "".join([*out, "<p class='na'>No step timeline was found.</p>"])
    res = inp.results.get("StepOutlier")
    k = 3.0
    if res is not None:
        for line in res.rule_parameters.splitlines():
            if line.startswith("stddev:"):
                k = float(line.split(":", 1)[1])
    out.append("<div class='charts'>")
    table = ["<table><tr><th>Node</th><th>Phase</th><th>Steps</th><th>mean</th><th>p50</th><th>p95</th><th>max</th>"
             f"<th>Outliers (&gt; mean + {k:g} std)</th><th>First outlier steps</th></tr>"]
    for (node, mode), grp in steps.groupby(["node", "mode"], sort=True):
        d = grp["duration"].to_numpy(dtype=float)
        thr = float(d.mean() + k * d.std())
        out.append(histogram(d, title=f"{node} {mode}: step duration (s)", bins=60, x_label="s", threshold=thr))
        outl = grp["step"].to_numpy()[d > thr]
        q = np.quantile(d, [0.5, 0.95])
        table.append(
            f"<tr><td>{escape(str(node))}</td><td>{escape(str(mode))}</td><td class='num'>{len(d):,}</td>"
            f"<td class='num'>{d.mean():.4f}</td><td class='num'>{q[0]:.4f}</td><td class='num'>{q[1]:.4f}</td>"
            f"<td class='num'>{d.max():.4f}</td><td class='num'>{len(outl)}</td>"
            f"<td>{escape(', '.join(map(str, outl[:15].tolist())))}</td></tr>"
        )
    out.append("</div>")
    out.extend(table)
    out.append("</table>")
    return "".join(out)


def _cost(inp: ReportInput) -> str:
    c = inp.cost
    out = ["<h2 id='cost'>Cost</h2>"]
    if c is None:
        return "".join([*out, "<p class='na'>Pass --instance-type (and --instance-count, --price) to see costs.</p>"])
    rows = [
        ("Instances", f"{c.instance_count} x {escape(c.instance_type)}"),
        ("Price", f"${c.price_per_hour:.3f} per instance-hour"),
        ("Duration", _fmt_s(c.duration_s)),
        ("Cost of this run", f"${c.cost:,.2f}"),
    ]
    if c.gpu_utilization_mean is not None:
        rows.append(("Mean GPU utilization", f"{c.gpu_utilization_mean:.1f}%"))
    if c.idle_gpu_cost is not None:
        rows.append(("Cost of idle GPU time", f"${c.idle_gpu_cost:,.2f}"))
    out.append("<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>")
    s = c.suggestion
    if s is not None:
        out.append(
            f"<p class='suggestion'><b>Right-sizing:</b> {s.instance_count} x {escape(s.instance_type)} would cost "
            f"about ${s.cost:,.2f} for the same duration, {s.saving_percent:.0f}% less ({escape(s.reason)}). "
            "Check the CPU and memory figures above before moving: a smaller instance also has fewer vCPUs.</p>"
        )
    else:
        out.append("<p class='muted'>No cheaper configuration of the same GPU type would carry the observed load.</p>")
    out.append(f"<p class='muted'>Prices: {escape(c.price_source)}. For example, following the profiler's advice "
               "moved a published Horovod job from 3 x ml.p3.8xlarge (503 s, $6.16) to 2 x ml.p3.2xlarge "
               "(502 s, $1.07), 83% less.</p>")
    return "".join(out)


def render_report(inp: ReportInput) -> str:
    """The report as one HTML string."""
    span = _span(inp.data)
    body = [
        f"<h1>Profiler report: {escape(inp.job_name)}</h1>",
        f"<p class='muted'>Generated by smx-debug on {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}. "
        "Rules evaluated locally with Debugger's definitions.</p>",
        "<p class='muted'>Contents: <a href='#summary'>summary</a> · <a href='#rules'>rules</a> · "
        "<a href='#usage'>usage</a> · <a href='#timeline'>over time</a> · <a href='#heatmap'>heatmap</a> · "
        "<a href='#steps'>steps</a> · <a href='#cost'>cost</a></p>",
        _summary(inp),
        _rules(inp),
        _usage(inp),
    ]
    if span is not None and inp.data.system_span_ns is not None:
        body += [_over_time(inp, span[0]), _heatmaps(inp, span[0], span[1])]
    body += [_steps(inp), _cost(inp)]
    if inp.skipped:
        items = "".join(f"<li>{escape(k)}: {v}</li>" for k, v in inp.skipped.items())
        body.append(f"<h2>Data notes</h2><p>Skipped while reading:</p><ul>{items}</ul>")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Profiler report - {escape(inp.job_name)}</title><style>{_CSS}</style></head><body>"
        + "".join(body)
        + "</body></html>"
    )


def write_report(inp: ReportInput, path: str | Path) -> Path:
    """Write the report to ``path`` and return it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(inp), encoding="utf-8")
    return out
