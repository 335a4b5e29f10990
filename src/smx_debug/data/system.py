"""System metrics (``profiler-output/system/...``) into one long pandas DataFrame, fast.

Each file is JSON-lines, one record a line: ``{"Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"}``.
A file is named after the minute it starts (``<epoch_s>.<node>.json``) and sits in an hour folder
(``system/incremental/<YYYYMMDDHH>/``) or, in older jobs and smdebug's tests, directly in ``incremental/``.
File names say when and where, so files outside the time window or nodes are never downloaded.

Speed: whole files are read as bytes and split by pyarrow's CSV tokenizer (canonical records) or parsed by
``pyarrow.json`` with an explicit schema, in worker threads; only the lines neither can read go through a
per-line path: the few lines with JSON escapes, else a block of about a megabyte around a line ``pyarrow.json``
refuses (``frame.attrs["lines_parsed_one_by_one"]`` says how many lines did). Bad records never fail a read: they are skipped and counted by reason (:data:`SKIP_REASONS`):
lines that are not records (garbage, a truncated last line, nesting of any depth), lines with bytes that are
not UTF-8, strings with lone surrogates (``"\\ud800"``: valid JSON, not representable in UTF-8), ``NaN``,
``Infinity``/``-Infinity`` and numbers beyond float range (``1e400``) in ``Value`` or ``Timestamp``, and
timestamps outside :data:`TIMESTAMP_RANGE_S` (epoch seconds 2000-01-01 .. 2100-01-01), counted apart when
they are epoch milliseconds, microseconds or nanoseconds written where Debugger writes seconds. Every path
(CSV tokenizer, ``pyarrow.json``, per line) skips and counts the same records under the same reasons, so the
result never depends on the rest of the file. Exact duplicate records are kept (as smdebug keeps them). A few
garbage lines in a canonical file keep it on the fast path.
"""

from __future__ import annotations

import codecs
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypedDict, Unpack

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pj

from smx_debug import _json as bounded_json
from smx_debug.data._util import TimeLike, is_utf8, to_epoch_ns
from smx_debug.data.progress import progress_bar
from smx_debug.data.sources import DEFAULT_WORKERS, ObjectInfo, Source, open_source
from smx_debug.errors import ConfigError, NoDataYetError, NotFoundError

SYSTEM_COLUMNS = ["timestamp", "node", "type", "name", "dimension", "value"]

# Plausible epoch seconds for a record: 2000-01-01 <= t < 2100-01-01. Anything else is skipped and counted;
# a value that lands in the window once divided by 1e3/1e6/1e9 is counted as a wrongly scaled timestamp.
TIMESTAMP_RANGE_S = (946_684_800.0, 4_102_444_800.0)
MALFORMED = "malformed lines"
BAD_BYTES = "lines with bytes that are not UTF-8"
OUT_OF_RANGE = "timestamps out of range"
WRONG_SCALE = "timestamps in ms/us/ns, not seconds"
LONE_SURROGATE = "strings with lone surrogates"
NAN = "NaN numbers"
INFINITY = "Infinity numbers"
OVERFLOW = "numbers beyond float range"
SKIP_REASONS = (MALFORMED, BAD_BYTES, LONE_SURROGATE, NAN, INFINITY, OVERFLOW, OUT_OF_RANGE, WRONG_SCALE)
# Not a skip reason: the lines that went through the per-line path (counted with the skips while a file is
# parsed, then reported apart, in ``frame.attrs["lines_parsed_one_by_one"]``).
_PER_LINE = "lines parsed one by one"
# A canonical file with more odd-but-valid records than this is parsed by the general JSON path instead.
_MAX_ODD_RECORDS = 64
# Up to this many lines with bytes that are not UTF-8, the parts between them are parsed as they are (no copy);
# beyond, the file is rebuilt without them line by line.
_MAX_BYTE_SCANS = 16
_UTF8_CHUNK = 8 << 20
# Up to this many lines with JSON escapes (Debugger writes none), the parts between them keep the fast path and
# only those lines are parsed one by one; beyond, pyarrow.json reads the whole part.
_MAX_ESCAPED_LINES = 64
# A part pyarrow.json refuses (a lone surrogate, a line that is not JSON) or reads with NaN is parsed again in
# newline-aligned blocks of about this many bytes: only the blocks it refuses again go line by line.
_BLOCK = 1 << 20
_NON_SPACE = re.compile(rb"\S")

