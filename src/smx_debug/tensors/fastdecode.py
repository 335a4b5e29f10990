"""Many records at once: find each record's TensorProto, dtype, element count and content bytes with numpy.

Every record a Debugger writer produces (smdebug's and ours) has one layout: ``Event{wall_time?, step?,
summary{value{tag, tensor{dtype?, tensor_shape?, tensor_content?}, metadata}}}``, fields in number order. This
module walks that layout for all records of a batch together, with vectorised varint reads, instead of one
protobuf parse and a dozen attribute reads per record. A record that does not follow the layout exactly (another
writer, typed value fields, extra fields, more than :data:`MAX_DIMS` dims, damage) is marked not ``ok`` and left to
the caller's protobuf path, so the fast path can be wrong about nothing but speed.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final

import numpy as np

from smx_debug.tensors.dtypes import NUMPY_DTYPES

MAX_DIMS: Final = 8
_I64 = np.int64


@dataclass
class Walk:
    """Per record: whether the layout matched, and where its parts are (offsets into the batch buffer)."""

    ok: np.ndarray
    tag_start: np.ndarray
    tag_len: np.ndarray
    tensor_start: np.ndarray
    tensor_end: np.ndarray
    dtype: np.ndarray
    ndim: np.ndarray
    count: np.ndarray
    content_start: np.ndarray
    content_len: np.ndarray
    dims: np.ndarray  # (records, MAX_DIMS) when asked for: the sizes of the first ``ndim`` dims

    def take(self, rows: np.ndarray) -> Walk:
        """The records ``rows`` only."""
        return Walk(*(getattr(self, f.name)[rows] for f in fields(self)))


def _varint(buf: np.ndarray, pos: np.ndarray, ok: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Read a varint at each ``pos``; clears ``ok`` (in place) where it runs past ``end`` or is over 10 bytes."""
    last = len(buf) - 1
    value = np.zeros(len(pos), np.uint64)
    cur = pos.copy()
    more = ok.copy()
    for k in range(10):
        if not more.any():
            break
        inside = cur < end
        ok &= inside | ~more
        more &= inside
        b = buf[np.minimum(cur, last)].astype(np.uint64)
        value |= np.where(more, (b & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        cur = np.where(more, cur + 1, cur)
        more &= (b & np.uint64(0x80)) != 0
    ok &= ~more
    return value.astype(_I64), cur


def _byte(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The byte at each ``pos`` (-1 where ``pos`` is at or past ``end``)."""
    b = buf[np.minimum(pos, len(buf) - 1)].astype(np.int16)
    return np.where(pos < end, b, -1)


def _optional(buf: np.ndarray, pos: np.ndarray, ok: np.ndarray, end: np.ndarray, key: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An optional varint field ``key`` at ``pos``: (present, value, position after)."""
    present = ok & (_byte(buf, pos, end) == key)
    value, after = _varint(buf, pos + 1, present.copy(), end)
    return present, np.where(present, value, 0), np.where(present, after, pos)


def _length(buf: np.ndarray, pos: np.ndarray, ok: np.ndarray, end: np.ndarray, key: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """A required length-delimited field ``key`` at ``pos``: (length, start of its body); clears ``ok``."""
    ok &= _byte(buf, pos, end) == key
    length, body = _varint(buf, pos + 1, ok, end)
    ok &= body + length <= end
    return length, body


def walk(buf: np.ndarray, start: np.ndarray, end: np.ndarray, *, dims: bool = False) -> Walk:
    """Walk the payloads ``buf[start[i]:end[i]]`` (uint8 buffer, int64 offsets); ``dims``: record each dim's
    size too (else ``Walk.dims`` has no columns)."""
    n = len(start)
    ok = np.ones(n, bool) & (end > start)
    pos = start.astype(_I64)
    end = end.astype(_I64)
    pos = np.where(_byte(buf, pos, end) == 0x09, pos + 9, pos)  # wall_time (fixed64)
    _, _, pos = _optional(buf, pos, ok, end, 0x10)  # step
    length, pos = _length(buf, pos, ok, end, 0x2A)  # summary: the last field
    ok &= pos + length == end
    length, pos = _length(buf, pos, ok, end, 0x0A)  # its one value
    ok &= pos + length == end
    tag_len, tag_start = _length(buf, pos, ok, end, 0x0A)  # tag
    pos = tag_start + tag_len
    t_len, t_start = _length(buf, pos, ok, end, 0x42)  # tensor
    t_end = t_start + t_len
    _, dtype, pos = _optional(buf, t_start, ok, t_end, 0x08)
    has_shape = ok & (_byte(buf, pos, t_end) == 0x12)
    s_len, s_start = _varint(buf, pos + 1, has_shape.copy(), t_end)
    s_len = np.where(has_shape, s_len, 0)
    s_start = np.where(has_shape, s_start, pos)
    s_end = s_start + s_len
    ok &= s_end <= t_end
    pos = s_end
    has_content = ok & (_byte(buf, pos, t_end) == 0x22)
    c_len, c_start = _varint(buf, pos + 1, has_content.copy(), t_end)
    c_len = np.where(has_content, c_len, 0)
    c_start = np.where(has_content, c_start, pos)
    ok &= c_start + c_len == t_end  # nothing else in the tensor (no typed value fields)
    # dims: each `12 len {08 size}? {12 len name}?`
    count = np.ones(n, _I64)
    ndim = np.zeros(n, np.int8)
    sizes = np.zeros((n, MAX_DIMS if dims else 0), _I64)
    p = s_start.copy()
    for k in range(MAX_DIMS):
        more = ok & (p < s_end)
        if not more.any():
            break
        d_len, d_start = _length(buf, p, more, s_end, 0x12)
        d_end = d_start + d_len
        has_size, size, _ = _optional(buf, d_start, more, d_end, 0x08)
        count = np.where(more, count * np.where(has_size, size, 0), count)
        if dims:
            sizes[:, k] = np.where(more & has_size, size, 0)
        ndim = np.where(more, ndim + 1, ndim).astype(np.int8)
        ok &= more | ~(ok & (p < s_end))  # a dim that failed to parse fails the record
        p = np.where(more, d_end, p)
    ok &= p >= s_end  # more dims than MAX_DIMS: left to the protobuf path
    return Walk(ok, tag_start, tag_len, t_start, t_end, dtype, ndim, count, c_start, c_len, sizes)


def scalar_values(buf: np.ndarray, w: Walk) -> tuple[np.ndarray, np.ndarray]:
    """(mask, float64 values) of the records that hold exactly one real number (bool, int, uint, float)."""
    values = np.full(len(w.ok), np.nan)
    mask = np.zeros(len(w.ok), bool)
    one = w.ok & (w.count == 1)
    for code in np.unique(w.dtype[one]):
        dtype = NUMPY_DTYPES.get(int(code))
        if dtype is None or dtype.kind == "c":
            continue
        rows = np.flatnonzero(one & (w.dtype == code) & (w.content_len == dtype.itemsize))
        if not len(rows):
            continue
        idx = w.content_start[rows, None] + np.arange(dtype.itemsize)
        values[rows] = buf[idx].reshape(-1).view(dtype).astype(np.float64)
        mask[rows] = True
    return mask, values
