"""TFRecord framing of event files: ``u64 length | u32 masked crc32c(length) | payload | u32 footer``.

smdebug's writer does not checksum payloads: every footer is the masked crc32c of the ten bytes ``b"0x12345678"``
(:data:`SMDEBUG_FOOTER`), and its reader (check "minimal") rejects a real checksum. :func:`frame` writes that
constant by default so smdebug reads what we write; :func:`split_records` accepts both footers and, with
``verify=True``, checks real payload checksums (a constant footer cannot be checked and is accepted).

A record cut mid-write or with a damaged header is skipped and counted; scanning resumes at the next offset where
a valid header starts, so records after the damage are not lost.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

import google_crc32c
import numpy as np

_MASK_DELTA: Final = 0xA282EAD8
_HEADER = struct.Struct("<QI")
_U32 = struct.Struct("<I")
BAD_HEADER: Final = "damaged record headers"
TRUNCATED: Final = "records cut mid-write"
BAD_CHECKSUM: Final = "records with a wrong checksum"


def masked_crc32c(data: bytes | memoryview) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    crc = int(google_crc32c.value(bytes(data)))
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _crc32c_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):  # CRC-32C (Castagnoli), reflected polynomial
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(0x82F63B78), table >> np.uint32(1))
    return table.astype(np.uint32)


_CRC_TABLE: Final = _crc32c_table()


def header_ok(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Per record (``start`` and ``length`` of each, header and footer included, in a uint8 ``buf``): whether a
    valid header is there, one that says this length and whose checksum covers it (what :func:`split_records`
    checks one record at a time)."""
    inside = (start >= 0) & (start + np.maximum(length, 16) <= len(buf))
    if len(buf) < 12:
        return np.zeros(len(start), bool)
    at = np.where(inside, start, 0)
    said = np.zeros(len(start), np.uint64)
    stored = np.zeros(len(start), np.uint64)
    crc = np.full(len(start), 0xFFFFFFFF, np.uint32)
    for k in range(12):  # one byte column at a time: no (records, 12) index array
        byte = buf[at + k]
        if k < 8:
            said |= byte.astype(np.uint64) << np.uint64(8 * k)
            crc = _CRC_TABLE[(crc ^ byte) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        else:
            stored |= byte.astype(np.uint64) << np.uint64(8 * (k - 8))
    crc64 = (crc ^ np.uint32(0xFFFFFFFF)).astype(np.uint64)
    masked = (((crc64 >> np.uint64(15)) | (crc64 << np.uint64(17))) + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)
    ok: np.ndarray = inside & (said.astype(np.int64) == length - 16) & (masked == stored)
    return ok


SMDEBUG_FOOTER: Final = masked_crc32c(b"0x12345678")
_SMDEBUG_FOOTER_BYTES: Final = _U32.pack(SMDEBUG_FOOTER)


def frame(payload: bytes, *, checksum: bool = False) -> bytes:
    """One TFRecord: the header, ``payload`` and smdebug's constant footer (or the real checksum)."""
    length = struct.pack("<Q", len(payload))
    footer = _U32.pack(masked_crc32c(payload)) if checksum else _SMDEBUG_FOOTER_BYTES
    return length + _U32.pack(masked_crc32c(length)) + payload + footer


@dataclass
class Records:
    """The records found in a buffer: ``(start, end)`` of each payload, and what was skipped, by reason."""

    spans: list[tuple[int, int]] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # where each record (its header) starts
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n


def _header_ok(data: bytes, pos: int, end: int) -> int:
    """The payload length of a valid header at ``pos``, or -1."""
    if pos + 12 > end:
        return -1
    length, crc = _HEADER.unpack_from(data, pos)
    if crc != masked_crc32c(data[pos:pos + 8]):
        return -1
    return int(length)


def _resync(data: bytes, pos: int, end: int) -> int:
    """The next offset after ``pos`` where a valid, complete-looking header starts, or ``end``."""
    for i in range(pos + 1, end - 11):
        length = _HEADER.unpack_from(data, i)[0]
        if i + 16 + length <= end and _header_ok(data, i, end) >= 0:
            return i
    return end


def split_records(data: bytes, *, verify: bool = False, start: int = 0, end: int | None = None) -> Records:
    """Every record in ``data[start:end]``; damaged and cut records are skipped and counted, never raised."""
    out = Records()
    end = len(data) if end is None else end
    pos = start
    unpack = _HEADER.unpack_from
    while pos < end:
        if pos + 12 > end:
            out.skip(TRUNCATED)
            break
        length, crc = unpack(data, pos)
        if crc != masked_crc32c(data[pos:pos + 8]):
            out.skip(BAD_HEADER)
            pos = _resync(data, pos, end)
            continue
        body = pos + 12
        stop = body + length
        if stop + 4 > end:
            out.skip(TRUNCATED)  # the header is valid (its checksum covers the length): the rest was never written
            break
        if verify:
            footer = _U32.unpack_from(data, stop)[0]
            if footer != SMDEBUG_FOOTER and footer != masked_crc32c(data[body:stop]):
                out.skip(BAD_CHECKSUM)
                pos = stop + 4
                continue
        out.spans.append((body, stop))
        out.offsets.append(pos)
        pos = stop + 4
    return out
