"""Several jobs side by side (a retraining loop's runs): verdicts, utilization, steps, rules and cost."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path

import numpy as np

from smx_debug.htmlreport.fmt import count, duration, money, percent
from smx_debug.htmlreport.model import ReportInput, ReportModel, build_model
from smx_debug.htmlreport.render import CSS, rules_section, verdict_header
from smx_debug.htmlreport.svg import line_chart


def _gpu_line(m: ReportModel) -> tuple[np.ndarray, np.ndarray]:
    """Mean GPU utilization over all nodes, per minute since the job's start."""
    return m.facts.gpu_per_minute


def _row(i: int, m: ReportModel) -> str:
    f = m.facts
    fired = m.fired
    v = m.verdict
    dur = (m.end_ns - m.start_ns) / 1e9 if m.start_ns is not None and m.end_ns is not None else float("nan")
    cells = [
        f"<b>{escape(f.job_name)}</b>", {True: "<span class='ok'>healthy</span>", False: "<span class='bad'>not healthy</span>",
                                             None: "<span class='na'>no data</span>"}[v.healthy],
        escape(m.outcome.status or ("stopped" if m.outcome.stopped else "-")), duration(dur),
        f"{len(f.nodes)}", percent(f.gpu_mean) if f.gpu_mean is not None else "-",
        percent(f.gpu_p95) if f.gpu_p95 is not None else "-", percent(f.cpu_mean) if f.cpu_mean is not None else "-",
        count(f"job{i}-steps", f.step_count), duration(f.step_median_s) if f.step_median_s is not None else "-",
        f"{count(f'job{i}-rules-fired', len(fired))}: " + escape(", ".join(r.name for r in fired) or "none"),
        money(v.cost_so_far) if v.cost_so_far is not None else "-",
        money(v.cost_after_trigger) if v.cost_after_trigger is not None else "-",
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def render_comparison(inputs: Sequence[ReportInput], *, title: str = "Runs compared") -> str:
    """One page comparing several jobs, each evaluated on its own; every job's verdict and rules below."""
    models = [build_model(inp) for inp in inputs]
    head = ("<tr><th>Job</th><th>Verdict</th><th>Status</th><th>Duration</th><th>Nodes</th><th>GPU mean</th>"
            "<th>GPU p95</th><th>CPU mean</th><th>Steps</th><th>Median step</th><th>Rules fired</th>"
            "<th>Cost so far</th><th>Cost after first trigger</th></tr>")
    body = [f"<h1>{escape(title)}</h1>",
            f"<p class='muted'>smx-debug comparison of {len(models)} runs, generated "
            f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.</p>",
            "<h2 id='table'>Side by side</h2><table>" + head + "".join(_row(i, m) for i, m in enumerate(models))
            + "</table>"]
    lines = [(m.facts.job_name, *_gpu_line(m)) for m in models]
    if any(len(x) for _, x, _ in lines):
        body.append("<div class='charts'>" + line_chart(lines, title="GPU utilization, mean of all GPUs (%)",
                                                        x_label="minutes since start", width=900, height=260)
                    + "</div>")
    for i, m in enumerate(models):
        body.append(f"<details data-job='{i}'><summary>{escape(m.facts.job_name)}: {escape(m.verdict.headline)}"
                    f"</summary>{verdict_header(m).replace('data-count=', 'data-job-count=')}"
                    f"{rules_section(m).replace('data-count=', 'data-job-count=')}</details>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>" + "".join(body) + "</body></html>")


def write_comparison(inputs: Sequence[ReportInput], path: str | Path, *, title: str = "Runs compared") -> Path:
    """Write :func:`render_comparison` to ``path``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_comparison(inputs, title=title), encoding="utf-8")
    return out
