"""Read many tensors' records at once into a tidy frame of scalars and reductions, or into full values.

Records are fetched per event file (the whole file when most of it is wanted, else only the wanted byte ranges,
coalesced), in batches of bounded size, and decoded together (:mod:`smx_debug.tensors.fastdecode`); a record the
fast path cannot read goes through protobuf. Nothing that cannot be read is fatal: it is skipped and counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pandas as pd

from smx_debug.data.sources import LocalSource, Source
from smx_debug.errors import DataError, UnknownDtypeError
from smx_debug.tensors.catalog import (
    BAD_ENTRY,
    DAMAGED_RECORD,
    UNKNOWN_DTYPE,
    WRONG_TENSOR,
    Catalog,
    EventFile,
    read_range,
)
from smx_debug.tensors.codec import decode_event
from smx_debug.tensors.dtypes import DT_BFLOAT16, DT_INVALID, DT_STRING, NUMPY_DTYPES
from smx_debug.tensors.fastdecode import Walk, scalar_values, walk
from smx_debug.tensors.mode_keys import ModeKeys
from smx_debug.tensors.reductions import compute_reduction
from smx_debug.tensors.tfrecord import BAD_CHECKSUM, SMDEBUG_FOOTER, header_ok, masked_crc32c

TENSOR_COLUMNS: Final = ["step", "mode", "mode_step", "worker", "tensor", "reduction", "value"]
NON_SCALAR: Final = "complex or string scalars (not a real number)"
# A batch's buffer and its per-record work arrays stay small beside the frame they feed (peak memory).
_BATCH_BYTES: Final = 2 << 20
_BATCH_RECORDS: Final = 8192
_GAP: Final = 4096  # ranges closer than this are read as one
_DENSE: Final = 0.5  # read the whole file when at least this share of it is wanted


@dataclass
class Batch:
    """The readable records of some event files, in one buffer: per record its file, entry position, name id,
    offsets and layout (:class:`~smx_debug.tensors.fastdecode.Walk`). Records dropped when the batch was read
    (a header that is not the index's, a wrong checksum, another tensor's tag) are in ``dropped``, by
    ``(file index, entry position)``, with the reason they were counted under."""

    buf: np.ndarray
    files: list[EventFile]
    file_of: np.ndarray  # index into files
    pos: np.ndarray  # entry position in its file
    ids: np.ndarray
    start: np.ndarray  # record start (its header) in buf
    length: np.ndarray
    walk: Walk
    dropped: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)  # (reason, message)


def _fetch(source: Source, f: EventFile, sel: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The bytes holding the selected records of ``f`` and where each record starts in them: the whole file
    when most of it is wanted, else the wanted byte ranges (coalesced), from one open file on disk."""
    assert f.key is not None  # only files with records are planned
    starts, lengths = f.starts[sel].astype(np.int64), f.lengths[sel].astype(np.int64)
    dense = lengths.sum() >= _DENSE * max(f.size, 1)
    if isinstance(source, LocalSource):
        with open(os.path.join(source.root, f.key), "rb") as fh:
            if dense:
                return fh.read(), starts

            def pread(start: int, length: int) -> bytes:
                fh.seek(start)
                return fh.read(length)

            return _ranges(pread, starts, lengths)
    if dense:
        return source.read(f.key), starts
    key = f.key
    return _ranges(lambda start, length: read_range(source, key, start, length), starts, lengths)


def _ranges(read: Callable[[int, int], bytes], starts: np.ndarray, lengths: np.ndarray
            ) -> tuple[bytes, np.ndarray]:
    """The records at ``starts`` (of ``lengths``), ranges closer than :data:`_GAP` read as one."""
    order = np.argsort(starts, kind="stable")
    segments: list[bytes] = []
    offsets = np.empty(len(starts), np.int64)
    seg_start = seg_end = -1
    pending: list[int] = []
    out_pos = 0

    def flush() -> None:
        nonlocal out_pos
        if seg_start < 0:
            return
        data = read(seg_start, seg_end - seg_start)
        for i in pending:
            offsets[i] = out_pos + (starts[i] - seg_start)
        segments.append(data)
        out_pos += len(data)

    for i in order:
        a, b = int(starts[i]), int(starts[i] + lengths[i])
        if seg_start >= 0 and a <= seg_end + _GAP:
            seg_end = max(seg_end, b)
        else:
            flush()
            seg_start, seg_end, pending = a, b, []
        pending.append(int(i))
    flush()
    return b"".join(segments), offsets


