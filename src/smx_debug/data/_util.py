"""Small helpers shared by the readers: time arguments, strings JSON may hold and UTF-8 cannot."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from smx_debug.errors import ConfigError

TimeLike = datetime | pd.Timestamp | str | int | float | None


def is_utf8(text: str) -> bool:
    """False for a string with a lone surrogate (from a JSON escape such as ``"\\ud800"``): valid JSON, no UTF-8."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def to_epoch_ns(value: TimeLike, field: str) -> int | None:
    """``None`` stays ``None``; datetimes (naive = UTC), ISO strings and epoch seconds become epoch ns."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{field} must be a time, got {value!r}", field=field, value=value)
    if isinstance(value, int | float):
        return round(float(value) * 1e9)
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{field} is not a time: {value!r}", field=field, value=value) from exc
    if pd.isna(ts):
        raise ConfigError(f"{field} is not a time: {value!r}", field=field, value=value)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return int(ts.value)
