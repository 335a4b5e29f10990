"""The reader side of the tensor rules: a trial's newly saved steps as :class:`TensorBatch` objects.

:class:`TrialFeed` keeps a cursor (the next global step to read) and reads only the steps every worker has
finished since the last call, each record once: scalars and saved reductions through the reader's vectorised
scalar path, raw values of many elements grouped by tensor and shape and cut out of the read buffer with numpy
(one protobuf parse per group for the shape, and for records the fast path cannot read). Damaged records are
skipped and counted in the trial's ``skipped``, never fatal.

Issue 21 moves this module to the data layer. Until ``smx_debug.tensors`` offers a bulk reader of raw values
and each step's wall time, :func:`_plan` and :func:`read_records` use the trial's catalog (``Trial._catalog``)
and the reader's batch functions: the only place outside ``smx_debug.tensors`` that does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.evaluate.tensor_data import MODE_NAMES, TensorBatch, TensorSeries, empty_reductions

__all__ = ["TrialFeed", "is_trial", "read_records"]

_TRIAL_MARKERS = ("index", "events", "collections", "training_job_end.ts")


def is_trial(path: str, *, s3_client: Any = None) -> bool:
    """Whether ``path`` (a local folder or an ``s3://`` prefix) holds Debugger's tensor layout."""
    if path.startswith("s3://"):
        from smx_debug.reports.sources import split_s3_uri

        bucket, key = split_s3_uri(path)
        prefix = key.rstrip("/") + "/" if key else ""
        if s3_client is None:
            import boto3

            s3_client = boto3.client("s3")
        listed = s3_client.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/", MaxKeys=1000)
        tops = {p["Prefix"][len(prefix):].rstrip("/") for p in listed.get("CommonPrefixes", [])}
        tops |= {o["Key"][len(prefix):] for o in listed.get("Contents", [])}
        return bool(tops & set(_TRIAL_MARKERS))
    local = os.path.expanduser(path)
    return os.path.isdir(local) and any(os.path.exists(os.path.join(local, m)) for m in _TRIAL_MARKERS)


@dataclass
class Records:
    """What :func:`read_records` returns for a step range."""

    arrays: dict[str, TensorSeries] = field(default_factory=dict)
    reductions: pd.DataFrame = field(default_factory=empty_reductions)
    wall_times: dict[int, float] = field(default_factory=dict)


def _plan(trial: Any, wanted: set[str], start: int, end: int) -> tuple[Any, list[tuple[Any, np.ndarray]]]:
    """The trial's catalog and, per event file of steps [start, end), the positions of the wanted records."""
    cat = trial._catalog  # see the module docstring
    want = np.array([cat.base_of[i] in wanted for i in range(len(cat.names))], bool)
    plan = []
    for f in sorted(cat.order, key=lambda f: (f.step, f.worker)):
        if f.key is None or not start <= f.step < end:
            continue
        sel = np.flatnonzero(want[f.ids]) if len(want) else np.zeros(0, np.int64)
        if len(sel):
            plan.append((f, sel))
    return cat, plan


@dataclass
class _Chunk:
    """Records of one tensor read from one batch: where they are, and their values (a block or one by one)."""

    steps: np.ndarray
    modes: np.ndarray
    mode_steps: np.ndarray
    workers: np.ndarray
    block: np.ndarray | None = None
    records: list[np.ndarray] = field(default_factory=list)


def _series(name: str, chunks: list[_Chunk]) -> TensorSeries:
    """One tensor's chunks as a series in (step, worker) order; one block when every chunk is a block of one shape
    and dtype."""
    steps = np.concatenate([c.steps for c in chunks])
    workers = np.concatenate([c.workers for c in chunks])
    order = np.lexsort((workers.astype(str), steps))
    modes = np.concatenate([c.modes for c in chunks])[order]
    mode_steps = np.concatenate([c.mode_steps for c in chunks])[order]
    blocks = [c.block for c in chunks]
    if all(b is not None for b in blocks) and len({(b.shape[1:], b.dtype) for b in blocks if b is not None}) == 1:
        block = np.concatenate([b for b in blocks if b is not None])[order]
        return TensorSeries(name, steps[order], modes, mode_steps, workers[order], block=block)
    values = [v for c in chunks for v in (list(c.block) if c.block is not None else c.records)]
    return TensorSeries.of(name, steps[order], modes, mode_steps, workers[order], [values[i] for i in order])


def read_records(trial: Any, wanted: Iterable[str], start: int, end: int) -> Records:
    """The records of the ``wanted`` tensors (and their saved reductions) at global steps [start, end)."""
    from smx_debug.tensors.dtypes import NUMPY_DTYPES
    from smx_debug.tensors.fastdecode import scalar_values, walk
    from smx_debug.tensors.frame import decode_values, read_batches

    cat, plan = _plan(trial, set(wanted), start, end)
    out = Records()
    if not plan:
        return out
    is_reduction = np.array([bool(r) for r in cat.reduction_of], bool)
    mode_names = np.array(MODE_NAMES, object)
    known = np.array(sorted(NUMPY_DTYPES), np.int64)
    chunks: dict[str, list[_Chunk]] = {}
    red_parts: list[pd.DataFrame] = []
    for batch in read_batches(cat, plan, verify=trial.verify_checksums):
        if not len(batch.ids):
            continue
        files = batch.files
        step = np.array([f.step for f in files], np.int64)[batch.file_of]
        mode = mode_names[np.array([int(f.mode) for f in files], np.int64)[batch.file_of] - 1]
        mode_step = np.array([f.mode_step for f in files], np.int64)[batch.file_of]
        worker = np.array([f.worker for f in files], object)[batch.file_of]
        _wall_times(batch, out.wall_times, step)
        w = walk(batch.buf, batch.start + 12, batch.start + batch.length - 4)
        red = is_reduction[batch.ids]
        scalar_ok, scalar = scalar_values(batch.buf, w)
        rows = np.flatnonzero(red & scalar_ok)
        if len(rows):
            ids = batch.ids[rows]
            red_parts.append(pd.DataFrame({
                "step": step[rows], "mode": mode[rows], "mode_step": mode_step[rows], "worker": worker[rows],
                "tensor": np.array([cat.base_of[i] for i in ids.tolist()], object),
                "reduction": np.array([cat.reduction_of[i] for i in ids.tolist()], object), "value": scalar[rows]}))
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
            first = dict(decode_values(cat, batch, members[:1]))
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
            chunks.setdefault(cat.base_of[nid], []).append(
                _Chunk(step[members], mode[members], mode_step[members], worker[members], block=block))
        for r, value in decode_values(cat, batch, np.array(sorted(slow), np.int64)):
            chunks.setdefault(cat.base_of[int(batch.ids[r])], []).append(
                _Chunk(step[[r]], mode[[r]], mode_step[[r]], worker[[r]], records=[value]))
    out.arrays = {name: _series(name, parts) for name, parts in chunks.items()}
    if red_parts:
        out.reductions = pd.concat(red_parts, ignore_index=True)
    return out


def _wall_times(batch: Any, into: dict[int, float], step: np.ndarray) -> None:
    """Each step's wall time: ``Event.wall_time`` (field 1, a double, first in the record) of its first record."""
    buf = batch.buf
    _, first = np.unique(batch.file_of, return_index=True)
    for r in first.tolist():
        s = int(step[r])
        a = int(batch.start[r]) + 12
        if s in into or a + 9 > len(buf) or buf[a] != 0x09:
            continue
        into[s] = float(buf[a + 1:a + 9].view("<f8")[0])


class TrialFeed:
    """The steps a trial saved since the previous :meth:`read`, once every worker wrote them.

    While the trial has no collections file yet and has not ended, nothing is read (a rule that reads a
    collection would otherwise miss the first steps, written before the hook's collections file).
    """

    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self.cursor = 0  # next global step to read

    def names(self) -> list[str]:
        """Every tensor name the trial holds so far."""
        names: list[str] = self.trial.tensor_names()
        return names

    def collections(self) -> dict[str, Callable[[str], bool]]:
        """The trial's collections, as predicates on tensor names."""
        return {name: coll.matches for name, coll in self.trial.collections().items()}

    def read(self, select: Callable[[list[str], Mapping[str, Callable[[str], bool]]], set[str]], *,
             now: float | None = None, until: int | None = None) -> TensorBatch:
        """Refresh the trial, ask ``select(names, collections)`` which tensors to read, and read them at the
        steps completed since the last call (and before global step ``until``, when given: a replay)."""
        self.trial.refresh()
        ended = bool(self.trial.loaded_all_steps)
        names, collections = self.names(), self.collections()
        empty = TensorBatch(names=names, collections=collections, ended=ended, now=now)
        if not collections and not ended:
            return empty
        complete = [s for s in self.trial.steps() if s >= self.cursor and (until is None or s < until)]
        if not complete:
            return empty
        end = max(complete) + 1
        records = read_records(self.trial, select(names, collections), self.cursor, end)
        self.cursor = end
        return TensorBatch(arrays=records.arrays, reductions=records.reductions, wall_times=records.wall_times,
                           names=names, collections=collections, ended=ended, now=now)