_FILE_RE = re.compile(r"(?:^|/)(\d{10})\.([A-Za-z0-9_\-.]+?)\.json$")
_SCHEMA = pa.schema(
    [
        ("Type", pa.string()),
        ("Name", pa.string()),
        ("Dimension", pa.string()),
        ("Value", pa.float64()),
        ("NodeId", pa.string()),
        ("Timestamp", pa.float64()),
    ]
)
_PARSE = pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="ignore")
_READ = pj.ReadOptions(use_threads=False, block_size=1 << 22)
_REQUIRED = ("Type", "Dimension", "Value", "NodeId", "Timestamp")
_NUMBERS = ("Value", "Timestamp")
_TS_TYPE = pa.timestamp("ns", tz="UTC")
_DICT = pa.dictionary(pa.int32(), pa.string())
_DICT8 = pa.dictionary(pa.int8(), pa.string())
_OUT_SCHEMA = pa.schema(
    [
        ("timestamp", _TS_TYPE),
        ("node", _DICT),
        ("type", _DICT),
        ("name", _DICT),
        ("dimension", _DICT),
        ("value", pa.float64()),
    ]
)


@dataclass(frozen=True)
class SystemFile:
    """One system-metrics file: its key, the minute it starts (epoch s) and the node it comes from."""

    info: ObjectInfo
    minute: int
    node: str


Skips = dict[str, int]


def _add(skips: Skips, reason: str, n: int) -> None:
    if n:
        skips[reason] = skips.get(reason, 0) + n


class _Rejected:
    """A number JSON can write but a record cannot hold: the reason it is skipped under."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


_CONSTANTS = {"NaN": _Rejected(NAN), "Infinity": _Rejected(INFINITY), "-Infinity": _Rejected(INFINITY)}
_TOO_BIG = _Rejected(OVERFLOW)


def _json_float(text: str) -> float | _Rejected:
    value = float(text)
    return value if math.isfinite(value) else _TOO_BIG


def _json_int(text: str) -> int | _Rejected:
    value = int(text)
    try:
        float(value)
    except OverflowError:
        return _TOO_BIG
    return value


def _load(line: bytes | str) -> Any:
    """``json.loads`` of one line, with ``NaN``/``Infinity`` and out-of-range numbers marked as :class:`_Rejected`;
    :data:`MALFORMED` (a string) when the line is not JSON or nests deeper than the parser goes."""
    try:
        return bounded_json.loads(line, parse_constant=_CONSTANTS.__getitem__, parse_float=_json_float,
                                  parse_int=_json_int)
    except ValueError:  # also nested too deep: e.g. a 5,000-deep array, whatever the rest says
        return MALFORMED


def _record_problem(rec: Any) -> str | None:
    """Why a parsed line cannot be a record (a :data:`SKIP_REASONS` entry), or None when it is one.

    The order is the same on every path: structure and types, then strings, then numbers (Value before
    Timestamp), so one bad record is counted once and under the same reason wherever it is parsed.
    """
    if not isinstance(rec, dict):
        return MALFORMED
    strings = [rec.get(key) for key in ("Type", "Dimension", "NodeId")]
    name = rec.get("Name")
    if not all(isinstance(v, str) for v in strings) or (name is not None and not isinstance(name, str)):
        return MALFORMED
    numbers = [rec.get(key) for key in _NUMBERS]
    if any(isinstance(v, bool) or not isinstance(v, int | float | _Rejected) for v in numbers):
        return MALFORMED
    if not all(is_utf8(v) for v in (*strings, name) if v is not None):
        return LONE_SURROGATE
    for v in numbers:
        if isinstance(v, _Rejected):
            return v.reason
    return None


def _numbers_problem(value: str, stamp: str) -> str:
    """Why a record the CSV path read with a NaN or infinite Value or Timestamp is skipped, decided from the
    numbers' text as the per-line path decides (arrow also reads "nan" and "inf", which are not JSON)."""
    parsed = [_load(value), _load(stamp)]
    if any(isinstance(p, bool) or not isinstance(p, int | float | _Rejected) for p in parsed):
        return MALFORMED
    return next((p.reason for p in parsed if isinstance(p, _Rejected)), MALFORMED)