def read_batches(catalog: Catalog, plan: Sequence[tuple[EventFile, np.ndarray]], *,
                 verify: bool = False, dims: bool = False) -> Iterator[Batch]:
    """The planned records (per file, the selected entry positions), a bounded batch at a time; records whose
    header or checksum is wrong are dropped here and counted."""
    local = isinstance(catalog.source, LocalSource)
    with ThreadPoolExecutor(max_workers=16, thread_name_prefix="smx-tensors") as pool:
        i = 0
        while i < len(plan):
            chunk: list[tuple[EventFile, np.ndarray]] = []
            size = 0
            records = 0
            while i < len(plan) and (not chunk or (size < _BATCH_BYTES and records < _BATCH_RECORDS)):
                f, sel = plan[i]
                chunk.append((f, sel))
                size += int(f.lengths[sel].sum())
                records += len(sel)
                i += 1
            if local:  # small files from disk: a thread per read costs more than it saves
                fetched = [_fetch(catalog.source, f, sel) for f, sel in chunk]
            else:
                fetched = list(pool.map(lambda fs: _fetch(catalog.source, fs[0], fs[1]), chunk))
            yield _batch(catalog, chunk, fetched, verify, dims)


def _batch(catalog: Catalog, chunk: list[tuple[EventFile, np.ndarray]], fetched: list[tuple[bytes, np.ndarray]],
           verify: bool, dims: bool) -> Batch:
    # One buffer, each fetched piece copied in and dropped at once: the peak is the batch plus one piece, not two
    # copies of the batch (b"".join would hold every piece and the joined bytes together).
    bases = np.cumsum([0] + [len(d) for d, _ in fetched[:-1]])
    buf = np.empty(sum(len(d) for d, _ in fetched), np.uint8)
    for i, base in enumerate(bases):
        piece = fetched[i][0]
        buf[base:base + len(piece)] = np.frombuffer(piece, np.uint8)
        fetched[i] = (b"", fetched[i][1])
    file_of = np.concatenate([np.full(len(sel), k, np.int32) for k, (_, sel) in enumerate(chunk)])
    pos = np.concatenate([sel for _, sel in chunk]).astype(np.int64)
    ids = np.concatenate([f.ids[sel] for f, sel in chunk])
    length = np.concatenate([f.lengths[sel] for f, sel in chunk]).astype(np.int64)
    start = np.concatenate([offs + base for (_, offs), base in zip(fetched, bases, strict=True)])
    files = [f for f, _ in chunk]
    dropped: dict[tuple[int, int], tuple[str, str]] = {}

    def drop(rows: np.ndarray, reason: str, why: Callable[[int], str]) -> None:
        for r in rows.tolist():
            f, p = int(file_of[r]), int(pos[r])
            dropped[(f, p)] = (reason, why(r))
            catalog.skip_record(files[f], p, reason)

    # The record's header must be a valid one saying the index's length (a wrong offset, a rewritten file or a
    # damaged header fail here): what split_records checks when it scans a file.
    good = header_ok(buf, start, length)
    drop(np.flatnonzero(~good), BAD_ENTRY, lambda _: "no valid record header of the index's length at its offset")
    if verify:
        for k in np.flatnonzero(good):
            a, n = int(start[k]), int(length[k])
            footer = int.from_bytes(buf[a + n - 4:a + n].tobytes(), "little")
            if footer != SMDEBUG_FOOTER and footer != masked_crc32c(buf[a + 12:a + n - 4].tobytes()):
                good[k] = False
                drop(np.array([k]), BAD_CHECKSUM, lambda _: "the record's checksum is wrong")
    if not good.all():
        keep = np.flatnonzero(good)
        file_of, pos, ids, start, length = file_of[keep], pos[keep], ids[keep], start[keep], length[keep]
    w = walk(buf, start + 12, start + length - 4, dims=dims)
    # Each record's own tag must be the name the index gives it (a record the fast walk cannot read is checked
    # when protobuf decodes it, in decode_values).
    wrong = _wrong_tags(catalog, buf, w, ids)
    if wrong.any():
        drop(np.flatnonzero(wrong), WRONG_TENSOR,
             lambda r: f"the record holds tensor {_tag(buf, w, r)!r} (a damaged index)")
        keep = np.flatnonzero(~wrong)
        file_of, pos, ids, start, length, w = file_of[keep], pos[keep], ids[keep], start[keep], length[keep], w.take(
            keep)
    return Batch(buf, files, file_of, pos, ids, start, length, w, dropped)


def _tag(buf: np.ndarray, w: Walk, row: int) -> str:
    a = int(w.tag_start[row])
    return bytes(buf[a:a + int(w.tag_len[row])]).decode("utf-8", "replace")


