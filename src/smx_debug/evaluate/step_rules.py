"""Framework-metric profiler rules: step outliers, initialization time, dataloaders."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from smx_debug.data.frames import JobData, ns
from smx_debug.evaluate.result import RuleResult, encode_parameters
from smx_debug.evaluate.scan import boundaries, counts_before

__all__ = ["dataloader", "max_initialization_time", "step_outlier"]

# smdebug's Dataloader rule waits for this many one-second samples before judging (not a catalog parameter).
DATALOADER_PATIENCE = 10
# StepOutlier judges a phase only once it has more than this many steps (smdebug).
STEP_OUTLIER_MIN_STEPS = 100


def _span(data: JobData) -> tuple[int, int] | None:
    points: list[int] = []
    if data.system_span_ns is not None:
        points.extend(data.system_span_ns)
    if not data.steps.empty:
        points.extend([int(ns(data.steps["start"]).min()), int(ns(data.steps["end"]).max())])
    return (min(points), max(points)) if points else None


def step_outlier(data: JobData, params: dict[str, Any]) -> RuleResult:
    """StepOutlier: step durations above mean + ``stddev`` standard deviations.

    Debugger: "Rule returns True if duration is larger than stddev * standard deviation" - per node
    and phase (TRAIN/EVAL, or only ``mode``), once a phase has more than 100 steps, the rule fires when
    more than ``n_outliers`` steps exceed ``mean + stddev * std``. As in the rule job, each scan
    evaluation that finds the condition adds one to RuleTriggered and its outlier count to Violations.
    """
    rp = encode_parameters(
        {"threshold": params["stddev"], "mode": params["mode"], "n_outliers": params["n_outliers"],
         "stddev": params["stddev"]}
    )
    steps = data.steps
    if params["mode"] is not None:
        steps = steps[steps["mode"].astype(str).str.upper() == str(params["mode"]).upper()]
    if steps.empty:
        return RuleResult(rule="StepOutlier", details={"step_details": {}}, rule_parameters=rp)
    span = _span(data)
    assert span is not None
    bounds = boundaries(span[0], span[1], int(params["scan_interval_us"]))
    k_std = float(params["stddev"])
    triggered = violations = worst = 0
    hits = np.zeros(len(bounds), dtype=bool)
    details: dict[str, Any] = {}
    reasons: list[str] = []
    for (node, mode), grp in steps.groupby(["node", "mode"], sort=True):
        grp = grp.sort_values("end", kind="stable")
        vals = grp["duration"].to_numpy(dtype=np.float64)
        nums = grp["step"].to_numpy()
        n_at = counts_before(ns(grp["end"]), bounds)
        cs, cs2 = np.cumsum(vals), np.cumsum(vals**2)
        for k in np.flatnonzero(n_at > STEP_OUTLIER_MIN_STEPS):  # one pass per scan evaluation
            n = int(n_at[k])
            mean = cs[n - 1] / n
            std = np.sqrt(max(cs2[n - 1] / n - mean**2, 0.0))
            n_out = int((vals[:n] > mean + k_std * std).sum())
            if n_out > params["n_outliers"]:
                triggered += 1
                violations += n_out
                hits[k] = True
                worst = max(worst, n_out)
        if len(vals) <= STEP_OUTLIER_MIN_STEPS:
            continue
        mean, std = float(vals.mean()), float(vals.std())
        out = vals > mean + k_std * std
        probs, edges = np.histogram(vals[~out], bins=100)
        q = np.quantile(vals, [0.99, 0.95, 0.5])
        entry = {
            "step_stats": {"mean": mean, "max": float(vals.max()), "p99": float(q[0]), "p95": float(q[1]),
                           "p50": float(q[2]), "min": float(vals.min())},
            "number_of_outliers": int(out.sum()),
            "phase": f"Step:ModeKeys.{mode}",
            "stddev": round(std, 2),
            "probs": probs.tolist(),
            "binedges": edges.tolist(),
            "step_numbers": nums[out].tolist(),
        }
        prev = details.get(str(node))
        if prev is None or len(vals) > prev.get("_n", 0):  # one entry per node: its busiest phase
            details[str(node)] = {**entry, "_n": len(vals)}
        if out.sum() > params["n_outliers"]:
            reasons.append(
                f"{node} {mode}: {int(out.sum())} steps slower than {mean + k_std * std:.3f} s "
                f"(mean {mean:.3f} s + {k_std:g} x std {std:.3f} s)"
            )
    for entry in details.values():
        entry.pop("_n", None)
    if triggered and not reasons:  # fired while running; the final statistics no longer show enough outliers
        reasons.append(f"at {triggered} scan evaluations more than {params['n_outliers']} steps exceeded "
                       f"mean + {k_std:g} x std of the steps so far (up to {worst})")
    return RuleResult(
        rule="StepOutlier",
        rule_triggered=triggered,
        violations=violations,
        details={"step_details": details},
        datapoints=len(steps),
        rule_parameters=rp,
        trigger_step=int(np.flatnonzero(hits)[0]) + 1 if hits.any() else None,
        message="; ".join(reasons),
    )


def max_initialization_time(data: JobData, params: dict[str, Any]) -> RuleResult:
    """MaxInitializationTime: the training loop starts too late.

    Debugger: "This rule helps to detect if the training intialization is taking too much time. The
    rule waits until first step is available" and fires once ``threshold`` minutes passed without a
    step. As in the rule job, a scan fires when its START is more than ``threshold`` minutes after the
    first scan's start and no step has been seen by the end of the scan (a step starting exactly at the
    scan's end counts as seen, as Debugger's inclusive time-range query does).
    """
    rp = encode_parameters({"threshold": params["threshold"]})
    span = _span(data)
    details: dict[str, Any] = {"step_num": {}}
    if span is None:
        return RuleResult(rule="MaxInitializationTime", details=details, rule_parameters=rp)
    t0 = data.system_span_ns[0] if data.system_span_ns is not None else span[0]
    interval_ns = int(params["scan_interval_us"]) * 1000
    bounds = boundaries(t0, span[1], int(params["scan_interval_us"]))
    starts = np.sort(ns(data.steps["start"])) if not data.steps.empty else np.array([], dtype=np.int64)
    if len(starts):
        details["step_num"] = {"first": int(starts[0] // 1000)}
        if len(starts) > 1:
            details["step_num"]["last"] = int(starts[-1] // 1000)
    if data.system_span_ns is not None:
        details["job_start"] = data.system_span_ns[0] / 1e9
        details["job_end"] = data.system_span_ns[1] / 1e9
    scan_start = bounds - interval_ns
    waited = scan_start - scan_start[0] > int(params["threshold"]) * 60 * 10**9
    no_step = np.searchsorted(starts, bounds, side="right") == 0
    hits = waited & no_step
    count = int(hits.sum())
    msg = ""
    if count:
        first = (starts[0] - t0) / 60e9 if len(starts) else None
        msg = (
            f"first step after {first:.1f} min" if first is not None else "no training step recorded"
        ) + f" (threshold {params['threshold']} min)"
    return RuleResult(
        rule="MaxInitializationTime",
        rule_triggered=count,
        violations=count,
        details=details,
        datapoints=len(starts),
        rule_parameters=rp,
        trigger_step=int(np.flatnonzero(hits)[0]) + 1 if count else None,
        message=msg,
    )


def dataloader(data: JobData, params: dict[str, Any]) -> RuleResult:
    """Dataloader: too few or too many parallel dataloader processes for the CPU cores.

    Debugger: "This rule helps to detect how many dataloader processes are running in parallel and
    whether the total number is equal the number of available CPU cores" - the median number of
    distinct dataloader processes per second is compared with ``min_threshold`` and
    ``max_threshold`` percent of the cores.
    """
    rp = encode_parameters({"min_threshold": params["min_threshold"], "max_threshold": params["max_threshold"]})
    events = data.dataloader
    if events.empty:
        return RuleResult(rule="Dataloader", rule_parameters=rp)
    cpu = data.totals("CPUUtilization")
    cores = max((n for _, _, n in cpu.values()), default=0)
    start, end = ns(events["start"]), ns(events["end"])
    seconds = start // 10**9
    per_second = (
        pd.DataFrame({"s": seconds, "pid": events["pid"].to_numpy()}).groupby("s")["pid"].nunique().sort_index()
    )
    parallel = per_second.to_numpy()
    sec = per_second.index.to_numpy()
    span = _span(data) or (int(start.min()), int(end.max()))
    bounds = boundaries(min(span[0], int(start.min())), max(span[1], int(end.max())), int(params["scan_interval_us"]))
    n_at = counts_before(sec * 10**9, bounds)
    violations = 0
    first: int | None = None
    for k in np.flatnonzero(n_at > DATALOADER_PATIENCE):  # one pass per scan evaluation
        med = int(np.median(parallel[: n_at[k]]))
        bad = int(med < cores * params["min_threshold"] / 100) + int(med > cores * params["max_threshold"] / 100)
        violations += bad
        if bad and first is None:
            first = int(k) + 1
    durations = (end - start) / 1e9
    probs, edges = np.histogram(durations, bins=100)
    median = int(np.median(parallel))
    details: dict[str, Any] = {}
    for key in ("pin_memory", "num_workers", "prefetch"):
        if data.dataloader_info.get(key) is not None:
            details[key] = data.dataloader_info[key]
    details.update(
        {
            "cores": cores,
            "dataloaders": median,
            "dataloading_time": {
                "p25": float(np.quantile(durations, 0.25)),
                "p50": float(np.quantile(durations, 0.5)),
                "p95": float(np.quantile(durations, 0.95)),
                "probs": probs.tolist(),
                "binedges": edges.tolist(),
            },
        }
    )
    msg = f"median {median} parallel dataloader processes for {cores} cores" if violations else ""
    return RuleResult(
        rule="Dataloader",
        rule_triggered=1 if violations else 0,
        violations=violations,
        details=details,
        datapoints=len(events),
        rule_parameters=rp,
        trigger_step=first,
        message=msg,
    )
