"""Many tensors' raw values at once, as numpy blocks: what rules and reports read (``Trial.arrays``).

:func:`read_arrays` reads the records of some tensors over a range of global steps, each record once: scalars and
saved reductions through the vectorised scalar path (a tidy frame, :data:`~smx_debug.tensors.frame.TENSOR_COLUMNS`),
raw values of many elements grouped by tensor, dtype and size and cut out of the read buffer with one numpy
gather per group (one protobuf parse per group for the shape; records the fast path cannot read go through
protobuf one by one), and each step's wall time (``Event.wall_time`` of its first record). Damaged records are
skipped and counted in the catalog's ``skipped``, never fatal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

import numpy as np
import pandas as pd

from smx_debug.tensors.catalog import Catalog, EventFile
from smx_debug.tensors.dtypes import NUMPY_DTYPES
from smx_debug.tensors.fastdecode import scalar_values
from smx_debug.tensors.frame import Batch, decode_values, read_batches
from smx_debug.tensors.mode_keys import ModeKeys

MODE_NAMES: Final = tuple(m.name for m in ModeKeys)  # TRAIN, EVAL, PREDICT, GLOBAL: ModeKeys 1..4 in order


def empty_reductions() -> pd.DataFrame:
    """An empty frame of saved reductions and scalars (``step, mode, mode_step, worker, tensor, reduction,
    value``; ``mode``, ``worker``, ``tensor`` and ``reduction`` as Python strings)."""
    return pd.DataFrame({
        "step": pd.Series([], dtype="int64"), "mode": pd.Series([], dtype=object),
        "mode_step": pd.Series([], dtype="int64"), "worker": pd.Series([], dtype=object),
        "tensor": pd.Series([], dtype=object), "reduction": pd.Series([], dtype=object),
        "value": pd.Series([], dtype="float64"),
    })


@dataclass(frozen=True)
class TensorValues:
    """The raw values of one tensor, one per saved record, ordered by global step then worker: as one
    ``(records, *shape)`` array (``block``) when they share a shape and dtype, else one array per record.

    ``modes`` holds mode names (``"TRAIN"``, ``"EVAL"``, ``"PREDICT"``, ``"GLOBAL"``).
    """

    name: str
    steps: np.ndarray  # int64 global steps
    modes: np.ndarray  # object
    mode_steps: np.ndarray  # int64
    workers: np.ndarray  # object
    records: tuple[np.ndarray, ...] = ()
    block: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.steps)

    @classmethod
    def of(cls, name: str, steps: Any, modes: Any, mode_steps: Any, workers: Any,
           values: Sequence[np.ndarray]) -> TensorValues:
        """Values from per-record arrays (stacked into ``block`` when they share a shape and dtype)."""
        arrays = [np.asarray(v) for v in values]
        same = bool(arrays) and all(v.shape == arrays[0].shape and v.dtype == arrays[0].dtype for v in arrays)
        return cls(name, np.asarray(steps, np.int64), np.asarray(modes, object), np.asarray(mode_steps, np.int64),
                   np.asarray(workers, object), () if same else tuple(arrays),
                   np.stack(arrays) if same else None)

    def take(self, idx: np.ndarray) -> TensorValues:
        """The records at positions ``idx`` (in that order)."""
        if self.block is not None:
            return TensorValues(self.name, self.steps[idx], self.modes[idx], self.mode_steps[idx],
                                self.workers[idx], block=self.block[idx])
        return TensorValues.of(self.name, self.steps[idx], self.modes[idx], self.mode_steps[idx], self.workers[idx],
                               [self.records[i] for i in np.asarray(idx).tolist()])

    @cached_property
    def values(self) -> tuple[np.ndarray, ...]:
        """One array per record."""
        return tuple(self.block) if self.block is not None else self.records

    @cached_property
    def stacked(self) -> np.ndarray | None:
        """All values as one ``(records, *shape)`` float64 array when they share a shape and are real numbers,
        else None."""
        if self.block is not None:
            return self.block.astype(np.float64) if self.block.dtype.kind in "fiub" else None
        if not self.records:
            return None
        shape = self.records[0].shape
        if any(v.shape != shape or v.dtype.kind not in "fiub" for v in self.records):
            return None
        return np.stack([np.asarray(v, dtype=np.float64) for v in self.records])


@dataclass
class TrialArrays:
    """What :meth:`smx_debug.tensors.Trial.arrays` returns for a range of steps.

    Attributes:
        values: raw values by tensor name (a tensor saved only as reductions is absent).
        reductions: saved reductions and scalars, one row per record (:func:`empty_reductions`'s columns;
            ``reduction`` is ``""`` for a tensor's own value, ``"abs_mean"``... for a saved reduction).
        wall_times: global step -> wall time (epoch seconds) of the step's first record read.
    """

    values: dict[str, TensorValues] = field(default_factory=dict)
    reductions: pd.DataFrame = field(default_factory=empty_reductions)
    wall_times: dict[int, float] = field(default_factory=dict)


@dataclass
class _Chunk:
    """Records of one tensor read from one batch: where they are, and their values (a block or one by one)."""

    steps: np.ndarray
    modes: np.ndarray
    mode_steps: np.ndarray
    workers: np.ndarray
    block: np.ndarray | None = None
    records: list[np.ndarray] = field(default_factory=list)


def _values(name: str, chunks: list[_Chunk]) -> TensorValues:
    """One tensor's chunks in (step, worker) order; one block when every chunk is a block of one shape and dtype."""
    steps = np.concatenate([c.steps for c in chunks])
    workers = np.concatenate([c.workers for c in chunks])
    order = np.lexsort((workers.astype(str), steps))
    modes = np.concatenate([c.modes for c in chunks])[order]
    mode_steps = np.concatenate([c.mode_steps for c in chunks])[order]
    blocks = [c.block for c in chunks]
    if all(b is not None for b in blocks) and len({(b.shape[1:], b.dtype) for b in blocks if b is not None}) == 1:
        block = np.concatenate([b for b in blocks if b is not None])[order]
        return TensorValues(name, steps[order], modes, mode_steps, workers[order], block=block)
    values = [v for c in chunks for v in (list(c.block) if c.block is not None else c.records)]
    return TensorValues.of(name, steps[order], modes, mode_steps, workers[order], [values[i] for i in order])


def plan_files(catalog: Catalog, wanted: set[str], start: int | None, end: int | None,
               keep: Callable[[EventFile], bool] | None = None) -> list[tuple[EventFile, np.ndarray]]:
    """Per event file of global steps [start, end) (``keep`` may drop more), the positions of the records of the
    ``wanted`` tensors and their reductions, in (step, worker) order."""
    want = np.array([catalog.base_of[i] in wanted for i in range(len(catalog.names))], bool)
    plan = []
    for f in sorted(catalog.order, key=lambda f: (f.step, f.worker)):
        if f.key is None or (start is not None and f.step < start) or (end is not None and f.step >= end):
            continue
        if keep is not None and not keep(f):
            continue
        sel = np.flatnonzero(want[f.ids]) if len(want) else np.zeros(0, np.int64)
        if len(sel):
            plan.append((f, sel))
    return plan


def read_arrays(catalog: Catalog, plan: Sequence[tuple[EventFile, np.ndarray]], *,
                verify: bool = False) -> TrialArrays:
    """The planned records (:func:`plan_files`) as raw values, saved reductions and wall times."""
    out = TrialArrays()
    if not plan:
        return out
    is_reduction = np.array([bool(r) for r in catalog.reduction_of], bool)
    mode_names = np.array(MODE_NAMES, object)
    known = np.array(sorted(NUMPY_DTYPES), np.int64)
    chunks: dict[str, list[_Chunk]] = {}
    red_parts: list[pd.DataFrame] = []
    for batch in read_batches(catalog, plan, verify=verify):
        if not len(batch.ids):
            continue
        files = batch.files
        step = np.array([f.step for f in files], np.int64)[batch.file_of]
        mode = mode_names[np.array([int(f.mode) for f in files], np.int64)[batch.file_of] - 1]
        mode_step = np.array([f.mode_step for f in files], np.int64)[batch.file_of]
        worker = np.array([f.worker for f in files], object)[batch.file_of]
        _wall_times(batch, out.wall_times, step)
        w = batch.walk
        red = is_reduction[batch.ids]
        scalar_ok, scalar = scalar_values(batch.buf, w)
        rows = np.flatnonzero(red & scalar_ok)
        if len(rows):
            ids = batch.ids[rows]
            red_parts.append(pd.DataFrame({
                "step": step[rows], "mode": mode[rows], "mode_step": mode_step[rows], "worker": worker[rows],
                "tensor": np.array([catalog.base_of[i] for i in ids.tolist()], object),
                "reduction": np.array([catalog.reduction_of[i] for i in ids.tolist()], object),
                "value": scalar[rows]}))
        # Raw records, grouped by (name, dtype, bytes): each group is cut out of the buffer in one numpy gather
        # (its shape from one protobuf parse); what the fast path cannot read goes through protobuf one by one.
        raw = np.flatnonzero(~red)
        fast = raw[w.ok[raw] & np.isin(w.dtype[raw], known)]
        slow = set(raw.tolist()) - set(fast.tolist())
        keys = np.stack([batch.ids[fast].astype(np.int64), w.dtype[fast].astype(np.int64),
                         w.content_len[fast].astype(np.int64)], axis=1)
        uniq, group_of = np.unique(keys, axis=0, return_inverse=True) if len(fast) else (keys, np.zeros(0, int))
        for g, (nid, code, nbytes) in enumerate(uniq.tolist()):
            members = fast[group_of.reshape(-1) == g]
            first = dict(decode_values(catalog, batch, members[:1]))
            if int(members[0]) not in first:
                slow.update(members[1:].tolist())  # damaged: counted by decode_values; the others go one by one
                continue
            shape = first[int(members[0])].shape
            dtype = NUMPY_DTYPES[code]
            if int(np.prod(shape)) * dtype.itemsize != nbytes:
                slow.update(members.tolist())
                continue
            idx = np.asarray(w.content_start[members], np.int64)[:, None] + np.arange(nbytes)
            block = batch.buf[idx].view(dtype).reshape(len(members), *shape)
            chunks.setdefault(catalog.base_of[nid], []).append(
                _Chunk(step[members], mode[members], mode_step[members], worker[members], block=block))
        for r, value in decode_values(catalog, batch, np.array(sorted(slow), np.int64)):
            chunks.setdefault(catalog.base_of[int(batch.ids[r])], []).append(
                _Chunk(step[[r]], mode[[r]], mode_step[[r]], worker[[r]], records=[value]))
    out.values = {name: _values(name, parts) for name, parts in chunks.items()}
    if red_parts:
        out.reductions = pd.concat(red_parts, ignore_index=True)
    return out


def _wall_times(batch: Batch, into: dict[int, float], step: np.ndarray) -> None:
    """Each step's wall time: ``Event.wall_time`` (field 1, a double, first in the record) of its first record."""
    buf = batch.buf
    _, first = np.unique(batch.file_of, return_index=True)
    for r in first.tolist():
        s = int(step[r])
        a = int(batch.start[r]) + 12
        if s in into or a + 9 > len(buf) or buf[a] != 0x09:
            continue
        into[s] = float(buf[a + 1:a + 9].view("<f8")[0])
