"""Framework traces (``profiler-output/framework/pevents/...``) into pandas, with absolute timestamps.

Each trace file is a Chrome-trace JSON array written by smdebug: the first event
``{"name": "process_name", "ph": "M", "args": {"start_time_since_epoch_in_micros": ...}}`` gives the start,
later ``ts`` values are microseconds relative to it. Files are named
``<end_us>_<pid>-<node>_{pythontimeline,model_timeline,horovod_timeline}.json`` in hour folders, so
files outside the time window or nodes are never downloaded. A truncated file (still being written) keeps
the events before the cut, and the cut is counted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from smx_debug import _json as bounded_json
from smx_debug.data import frames
from smx_debug.data._util import TimeLike, is_utf8, to_epoch_ns
from smx_debug.data.progress import progress_bar
from smx_debug.data.sources import DEFAULT_WORKERS, ObjectInfo, Source, open_source
from smx_debug.data.system import TIMESTAMP_RANGE_S
from smx_debug.errors import ConfigError, NotFoundError

TRACE_KINDS = ("pythontimeline", "model_timeline", "horovod_timeline")
# the events frame's columns and their dtypes (an empty frame has them too)
_EVENT_DTYPES = {"node": "str", "pid": "int64", "kind": "str", "process": "str", "name": "str", "phase": "str",
                 "start": "datetime64[ns, UTC]", "end": "datetime64[ns, UTC]", "duration": "float64", "step": "Int64",
                 "args": "object"}
EVENT_COLUMNS = list(_EVENT_DTYPES)
STEP_COLUMNS = list(frames.STEP_COLUMNS)
_FILE_RE = re.compile(r"(?:^|/)(\d{13,19})_(.+)_(pythontimeline|model_timeline|horovod_timeline)\.json$")
_PID_NODE = re.compile(r"^(\d+)-(.+)$")


@dataclass(frozen=True)
class TraceFile:
    """One trace file: its key, end time (epoch us), writer pid, node and kind, from its name."""

    info: ObjectInfo
    end_us: int
    pid: int
    node: str
    kind: str


def trace_file(info: ObjectInfo) -> TraceFile | None:
    """What a trace file's name says (end time, pid, node, kind), or None if it is not a trace file."""
    m = _FILE_RE.search(info.key)
    if not m:
        return None
    end = int(m.group(1))
    end_us = end // 1000 if len(m.group(1)) > 16 else end  # a few old files are named in ns
    middle = m.group(2)
    pm = _PID_NODE.match(middle)
    if pm:
        pid, node = int(pm.group(1)), pm.group(2)
    else:  # "<pid>" or "<pid>_<rank>" without a host: the node is unknown
        head = middle.split("_", 1)[0]
        pid, node = (int(head) if head.isdigit() else -1), middle
    return TraceFile(info, end_us, pid, node, m.group(3))


def _load_events(data: bytes) -> tuple[list[Any], int]:
    """The events of a JSON array; a truncated array, or an event nested deeper than the parser goes, keeps the
    complete events before it (1 skip counted)."""
    try:
        events = bounded_json.loads(data)
    except ValueError:  # also nested too deep
        pass
    else:
        if isinstance(events, list):
            return events, 0
        if isinstance(events, dict) and isinstance(events.get("traceEvents"), list):
            return events["traceEvents"], 0
        return [], 1
    text = data.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    pos = text.find("[")
    if pos < 0:
        return [], 1
    pos += 1
    out: list[Any] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out, 0
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):  # raw_decode has no bounded twin: its RecursionError is caught here
            return out, 1
        out.append(obj)


