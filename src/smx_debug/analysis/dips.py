"""Why did the GPUs go idle? Each dip of GPU utilization during training, matched to what the framework did.

Debugger's interactive analysis (``find_time_annotations``) listed the framework events around moments of
low utilization. Here every dip is a period, its cost is the GPU time lost against the node's own busy
level, and its cause is the framework event that overlaps it most (dataloader, forward, backward, a
Python operator), so the causes can be ranked by GPU time lost.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from smx_debug.data.frames import JobData, ns
from smx_debug.errors import ConfigError

DIP_COLUMNS = [
    "node", "start", "end", "duration_s", "gpu_util_mean", "baseline", "gpu_seconds_lost", "step", "mode",
    "cause", "cause_event", "cause_share",
]
CAUSE_COLUMNS = ["cause", "cause_event", "dips", "gpu_seconds_lost", "share_percent", "duration_s", "example_steps"]

_CATEGORIES = (
    ("dataloader", re.compile(r"dataloader|dataset::|getnext|dataiterator|data_loader|iteratorgetnext", re.I)),
    ("backward", re.compile(r"backward|grad", re.I)),
    ("forward", re.compile(r"forward", re.I)),
    ("collective", re.compile(r"allreduce|allgather|broadcast|nccl|horovod|negotiate", re.I)),
    ("checkpoint", re.compile(r"checkpoint|save|serialize", re.I)),
)
BETWEEN_STEPS = "between steps (no framework event)"
IN_STEP = "step (no finer framework events)"
BUSY_PERCENTILE = 90.0
NO_TRACE = "no framework trace"


def classify_event(name: str) -> str:
    """The phase a framework event belongs to: dataloader, forward, backward, collective, checkpoint, operator."""
    for category, pattern in _CATEGORIES:
        if pattern.search(name):
            return category
    return "operator"


def _empty() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series([], dtype=object) for c in DIP_COLUMNS})
    for c in ("start", "end"):
        frame[c] = pd.Series([], dtype="datetime64[ns, UTC]")
    for c in ("duration_s", "gpu_util_mean", "baseline", "gpu_seconds_lost", "cause_share"):
        frame[c] = pd.Series([], dtype="float64")
    frame["step"] = pd.Series([], dtype="Int64")
    return frame


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of every run of True."""
    if not mask.any():
        return []
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(padded)
    return list(zip(np.flatnonzero(d == 1).tolist(), (np.flatnonzero(d == -1) - 1).tolist(), strict=True))


def _events_by_node(events: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]]:
    """Per node: X events other than steps as sorted (start ns, end ns, name code) and the names."""
    sel = events[(events["phase"] == "X") & events["duration"].notna()
                 & ~events["name"].astype(str).str.startswith("Step:")]
    if sel.empty:
        return {}
    start = ns(sel["start"])
    end = start + np.round(sel["duration"].to_numpy(dtype=float) * 1e9).astype(np.int64)
    name_codes, names = pd.factorize(sel["name"].astype(str))
    node_codes, nodes = pd.factorize(sel["node"].astype(str))
    out = {}
    for k, node in enumerate(nodes):
        idx = np.flatnonzero(node_codes == k)
        order = idx[np.argsort(start[idx], kind="stable")]
        out[str(node)] = (start[order], end[order], name_codes[order], [str(n) for n in names])
    return out


