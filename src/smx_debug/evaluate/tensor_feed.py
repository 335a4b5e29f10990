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


def read_records(trial: Any, wanted: Iterable[str], start: int, end: int) -> Records:
    """The records of the ``wanted`` tensors (and their saved reductions) at global steps [start, end)."""
    from smx_debug.tensors.dtypes import NUMPY_DTYPES
    from smx_debug.tensors.fastdecode import scalar_values, walk
    from smx_debug.tensors.frame import decode_values, read_batches

    cat, plan = _plan(trial, set(wanted), start, end)
    out = Records()
    if not plan:
        return out
    raw: dict[str, list[tuple[int, int, int, str, np.ndarray]]] = {}  # name -> (step, mode, mode_step, worker, v)
    red_rows: list[tuple[int, int, int, str, str, str, float]] = []
    for batch in read_batches(cat, plan, verify=trial.verify_checksums):
        if not len(batch.ids):
            continue
        files = batch.files
        step = np.array([f.step for f in files], np.int64)[batch.file_of]
        mode = np.array([int(f.mode) for f in files], np.int64)[batch.file_of]
        mode_step = np.array([f.mode_step for f in files], np.int64)[batch.file_of]
        worker = np.array([f.worker for f in files], object)[batch.file_of]
        _wall_times(batch, out.wall_times, step)
        w = walk(batch.buf, batch.start + 12, batch.start + batch.length - 4)
        is_red = np.array([bool(cat.reduction_of[i]) for i in batch.ids.tolist()], bool)
        scalar_ok, scalar = scalar_values(batch.buf, w)
        for r in np.flatnonzero(is_red & scalar_ok).tolist():
            nid = int(batch.ids[r])
            red_rows.append((int(step[r]), int(mode[r]), int(mode_step[r]), str(worker[r]), cat.base_of[nid],
                             cat.reduction_of[nid], float(scalar[r])))
        # Raw records: grouped by (name, dtype, size); a group is cut out of the buffer in one numpy gather.
        raw_rows = np.flatnonzero(~is_red)
        fast = w.ok[raw_rows] & np.isin(w.dtype[raw_rows], list(NUMPY_DTYPES))
        slow: list[int] = raw_rows[~fast].tolist()
        rows = raw_rows[fast]
        keys = np.stack([batch.ids[rows].astype(np.int64), w.dtype[rows].astype(np.int64),
                         w.content_len[rows].astype(np.int64)], axis=1) if len(rows) else np.zeros((0, 3), np.int64)
        groups: dict[tuple[int, int, int], list[int]] = {}
        for k, r in zip(map(tuple, keys.tolist()), rows.tolist(), strict=True):
            groups.setdefault(k, []).append(r)
        decoded: dict[int, np.ndarray] = {}
        for (_, code, nbytes), members in groups.items():
            first = dict(decode_values(cat, batch, np.array(members[:1])))
            if members[0] not in first:
                continue  # damaged: counted by decode_values
            shape = first[members[0]].shape
            dtype = NUMPY_DTYPES[code]
            if int(np.prod(shape)) * dtype.itemsize != nbytes:
                slow.extend(members[1:])
                decoded.update(first)
                continue
            idx = np.asarray(w.content_start[members], np.int64)[:, None] + np.arange(nbytes)
            block = batch.buf[idx].view(dtype).reshape(len(members), *shape) if nbytes else np.zeros(
                (len(members), *shape), dtype)
            decoded.update(zip(members, block, strict=True))
        decoded.update(decode_values(cat, batch, np.array(slow, np.int64)))
        for r in sorted(decoded):
            raw.setdefault(cat.base_of[int(batch.ids[r])], []).append(
                (int(step[r]), int(mode[r]), int(mode_step[r]), str(worker[r]), decoded[r]))
    for name, recs in raw.items():
        recs.sort(key=lambda t: (t[0], t[3]))
        out.arrays[name] = TensorSeries(
            name, np.array([t[0] for t in recs], np.int64), np.array([MODE_NAMES[t[1] - 1] for t in recs], object),
            np.array([t[2] for t in recs], np.int64), np.array([t[3] for t in recs], object),
            tuple(t[4] for t in recs))
    if red_rows:
        cols = list(zip(*red_rows, strict=True))
        out.reductions = pd.DataFrame({
            "step": np.array(cols[0], np.int64), "mode": np.array([MODE_NAMES[m - 1] for m in cols[1]], object),
            "mode_step": np.array(cols[2], np.int64), "worker": np.array(cols[3], object),
            "tensor": np.array(cols[4], object), "reduction": np.array(cols[5], object),
            "value": np.array(cols[6], np.float64)})
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