def parse_trace(data: bytes, *, node: str = "", pid: int = -1, kind: str = "") -> tuple[pd.DataFrame, int]:
    """One trace file as rows of :data:`EVENT_COLUMNS`; returns ``(frame, skipped)``.

    ``start``/``end`` are absolute (datetime64[ns, UTC]); ``duration`` is seconds (X events; B/E/i have none);
    ``step`` is ``args.step_num`` when present; ``process`` is the name the M events give the trace pid.
    """
    events, skipped = _load_events(data)
    base_us: int | None = None
    names: dict[Any, str] = {}
    rows: list[tuple[Any, ...]] = []
    for ev in events:
        if not isinstance(ev, dict):
            skipped += 1
            continue
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        if ev.get("ph") == "M":
            if "start_time_since_epoch_in_micros" in args and base_us is None:
                base_us = int(args["start_time_since_epoch_in_micros"])
            elif ev.get("name") == "process_name" and isinstance(args.get("name"), str) and is_utf8(args["name"]):
                names[ev.get("pid")] = args["name"]
            continue
        ts, dur = ev.get("ts"), ev.get("dur")
        if isinstance(ts, str):
            ts = float(ts) if ts.replace(".", "", 1).isdigit() else None
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            skipped += 1
            continue
        if isinstance(dur, bool) or not isinstance(dur, int | float):
            dur = None
        step_num = args.get("step_num")
        try:
            step = int(step_num) if step_num is not None else None
        except (TypeError, ValueError):
            step = None
        event_name, event_phase = str(ev.get("name", "")), str(ev.get("ph", ""))
        if not (is_utf8(event_name) and is_utf8(event_phase)):  # a lone surrogate escape: no string column holds it
            skipped += 1
            continue
        rows.append((ev.get("pid"), event_name, event_phase, ts, dur, step, args))
    if not rows:
        return _empty_events(), skipped
    # Horovod's raw timeline carries absolute microseconds and no start event.
    base = base_us if base_us is not None else 0
    hi_us = TIMESTAMP_RANGE_S[1] * 1e6
    ts_us = np.asarray([r[3] for r in rows], dtype=np.float64)
    dur_all = np.asarray([np.nan if r[4] is None else r[4] for r in rows], dtype=np.float64)
    # Events past 2100 (a timestamp of 1e20, microseconds written in ns) are skipped and counted, never an
    # overflow. No lower bound: smdebug's own test traces carry small relative times without a start event.
    absolute = ts_us + float(base)
    plausible = (absolute > -hi_us) & (absolute < hi_us) & (0 <= base < hi_us)
    plausible &= np.isnan(dur_all) | ((dur_all >= 0) & (absolute + dur_all < hi_us))
    if not plausible.all():
        skipped += int((~plausible).sum())
        rows = [r for r, ok in zip(rows, plausible, strict=True) if ok]
        if not rows:
            return _empty_events(), skipped
        ts_us, dur_all = ts_us[plausible], dur_all[plausible]
    trace_pid, name, phase, _ts, _dur, step_arr, args_list = zip(*rows, strict=True)
    offset_ns = base * 1000
    # Relative microseconds are small enough to scale exactly; the epoch offset is added in int64.
    start_ns = np.round(ts_us * 1000).astype(np.int64) + offset_ns
    dur_us = dur_all
    has_end = ~np.isnan(dur_us)
    end_ns = start_ns + np.round(np.where(has_end, dur_us, 0) * 1000).astype(np.int64)
    start = pd.to_datetime(start_ns, utc=True)
    end = pd.to_datetime(np.where(has_end, end_ns, np.iinfo(np.int64).min), utc=True)
    frame = pd.DataFrame(
        {
            "node": node,
            "pid": pid,
            "kind": kind,
            "process": [names.get(p, "") for p in trace_pid],
            "name": list(name),
            "phase": list(phase),
            "start": start,
            "end": end,
            "duration": dur_us / 1e6,
            "step": pd.array(list(step_arr), dtype="Int64"),
            "args": list(args_list),
        }
    )
    return frame, skipped


def _empty_events() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in _EVENT_DTYPES.items()})


def list_trace_files(source: Source) -> list[TraceFile]:
    """Every framework trace file under ``source``, sorted by end time."""
    infos = source.list("framework/")
    if not infos:
        infos = source.list("")
    out = [t for t in map(trace_file, infos) if t is not None]
    out.sort(key=lambda t: (t.end_us, t.node, t.pid, t.info.key))
    return out


def _window(files: list[TraceFile], start_ns: int | None, end_ns: int | None) -> list[TraceFile]:
    # A file holds events that ended after the previous file of the same writer and up to its own name's time.
    if start_ns is None and end_ns is None:
        return files
    prev: dict[tuple[str, int, str], int] = {}
    out = []
    for f in files:
        writer = (f.node, f.pid, f.kind)
        before = prev.get(writer)
        prev[writer] = f.end_us
        if start_ns is not None and f.end_us * 1000 < start_ns:
            continue
        if end_ns is not None and before is not None and before * 1000 >= end_ns:
            continue
        out.append(f)
    return out


