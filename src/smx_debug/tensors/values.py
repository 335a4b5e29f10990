"""One record's value at a time, for smdebug's per-value API (``trial.tensor(name).value(step)``), fast when a
notebook reads every value.

Reading one record per call costs an open (or a GetObject), a header check and a protobuf parse each time, and a
notebook that reads every tensor at every step pays it hundreds of thousands of times. :class:`RecordReader`
reads ahead instead: on a miss, the asked tensor's records over the next files of its steps, with every small
record of those files (scalars, reductions), are read through the batched path :meth:`Trial.frame` uses
(:func:`~smx_debug.tensors.frame.read_batches`: one read per file, the same header, checksum and tag checks, the
same counting) and kept, up to a byte budget (the least recently used batches go first). A value is then cut out
of the kept buffer with numpy, or decoded by protobuf (:func:`~smx_debug.tensors.frame.decode_one`) when the fast
walk could not read its record. Each event file is read once while its records stay in the budget.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from smx_debug.errors import DataError
from smx_debug.tensors.catalog import Catalog, EventFile
from smx_debug.tensors.dtypes import NUMPY_DTYPES
from smx_debug.tensors.frame import Batch, decode_one, read_batches

__all__ = ["RecordReader"]

SMALL: Final = 1024  # records up to this size are read along with the asked tensor's
AHEAD_RECORDS: Final = 8192  # a miss reads ahead at most this many records...
AHEAD_BYTES: Final = 4 << 20  # ...or bytes of records (at least the asked one)
BUDGET: Final = 256 << 20  # bytes of records and their layout kept
_ITEMSIZE: Final = np.array([NUMPY_DTYPES[c].itemsize if c in NUMPY_DTYPES else 0 for c in range(32)], np.int64)


@dataclass(eq=False)
class _Chunk:
    """One batch kept: its records, and which of them numpy can cut out of the buffer."""

    batch: Batch
    fast: np.ndarray
    nbytes: int


class _Slots:
    """Where each entry of one event file is kept: chunk serial and row (-1: not kept), or why it is unreadable."""

    __slots__ = ("bad", "chunk", "row")

    def __init__(self, n: int) -> None:
        self.chunk = np.full(n, -1, np.int64)
        self.row = np.full(n, -1, np.int64)
        self.bad: dict[int, str] = {}  # entry position -> the DataError's message (never dropped)


class RecordReader:
    """Values of single records, read ahead and kept within ``budget`` bytes. Not thread-safe."""

    def __init__(self, catalog: Catalog, *, verify: bool = False, budget: int = BUDGET) -> None:
        self._catalog = catalog
        self._verify = verify
        self._budget = budget
        self._chunks: OrderedDict[int, _Chunk] = OrderedDict()
        self._slots: dict[EventFile, _Slots] = {}
        self._serial = 0
        self._bytes = 0

    def value(self, records: Sequence[tuple[EventFile, int]], i: int) -> np.ndarray:
        """The value of ``records[i]`` (a tensor's records in step order: what follows is read ahead).

        Raises:
            DataError: when the record is damaged or holds another tensor (counted once in the catalog).
            UnknownDtypeError: for a dtype with no numpy form.
        """
        f, p = records[i]
        slots = self._slots.get(f)
        if slots is None or (slots.chunk[p] < 0 and p not in slots.bad):
            self._load(records, i)
            slots = self._slots[f]
        serial = int(slots.chunk[p])
        if serial < 0:
            name = self._catalog.names[int(f.ids[p])]
            why = slots.bad.get(p, "the record could not be kept")
            raise DataError(f"tensor {name!r} at step {f.step} of worker {f.worker!r} ({f.key}@{int(f.starts[p])})"
                            f": {why}")
        chunk = self._chunks[serial]
        self._chunks.move_to_end(serial)
        row = int(slots.row[p])
        if not chunk.fast[row]:
            return decode_one(self._catalog, chunk.batch, row)
        w = chunk.batch.walk
        dtype = NUMPY_DTYPES[int(w.dtype[row])]
        a = int(w.content_start[row])
        shape = w.dims[row, :int(w.ndim[row])].tolist()
        out: np.ndarray = chunk.batch.buf[a:a + int(w.content_len[row])].view(dtype).astype(
            dtype.newbyteorder("=")).reshape(shape)
        return out

    def _load(self, records: Sequence[tuple[EventFile, int]], i: int) -> None:
        """Read ``records[i]`` and what follows it (see the module docstring)."""
        plan: list[tuple[EventFile, np.ndarray]] = []
        n_records = n_bytes = 0
        j = i
        while j < len(records) and n_records < AHEAD_RECORDS and n_bytes < AHEAD_BYTES:
            f = records[j][0]
            mine = []
            while j < len(records) and records[j][0] is f:
                mine.append(records[j][1])
                j += 1
            if f.key is None:
                continue
            want = f.lengths <= SMALL
            want[mine] = True
            slots = self._slots.get(f)
            if slots is not None:
                want &= slots.chunk < 0
                want[list(slots.bad)] = False
            sel = np.flatnonzero(want)
            if len(sel):
                plan.append((f, sel))
                n_records += len(sel)
                n_bytes += int(f.lengths[sel].sum())
        first = self._serial
        for batch in read_batches(self._catalog, plan, verify=self._verify):
            self._keep(batch)
        for f, _ in plan:
            self._slots.setdefault(f, _Slots(len(f.ids)))
        while self._bytes > self._budget and next(iter(self._chunks)) < first:  # never what was just read
            old, dropped = self._chunks.popitem(last=False)
            self._bytes -= dropped.nbytes
            for f in dropped.batch.files:
                slots = self._slots[f]
                gone = slots.chunk == old
                slots.chunk[gone] = -1
                slots.row[gone] = -1

    def _keep(self, batch: Batch) -> None:
        w = batch.walk
        w.dims = np.ascontiguousarray(w.dims[:, :int(w.ndim.max()) if len(w.ndim) else 0])  # most are 1 or 2
        code = np.clip(w.dtype, 0, len(_ITEMSIZE) - 1)
        fast = (w.ok & (w.dtype == code) & (_ITEMSIZE[code] > 0) & (w.count > 0)
                & (w.content_len == w.count * _ITEMSIZE[code]) & (w.dims >= 0).all(axis=1))
        arrays = (batch.file_of, batch.pos, batch.ids, batch.start, batch.length, fast,
                  *(getattr(w, k) for k in ("ok", "tag_start", "tag_len", "tensor_start", "tensor_end", "dtype",
                                            "ndim", "count", "content_start", "content_len", "dims")))
        nbytes = batch.buf.nbytes + sum(a.nbytes for a in arrays)
        serial = self._serial
        self._serial += 1
        self._chunks[serial] = _Chunk(batch, fast, nbytes)
        self._bytes += nbytes
        for (k, p), (_, why) in batch.dropped.items():
            f = batch.files[k]
            self._slots.setdefault(f, _Slots(len(f.ids))).bad[p] = why
        bounds = np.searchsorted(batch.file_of, np.arange(len(batch.files) + 1))
        for k, f in enumerate(batch.files):
            rows = np.arange(bounds[k], bounds[k + 1])
            slots = self._slots.setdefault(f, _Slots(len(f.ids)))
            slots.chunk[batch.pos[rows]] = serial
            slots.row[batch.pos[rows]] = rows
