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

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from smx_debug.errors import DataError
from smx_debug.tensors.catalog import Catalog, EventFile
from smx_debug.tensors.dtypes import NUMPY_DTYPES
from smx_debug.tensors.frame import Batch, decode_one, read_batches

SMALL: Final = 1024  # records up to this size are read along with the asked tensor's
AHEAD_RECORDS: Final = 8192  # a miss reads ahead at most this many records...
AHEAD_BYTES: Final = 4 << 20  # ...or bytes of records (at least the asked one)
BUDGET: Final = 256 << 20  # bytes of records and their layout kept
_ITEMSIZE: Final = np.array([NUMPY_DTYPES[c].itemsize if c in NUMPY_DTYPES else 0 for c in range(32)], np.int64)
_PER_ROW: Final = 200  # bytes a kept record costs beside its own: its recipe, its slot, its batch arrays


# Per DataType number: (stored dtype, native dtype) for numpy to cut a value out of a buffer.
_DTYPES: Final = [(NUMPY_DTYPES[c], NUMPY_DTYPES[c].newbyteorder("=")) if c in NUMPY_DTYPES else None
                  for c in range(len(_ITEMSIZE))]


@dataclass(eq=False)
class _Chunk:
    """One batch kept. Per record: the block its value was decoded into with the other small records of its
    dtype and shape (``(records, *shape)``; None: not decoded in bulk) and its row there, in plain lists (what
    every value looks up: no container per record for the garbage collector to walk); else how numpy cuts its
    value out of the buffer (arrays: rarely looked up): its DataType number (-1: the record goes through
    protobuf), content offset, element count and shape (an index into ``shapes``)."""

    serial: int
    batch: Batch
    block: list[np.ndarray | None]
    index: list[int]
    code: np.ndarray
    offset: np.ndarray
    count: np.ndarray
    shape: np.ndarray
    shapes: list[tuple[int, ...]]
    nbytes: int


class RecordReader:
    """Values of single records, read ahead and kept within ``budget`` bytes (one reader at a time: a lock)."""

    def __init__(self, catalog: Catalog, *, verify: bool = False, budget: int = BUDGET) -> None:
        self._catalog = catalog
        self._verify = verify
        self._budget = budget
        self._chunks: OrderedDict[int, _Chunk] = OrderedDict()
        # Per event file, the chunks holding some of its entries, each with its row per entry position (-1: not
        # in that chunk).
        self._slots: dict[EventFile, list[tuple[_Chunk, list[int]]]] = {}
        self._bad: dict[tuple[EventFile, int], str] = {}  # unreadable entries: why (kept for good: few)
        self._serial = 0
        self._bytes = 0
        self._last = -1
        self._lock = threading.Lock()

    def value(self, files: Sequence[EventFile], positions: Sequence[int], i: int) -> np.ndarray:
        """The value of record ``i`` of a tensor's records (their files and entry positions, in step order:
        what follows is read ahead).

        Raises:
            DataError: when the record is damaged or holds another tensor (counted once in the catalog).
            UnknownDtypeError: for a dtype with no numpy form.
        """
        f, p = files[i], positions[i]
        with self._lock:  # the GIL alone would not keep the LRU order and the slots in step with a load
            for loaded in (False, True):  # kept, else read it and what follows, then look again
                for chunk, rows in self._slots.get(f, ()):  # usually one
                    row = rows[p]
                    if row >= 0:
                        if chunk.serial != self._last:  # least recently used out first
                            self._chunks.move_to_end(chunk.serial)
                            self._last = chunk.serial
                        block = chunk.block[row]
                        if block is not None:
                            got: np.ndarray = block[chunk.index[row]].copy()
                            return got
                        return self._cut(chunk, row)
                if loaded or (f, p) in self._bad:  # known to be unreadable: not read again
                    break
                self._load(files, positions, i)
            name = self._catalog.names[int(f.ids[p])]
            why = self._bad.get((f, p), "the record could not be read")
        raise DataError(f"tensor {name!r} at step {f.step} of worker {f.worker!r} ({f.key}@{int(f.starts[p])}): {why}")

    def _cut(self, chunk: _Chunk, row: int) -> np.ndarray:
        code = int(chunk.code[row])
        if code < 0:
            return decode_one(self._catalog, chunk.batch, row)
        stored, native = _DTYPES[code]  # type: ignore[misc]  # a known code: checked in _keep
        out: np.ndarray = np.frombuffer(chunk.batch.buf, stored, int(chunk.count[row]),
                                        int(chunk.offset[row])).astype(native)
        shape = chunk.shapes[int(chunk.shape[row])]
        return out if len(shape) == 1 else out.reshape(shape)  # 1-D: its one dim is the count

    def _load(self, files: Sequence[EventFile], positions: Sequence[int], i: int) -> None:
        """Read record ``i`` and what follows it (see the module docstring)."""
        plan: list[tuple[EventFile, np.ndarray]] = []
        n_records = n_bytes = 0
        j = i
        while j < len(files) and n_records < AHEAD_RECORDS and n_bytes < AHEAD_BYTES:
            f = files[j]
            mine = []
            while j < len(files) and files[j] is f:
                mine.append(positions[j])
                j += 1
            if f.key is None:
                continue
            want = f.lengths <= SMALL
            want[mine] = True
            for _, rows in self._slots.get(f, ()):
                want &= np.asarray(rows) < 0
            if self._bad:
                want[[p for p in range(len(want)) if (f, p) in self._bad]] = False
            sel = np.flatnonzero(want)
            if len(sel):
                plan.append((f, sel))
                n_records += len(sel)
                n_bytes += int(f.lengths[sel].sum())
        first = self._serial
        for batch in read_batches(self._catalog, plan, verify=self._verify, dims=True):
            self._keep(batch)
        while self._bytes > self._budget and self._chunks and next(iter(self._chunks)) < first:
            self._drop(self._chunks.popitem(last=False)[1])  # never what was just read

    def _keep(self, batch: Batch) -> None:
        for (k, p), (_, why) in batch.dropped.items():
            self._bad[(batch.files[k], p)] = why
        w = batch.walk
        code = np.clip(w.dtype, 0, len(_ITEMSIZE) - 1)
        size = _ITEMSIZE[code]
        fast = (w.ok & (w.dtype == code) & (size > 0) & (w.count > 0) & (w.content_len == w.count * size)
                & (w.dims >= 0).all(axis=1))
        shape_of, shapes = _shapes(np.where(fast, w.ndim, 0), w.dims)
        block, index, blocks = _blocks(batch.buf, fast & (w.ndim > 0) & (w.content_len <= SMALL), code,
                                       shape_of, shapes, w.content_start, w.content_len)
        batch.walk = w.take(np.zeros(0, np.int64))  # what is needed is kept below
        serial = self._serial
        self._serial += 1
        kept: list[np.ndarray | None] = [None, *blocks]
        chunk = _Chunk(serial, batch, [kept[b] for b in (block + 1).tolist()], index.tolist(),
                       np.where(fast, code, -1), w.content_start.astype(np.int64), w.count.astype(np.int64),
                       shape_of, shapes, batch.buf.nbytes + _PER_ROW * len(fast) + sum(b.nbytes for b in blocks))
        self._chunks[serial] = chunk
        self._bytes += chunk.nbytes
        # Every file's row per entry position in one array (one tolist), then cut per file.
        entries = np.fromiter((len(f.ids) for f in batch.files), np.int64, len(batch.files))
        base = np.cumsum(entries) - entries
        rows = np.full(int(entries.sum()), -1, np.int64)
        rows[base[batch.file_of] + batch.pos] = np.arange(len(batch.pos))
        every = rows.tolist()
        for f, a, n in zip(batch.files, base.tolist(), entries.tolist(), strict=True):
            self._slots.setdefault(f, []).append((chunk, every[a:a + n]))

    def _drop(self, chunk: _Chunk) -> None:
        self._bytes -= chunk.nbytes
        for f in chunk.batch.files:
            kept = [(c, rows) for c, rows in self._slots[f] if c is not chunk]
            if kept:
                self._slots[f] = kept
            else:
                del self._slots[f]