def _parse_lines(data: bytes, skips: Skips, *, counted: bool = True) -> pa.Table:
    """The per-line path: every line through ``json.loads``; bad lines skipped and counted (and, ``counted``,
    the lines themselves under :data:`_PER_LINE`)."""
    cols: dict[str, list[Any]] = {name: [] for name in _SCHEMA.names}
    for line in data.splitlines():
        if not line.strip():
            continue
        if counted:
            _add(skips, _PER_LINE, 1)
        rec = _load(line)
        problem = _record_problem(rec)
        if problem is not None:
            _add(skips, problem, 1)
            continue
        for name in _SCHEMA.names:
            value = rec.get(name)
            cols[name].append(float(value) if name in _NUMBERS else value)  # a 300-digit int is no int64
    return pa.table(cols, schema=_SCHEMA)


def _bad_byte_lines(data: bytes) -> list[tuple[int, int]] | None:
    """Byte spans of the lines that are not valid UTF-8; None when there are too many to split around.

    ASCII data (all of Debugger's) costs one fast scan; otherwise the data is decoded in chunks, so the check
    never holds more than a chunk of text.
    """
    if data.isascii():
        return []
    view = memoryview(data)
    size = len(data)
    spans: list[tuple[int, int]] = []
    pos = 0
    while pos < size:
        stop = min(pos + _UTF8_CHUNK, size)
        try:
            _text, used = codecs.utf_8_decode(view[pos:stop], "strict", stop == size)
            pos += used
        except UnicodeDecodeError as exc:
            at = pos + exc.start
            begin = data.rfind(b"\n", 0, at) + 1
            nl = data.find(b"\n", at)
            pos = size if nl < 0 else nl + 1
            spans.append((begin, pos))
            if len(spans) > _MAX_BYTE_SCANS:
                return None
    return spans


def _drop_bad_lines(data: bytes, skips: Skips) -> bytes:
    """A copy of ``data`` without its lines that are not valid UTF-8 (for badly damaged files only)."""
    kept = []
    for line in data.split(b"\n"):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            _add(skips, BAD_BYTES, 1)
            continue
        kept.append(line)
    return b"\n".join(kept)


def _plausible(stamp: Any, skips: Skips) -> Any:
    """None when every timestamp is plausible epoch seconds, else the keep-mask (the rest counted by reason)."""
    lo, hi = TIMESTAMP_RANGE_S
    ok = pc.fill_null(pc.and_(pc.greater_equal(stamp, lo), pc.less(stamp, hi)), False)
    n_ok = int(pc.sum(ok).as_py() or 0)
    if n_ok == len(stamp):
        return None
    bad = pc.invert(ok)
    scaled = None
    for factor in (1e3, 1e6, 1e9):
        s = pc.divide(stamp, factor)
        hit = pc.fill_null(pc.and_(pc.greater_equal(s, lo), pc.less(s, hi)), False)
        scaled = hit if scaled is None else pc.or_(scaled, hit)
    n_scaled = int(pc.sum(pc.and_(bad, scaled)).as_py() or 0)
    _add(skips, WRONG_SCALE, n_scaled)
    _add(skips, OUT_OF_RANGE, len(stamp) - n_ok - n_scaled)
    return ok


# Fast path: a canonical record split on '"' gives 21 fields: keys at 1, 5, 9, 13, 15, 19; string values at
# 3 (Type), 7 (Name), 11 (Dimension), 17 (NodeId); numbers inside 14 (": 4.76, ") and 20 (": 1591160699.45}").
# pyarrow's CSV tokenizer splits several times faster than any JSON parser; every key is then checked, and a
# file that is not canonical (other key order, a missing Name, extra keys) takes the general JSON path.
_NAMES = [f"c{i}" for i in range(21)]
_KEYS = {"c1": "Type", "c5": "Name", "c9": "Dimension", "c13": "Value", "c15": "NodeId", "c19": "Timestamp"}
_CSV_READ = pcsv.ReadOptions(use_threads=False, column_names=_NAMES, block_size=1 << 24)
_CSV_CONVERT = pcsv.ConvertOptions(
    include_columns=[*_KEYS, "c3", "c7", "c11", "c14", "c17", "c20"],
    column_types={
        **{c: pa.string() for c in _KEYS},
        **{c: _DICT for c in ["c3", "c7", "c11", "c17"]},
        "c14": pa.string(),
        "c20": pa.string(),
    },
    strings_can_be_null=False,
)