def framework_metrics(
    job_or_path: str | os.PathLike[str] | Source,
    start: TimeLike = None,
    end: TimeLike = None,
    nodes: str | Iterable[str] | None = None,
    *,
    kinds: Iterable[str] | None = None,
    sagemaker_client: Any = None,
    s3_client: Any = None,
    workers: int = DEFAULT_WORKERS,
    progress: bool | None = None,
) -> pd.DataFrame:
    """The trace events of a job (name), ``s3://`` prefix or local folder: one row per event.

    Columns :data:`EVENT_COLUMNS`; events overlapping ``[start, end)`` are kept. ``kinds`` picks among
    :data:`TRACE_KINDS`. Skipped events and truncated files are counted in ``df.attrs["skipped"]``.
    """
    kind_set = set(TRACE_KINDS if kinds is None else kinds)
    unknown = kind_set - set(TRACE_KINDS)
    if unknown:
        raise ConfigError(f"kinds must be among {list(TRACE_KINDS)}, got {sorted(unknown)}", field="kinds",
                          value=sorted(unknown))
    node_set = {nodes} if isinstance(nodes, str) else (set(nodes) if nodes is not None else None)
    start_ns, end_ns = to_epoch_ns(start, "start"), to_epoch_ns(end, "end")
    source = open_source(job_or_path, sagemaker_client=sagemaker_client, s3_client=s3_client)
    files = list_trace_files(source)
    if not files:
        raise NotFoundError(
            f"no framework traces under {source.uri}: expected framework/pevents/<YYYYMMDDHH>/"
            "<end_us>_<pid>-<node>_pythontimeline.json files (was framework profiling on?)"
        )
    files = [f for f in files if f.kind in kind_set and (node_set is None or f.node in node_set)]
    files = _window(files, start_ns, end_ns)
    by_key = {f.info.key: f for f in files}
    frames: list[pd.DataFrame] = []
    skipped = 0

    def parse(key: str, data: bytes) -> tuple[pd.DataFrame, int]:
        f = by_key[key]
        return parse_trace(data, node=f.node, pid=f.pid, kind=f.kind)

    with progress_bar(f"framework traces {source.uri}", len(files), enabled=progress) as bar:
        for _key, (frame, n_skipped) in source.map(list(by_key), parse, workers=workers):
            if len(frame):
                frames.append(frame)
            skipped += n_skipped
            bar.update()
    df = pd.concat(frames, ignore_index=True) if frames else _empty_events()
    if start_ns is not None or end_ns is not None:
        s_ns = df["start"].astype("int64")
        e_ns = df["end"].where(df["end"].notna(), df["start"]).astype("int64")
        keep = np.ones(len(df), dtype=bool)
        if start_ns is not None:
            keep &= e_ns.to_numpy() >= start_ns
        if end_ns is not None:
            keep &= s_ns.to_numpy() < end_ns
        df = df[keep].reset_index(drop=True)
    df.attrs.update({"source": source.uri, "files": len(files), "skipped": skipped})
    return df


def _natural(node: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", node))


def step_durations(events: pd.DataFrame) -> pd.DataFrame:
    """Training steps (``Step:ModeKeys.<MODE>`` X events of the python timeline) as rows of :data:`STEP_COLUMNS`.

    ``rank`` is the ordinal of the writing process over (node in natural order, pid): the Horovod/DDP global
    rank when one process drives each GPU and pids grow with the local rank.
    """
    missing = [c for c in ("node", "pid", "name", "phase", "start", "end", "duration", "step") if c not in events]
    if missing:
        raise ConfigError(f"events lacks columns {missing}", field="events", value=list(events.columns))
    steps = events[(events["phase"] == "X") & events["name"].astype(str).str.startswith("Step:")
                   & events["step"].notna()]
    if steps.empty:
        return frames.empty_steps()
    writers = sorted({(n, p) for n, p in zip(steps["node"], steps["pid"], strict=True)},
                     key=lambda w: (_natural(str(w[0])), w[1]))
    rank_of = {w: i for i, w in enumerate(writers)}
    out = pd.DataFrame(
        {
            "node": steps["node"].to_numpy(),
            "rank": np.fromiter((rank_of[(n, p)] for n, p in zip(steps["node"], steps["pid"], strict=True)),
                                dtype=np.int64, count=len(steps)),
            "mode": steps["name"].str.rsplit(".", n=1).str[-1].str.replace("Step:", "", regex=False).to_numpy(),
            "step": steps["step"].astype("int64").to_numpy(),
            "start": steps["start"].to_numpy(),
            "end": steps["end"].to_numpy(),
            "duration": steps["duration"].to_numpy(dtype=np.float64),
        }
    )
    out["start"] = pd.to_datetime(out["start"], utc=True)
    out["end"] = pd.to_datetime(out["end"], utc=True)
    return out.sort_values(["node", "rank", "start"], kind="stable").reset_index(drop=True)
