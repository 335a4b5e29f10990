"""Profiler output (a folder, one file, or any reports ``Source`` such as an S3 prefix) into :class:`JobData`.

There is one reader per format and it lives in :mod:`smx_debug.data`: system metrics through
:class:`~smx_debug.data.SystemMetricsReader` / :func:`~smx_debug.data.system.parse_system_file`, steps through
:func:`~smx_debug.data.framework_metrics` / :func:`~smx_debug.data.framework_trace.parse_trace` and
:func:`~smx_debug.data.step_durations`. This module only decides which files go where and gathers
what the readers skipped into a :class:`LoadReport`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from smx_debug.data.frames import JobData, empty_steps, empty_system
from smx_debug.data.framework_trace import (
    framework_metrics,
    list_trace_files,
    parse_trace,
    step_durations,
    trace_file,
)
from smx_debug.data.metrics_file import read_scalars
from smx_debug.data.sources import ObjectInfo, Source, open_source
from smx_debug.data.system import SystemMetricsReader, list_system_files, parse_system_file, tables_frame
from smx_debug.errors import NotFoundError


@dataclass
class LoadReport:
    """What was read and what was skipped (counts by reason)."""

    files: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, what: str, n: int = 1) -> None:
        """Count ``n`` records left out for reason ``what``."""
        if n:
            self.skipped[what] = self.skipped.get(what, 0) + n

    def add_system(self, frame: pd.DataFrame) -> None:
        """Take the counts a system-metrics frame carries in its ``attrs``."""
        self.files += int(frame.attrs.get("files", 0))
        for reason, n in frame.attrs.get("skipped_by_reason", {}).items():
            self.skip(f"{reason} (system metrics)", n)

    def add_events(self, events: pd.DataFrame) -> None:
        """Take the counts a framework-events frame carries in its ``attrs``."""
        self.files += int(events.attrs.get("files", 0))
        self.skip("malformed trace events or truncated traces", int(events.attrs.get("skipped", 0)))


def load_source(source: Source, report: LoadReport | None = None) -> JobData:
    """System metrics and training steps under a profiler-output root (disk or S3); absent parts are empty."""
    report = report if report is not None else LoadReport()
    system = empty_system()
    steps = empty_steps()
    if list_system_files(source):
        system = SystemMetricsReader(source, progress=None).refresh(release=True)
        report.add_system(system)
    if any(t.kind == "pythontimeline" for t in list_trace_files(source)):
        events = framework_metrics(source, kinds=["pythontimeline"], progress=None)
        report.add_events(events)
        steps = step_durations(events)
    return JobData(system=system, steps=steps)


def _first_line(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.readline()
    except OSError:
        return b""


def _is_scalars(path: Path) -> bool:
    return b'"MetricName"' in _first_line(path)


def _load_file(path: Path, report: LoadReport) -> JobData:
    report.files += 1
    trace = trace_file(ObjectInfo(path.name, 0, ""))
    if trace is not None:
        events, skipped = parse_trace(path.read_bytes(), node=trace.node, pid=trace.pid, kind=trace.kind)
        report.skip("malformed trace events or truncated traces", skipped)
        return JobData(steps=step_durations(events))
    if _is_scalars(path):
        return JobData(scalars=read_scalars([path], report.skipped))
    head = _first_line(path)
    if b'"Dimension"' in head and b'"NodeId"' in head:
        table, skips = parse_system_file(path.read_bytes())
        frame = tables_frame([table], {path.name: skips}, source=str(path), files=1)
        for reason, n in skips.items():
            report.skip(f"{reason} (system metrics)", n)
        return JobData(system=frame if len(frame) else empty_system())
    report.skip(f"files of no known format ({path.name})")
    return JobData()


def load_path(path: str | os.PathLike[str], report: LoadReport | None = None) -> JobData:
    """Read a ``profiler-output`` folder (or a folder holding one), or one file, into :class:`JobData`.

    Files: system metrics (``<epoch_s>.<node>.json``), python timelines (steps), and smdebug's
    SageMaker-metrics JSON-lines files (scalars, recognised by their ``MetricName`` key).
    """
    report = report if report is not None else LoadReport()
    root = Path(path)
    if not root.exists():
        raise NotFoundError(f"path {str(root)!r} does not exist")
    if root.is_file():
        return _load_file(root, report)
    source = open_source(root)
    data = load_source(source, report)
    known = {o.key for o in _profiler_files(source)}
    base = Path(source.uri)
    metric_files = [p for p in sorted(root.rglob("*.json")) if p.is_file() and _relative(p, base) not in known
                    and _is_scalars(p)]
    report.files += len(metric_files)
    scalars = read_scalars(metric_files, report.skipped)
    return JobData(system=data.system, steps=data.steps, scalars=scalars)


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return ""


def _profiler_files(source: Source) -> list[ObjectInfo]:
    return [f.info for f in list_system_files(source)] + [t.info for t in list_trace_files(source)]