class _NotCanonical(Exception):
    pass


def _odd_rows(rows: list[str], skips: Skips) -> pa.Table | None:
    """Lines the tokenizer rejected: garbage is counted; valid records of another shape are parsed here."""
    records = []
    for text in rows:
        if not isinstance(_load(text), dict):
            _add(skips, MALFORMED, 1)
            continue
        records.append(text.encode())
    if not records:
        return None
    if len(records) > _MAX_ODD_RECORDS:
        raise _NotCanonical
    return _parse_lines(b"\n".join(records), skips, counted=False)  # a few, on the fast path: not its fallback


def _parse_fast(data: pa.Buffer | bytes) -> tuple[pa.Table, Skips]:
    bad_rows: list[str] = []

    def on_invalid(row: Any) -> str:
        bad_rows.append(row.text)
        if len(bad_rows) > 4 * _MAX_ODD_RECORDS:
            return "error"  # mostly another shape: the general path is faster
        return "skip"

    opts = pcsv.ParseOptions(
        delimiter='"', quote_char=False, escape_char=False, newlines_in_values=False, invalid_row_handler=on_invalid
    )
    try:
        buf = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
        t = pcsv.read_csv(buf, read_options=_CSV_READ, parse_options=opts, convert_options=_CSV_CONVERT)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise _NotCanonical from exc
    skips: Skips = {}
    odd = _odd_rows(bad_rows, skips) if bad_rows else None
    for col, key in _KEYS.items():
        if t.num_rows and not pc.all(pc.equal(t.column(col), key)).as_py():
            raise _NotCanonical
    tail = pc.utf8_rtrim_whitespace(t.column("c20"))
    complete = pc.ends_with(tail, "}")
    if not pc.all(complete).as_py():
        _add(skips, MALFORMED, t.num_rows - int(pc.sum(complete).as_py() or 0))
        t, tail = t.filter(complete), tail.filter(complete)
    value_text, stamp_text = pc.utf8_trim(t.column("c14"), ": ,\t"), pc.utf8_trim(tail, ": }\t")
    try:
        value = pc.cast(value_text, pa.float64())
        stamp = pc.cast(stamp_text, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise _NotCanonical from exc
    finite = pc.and_(pc.is_finite(value), pc.is_finite(stamp))
    if not pc.all(finite).as_py():  # NaN, Infinity, 1e400: counted by what the text says, as per line
        bad = pc.invert(finite)
        for v, ts in zip(value_text.filter(bad).to_pylist(), stamp_text.filter(bad).to_pylist(), strict=True):
            _add(skips, _numbers_problem(v, ts), 1)
        t, value, stamp = t.filter(finite), value.filter(finite), stamp.filter(finite)
    keep = _plausible(stamp, skips)
    if keep is not None:
        t, value, stamp = t.filter(keep), value.filter(keep), stamp.filter(keep)
    us = pc.cast(pc.floor(pc.multiply(stamp, 1e6)), pa.int64())
    table = pa.table(
        [pc.cast(pc.multiply(us, 1000), pa.int64()).cast(_TS_TYPE), t.column("c17"), t.column("c3"),
         t.column("c7"), t.column("c11"), value],
        schema=_OUT_SCHEMA,
    )
    if odd is not None:
        table = pa.concat_tables([table, _compact_wide(odd, skips)]).unify_dictionaries()
    return _narrow(table), skips


def _narrow(table: pa.Table) -> pa.Table:
    # A file has a handful of distinct strings per column: int8 indices keep the kept parts as small as
    # the final categoricals (peak memory), falling back to int32 for unusually varied files.
    cols = []
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            if len(col.dictionary) <= 127:
                col = col.cast(_DICT8)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def parse_system_file(data: bytes) -> tuple[pa.Table, dict[str, int]]:
    """Parse one JSON-lines file into the compact output schema; returns ``(table, skipped)``.

    ``skipped`` counts the records left out by reason (:data:`SKIP_REASONS`; empty when none): lines that are
    not records or miss a required key (Type, Dimension, Value, NodeId, Timestamp) or have one of the wrong
    type, lines with bytes that are not UTF-8, timestamps outside :data:`TIMESTAMP_RANGE_S` or wrongly
    scaled. ``Name`` may be missing (smdebug reads such records with ``name=None``), giving a null name.
    """
    table, skipped, _per_line = _parse_file(data)
    return table, skipped


def _parse_file(data: bytes) -> tuple[pa.Table, Skips, int]:
    """:func:`parse_system_file`, and how many lines went through the per-line path."""
    table, skips = _parse_counted(data)
    per_line = skips.pop(_PER_LINE, 0)
    return table, skips, per_line


def _parse_counted(data: bytes) -> tuple[pa.Table, Skips]:
    if _NON_SPACE.search(data) is None:
        return _OUT_SCHEMA.empty_table(), {}
    skips: Skips = {}
    spans = _bad_byte_lines(data)
    if spans is None:
        clean = _drop_bad_lines(data, skips)
        return _parse_clean(clean, 0, len(clean), skips), skips
    if not spans:
        return _parse_clean(data, 0, len(data), skips), skips
    # Parse the parts between the bad lines where they lie in memory: no copy of a large file for one bad byte.
    _add(skips, BAD_BYTES, len(spans))
    bounds = [0, *(b for span in spans for b in span), len(data)]
    return _concat([_parse_clean(data, a, b, skips) for a, b in zip(bounds[::2], bounds[1::2], strict=True)
                    if b > a]), skips


def _concat(parts: list[pa.Table]) -> pa.Table:
    """The parts of one file, in order, as one compact table."""
    parts = [t.cast(_OUT_SCHEMA) for t in parts if t.num_rows]
    if not parts:
        return _OUT_SCHEMA.empty_table()
    if len(parts) == 1:
        return _narrow(parts[0])
    return _narrow(pa.concat_tables(parts).unify_dictionaries())


def _escaped_lines(data: bytes, start: int, end: int, at: int) -> list[tuple[int, int]] | None:
    """Byte spans of the runs of lines in ``data[start:end]`` that hold a backslash (the first at ``at``);
    None when more than :data:`_MAX_ESCAPED_LINES` lines do."""
    spans: list[tuple[int, int]] = []
    lines = 0
    while at >= 0:
        begin = data.rfind(b"\n", start, at) + 1 or start
        nl = data.find(b"\n", at, end)
        stop = end if nl < 0 else nl + 1
        lines += 1
        if lines > _MAX_ESCAPED_LINES:
            return None
        if spans and spans[-1][1] == begin:
            spans[-1] = (spans[-1][0], stop)
        else:
            spans.append((max(begin, start), stop))
        at = data.find(b"\\", stop, end)
    return spans


def _blocks(data: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """``data[start:end]`` cut after a newline every :data:`_BLOCK` bytes or so."""
    out = []
    pos = start
    while pos < end:
        nl = data.find(b"\n", min(pos + _BLOCK, end) - 1, end)
        stop = end if nl < 0 else nl + 1
        out.append((pos, stop))
        pos = stop
    return out


def _parse_clean(data: bytes, start: int, end: int, skips: Skips, *, split: bool = True) -> pa.Table:
    """``data[start:end]`` (valid UTF-8, read in place) into the compact schema; bad records counted.

    The canonical fast path first (with ``split``, lines with JSON escapes, when few, are set aside and parsed one
    by one), then ``pyarrow.json``; what that refuses is parsed again per block (with ``split``), and only a block
    refused again goes line by line: one bad line never sends a whole file through the per-line path.
    """
    if _NON_SPACE.search(data, start, end) is None:
        return _OUT_SCHEMA.empty_table()
    buf = pa.py_buffer(memoryview(data)[start:end])
    escape = data.find(b"\\", start, end)
    if escape < 0:  # no JSON escapes: the canonical fast path can apply
        try:
            table, fast_skips = _parse_fast(buf)
        except _NotCanonical:
            pass
        else:
            for reason, n in fast_skips.items():
                _add(skips, reason, n)
            return table
    elif split and (escaped := _escaped_lines(data, start, end, escape)) is not None:
        bounds = [start, *(b for span in escaped for b in span), end]
        parts: list[pa.Table] = []
        for i, (a, b) in enumerate(pairwise(bounds)):
            if b <= a:
                continue
            if i % 2:  # a run of lines with escapes
                parts.append(_compact_wide(_parse_lines(data[a:b], skips), skips))
            else:
                parts.append(_parse_clean(data, a, b, skips, split=split))
        return _concat(parts)
    try:
        raw = pj.read_json(buf, read_options=_READ, parse_options=_PARSE)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # e.g. a lone surrogate, 1e400, a line that is not JSON
        raw = None
    if raw is None or not all(pc.all(pc.is_finite(raw.column(k))).as_py() for k in _NUMBERS):
        # pyarrow.json reads NaN and Infinity: the per-line path counts them as it counts every bad record
        blocks = _blocks(data, start, end) if split else []
        if len(blocks) > 1:
            return _concat([_parse_clean(data, a, b, skips, split=False) for a, b in blocks])
        return _narrow(_compact_wide(_parse_lines(data[start:end], skips), skips))
    valid = None
    for key in _REQUIRED:
        col = raw.column(key)
        if col.null_count:
            ok = pc.is_valid(col)
            valid = ok if valid is None else pc.and_(valid, ok)
    if valid is not None:
        _add(skips, MALFORMED, raw.num_rows - int(pc.sum(valid).as_py() or 0))
        raw = raw.filter(valid)
    return _narrow(_compact_wide(raw, skips))


def _compact_wide(raw: pa.Table, skips: Skips) -> pa.Table:
    keep = _plausible(raw.column("Timestamp"), skips)
    if keep is not None:
        raw = raw.filter(keep)
    # Truncate to whole microseconds as smdebug does (int(ts * 1e6)); float64 epoch seconds carry no more.
    us = pc.cast(pc.floor(pc.multiply(raw.column("Timestamp"), 1e6)), pa.int64())
    ts = pc.cast(pc.multiply(us, 1000), pa.int64()).cast(_TS_TYPE)
    return pa.table(
        [
            ts,
            pc.dictionary_encode(raw.column("NodeId")),
            pc.dictionary_encode(raw.column("Type")),
            pc.dictionary_encode(raw.column("Name")),
            pc.dictionary_encode(raw.column("Dimension")),
            raw.column("Value"),
        ],
        schema=_OUT_SCHEMA,
    )


def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "timestamp": pd.Series([], dtype="datetime64[ns, UTC]"),
            "node": pd.Categorical([]),
            "type": pd.Categorical([]),
            "name": pd.Categorical([]),
            "dimension": pd.Categorical([]),
            "value": pd.Series([], dtype="float64"),
        }
    )


