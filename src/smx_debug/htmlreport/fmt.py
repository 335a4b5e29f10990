"""Numbers as people read them: a unit on every value, no scientific notation, counts tagged for consistency."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from html import escape


def number(value: float, digits: int = 1) -> str:
    """``1,234.5``; integers without decimals; never ``1e+06``; ``-`` for NaN/None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    v = float(value)
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 100:
        digits = min(digits, 1)
    elif abs(v) < 1 and v != 0:
        digits = max(digits, 3)
    return f"{v:,.{digits}f}"


def percent(value: float) -> str:
    """``85.3%``."""
    return "-" if value is None or math.isnan(float(value)) else f"{float(value):.1f}%"


def rate_mb(bytes_per_s: float) -> str:
    """Bytes per second as ``12.3 MB/s``."""
    return "-" if bytes_per_s is None or math.isnan(float(bytes_per_s)) else f"{float(bytes_per_s) / 1e6:,.1f} MB/s"


def duration(seconds: float) -> str:
    """``250 ms``, ``12.5 s``, ``4.2 min``, ``1.50 h``."""
    if seconds is None or math.isnan(float(seconds)):
        return "-"
    s = float(seconds)
    if abs(s) < 1:
        return f"{s * 1000:,.0f} ms" if abs(s) >= 0.01 else f"{s * 1000:,.2f} ms"
    if abs(s) < 60:
        return f"{s:.1f} s"
    if abs(s) < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def money(usd: float) -> str:
    """``$1,234.56``."""
    return f"${float(usd):,.2f}"


def utc(epoch_ns: int) -> str:
    """``2026-01-01 00:10:00 UTC``."""
    return datetime.fromtimestamp(epoch_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def count(key: str, value: int) -> str:
    """A count tagged ``data-count`` so a test can check that every place showing it agrees."""
    return f"<span data-count='{escape(key)}'>{int(value):,}</span>"
