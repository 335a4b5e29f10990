"""One merged timeline: system metrics and framework events as a Chrome trace-event JSON file.

Open it in Perfetto (ui.perfetto.dev, "Open trace file") or chrome://tracing. Each node is a process: its
system metrics are counter tracks (GPU utilization and memory per GPU, CPU, memory, I/O and network), its
framework events are slices on one track per trace process (steps, dataloader, forward/backward, ...), and
marks (onset, first trigger, stop) are global instant events. Times are microseconds since the first
sample; ``otherData.t0_utc`` gives that moment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.analysis.dips import classify_event
from smx_debug.data.frames import JobData, Series, ns

# counter track -> (dimensions, scale, per device?)
COUNTERS: dict[str, tuple[tuple[str, ...], float, bool]] = {
    "GPU utilization (%)": (("GPUUtilization",), 1.0, True),
    "GPU memory (%)": (("GPUMemoryUtilization",), 1.0, True),
    "CPU utilization (%)": (("CPUUtilization",), 1.0, False),
    "Memory (%)": (("MemoryUtilization",), 1.0, False),
    "I/O (MB/s)": (("ReadThroughputInBytesPerSecond", "WriteThroughputInBytesPerSecond"), 1e-6, True),
    "Network (MB/s)": (("ReceiveBytesPerSecond", "TransmitBytesPerSecond"), 1e-6, True),
}
_LABELS = {"ReadThroughputInBytesPerSecond": "read", "WriteThroughputInBytesPerSecond": "write",
           "ReceiveBytesPerSecond": "receive", "TransmitBytesPerSecond": "transmit"}


@dataclass(frozen=True)
class TraceMark:
    """A moment to mark on the whole timeline (``kind``: onset, trigger, stop)."""

    name: str
    time_ns: int
    kind: str = "trigger"


def _origin(data: JobData, events: pd.DataFrame | None, marks: Sequence[TraceMark]) -> int | None:
    pts: list[int] = []
    if data.system_span_ns is not None:
        pts.append(data.system_span_ns[0])
    if not data.steps.empty:
        pts.append(int(ns(data.steps["start"]).min()))
    if events is not None and len(events):
        pts.append(int(ns(events["start"]).min()))
    pts += [m.time_ns for m in marks]
    return min(pts) if pts else None


def _aligned(data: JobData, node: str, series: list[tuple[str, Series]]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Values of several series of one node on its snapshot grid (NaN where a series has no sample)."""
    snap = data.snapshots[node]
    out: dict[str, np.ndarray] = {}
    seen = np.zeros(len(snap), dtype=bool)
    for label, s in series:
        col = np.full(len(snap), np.nan)
        idx = np.clip(np.searchsorted(snap, s.ts, side="right") - 1, 0, None)
        col[idx] = s.values
        out[label] = col
        seen |= ~np.isnan(col)
    return snap[seen], {k: v[seen] for k, v in out.items()}


