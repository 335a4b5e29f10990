"""Local inputs: a job's ``profiler-output`` folder (or single files) read into :class:`JobData`.

System metrics come from the reports package's reader when it is importable (it also reads S3); the
small readers here cover single files, step timelines and the SageMaker-metrics JSON-lines files
smdebug writes. Malformed lines and events are skipped and counted, never fatal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.errors import NotFoundError, SmxDebugError
from smx_debug.evaluate.data import (
    JobData,
    empty_scalars,
    empty_steps,
    empty_system,
)

__all__ = ["LoadReport", "load_path", "read_scalars", "read_steps", "read_system"]

_TIMELINE = re.compile(r"(?P<end>\d+)_(?P<pid>\d+)-(?P<node>.+?)_pythontimeline\.json$")
_MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")


@dataclass
class LoadReport:
    """What was read and what was skipped."""

    files: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, what: str, n: int = 1) -> None:
        if n:
            self.skipped[what] = self.skipped.get(what, 0) + n


def _json_lines(path: Path, report: LoadReport) -> list[dict[str, Any]]:
    rows = []
    bad = 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(rec, dict):
            rows.append(rec)
        else:
            bad += 1
    report.skip(f"malformed lines in {path.name}", bad)
    return rows


def read_system(paths: list[Path], report: LoadReport | None = None) -> pd.DataFrame:
    """System-metrics JSON-lines files -> the long frame of docs/CONTRACTS.md."""
    report = report or LoadReport()
    rows: list[dict[str, Any]] = []
    for p in paths:
        report.files += 1
        rows.extend(_json_lines(p, report))
    if not rows:
        return empty_system()
    df = pd.DataFrame(rows)
    need = ["Timestamp", "NodeId", "Type", "Dimension", "Value"]
    if any(c not in df.columns for c in need):
        report.skip("records without the system-metrics keys", len(df))
        return empty_system()
    if "Name" not in df.columns:
        df["Name"] = None
    value = pd.to_numeric(df["Value"], errors="coerce")
    ts = pd.to_numeric(df["Timestamp"], errors="coerce")
    ok = value.notna() & ts.notna() & df["NodeId"].notna() & df["Dimension"].notna()
    report.skip("incomplete system records", int((~ok).sum()))
    df = df[ok]
    out = pd.DataFrame(
        {
            "timestamp": pd.to_datetime((ts[ok] * 1e9).round().astype("int64"), utc=True),
            "node": df["NodeId"].astype(str).to_numpy(),
            "type": df["Type"].astype(str).to_numpy(),
            "name": df["Name"].fillna("total").astype(str).to_numpy(),
            "dimension": df["Dimension"].astype(str).to_numpy(),
            "value": value[ok].astype("float64").to_numpy(),
        }
    )
    return out.sort_values("timestamp", kind="stable").reset_index(drop=True)


def read_steps(paths: list[Path], report: LoadReport | None = None) -> pd.DataFrame:
    """smdebug python-timeline traces -> step durations (``Step:ModeKeys.<MODE>`` X events)."""
    report = report or LoadReport()
    rows: list[dict[str, Any]] = []
    for p in paths:
        report.files += 1
        m = _TIMELINE.search(p.name)
        node = m.group("node") if m else "algo-1"
        try:
            events = json.loads(p.read_text(errors="replace"))
        except json.JSONDecodeError:
            report.skip(f"unreadable timeline {p.name}")
            continue
        if not isinstance(events, list):
            report.skip(f"unreadable timeline {p.name}")
            continue
        t0 = next(
            (e.get("args", {}).get("start_time_since_epoch_in_micros") for e in events
             if isinstance(e, dict) and e.get("name") == "process_name" and e.get("ph") == "M"
             and "start_time_since_epoch_in_micros" in e.get("args", {})),
            0,
        )
        for e in events:
            if not isinstance(e, dict) or e.get("ph") != "X" or not str(e.get("name", "")).startswith("Step:ModeKeys."):
                continue
            try:
                start = int(t0) + int(e["ts"])
                dur = int(e["dur"])
                step = int(e.get("args", {})["step_num"])
            except (KeyError, TypeError, ValueError):
                report.skip("incomplete step events")
                continue
            rows.append({"node": node, "rank": int(e.get("args", {}).get("pid", m.group("pid") if m else 0)),
                         "mode": str(e["name"]).split(".", 1)[1], "step": step,
                         "start_us": start, "dur_us": dur})
    if not rows:
        return empty_steps()
    df = pd.DataFrame(rows)
    starts = pd.to_datetime(df["start_us"].to_numpy() * 1000, utc=True)
    ends = pd.to_datetime((df["start_us"] + df["dur_us"]).to_numpy() * 1000, utc=True)
    return pd.DataFrame(
        {"node": df["node"], "rank": df["rank"].astype("int64"), "mode": df["mode"],
         "step": df["step"].astype("int64"), "start": starts, "end": ends,
         "duration": df["dur_us"].to_numpy(dtype=np.float64) / 1e6}
    ).sort_values(["node", "start"], kind="stable").reset_index(drop=True)


def read_scalars(paths: list[Path], report: LoadReport | None = None) -> pd.DataFrame:
    """SageMaker-metrics JSON-lines (``{MetricName: "loss_TRAIN", Value, Timestamp, IterationNumber}``)."""
    report = report or LoadReport()
    rows: list[dict[str, Any]] = []
    for p in paths:
        report.files += 1
        rows.extend(_json_lines(p, report))
    if not rows:
        return empty_scalars()
    df = pd.DataFrame(rows)
    if any(c not in df.columns for c in ("MetricName", "Value", "Timestamp")):
        report.skip("records without MetricName/Value/Timestamp", len(df))
        return empty_scalars()
    if "IterationNumber" not in df.columns:
        df["IterationNumber"] = np.nan
    value = pd.to_numeric(df["Value"], errors="coerce")
    ts = pd.to_numeric(df["Timestamp"], errors="coerce")
    step = pd.to_numeric(df["IterationNumber"], errors="coerce")
    ok = value.notna() & ts.notna() & df["MetricName"].notna()
    report.skip("incomplete metric records", int((~ok).sum()))
    names = df.loc[ok, "MetricName"].astype(str)
    split = names.str.rsplit("_", n=1, expand=True)
    if split.shape[1] == 1:
        split[1] = None
    has_mode = split[1].isin(_MODES)
    metric = np.where(has_mode, split[0], names)
    mode = np.where(has_mode, split[1], "GLOBAL")
    return pd.DataFrame(
        {"metric": metric, "mode": mode, "step": step[ok].fillna(-1).astype("int64").to_numpy(),
         "timestamp": pd.to_datetime((ts[ok] * 1e9).round().astype("int64"), utc=True),
         "value": value[ok].astype("float64").to_numpy()}
    ).reset_index(drop=True)


def _first_line(path: Path) -> str:
    try:
        with path.open(errors="replace") as fh:
            return fh.readline()
    except OSError:
        return ""


def _system_via_reports(root: Path) -> pd.DataFrame | None:
    """The reports package's (fast) reader for a folder; None where it does not know the layout."""
    from smx_debug.reports.system import system_metrics

    try:
        df = system_metrics(root, progress=False)
    except SmxDebugError:  # e.g. a layout it does not know: fall back to our reader
        return None
    return df if len(df) else None


def load_path(path: str | Path, report: LoadReport | None = None) -> JobData:
    """Read a ``profiler-output`` folder, a folder of metric files, or one file into :class:`JobData`."""
    report = report or LoadReport()
    root = Path(path)
    if not root.exists():
        raise NotFoundError(f"path {str(root)!r} does not exist")
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if p.is_file())
    sys_files, step_files, scalar_files = [], [], []
    for p in files:
        if _TIMELINE.search(p.name):
            step_files.append(p)
            continue
        head = _first_line(p)
        if '"MetricName"' in head:
            scalar_files.append(p)
        elif '"Dimension"' in head and '"NodeId"' in head:
            sys_files.append(p)
    system = None
    if root.is_dir() and sys_files and any("system" in p.parts for p in sys_files):
        system = _system_via_reports(root)
    if system is None:
        system = read_system(sys_files, report)
    return JobData(system=system, steps=read_steps(step_files, report), scalars=read_scalars(scalar_files, report))
