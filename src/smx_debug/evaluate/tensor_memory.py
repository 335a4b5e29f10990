"""A trial held in memory as a hook writes it: what :class:`~smx_debug.evaluate.tensor_feed.TrialFeed` reads from a
trial (``refresh``, ``loaded_all_steps``, ``tensor_names``, ``collections``, ``steps``, ``arrays``), for the steps one
worker's hook hands its sink, so the :class:`~smx_debug.evaluate.tensor_eval.TensorEvaluator` judges them in the
training process (the in-process guard, :mod:`smx_debug.evaluate.tensor_guard`) exactly as it judges the trial on disk.

Each step is kept until the feed has read it, then dropped: the evaluator reads each step once and keeps what it
compares across steps in its rules' state. Values are held as the trial's reader returns them
(:func:`~smx_debug.tensors.read_arrays`): a reduction tensor holding one real number becomes a row of
``reductions`` (another reduction is dropped, as the reader drops it), every other tensor a raw value in
``values``, in the dtype the writer writes (:func:`~smx_debug.tensors.dtypes.as_array`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.tensors.arrays import TensorValues, TrialArrays
from smx_debug.tensors.collections_file import Collection
from smx_debug.tensors.dtypes import as_array
from smx_debug.tensors.mode_keys import ModeKeys
from smx_debug.tensors.reductions import parse_reduction_name


@dataclass(frozen=True)
class _Step:
    step: int
    mode: str
    mode_step: int
    wall_time: float
    raw: dict[str, np.ndarray]
    reductions: list[tuple[str, str, float]]  # (tensor, reduction, value)


def _held(name: str, value: Any) -> tuple[str, tuple[str, str, float] | np.ndarray | None]:
    """The tensor a written value belongs to (a reduction's: the tensor it reduces), and the value as the reader
    returns it: a (tensor, reduction, value) row, a raw array, or None (a reduction that is not one real number:
    the reader skips its value but knows the tensor's name)."""
    array = as_array(value, name=name)
    parsed = parse_reduction_name(name)
    if parsed is None:
        return name, array
    if array.size == 1 and array.dtype.kind in "fiub":
        kind = ("abs_" if parsed.abs else "") + parsed.reduction
        return parsed.tensor, (parsed.tensor, kind, float(array.reshape(-1)[0]))
    return parsed.tensor, None


class MemoryTrial:
    """One worker's steps, as written, until read (see the module's docstring).

    Args:
        worker: the worker name the hook writes as (``worker_0``).
    """

    start_step = 0

    def __init__(self, worker: str = "worker_0") -> None:
        self.worker = worker
        self._steps: list[_Step] = []
        self._names: set[str] = set()
        self._collections: dict[str, Collection] = {}
        self._ended = False

    # --- what the hook's sink hands on ----------------------------------------------------------------

    def add_step(self, step: int, *, mode: ModeKeys, mode_step: int, tensors: Mapping[str, Any],
                 wall_time: float | None = None) -> None:
        """Hold one written step (global ``step`` increasing from call to call, as the writer requires)."""
        raw: dict[str, np.ndarray] = {}
        rows: list[tuple[str, str, float]] = []
        for name, value in tensors.items():
            tensor, held = _held(name, value)
            self._names.add(tensor)
            if isinstance(held, tuple):
                rows.append(held)
            elif held is not None:
                raw[name] = held
        stamp = time.time() if wall_time is None else float(wall_time)
        self._steps.append(_Step(int(step), ModeKeys(mode).name, int(mode_step), stamp, raw, rows))

    def set_collections(self, collections: Iterable[Collection]) -> None:
        """The collections the hook declares (each call replaces them, as a rewritten collections file does)."""
        self._collections = {c.name: c for c in collections}

    def end(self) -> None:
        """The training ended (the end-of-training marker)."""
        self._ended = True

    # --- what the feed reads --------------------------------------------------------------------------

    def refresh(self) -> int:
        """Nothing to list: steps arrive as they are written. The number of steps held."""
        return len(self._steps)

    @property
    def loaded_all_steps(self) -> bool:
        """Whether the training has ended."""
        return self._ended

    def tensor_names(self) -> list[str]:
        """Every tensor written so far (reduction tensors folded into the tensor they reduce)."""
        return sorted(self._names)

    def collections(self) -> dict[str, Collection]:
        """The collections declared so far."""
        return dict(self._collections)

    def steps(self) -> list[int]:
        """The global steps held (written and not read yet)."""
        return [s.step for s in self._steps]

    def arrays(self, names: Iterable[str], *, start_step: int | None = None,
               end_step: int | None = None) -> TrialArrays:
        """The values, reductions and wall times of ``names`` at global steps ``start_step <= step < end_step``;
        the steps before ``end_step`` are dropped (the feed reads each step once)."""
        wanted = set(names)
        lo = -1 if start_step is None else start_step
        picked = [s for s in self._steps if s.step >= lo and (end_step is None or s.step < end_step)]
        if end_step is not None:
            self._steps = [s for s in self._steps if s.step >= end_step]
        out = TrialArrays()
        records: dict[str, list[tuple[_Step, np.ndarray]]] = {}
        rows: list[tuple[int, str, int, str, str, str, float]] = []
        for s in picked:
            before = len(rows) + sum(map(len, records.values()))
            for name, value in s.raw.items():
                if name in wanted:
                    records.setdefault(name, []).append((s, value))
            rows.extend((s.step, s.mode, s.mode_step, self.worker, tensor, kind, value)
                        for tensor, kind, value in s.reductions if tensor in wanted)
            if len(rows) + sum(map(len, records.values())) > before:  # the reader stamps the steps it read
                out.wall_times[s.step] = s.wall_time
        for name, held in records.items():
            out.values[name] = TensorValues.of(name, [s.step for s, _ in held], [s.mode for s, _ in held],
                                               [s.mode_step for s, _ in held], [self.worker] * len(held),
                                               [v for _, v in held])
        if rows:
            frame = pd.DataFrame(rows, columns=["step", "mode", "mode_step", "worker", "tensor", "reduction",
                                                "value"])
            out.reductions = frame.astype({"step": "int64", "mode_step": "int64", "value": "float64"})
        return out