def _nodes_arg(nodes: str | Iterable[str] | None) -> frozenset[str] | None:
    if nodes is None:
        return None
    if isinstance(nodes, str):
        return frozenset([nodes])
    out = frozenset(nodes)
    if not all(isinstance(n, str) and n for n in out):
        raise ConfigError(f"nodes must be node names like 'algo-1', got {sorted(map(repr, out))}", field="nodes",
                          value=nodes)
    return out


def list_system_files(source: Source) -> list[SystemFile]:
    """Every system-metrics file under ``source``, sorted by (minute, node)."""
    infos = source.list("system/")
    if not infos:
        infos = [o for o in source.list("") if "framework/" not in o.key]
    out = []
    for info in infos:
        m = _FILE_RE.search(info.key)
        if m:
            out.append(SystemFile(info, int(m.group(1)), m.group(2)))
    out.sort(key=lambda f: (f.minute, f.node, f.info.key))
    return out


def _in_window(files: list[SystemFile], start_ns: int | None, end_ns: int | None) -> list[SystemFile]:
    # A file holds records from its own minute up to the next file of the same node, so compare that span.
    if start_ns is None and end_ns is None:
        return files
    by_node: dict[str, list[SystemFile]] = {}
    for f in files:
        by_node.setdefault(f.node, []).append(f)
    keep: set[str] = set()
    for node_files in by_node.values():
        for i, f in enumerate(node_files):
            begin = f.minute * 1_000_000_000
            nxt = node_files[i + 1].minute * 1_000_000_000 if i + 1 < len(node_files) else None
            if end_ns is not None and begin >= end_ns:
                continue
            if start_ns is not None and nxt is not None and nxt <= start_ns:
                continue
            keep.add(f.info.key)
    return [f for f in files if f.info.key in keep]


