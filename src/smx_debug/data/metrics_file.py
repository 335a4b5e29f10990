"""smdebug's SageMaker-metrics JSON-lines files (``{MetricName: "loss_TRAIN", Value, Timestamp, IterationNumber}``).

The scalar rules read them; malformed lines and implausible timestamps are skipped and counted, never fatal.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from smx_debug import _json as bounded_json
from smx_debug.data.frames import empty_scalars
from smx_debug.data.system import TIMESTAMP_RANGE_S

_MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")


def _records(path: Path, skipped: dict[str, int]) -> list[dict[str, Any]]:
    rows = []
    bad = 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            rec = bounded_json.loads(line)
        except ValueError:  # also bytes that are not UTF-8, and nesting too deep
            bad += 1
            continue
        if isinstance(rec, dict):
            rows.append(rec)
        else:
            bad += 1
    if bad:
        skipped["malformed lines (metrics files)"] = skipped.get("malformed lines (metrics files)", 0) + bad
    return rows


def read_scalars(paths: Iterable[Path], skipped: dict[str, int] | None = None) -> pd.DataFrame:
    """The scalars frame (``metric``, ``mode``, ``step``, ``timestamp``, ``value``) of metrics files.

    ``skipped`` (if given) receives counts of what was left out, by reason.
    """
    counts: dict[str, int] = skipped if skipped is not None else {}
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(_records(Path(p), counts))
    if not rows:
        return empty_scalars()
    df = pd.DataFrame(rows)
    if any(c not in df.columns for c in ("MetricName", "Value", "Timestamp")):
        counts["records without MetricName/Value/Timestamp"] = len(df)
        return empty_scalars()
    if "IterationNumber" not in df.columns:
        df["IterationNumber"] = np.nan
    value = pd.to_numeric(df["Value"], errors="coerce")
    ts = pd.to_numeric(df["Timestamp"], errors="coerce")
    step = pd.to_numeric(df["IterationNumber"], errors="coerce")
    ok = value.notna() & ts.notna() & df["MetricName"].notna()
    if int((~ok).sum()):
        counts["incomplete metric records"] = int((~ok).sum())
    plausible = ts.between(*TIMESTAMP_RANGE_S, inclusive="left")
    if int((ok & ~plausible).sum()):
        counts["timestamps out of range (metrics files)"] = int((ok & ~plausible).sum())
    ok &= plausible
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
