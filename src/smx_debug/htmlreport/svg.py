"""Inline SVG charts (no JavaScript library, no network): line chart, histogram, heatmap, bar list."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

__all__ = ["PALETTE", "downsample", "heatmap", "histogram", "line_chart"]

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


def line_chart(
    series: Sequence[tuple[str, np.ndarray, np.ndarray]], *, title: str, x_label: str = "minutes",
    y_max: float | None = 100.0, width: int = 640, height: int = 220,
) -> str:
    """Lines of (label, x, y); x in ``x_label`` units."""
    left, right, top, bottom = 40, 110, 24, 30
    pw, ph = width - left - right, height - top - bottom
    out = _frame(width, height, title, "line")
    xs = [s[1] for s in series if len(s[1])]
    if not xs:
        out.append(f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" {_FONT}>no data</text></svg>')
        return "".join(out)
    x0 = min(float(x.min()) for x in xs)
    x1 = max(float(x.max()) for x in xs)
    ytop = y_max if y_max is not None else max(float(np.nanmax(s[2])) for s in series if len(s[2])) or 1.0
    sx = pw / (x1 - x0) if x1 > x0 else 0.0
    sy = ph / ytop if ytop else 0.0
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    for frac in (0.0, 0.5, 1.0):
        yv = ytop * frac
        yy = top + ph - yv * sy
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 4}" y="{yy + 4:.1f}" text-anchor="end" {_FONT}>{yv:g}</text>')
    out.append(f'<text x="{left}" y="{height - 8}" {_FONT}>{x0:.0f}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 8}" text-anchor="end" {_FONT}>{x1:.0f} {escape(x_label)}</text>')
    for i, (label, x, y) in enumerate(series):
        if not len(x):
            continue
        xd, yd = downsample(np.asarray(x, float), np.asarray(y, float))
        pts = " ".join(f"{left + (a - x0) * sx:.1f},{top + ph - min(b, ytop) * sy:.1f}" for a, b in zip(xd, yd, strict=True))
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.3" points="{pts}"/>')
        ly = top + 12 + 14 * i
        out.append(f'<rect x="{left + pw + 8}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{left + pw + 22}" y="{ly + 1}" {_FONT}>{escape(label)}</text>')
    out.append("</svg>")
    return "".join(out)


def histogram(
    values: np.ndarray, *, title: str, bins: int | np.ndarray = 50, x_label: str = "", threshold: float | None = None,
    width: int = 420, height: int = 200,
) -> str:
    """Histogram of ``values``; bars at or above ``threshold`` are drawn red (outliers)."""
    left, right, top, bottom = 40, 10, 24, 30
    pw, ph = width - left - right, height - top - bottom
    out = _frame(width, height, title, "histogram")
    values = np.asarray(values, float)
    values = values[~np.isnan(values)]
    if not len(values):
        out.append(f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" {_FONT}>no data</text></svg>')
        return "".join(out)
    counts, edges = np.histogram(values, bins=bins)
    top_count = max(int(counts.max()), 1)
    bw = pw / len(counts)
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    for i, c in enumerate(counts.tolist()):
        if not c:
            continue
        h = max(1.0, ph * c / top_count)
        color = "#d62728" if threshold is not None and edges[i + 1] > threshold else "#1f77b4"
        out.append(
            f'<rect class="bar" x="{left + i * bw:.1f}" y="{top + ph - h:.1f}" width="{max(bw - 1, 1):.1f}" '
            f'height="{h:.1f}" fill="{color}"><title>{edges[i]:.3g}-{edges[i + 1]:.3g}: {c}</title></rect>'
        )
    out.append(f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" {_FONT}>{top_count}</text>')
    out.append(f'<text x="{left}" y="{height - 8}" {_FONT}>{edges[0]:.3g}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 8}" text-anchor="end" {_FONT}>{edges[-1]:.3g} {escape(x_label)}</text>')
    out.append("</svg>")
    return "".join(out)


def _color(v: float) -> str:
    # white (0%) -> blue (100%); NaN grey
    if np.isnan(v):
        return "#eeeeee"
    t = min(max(v / 100.0, 0.0), 1.0)
    r, g, b = int(255 - 224 * t), int(255 - 136 * t), int(255 - 75 * t)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    matrix: np.ndarray, row_labels: Sequence[str], *, title: str, x_label: str = "minutes",
    x_range: tuple[float, float] = (0.0, 1.0), width: int = 900, row_height: int = 8,
) -> str:
    """Rows (devices) x columns (time bins) of 0..100 values."""
    left, right, top, bottom = 90, 10, 24, 30
    rows, cols = matrix.shape if matrix.ndim == 2 else (0, 0)
    height = top + bottom + max(rows, 1) * row_height
    pw = width - left - right
    out = _frame(width, height, title, "heatmap")
    if not rows or not cols:
        out.append(f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" {_FONT}>no data</text></svg>')
        return "".join(out)
    cw = pw / cols
    step = max(1, -(-12 // row_height))  # label every n-th row so 11 px labels do not overlap
    for r in range(rows):
        y = top + r * row_height
        for c in range(cols):
            out.append(f'<rect x="{left + c * cw:.1f}" y="{y}" width="{cw + 0.3:.1f}" height="{row_height}" '
                       f'fill="{_color(float(matrix[r, c]))}"/>')
        if r % step == 0:
            out.append(f'<text x="{left - 4}" y="{y + row_height}" text-anchor="end" {_FONT}>{escape(row_labels[r])}</text>')
    out.append(f'<text x="{left}" y="{height - 8}" {_FONT}>{x_range[0]:.0f}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 8}" text-anchor="end" {_FONT}>{x_range[1]:.0f} {escape(x_label)}</text>')
    out.append("</svg>")
    return "".join(out)
