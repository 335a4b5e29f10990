"""What the tensor rules read: one batch of newly saved steps, as typed frames and arrays (no storage access).

A :class:`TensorBatch` holds the steps a trial saved since the previous batch: raw values per tensor
(:class:`smx_debug.tensors.TensorValues`), the reductions the hook saved instead of (or beside) them (the reader's tidy frame,
``smx_debug.tensors.TENSOR_COLUMNS``), each step's wall time, and the names and collections the trial declares.
The reader side (:mod:`smx_debug.evaluate.tensor_feed`) builds batches; the rules (:mod:`tensor_rules`) only
read them, so a rule is tested on batches built by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.tensors.arrays import TensorValues, empty_reductions


@dataclass(frozen=True)
class Stat:
    """One number per saved record of a tensor: where (global step, mode, mode step, worker) and the value."""

    tensor: str
    steps: np.ndarray  # int64 global steps, ascending
    modes: np.ndarray  # object: TRAIN/EVAL/PREDICT/GLOBAL
    mode_steps: np.ndarray  # int64
    workers: np.ndarray  # object
    values: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.steps)

    def take(self, mask: np.ndarray) -> Stat:
        """The records where ``mask`` holds."""
        return Stat(self.tensor, self.steps[mask], self.modes[mask], self.mode_steps[mask], self.workers[mask],
                    self.values[mask])


def per_record(series: TensorValues, fn: Callable[[np.ndarray], np.ndarray]) -> Stat:
    """One number per record of ``series``: ``fn`` maps ``(records, *shape)`` values to one number per record; it
    runs once over the stacked values when they share a shape, else on each value alone. Strings and empty
    values give NaN."""
    stacked = series.stacked
    if stacked is not None:
        out = np.asarray(fn(stacked), dtype=np.float64).reshape(len(series))
    else:
        out = np.array([float(np.asarray(fn(np.asarray(v, dtype=np.float64)[None])).reshape(-1)[0])
                        if v.dtype.kind in "fiub" and v.size else np.nan for v in series.values], dtype=np.float64)
    return Stat(series.name, series.steps, series.modes, series.mode_steps, series.workers, out)


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1)


# Reductions computed from raw values, as smdebug's numpy reductions (variance/std are numpy's, ddof 0).
_REDUCE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "min": lambda x: _flat(x).min(axis=1), "max": lambda x: _flat(x).max(axis=1),
    "mean": lambda x: _flat(x).mean(axis=1), "std": lambda x: _flat(x).std(axis=1),
    "variance": lambda x: _flat(x).var(axis=1), "sum": lambda x: _flat(x).sum(axis=1),
    "prod": lambda x: _flat(x).prod(axis=1), "l1": lambda x: np.abs(_flat(x)).sum(axis=1),
    "l2": lambda x: np.sqrt((_flat(x) ** 2).sum(axis=1)),
}


def _reducer(name: str) -> Callable[[np.ndarray], np.ndarray]:
    base = name[4:] if name.startswith("abs_") else name
    fn = _REDUCE[base]
    if base != name:
        return lambda x: fn(np.abs(x))
    return fn


@dataclass(frozen=True)
class TensorBatch:
    """The steps a trial saved since the previous batch.

    Attributes:
        arrays: raw values by tensor name (tensors saved only as reductions are absent).
        reductions: saved reductions and scalars (``step, mode, mode_step, worker, tensor, reduction, value``).
        wall_times: global step -> wall time (epoch seconds) of its first record, for the steps of this batch.
        names: every tensor name the trial holds so far (reduction tensors folded into their tensor).
        collections: collection name -> predicate on a tensor name, as the trial's collections files say.
        ended: the trial's end marker was seen and this batch holds its last steps.
        now: "now" (epoch seconds) for a live evaluation; None when judging a finished trial.
        waiting: why saved steps were not read yet (empty when they were, or when there are none).
    """

    arrays: Mapping[str, TensorValues] = field(default_factory=dict)
    reductions: pd.DataFrame = field(default_factory=empty_reductions)
    wall_times: Mapping[int, float] = field(default_factory=dict)
    names: Sequence[str] = ()
    collections: Mapping[str, Callable[[str], bool]] = field(default_factory=dict)
    ended: bool = False
    now: float | None = None
    waiting: str = ""
    _by_tensor: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def _saved(self, tensor: str) -> pd.DataFrame:
        if not self._by_tensor:
            r = self.reductions
            if len(r):
                for name, grp in r.groupby(r["tensor"].astype(str), sort=False, observed=True):
                    self._by_tensor[str(name)] = grp
            self._by_tensor[""] = None  # built
        got = self._by_tensor.get(tensor)
        return got if got is not None else empty_reductions()

    def saved_reductions(self, tensor: str) -> set[str]:
        """The reductions saved for ``tensor`` in this batch (``"abs_mean"``, ``"l2"``...; ``""``: a scalar)."""
        return {str(r) for r in self._saved(tensor)["reduction"].unique()}

    def reduction(self, tensor: str, name: str) -> Stat | None:
        """``tensor``'s reduction ``name`` per saved record: computed from its raw values when the batch has
        them, else the saved reduction (or the saved scalar itself); None when neither is in the batch."""
        series = self.arrays.get(tensor)
        fn = _reducer(name)
        if series is not None and len(series):
            return per_record(series, fn)
        saved = self._saved(tensor)
        rows = saved[saved["reduction"].astype(str) == name]
        if rows.empty:
            scalar = saved[saved["reduction"].astype(str) == ""]
            if scalar.empty:
                return None
            values = scalar["value"].to_numpy(np.float64)
            rows = scalar.assign(value=fn(values.reshape(-1, 1)))
        rows = rows.sort_values(["step", "worker"], kind="stable")
        return Stat(tensor, rows["step"].to_numpy(np.int64), rows["mode"].astype(str).to_numpy(object),
                    rows["mode_step"].to_numpy(np.int64), rows["worker"].astype(str).to_numpy(object),
                    rows["value"].to_numpy(np.float64))