@dataclass
class _Part:
    etag: str
    size: int
    table: pa.Table
    skipped: dict[str, int]
    per_line: int = 0  # lines that went through the per-line path


class SystemMetricsReader:
    """Reads a job's system metrics and re-reads them incrementally while the job runs.

    ``refresh()`` lists the source again and fetches only new files and files that grew (the last file of a
    live job is still being written), then returns the combined frame. Skipped records are counted in
    ``frame.attrs``: ``skipped_lines`` (total), ``skipped_by_file`` (total per file) and ``skipped_by_reason``
    (per :data:`SKIP_REASONS` entry, over all files); ``lines_parsed_one_by_one`` says how many lines the
    fast paths left to the per-line path (a few, around the lines they could not read).
    """

    def __init__(
        self,
        job_or_path: str | os.PathLike[str] | Source,
        *,
        start: TimeLike = None,
        end: TimeLike = None,
        nodes: str | Iterable[str] | None = None,
        sagemaker_client: Any = None,
        s3_client: Any = None,
        workers: int = DEFAULT_WORKERS,
        progress: bool | None = None,
    ) -> None:
        self.source = open_source(job_or_path, sagemaker_client=sagemaker_client, s3_client=s3_client)
        self.start_ns = to_epoch_ns(start, "start")
        self.end_ns = to_epoch_ns(end, "end")
        if self.start_ns is not None and self.end_ns is not None and self.end_ns <= self.start_ns:
            raise ConfigError(f"end ({end!r}) must be after start ({start!r})", field="end", value=end)
        self.nodes = _nodes_arg(nodes)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ConfigError(f"workers must be a positive integer, got {workers!r}", field="workers", value=workers)
        self.workers = workers
        self.progress = progress
        self._parts: dict[str, _Part] = {}
        self._order: list[str] = []
        self.files_fetched = 0

    def _select(self) -> list[SystemFile]:
        files = list_system_files(self.source)
        if not files:
            raise NoDataYetError(
                f"no system metrics under {self.source.uri} yet: expected "
                "system/incremental/<YYYYMMDDHH>/<epoch_s>.<node>.json files (a job writes its first within "
                "minutes of starting; was profiling on?)",
                where=self.source.uri,
            )
        if self.nodes is not None:
            present = {f.node for f in files}
            if not self.nodes & present:
                raise NotFoundError(
                    f"none of nodes {sorted(self.nodes)} has system metrics under {self.source.uri}; "
                    f"nodes present: {sorted(present)}"
                )
            files = [f for f in files if f.node in self.nodes]
        return _in_window(files, self.start_ns, self.end_ns)

    def refresh(self, *, release: bool = False) -> pd.DataFrame:
        """Fetch what is new since the last call and return every record read so far.

        ``release=True`` hands the parsed parts over to the frame (lower peak memory) and resets the reader.
        """
        selected = self._select()
        todo = [
            f.info
            for f in selected
            if (p := self._parts.get(f.info.key)) is None or p.etag != f.info.etag or p.size != f.info.size
        ]
        with progress_bar(f"system metrics {self.source.uri}", len(todo), enabled=self.progress) as bar:
            infos = {o.key: o for o in todo}
            for key, (table, skipped, per_line) in self.source.map(
                list(infos),
                lambda _k, data: _parse_file(data),
                workers=self.workers,
                sizes={k: o.size for k, o in infos.items()},
            ):
                info = infos[key]
                self._parts[key] = _Part(info.etag, info.size, table, skipped, per_line)
                self.files_fetched += 1
                bar.update()
        self._order = [f.info.key for f in selected]
        return self.frame(release=release)

    def frame(self, *, release: bool = False) -> pd.DataFrame:
        """The combined frame of everything read so far (no I/O)."""
        keys = [k for k in self._order if k in self._parts]
        tables = [self._parts[k].table for k in keys if self._parts[k].table.num_rows]
        skipped = {k: self._parts[k].skipped for k in keys if self._parts[k].skipped}
        per_line = sum(self._parts[k].per_line for k in keys)
        if release:
            self._parts = {}
        return tables_frame(tables, skipped, source=self.source.uri, files=len(keys), start_ns=self.start_ns,
                            end_ns=self.end_ns, release=release, per_line=per_line)


