"""Small helpers shared by the readers: time arguments, progress on stderr, HTML display of frames."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import Any, TextIO

import pandas as pd

from smx_debug.errors import ConfigError

__all__ = ["Progress", "is_utf8", "to_epoch_ns"]

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


class Progress:
    """A one-line progress counter on stderr, silent unless stderr is a terminal (or ``enabled=True``)."""

    def __init__(self, label: str, total: int, *, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.total = total
        self.done = 0
        self._last = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last > 0.1 or self.done >= self.total):
            self._last = now
            pct = 100.0 * self.done / self.total if self.total else 100.0
            self.stream.write(f"\r{self.label}: {self.done}/{self.total} ({pct:.0f}%)")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
