"""Small helpers shared by the readers: time arguments, a tqdm progress bar on stderr."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, TextIO

import pandas as pd
from tqdm import tqdm

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


def progress_bar(label: str, total: int, *, enabled: bool | None = None, file: TextIO | None = None,
                 unit: str = "file") -> Any:
    """A tqdm bar for a read of ``total`` files (``unit``s) on stderr (``file``).

    ``enabled=None``: shown only when the stream is a terminal (silent when piped, in a Lambda or a notebook's
    captured stderr), and only once the read has taken a second (tqdm's ``delay``): short reads print nothing.
    ``enabled=True``: shown from the start, wherever the stream goes, and left on screen at the end.
    """
    forced = enabled is True
    return tqdm(total=total, desc=label, unit=unit, delay=0.0 if forced else 1.0, leave=forced,
                file=file if file is not None else sys.stderr,
                disable=None if enabled is None else not enabled)