def _counters(data: JobData, node: str, pid: int, t0: int) -> Iterable[dict[str, Any]]:
    for track, (dims, scale, per_device) in COUNTERS.items():
        series: list[tuple[str, Series]] = []
        for dim in dims:
            group = [s for s in data.series(dim) if s.node == node]
            if per_device:
                multi = len(dims) > 1
                series += [(f"{_LABELS.get(dim, dim)}:{s.name}" if multi else s.name, s) for s in group]
            elif group:
                ts, total, n = data.totals(dim)[node]
                series.append(("mean", Series(node, "mean", ts, total / max(n, 1))))
        if not series:
            continue
        snap, cols = _aligned(data, node, series)
        labels = list(cols)
        matrix = np.column_stack([cols[k] for k in labels]) * scale
        us = ((snap - t0) // 1000).tolist()
        for t, row in zip(us, matrix.tolist(), strict=True):
            args = {k: round(v, 3) for k, v in zip(labels, row, strict=True) if v == v}
            yield {"ph": "C", "name": track, "pid": pid, "tid": 0, "ts": t, "args": args}


def _framework(events: pd.DataFrame, pids: dict[str, int], t0: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(metadata, X and instant events) of the framework trace, one thread per (writer pid, trace process)."""
    meta: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    keep = events[(events["phase"].isin(["X", "i", "I"]))
                  & ((events["phase"] != "X") | events["duration"].notna())]
    if keep.empty:
        return meta, out
    tids: dict[tuple[str, int, str], int] = {}
    start_us = (ns(keep["start"]) - t0) // 1000
    dur_us = np.round(keep["duration"].fillna(0).to_numpy(dtype=float) * 1e6).astype(np.int64)
    steps = keep["step"].to_numpy(dtype=object)
    cats: dict[str, str] = {}
    for node, wpid, proc, kind, name, ph, a, d, step in zip(
        keep["node"].astype(str), keep["pid"].tolist(), keep["process"].astype(str), keep["kind"].astype(str),
        keep["name"].astype(str), keep["phase"].astype(str), start_us.tolist(), dur_us.tolist(), steps,
        strict=True,
    ):
        pid = pids.setdefault(node, len(pids) + 1)
        key = (node, int(wpid), proc or kind)
        tid = tids.get(key)
        if tid is None:
            tid = tids[key] = len(tids) + 1
            meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                         "args": {"name": f"{proc or kind} (pid {wpid})"}})
        cat = cats.get(name) or cats.setdefault(name, "step" if name.startswith("Step:") else classify_event(name))
        ev: dict[str, Any] = {"ph": "X" if ph == "X" else "i", "name": name, "cat": cat, "pid": pid, "tid": tid,
                              "ts": a}
        if ph == "X":
            ev["dur"] = d
        else:
            ev["s"] = "t"
        if step is not None and step is not pd.NA:
            ev["args"] = {"step": int(step)}
        out.append(ev)
    return meta, out


def chrome_trace(
    data: JobData, events: pd.DataFrame | None = None, *, marks: Sequence[TraceMark] = (), job_name: str = "",
) -> dict[str, Any]:
    """The job as a Chrome trace-event JSON object (``traceEvents`` plus ``otherData``).

    Args:
        data: system metrics (counter tracks) and steps (used when ``events`` is None).
        events: framework events (:func:`smx_debug.data.framework_metrics`); steps-only when None.
        marks: global instant events (onset, first trigger, stop).
    """
    t0 = _origin(data, events, marks)
    if t0 is None:
        return {"traceEvents": [], "displayTimeUnit": "ms", "otherData": {"job": job_name}}
    nodes = list(data.nodes)
    if events is not None and len(events):
        nodes += sorted(set(events["node"].astype(str)) - set(nodes))
    pids = {node: i + 1 for i, node in enumerate(nodes)}
    body: list[dict[str, Any]] = []
    for node, pid in pids.items():
        if node in data.snapshots:
            body.extend(_counters(data, node, pid, t0))
    if events is None:
        steps = data.steps
        events = pd.DataFrame({
            "node": steps["node"].astype(str), "pid": steps["rank"], "kind": "pythontimeline",
            "process": "Step:ModeKeys." + steps["mode"].astype(str), "name": "Step:ModeKeys." + steps["mode"].astype(str),
            "phase": "X", "start": steps["start"], "duration": steps["duration"], "step": steps["step"],
        })
    thread_meta, framework = _framework(events, pids, t0)
    body += framework
    for m in marks:
        body.append({"ph": "i", "s": "g", "name": m.name, "cat": m.kind, "pid": 0, "tid": 0,
                     "ts": (m.time_ns - t0) // 1000})
    meta: list[dict[str, Any]] = []
    for node, pid in pids.items():
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": node}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    return {
        "traceEvents": meta + thread_meta + body,
        "displayTimeUnit": "ms",
        "otherData": {"job": job_name, "t0_utc": datetime.fromtimestamp(t0 / 1e9, tz=UTC).isoformat(),
                      "generator": "smx-debug trace"},
    }


def write_chrome_trace(trace: dict[str, Any], path: str | Path) -> Path:
    """Write ``trace`` as compact JSON and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        json.dump(trace, fh, separators=(",", ":"))
    return out