_TAG_BYTES: Final = 1 << 14  # tag bytes compared at once (bounds the work arrays: a few hundred KB)


def _wrong_tags(catalog: Catalog, buf: np.ndarray, w: Walk, ids: np.ndarray) -> np.ndarray:
    """Per record the fast walk read: whether its tag differs from the name its index entry gives."""
    names, offsets, lengths = catalog.encoded_names()
    wrong: np.ndarray = w.ok & (w.tag_len != lengths[ids])
    rows = np.flatnonzero(w.ok & ~wrong)
    n = lengths[ids[rows]]
    ends = np.cumsum(n)
    lo = 0
    while lo < len(rows):
        hi = max(int(np.searchsorted(ends, (ends[lo - 1] if lo else 0) + _TAG_BYTES, "right")), lo + 1)
        r, m = rows[lo:hi], n[lo:hi]
        total = int(m.sum())
        if total:
            within = np.arange(total) - np.repeat(np.cumsum(m) - m, m)
            differ = buf[np.repeat(w.tag_start[r], m) + within] != names[np.repeat(offsets[ids[r]], m) + within]
            wrong[r[np.unique(np.repeat(np.arange(len(r)), m)[differ])]] = True
        lo = hi
    return wrong


def decode_one(catalog: Catalog, batch: Batch, row: int) -> np.ndarray:
    """The value of one record of a batch, through protobuf, its tag checked against its index entry.

    Raises:
        DataError: when the record is damaged or holds another tensor (counted once, by reason).
        UnknownDtypeError: for a dtype with no numpy form (not counted here).
    """
    f, p = batch.files[int(batch.file_of[row])], int(batch.pos[row])
    a, n = int(batch.start[row]), int(batch.length[row])
    name = catalog.names[int(batch.ids[row])]
    where = f"tensor {name!r} at step {f.step} of worker {f.worker!r} ({f.key}@{int(f.starts[p])})"
    try:
        values = decode_event(batch.buf[a + 12:a + n - 4].tobytes())
        if not values:
            raise DataError("the record holds no tensor")
        if values[0].name != name:
            catalog.skip_record(f, p, WRONG_TENSOR)
            raise DataError(f"{where}: the record holds tensor {values[0].name!r} (a damaged index)")
        return values[0].value()
    except UnknownDtypeError:
        raise
    except DataError as exc:
        catalog.skip_record(f, p, DAMAGED_RECORD)  # no-op when counted as another tensor's above
        if str(exc).startswith(where):
            raise
        raise DataError(f"{where}: {exc}") from None


