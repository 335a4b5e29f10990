"""System metrics (``profiler-output/system/...``) into one long pandas DataFrame, fast.

Each file is JSON-lines, one record a line: ``{"Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"}``.
A file is named after the minute it starts (``<epoch_s>.<node>.json``) and sits in an hour folder
(``system/incremental/<YYYYMMDDHH>/``) or, in older jobs and smdebug's tests, directly in ``incremental/``.
File names say when and where, so files outside the time window or nodes are never downloaded.

Speed: whole files are read as bytes and parsed by ``pyarrow.json`` with an explicit schema in worker
threads; only a file whose fast parse fails (a truncated last line of a file still being written, a record
of the wrong shape) goes through a per-line path that skips and counts the bad lines.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pj

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.reports._util import Progress, TimeLike, to_epoch_ns
from smx_debug.reports.sources import DEFAULT_WORKERS, ObjectInfo, Source, open_source

__all__ = [
    "SYSTEM_COLUMNS",
    "SystemFile",
    "SystemMetricsReader",
    "parse_system_file",
    "system_metrics",
    "system_metrics_wide",
]

SYSTEM_COLUMNS = ["timestamp", "node", "type", "name", "dimension", "value"]

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


def _parse_lines(data: bytes) -> tuple[dict[str, list[Any]], int]:
    cols: dict[str, list[Any]] = {name: [] for name in _SCHEMA.names}
    skipped = 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if not isinstance(rec, dict) or not _record_ok(rec):
            skipped += 1
            continue
        for name in _SCHEMA.names:
            cols[name].append(rec.get(name))
    return cols, skipped


def _record_ok(rec: dict[str, Any]) -> bool:
    for key in ("Type", "Dimension", "NodeId"):
        if not isinstance(rec.get(key), str):
            return False
    name = rec.get("Name")
    if name is not None and not isinstance(name, str):
        return False
    for key in ("Value", "Timestamp"):
        v = rec.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return False
    return True


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


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _parse_fast(data: bytes) -> tuple[pa.Table, int]:
    bad_rows: list[str] = []

    def on_invalid(row: Any) -> str:
        bad_rows.append(row.text)
        return "skip"

    opts = pcsv.ParseOptions(
        delimiter='"', quote_char=False, escape_char=False, newlines_in_values=False, invalid_row_handler=on_invalid
    )
    try:
        t = pcsv.read_csv(pa.py_buffer(data), read_options=_CSV_READ, parse_options=opts, convert_options=_CSV_CONVERT)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise _NotCanonical from exc
    skipped = 0
    if bad_rows:
        # Only a truncated last line (a file still being written) is skipped here; anything else is not canonical.
        last = data.rstrip().rsplit(b"\n", 1)[-1].decode("utf-8", "replace").rstrip("\r")
        if len(bad_rows) > 1 or bad_rows[0].rstrip("\r") != last or _is_json(last):
            raise _NotCanonical
        skipped = 1
    for col, key in _KEYS.items():
        if t.num_rows and not pc.all(pc.equal(t.column(col), key)).as_py():
            raise _NotCanonical
    tail = pc.utf8_rtrim_whitespace(t.column("c20"))
    complete = pc.ends_with(tail, "}")
    if not pc.all(complete).as_py():
        skipped += t.num_rows - int(pc.sum(complete).as_py() or 0)
        t, tail = t.filter(complete), tail.filter(complete)
    try:
        value = pc.cast(pc.utf8_trim(t.column("c14"), ": ,\t"), pa.float64())
        stamp = pc.cast(pc.utf8_trim(tail, ": }\t"), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise _NotCanonical from exc
    if stamp.null_count or (len(stamp) and not pc.all(pc.is_finite(stamp)).as_py()):
        raise _NotCanonical
    us = pc.cast(pc.floor(pc.multiply(stamp, 1e6)), pa.int64())
    table = pa.table(
        [pc.cast(pc.multiply(us, 1000), pa.int64()).cast(_TS_TYPE), t.column("c17"), t.column("c3"),
         t.column("c7"), t.column("c11"), value],
        schema=_OUT_SCHEMA,
    )
    return _narrow(table), skipped


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


def parse_system_file(data: bytes) -> tuple[pa.Table, int]:
    """Parse one JSON-lines file into the compact output schema; returns ``(table, skipped_lines)``.

    Records missing a required key (Type, Dimension, Value, NodeId, Timestamp) or of the wrong type are
    skipped and counted; ``Name`` may be missing (memory and algorithm records), giving a null name.
    """
    if not data.strip():
        return _OUT_SCHEMA.empty_table(), 0
    if b"\\" not in data:  # no JSON escapes: the canonical fast path can apply
        try:
            return _parse_fast(data)
        except _NotCanonical:
            pass
    skipped = 0
    try:
        raw = pj.read_json(pa.py_buffer(data), read_options=_READ, parse_options=_PARSE)
        valid = None
        for key in _REQUIRED:
            col = raw.column(key)
            if col.null_count:
                ok = pc.is_valid(col)
                valid = ok if valid is None else pc.and_(valid, ok)
        if valid is not None:
            skipped = raw.num_rows - int(pc.sum(valid).as_py() or 0)
            raw = raw.filter(valid)
        ts_col = raw.column("Timestamp")
        if ts_col.null_count == 0 and len(ts_col) and not pc.all(pc.is_finite(ts_col)).as_py():
            ok = pc.is_finite(ts_col)
            skipped += raw.num_rows - int(pc.sum(ok).as_py() or 0)
            raw = raw.filter(ok)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        cols, skipped = _parse_lines(data)
        raw = pa.table(cols, schema=_SCHEMA)
    return _compact(raw), skipped


def _compact(raw: pa.Table) -> pa.Table:
    return _narrow(_compact_wide(raw))


def _compact_wide(raw: pa.Table) -> pa.Table:
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
    skipped: int


class SystemMetricsReader:
    """Reads a job's system metrics and re-reads them incrementally while the job runs.

    ``refresh()`` lists the source again and fetches only new files and files that grew (the last file of a
    live job is still being written), then returns the combined frame. Skipped lines are counted in
    ``frame.attrs["skipped_lines"]`` (total) and ``frame.attrs["skipped_by_file"]``.
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
            raise NotFoundError(
                f"no system metrics under {self.source.uri}: expected "
                "system/incremental/<YYYYMMDDHH>/<epoch_s>.<node>.json files (was profiling on?)"
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
        with Progress(f"system metrics {self.source.uri}", len(todo), enabled=self.progress) as bar:
            infos = {o.key: o for o in todo}
            for key, (table, skipped) in self.source.map(
                list(infos),
                lambda _k, data: parse_system_file(data),
                workers=self.workers,
                sizes={k: o.size for k, o in infos.items()},
            ):
                info = infos[key]
                self._parts[key] = _Part(info.etag, info.size, table, skipped)
                self.files_fetched += 1
                bar.update()
        self._order = [f.info.key for f in selected]
        return self.frame(release=release)

    def frame(self, *, release: bool = False) -> pd.DataFrame:
        """The combined frame of everything read so far (no I/O)."""
        keys = [k for k in self._order if k in self._parts]
        tables = [self._parts[k].table for k in keys if self._parts[k].table.num_rows]
        skipped = {k: self._parts[k].skipped for k in keys if self._parts[k].skipped}
        if release:
            self._parts = {}
        if tables:
            if len({t.schema for t in tables}) > 1:  # a file with >127 distinct names kept int32 indices
                tables = [t.cast(_OUT_SCHEMA) for t in tables]
            table = pa.concat_tables(tables)
            if self.start_ns is not None or self.end_ns is not None:
                ts = pc.cast(table.column("timestamp"), pa.int64())
                mask = None
                if self.start_ns is not None:
                    mask = pc.greater_equal(ts, self.start_ns)
                if self.end_ns is not None:
                    lt = pc.less(ts, self.end_ns)
                    mask = lt if mask is None else pc.and_(mask, lt)
                table = table.filter(mask)
            del tables
            table = table.unify_dictionaries()
            df: pd.DataFrame = table.to_pandas(split_blocks=True, self_destruct=release)
            del table
        else:
            df = _empty_frame()
        df.attrs.update(
            {
                "source": self.source.uri,
                "files": len(keys),
                "skipped_lines": sum(skipped.values()),
                "skipped_by_file": skipped,
            }
        )
        return df


def system_metrics(
    job_or_path: str | os.PathLike[str] | Source,
    start: TimeLike = None,
    end: TimeLike = None,
    nodes: str | Iterable[str] | None = None,
    *,
    sagemaker_client: Any = None,
    s3_client: Any = None,
    workers: int = DEFAULT_WORKERS,
    progress: bool | None = None,
) -> pd.DataFrame:
    """System metrics of a job (name), an ``s3://`` prefix or a local folder, as one long DataFrame.

    Columns: ``timestamp`` (datetime64[ns, UTC]), ``node``, ``type``, ``name``, ``dimension`` (categoricals)
    and ``value`` (float64); rows in file order (minute, node, line). ``start``/``end`` (datetimes, ISO
    strings or epoch seconds; end exclusive) and ``nodes`` restrict what is downloaded and returned.
    Skipped lines are counted in ``df.attrs["skipped_lines"]``.
    """
    reader = SystemMetricsReader(
        job_or_path,
        start=start,
        end=end,
        nodes=nodes,
        sagemaker_client=sagemaker_client,
        s3_client=s3_client,
        workers=workers,
        progress=progress,
    )
    return reader.refresh(release=True)


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
