"""Scan intervals: Debugger rule jobs re-evaluate every ``scan_interval_us`` on the data seen so far.

We reproduce that schedule after the fact: boundary ``k`` (1-based) is ``t0 + k * interval``, and the
rule's state at boundary ``k`` is computed from the events with timestamp ``< boundary``. ``t0`` is the
whole minute of the first event: the rule job starts scanning at the timestamp of the first system file,
and smdebug names those files by the epoch second of their full minute (``<minute>.algo-1.json``). The last
boundary lies past the last event, so the final evaluation sees everything (as the rule job does
once the training job has ended).
"""

from __future__ import annotations

import numpy as np

MINUTE_NS = 60 * 10**9


def boundaries(t0_ns: int, t_last_ns: int, interval_us: int) -> np.ndarray:
    """Scan boundaries (epoch ns) covering ``[t0, t_last]``, ``t0`` floored to its minute; at least one."""
    step = int(interval_us) * 1000
    t0_ns = int(t0_ns) - int(t0_ns) % MINUTE_NS
    k = max(1, (t_last_ns - t0_ns) // step + 1)
    return t0_ns + step * np.arange(1, k + 1, dtype=np.int64)


def counts_before(ts: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """How many of the sorted ``ts`` are before each boundary."""
    return np.searchsorted(ts, bounds, side="left")


def interval_of(ts: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """The 1-based scan index whose evaluation first sees each timestamp."""
    return np.searchsorted(bounds, ts, side="right") + 1


def window_quantiles(values: np.ndarray, ends: np.ndarray, window: int, qs: list[float]) -> np.ndarray:
    """Quantiles ``qs`` of the last ``window`` values before each end index: shape (len(qs), len(ends)).

    Full windows go through one vectorised ``np.quantile``; the few early ones with fewer values
    (only when ``patience`` < ``window``) are done one by one.
    """
    out = np.empty((len(qs), len(ends)))
    full = ends >= window
    if full.any():
        idx = ends[full][:, None] - window + np.arange(window)[None, :]
        out[:, full] = np.quantile(values[idx], qs, axis=1)
    for j in np.flatnonzero(~full):
        out[:, j] = np.quantile(values[: ends[j]], qs) if ends[j] > 0 else np.nan
    return out