def decode_values(catalog: Catalog, batch: Batch, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(row, value) for the records ``rows`` of a batch, through protobuf; damaged ones and other tensors'
    records skipped and counted."""
    for r in rows:
        try:
            yield int(r), decode_one(catalog, batch, int(r))
        except UnknownDtypeError:
            catalog.skip(UNKNOWN_DTYPE)
        except DataError:
            pass  # counted by decode_one


def tensor_frame(catalog: Catalog, plan: Sequence[tuple[EventFile, np.ndarray]], *, workers: Sequence[str],
                 tensors: Sequence[str], reductions: Sequence[str] = (), verify: bool = False,
                 ) -> pd.DataFrame:
    """The tidy frame (:data:`TENSOR_COLUMNS`) of the planned records: one row per scalar tensor value and per
    saved reduction; for tensors of more than one element, the ``reductions`` asked for, computed from the values
    (unless the same reduction was saved at that step)."""
    worker_code = {w: i for i, w in enumerate(workers)}
    tensor_code = {t: i for i, t in enumerate(tensors)}
    red_names = sorted({catalog.reduction_of[i] for i in range(len(catalog.names))} | set(reductions) | {""})
    red_code = {r: i for i, r in enumerate(red_names)}
    base_code = np.array([tensor_code.get(catalog.base_of[i], -1) for i in range(len(catalog.names))], np.int32)
    red_of = np.array([red_code[catalog.reduction_of[i]] for i in range(len(catalog.names))], np.int16)
    # Rows go straight into preallocated columns (one per planned record at most), so building the frame never
    # holds its rows twice; rows the protobuf path adds (computed reductions) are appended at the end.
    total = sum(len(sel) for _, sel in plan)
    cols: dict[str, np.ndarray] = {"step": np.empty(total, np.int64), "mode": np.empty(total, np.int8),
            "mode_step": np.empty(total, np.int64), "worker": np.empty(total, np.int16),
            "tensor": np.empty(total, np.int32), "reduction": np.empty(total, np.int16),
            "value": np.empty(total, np.float64)}
    extra: dict[str, list[np.ndarray]] = {c: [] for c in TENSOR_COLUMNS}
    filled = 0

    def emit(batch: Batch, rows: np.ndarray, red: np.ndarray, values: np.ndarray) -> None:
        nonlocal filled
        files = batch.file_of[rows]
        parts = {
            "step": np.array([f.step for f in batch.files], np.int64)[files],
            "mode": np.array([int(f.mode) - 1 for f in batch.files], np.int8)[files],
            "mode_step": np.array([f.mode_step for f in batch.files], np.int64)[files],
            "worker": np.array([worker_code[f.worker] for f in batch.files], np.int16)[files],
            "tensor": base_code[batch.ids[rows]], "reduction": red, "value": values,
        }
        k = len(rows)
        if filled + k <= total:
            for name, part in parts.items():
                cols[name][filled:filled + k] = part
            filled += k
        else:
            for name, part in parts.items():
                extra[name].append(part)

    for batch in read_batches(catalog, plan, verify=verify):
        w = batch.walk
        mask, values = scalar_values(batch.buf, w)
        fast = np.flatnonzero(mask)
        emit(batch, fast, red_of[batch.ids[fast]], values[fast])
        # Records the fast path could not read, and tensors of many elements that need reductions computed.
        raw_many = w.ok & (w.count != 1) & (red_of[batch.ids] == red_code[""])
        slow = np.flatnonzero(~w.ok | (raw_many if reductions else np.zeros(len(w.ok), bool)))
        singles = w.ok & (w.count == 1) & ~mask
        if singles.any():
            known = np.isin(w.dtype, [*NUMPY_DTYPES, DT_INVALID, DT_STRING, DT_BFLOAT16])
            catalog.skip(NON_SCALAR, int((singles & known).sum()))
            catalog.skip(UNKNOWN_DTYPE, int((singles & ~known).sum()))
        extra_rows: list[int] = []
        extra_red: list[int] = []
        extra_val: list[float] = []
        saved = _saved_reductions(catalog, batch) if reductions else set()
        for r, value in decode_values(catalog, batch, slow):
            nid = int(batch.ids[r])
            if value.size == 1:
                if value.dtype.kind in "fiub":
                    extra_rows.append(r)
                    extra_red.append(int(red_of[nid]))
                    extra_val.append(float(value.reshape(-1)[0]))
                else:
                    catalog.skip(NON_SCALAR)
                continue
            if red_of[nid] != red_code[""] or value.dtype.kind not in "fiub" or not value.size:
                continue
            base = catalog.base_of[nid]
            for red in reductions:
                if (int(batch.file_of[r]), base, red) in saved:
                    continue
                is_abs = red.startswith("abs_")
                extra_rows.append(r)
                extra_red.append(red_code[red])
                extra_val.append(float(compute_reduction(value, red[4:] if is_abs else red, abs=is_abs)))
        if extra_rows:
            emit(batch, np.asarray(extra_rows, np.int64), np.asarray(extra_red, np.int16),
                 np.asarray(extra_val, np.float64))
    return _assemble({k: v[:filled] for k, v in cols.items()}, extra, workers, tensors, red_names)


def _saved_reductions(catalog: Catalog, batch: Batch) -> set[tuple[int, str, str]]:
    return {(int(batch.file_of[r]), catalog.base_of[int(batch.ids[r])], catalog.reduction_of[int(batch.ids[r])])
            for r in range(len(batch.ids)) if catalog.reduction_of[int(batch.ids[r])]}


def _assemble(cols: dict[str, np.ndarray], extra: dict[str, list[np.ndarray]], workers: Sequence[str],
              tensors: Sequence[str], reductions: Sequence[str]) -> pd.DataFrame:
    if extra["step"]:
        cols = {k: np.concatenate([v, *extra[k]]) for k, v in cols.items()}
    step = cols["step"]
    if len(step) and not (np.diff(step) >= 0).all():  # rows the protobuf path added after their batch
        order = np.lexsort((cols["worker"], step))
        cols = {k: v[order] for k, v in cols.items()}
    modes = [m.name for m in ModeKeys]
    return pd.DataFrame({
        "step": cols["step"],
        "mode": _categorical(cols["mode"], modes),
        "mode_step": cols["mode_step"],
        "worker": _categorical(cols["worker"], workers),
        "tensor": _categorical(cols["tensor"], tensors),
        "reduction": _categorical(cols["reduction"], reductions),
        "value": cols["value"],
    }, copy=False)


def _categorical(codes: np.ndarray, names: Sequence[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(names), dtype=object))