def tables_frame(
    tables: list[pa.Table],
    skipped: dict[str, dict[str, int]],
    *,
    source: str,
    files: int,
    start_ns: int | None = None,
    end_ns: int | None = None,
    release: bool = False,
    per_line: int = 0,
) -> pd.DataFrame:
    """The contract frame from :func:`parse_system_file` tables, with the skip counts (per file) in ``attrs``
    and ``per_line``, the lines that went through the per-line path (a file's fast paths refused their block)."""
    tables = [t for t in tables if t.num_rows]
    if tables:
        if len({t.schema for t in tables}) > 1:  # a file with >127 distinct names kept int32 indices
            tables = [t.cast(_OUT_SCHEMA) for t in tables]
        table = pa.concat_tables(tables)
        if start_ns is not None or end_ns is not None:
            ts = pc.cast(table.column("timestamp"), pa.int64())
            mask = None
            if start_ns is not None:
                mask = pc.greater_equal(ts, start_ns)
            if end_ns is not None:
                lt = pc.less(ts, end_ns)
                mask = lt if mask is None else pc.and_(mask, lt)
            table = table.filter(mask)
        del tables
        table = table.unify_dictionaries()
        df: pd.DataFrame = table.to_pandas(split_blocks=True, self_destruct=release)
        del table
    else:
        df = _empty_frame()
    by_reason: dict[str, int] = {}
    for counts in skipped.values():
        for reason, n in counts.items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    df.attrs.update(
        {
            "source": source,
            "files": files,
            "skipped_lines": sum(by_reason.values()),
            "skipped_by_file": {k: sum(v.values()) for k, v in skipped.items() if v},
            "skipped_by_reason": by_reason,
            "lines_parsed_one_by_one": per_line,
        }
    )
    return df


