"""Inline SVG line charts with event marks (no JavaScript, no network)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_FONT = 'font-family="system-ui,sans-serif" font-size="11"'


def downsample(x: np.ndarray, y: np.ndarray, points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Bin means of (x, y) into at most ``points`` bins (x sorted)."""
    if len(x) <= points:
        return x, y
    edges = np.linspace(x[0], x[-1], points + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, points - 1)
    cnt = np.bincount(idx, minlength=points)
    keep = cnt > 0
    xm = np.bincount(idx, weights=x, minlength=points)[keep] / cnt[keep]
    ym = np.bincount(idx, weights=y, minlength=points)[keep] / cnt[keep]
    return xm, ym


def _frame(width: int, height: int, title: str, css: str) -> list[str]:
    return [
        f'<svg class="chart {escape(css)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{width / 2:.0f}" y="14" text-anchor="middle" {_FONT} font-weight="600">{escape(title)}</text>',
    ]


MARK_COLORS = {"onset": "#ff7f0e", "trigger": "#d62728", "stop": "#111111"}


def line_chart(
    series: Sequence[tuple[str, np.ndarray, np.ndarray]], *, title: str, x_label: str = "minutes",
    y_max: float | None = 100.0, width: int = 640, height: int = 220, unit: str = "%",
    marks: Sequence[tuple[float, str, str]] = (), x_range: tuple[float, float] | None = None, points: int = 400,
) -> str:
    """Lines of (label, x, y); x in ``x_label`` units, y in ``unit``.

    ``marks`` are (x, label, kind) vertical lines (kind: onset, trigger, stop); ``x_range`` shares one time
    axis between charts; each series is binned to at most ``points`` points.
    """
    left, right, top, bottom = 64, 120, 24, 30
    pw, ph = width - left - right, height - top - bottom
    out = _frame(width, height, title, "line")
    xs = [s[1] for s in series if len(s[1])]
    if not xs:
        out.append(f'<text class="nodata" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" {_FONT}>'
                   "no data</text></svg>")
        return "".join(out)
    x0 = min(float(x.min()) for x in xs) if x_range is None else x_range[0]
    x1 = max(float(x.max()) for x in xs) if x_range is None else x_range[1]
    peak = max((float(np.nanmax(s[2])) for s in series if len(s[2])), default=1.0)
    ytop = y_max if y_max is not None else _nice(peak)
    sx = pw / (x1 - x0) if x1 > x0 else 0.0
    sy = ph / ytop if ytop else 0.0
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    for frac in (0.0, 0.5, 1.0):
        yv = ytop * frac
        yy = top + ph - yv * sy
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 4}" y="{yy + 4:.1f}" text-anchor="end" {_FONT}>{_tick(yv)}{escape(unit)}</text>')
    out.append(f'<text x="{left}" y="{height - 8}" {_FONT}>{x0:.0f}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 8}" text-anchor="end" {_FONT}>{x1:.0f} {escape(x_label)}</text>')
    for i, (label, x, y) in enumerate(series):
        if not len(x):
            continue
        xd, yd = downsample(np.asarray(x, float), np.asarray(y, float), points)
        pts = " ".join(f"{left + (a - x0) * sx:.1f},{top + ph - min(b, ytop) * sy:.1f}"
                       for a, b in zip(xd, yd, strict=True) if b == b)
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.3" points="{pts}"/>')
        ly = top + 12 + 14 * i
        if ly < height - 6:
            out.append(f'<rect x="{left + pw + 8}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
            out.append(f'<text x="{left + pw + 22}" y="{ly + 1}" {_FONT}>{escape(label)}</text>')
    for mx, label, kind in marks:
        if not x0 <= mx <= x1:
            continue
        xx = left + (mx - x0) * sx
        color = MARK_COLORS.get(kind, "#555")
        out.append(f'<line class="mark mark-{escape(kind)}" x1="{xx:.1f}" x2="{xx:.1f}" y1="{top}" y2="{top + ph}" '
                   f'stroke="{color}" stroke-width="1.5" stroke-dasharray="4 3"><title>{escape(label)}</title></line>')
        out.append(f'<text x="{xx + 3:.1f}" y="{top + ph - 4}" fill="{color}" {_FONT}>{escape(kind)}</text>')
    out.append("</svg>")
    return "".join(out)


def threshold_chart(
    steps: Sequence[int], values: Sequence[float], *, title: str, statistic: str, lower: float | None = None,
    upper: float | None = None, trigger_step: int | None = None, width: int = 560, height: int = 220,
) -> str:
    """A statistic per step (x: training steps) against the bounds outside which a rule fires (dashed lines),
    the step it fired first marked. A positive statistic spanning more than three decades is drawn on a log
    scale; NaN and infinite values, which have no place on an axis, are marked along the top edge."""
    left, right, top, bottom = 72, 16, 24, 42
    pw, ph = width - left - right, height - top - bottom
    out = _frame(width, height, title, "threshold")
    x = np.asarray(steps, np.float64)
    y = np.asarray(values, np.float64)
    finite = np.isfinite(y)
    if not len(x):
        out.append(f'<text class="nodata" x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" {_FONT}>'
                   "no data</text></svg>")
        return "".join(out)
    bounds = [b for b in (lower, upper) if b is not None and np.isfinite(b)]
    shown = np.concatenate([y[finite], np.asarray(bounds, np.float64)])
    log = bool(len(shown)) and bool((shown > 0).all()) and float(shown.max()) / float(shown.min()) > 1e3

    def fy(v: np.ndarray) -> np.ndarray:
        return np.log10(v) if log else v

    lo_v, hi_v = (float(fy(shown).min()), float(fy(shown).max())) if len(shown) else (0.0, 1.0)
    if hi_v - lo_v < 1e-12:
        lo_v, hi_v = lo_v - 1.0, hi_v + 1.0
    pad = (hi_v - lo_v) * 0.08
    lo_v, hi_v = lo_v - pad, hi_v + pad
    x0, x1 = float(x.min()), float(x.max())
    sx = pw / (x1 - x0) if x1 > x0 else 0.0

    def px(v: float) -> float:
        return left + (v - x0) * sx if sx else left + pw / 2

    def py(v: float) -> float:
        return top + ph - (v - lo_v) / (hi_v - lo_v) * ph

    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    for frac in (0.0, 0.5, 1.0):
        v = lo_v + (hi_v - lo_v) * frac
        label = f"1e{v:.1f}" if log else _tick(v) if abs(v) >= 0.01 or v == 0 else f"{v:.2g}"
        out.append(f'<text x="{left - 4}" y="{py(v) + 4:.1f}" text-anchor="end" {_FONT}>{escape(label)}</text>')
    out.append(f'<text x="{left}" y="{height - 22}" {_FONT}>step {x0:.0f}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 22}" text-anchor="end" {_FONT}>step {x1:.0f}</text>')
    out.append(f'<text x="{left}" y="{height - 6}" {_FONT}>{escape(statistic)}{" (log scale)" if log else ""}</text>')
    pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x[finite], fy(y[finite]), strict=True))
    if pts:
        out.append(f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="1.3" points="{pts}"/>')
    for a, b in zip(x[~finite], y[~finite], strict=True):
        out.append(f'<circle class="nonfinite" cx="{px(a):.1f}" cy="{top + 4}" r="2.5" fill="{PALETTE[1]}">'
                   f'<title>step {a:.0f}: {b}</title></circle>')
    if (~finite).any():
        out.append(f'<text x="{left + pw - 4}" y="{top + 16}" text-anchor="end" fill="{PALETTE[1]}" {_FONT}>'
                   f"{int((~finite).sum())} non-finite</text>")
    for bound, side in ((lower, "fires below"), (upper, "fires above")):
        if bound is None or not np.isfinite(bound) or (log and bound <= 0):
            continue
        yy = py(float(fy(np.asarray(bound))))
        out.append(f'<line class="threshold" x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" '
                   f'stroke="#ff7f0e" stroke-width="1.2" stroke-dasharray="5 3"><title>{side} {bound:g}</title></line>')
        out.append(f'<text x="{left + 4}" y="{yy - 3:.1f}" fill="#ff7f0e" {_FONT}>{side} {escape(f"{bound:g}")}</text>')
    if trigger_step is not None and x0 <= trigger_step <= x1:
        xx = px(float(trigger_step))
        out.append(f'<line class="mark mark-trigger" x1="{xx:.1f}" x2="{xx:.1f}" y1="{top}" y2="{top + ph}" '
                   f'stroke="{MARK_COLORS["trigger"]}" stroke-width="1.5" stroke-dasharray="4 3">'
                   f"<title>fired at step {trigger_step}</title></line>")
        out.append(f'<text x="{xx + 3:.1f}" y="{top + ph - 4}" fill="{MARK_COLORS["trigger"]}" {_FONT}>'
                   f"fired at step {trigger_step}</text>")
    out.append("</svg>")
    return "".join(out)


def _nice(peak: float) -> float:
    """A round axis top at or above ``peak``."""
    if peak <= 0 or peak != peak:
        return 1.0
    mag = 10 ** np.floor(np.log10(peak))
    for m in (1, 2, 2.5, 5, 10):
        if peak <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def _tick(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or float(v).is_integer() else f"{v:.2f}".rstrip("0").rstrip(".")