def _blocks(buf: np.ndarray, take: np.ndarray, code: np.ndarray, shape_of: np.ndarray,
            shapes: list[tuple[int, ...]], start: np.ndarray, length: np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The records ``take`` selects, decoded in bulk: one ``(records, *shape)`` array per dtype and shape (a value
    is then one row of it, copied), and per record its block (-1: not decoded here) and its row in that block."""
    block = np.full(len(take), -1, np.int64)
    index = np.zeros(len(take), np.int64)
    blocks: list[np.ndarray] = []
    rows = np.flatnonzero(take)
    if not len(rows):
        return block, index, blocks
    key = code[rows].astype(np.int64) * len(shapes) + shape_of[rows]
    groups, group_of = np.unique(key, return_inverse=True)
    group_of = group_of.reshape(-1)
    for g, k in enumerate(groups.tolist()):
        mine = rows[group_of == g]
        stored, native = _DTYPES[k // len(shapes)]  # a known code: checked by the caller
        n = int(length[mine[0]])  # one dtype and shape: one content length
        raw = buf[start[mine].astype(np.int64)[:, None] + np.arange(n)]
        blocks.append(raw.view(stored).astype(native).reshape((len(mine), *shapes[k % len(shapes)])))
        block[mine] = g
        index[mine] = np.arange(len(mine))
    return block, index, blocks


def _shapes(ndim: np.ndarray, dims: np.ndarray) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Per record an index into a list of the distinct shapes (the first ``ndim`` of each row of ``dims``)."""
    deepest = int(ndim.max()) if len(ndim) else 0
    if not deepest:
        return np.zeros(len(ndim), np.int64), [()]
    used = np.where(np.arange(deepest) < ndim[:, None], dims[:, :deepest], 0)
    bits = 59 // deepest
    if int(used.max()) < 1 << bits:  # one int64 per shape: sorting it is cheap (sorting rows is not)
        key = ndim.astype(np.int64) | (used << (4 + bits * np.arange(deepest, dtype=np.int64))).sum(axis=1)
        _, first, shape_of = np.unique(key, return_index=True, return_inverse=True)
        return shape_of.reshape(-1), [tuple(used[r, :ndim[r]].tolist()) for r in first.tolist()]
    seen: dict[tuple[int, ...], int] = {}
    shape_of = np.array([seen.setdefault(tuple(d[:k]), len(seen)) for d, k in zip(used.tolist(), ndim.tolist(),
                                                                                  strict=True)], np.int64)
    return shape_of, list(seen)