class ReaderOptions(TypedDict, total=False):
    """:class:`SystemMetricsReader`'s options besides the window: clients, read threads, progress."""

    sagemaker_client: Any
    s3_client: Any
    workers: int
    progress: bool | None


def system_metrics(
    job_or_path: str | os.PathLike[str] | Source,
    start: TimeLike = None,
    end: TimeLike = None,
    nodes: str | Iterable[str] | None = None,
    **options: Unpack[ReaderOptions],
) -> pd.DataFrame:
    """System metrics of a job (name), an ``s3://`` prefix or a local folder, as one long DataFrame.

    Columns: ``timestamp`` (datetime64[ns, UTC]), ``node``, ``type``, ``name``, ``dimension`` (categoricals)
    and ``value`` (float64); rows in file order (minute, node, line). ``start``/``end`` (datetimes, ISO
    strings or epoch seconds; end exclusive) and ``nodes`` restrict what is downloaded and returned; ``options``
    are the reader's (``sagemaker_client``, ``s3_client``, ``workers``, ``progress``).
    Skipped records are counted in ``df.attrs["skipped_lines"]`` and by reason in ``df.attrs["skipped_by_reason"]``.
    """
    return SystemMetricsReader(job_or_path, start=start, end=end, nodes=nodes, **options).refresh(release=True)


def system_metrics_wide(df: pd.DataFrame, freq: str | None = "1s") -> pd.DataFrame:
    """Pivot the long frame: one row per timestamp (floored to ``freq``), one column per (node, name, dimension).

    Values that fall into the same bucket are averaged; ``freq=None`` keeps exact timestamps.
    """
    missing = [c for c in SYSTEM_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"df lacks system-metric columns {missing}", field="df", value=list(df.columns))
    ts = df["timestamp"].dt.floor(freq) if freq else df["timestamp"]
    name = df["name"].astype("object").where(df["name"].notna(), df["type"].astype("object"))
    wide = (
        pd.DataFrame({"timestamp": ts, "node": df["node"].astype("object"), "name": name,
                      "dimension": df["dimension"].astype("object"), "value": df["value"]})
        .groupby(["timestamp", "node", "name", "dimension"], sort=True)["value"]
        .mean()
        .unstack(["node", "name", "dimension"])
    )
    out: pd.DataFrame = wide.sort_index(axis=1)
    return out