def gpu_dips(
    data: JobData, events: pd.DataFrame | None = None, *, threshold: float = 0.5, min_duration_s: float = 0.0,
) -> pd.DataFrame:
    """Every period where a node's mean GPU utilization falls below ``threshold`` x its busy level in training.

    The busy level is the 90th percentile of the node's mean GPU utilization during training (steps bound
    it), so a long stall that idles the GPUs for most of the job is still one dip, not the new normal.

    Args:
        data: the job's frames (system metrics; steps bound the training loop when present).
        events: framework events (:func:`smx_debug.data.framework_metrics`); None or empty leaves the
            cause as "no framework trace".
        threshold: fraction of the node's busy level below which a sample is a dip.
        min_duration_s: drop shorter dips.

    Returns:
        One row per dip (:data:`DIP_COLUMNS`), largest ``gpu_seconds_lost`` first. ``gpu_seconds_lost`` is
        (busy level - utilization) x sample interval x GPUs, summed over the dip; ``cause_share`` is the share
        of the dip covered by ``cause_event``; a dip inside steps with no finer framework event has the cause
        "step (no finer framework events)".
    """
    if not 0 < threshold < 1:
        raise ConfigError(f"threshold must be between 0 and 1, got {threshold!r}", field="threshold", value=threshold)
    if min_duration_s < 0:
        raise ConfigError(f"min_duration_s must not be negative, got {min_duration_s!r}", field="min_duration_s",
                          value=min_duration_s)
    steps = data.steps
    has_events = events is not None and len(events) > 0
    by_node = _events_by_node(events) if events is not None and has_events else {}
    step_groups = {str(k): g for k, g in steps.groupby("node", sort=False, observed=True)}
    rows: list[dict[str, object]] = []
    for node, (ts, total, n_gpus) in data.totals("GPUUtilization").items():
        if len(ts) < 3:
            continue
        util = total / max(n_gpus, 1)
        node_steps = step_groups.get(node, steps.iloc[0:0])
        s_start = ns(node_steps["start"]) if len(node_steps) else np.zeros(0, np.int64)
        s_end = ns(node_steps["end"]) if len(node_steps) else np.zeros(0, np.int64)
        window = (ts >= s_start.min()) & (ts <= s_end.max()) if len(s_start) else np.ones(len(ts), bool)
        if window.sum() < 3:
            continue
        interval = int(np.median(np.diff(ts)))
        baseline = float(np.percentile(util[window], BUSY_PERCENTILE))
        if baseline < 5.0:  # the GPUs were never busy: nothing dips
            continue
        order = np.argsort(s_start, kind="stable")
        s_start, s_end = s_start[order], s_end[order]
        s_num = node_steps["step"].to_numpy()[order] if len(node_steps) else np.zeros(0)
        s_mode = node_steps["mode"].astype(str).to_numpy()[order] if len(node_steps) else np.zeros(0, object)
        e_start, e_end, e_code, e_names = by_node.get(node) or (np.zeros(0, np.int64), np.zeros(0, np.int64),
                                                                np.zeros(0, np.int64), [])
        longest = int((e_end - e_start).max()) if len(e_start) else 0
        for first, last in _runs((util < threshold * baseline) & window):
            a, b = int(ts[first]), int(ts[last]) + interval
            dur_s = (b - a) / 1e9
            if dur_s < min_duration_s:
                continue
            lost = float(np.clip(baseline - util[first:last + 1], 0, None).sum()) / 100.0 * interval / 1e9 * n_gpus
            step: int | None = None
            mode = ""
            i = int(np.searchsorted(s_start, b, side="left"))
            cand = np.arange(max(0, i - 64), i)
            if len(cand):
                ov = np.minimum(s_end[cand], b) - np.maximum(s_start[cand], a)
                if ov.max() > 0:
                    k = cand[int(np.argmax(ov))]
                    step, mode = int(s_num[k]), str(s_mode[k])
            cause, cause_event, share = (NO_TRACE, "", 0.0) if not has_events else (BETWEEN_STEPS, "", 0.0)
            if len(e_start):
                lo = int(np.searchsorted(e_start, a - longest, side="left"))
                hi = int(np.searchsorted(e_start, b, side="left"))
                if hi > lo:
                    ov = np.minimum(e_end[lo:hi], b) - np.maximum(e_start[lo:hi], a)
                    pos = ov > 0
                    if pos.any():
                        codes = e_code[lo:hi][pos]
                        per = np.bincount(codes, weights=ov[pos].astype(float))
                        best = int(np.argmax(per))
                        cause_event = e_names[best]
                        share = min(1.0, float(per[best]) / (b - a))
                        cause = classify_event(cause_event)
            if cause == BETWEEN_STEPS and step is not None:
                cause, cause_event = IN_STEP, f"Step:ModeKeys.{mode}"
            rows.append({
                "node": node, "start": a, "end": b, "duration_s": dur_s, "gpu_util_mean":
                float(util[first:last + 1].mean()), "baseline": baseline, "gpu_seconds_lost": lost, "step": step,
                "mode": mode, "cause": cause, "cause_event": cause_event, "cause_share": share,
            })
    if not rows:
        return _empty()
    out = pd.DataFrame(rows, columns=DIP_COLUMNS)
    out["start"] = pd.to_datetime(out["start"].astype("int64"), utc=True)
    out["end"] = pd.to_datetime(out["end"].astype("int64"), utc=True)
    out["step"] = pd.array(out["step"].tolist(), dtype="Int64")
    return out.sort_values("gpu_seconds_lost", ascending=False, kind="stable").reset_index(drop=True)


def dip_causes(dips: pd.DataFrame) -> pd.DataFrame:
    """The causes of :func:`gpu_dips`, ranked by GPU time lost (:data:`CAUSE_COLUMNS`)."""
    if dips.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in CAUSE_COLUMNS})
    total = float(dips["gpu_seconds_lost"].sum())
    groups = []
    for (cause, event), grp in dips.groupby(["cause", "cause_event"], sort=False):
        steps = sorted(int(s) for s in grp["step"].dropna().unique())
        groups.append({
            "cause": cause, "cause_event": event, "dips": len(grp),
            "gpu_seconds_lost": float(grp["gpu_seconds_lost"].sum()),
            "share_percent": 100.0 * float(grp["gpu_seconds_lost"].sum()) / total if total else 0.0,
            "duration_s": float(grp["duration_s"].sum()), "example_steps": steps[:8],
        })
    out = pd.DataFrame(groups, columns=CAUSE_COLUMNS)
    return out.sort_values("gpu_seconds_lost", ascending=False, kind="stable").reset_index(drop=True)
