"""Framework-metric profiler rules: step outliers, initialization time, dataloaders."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from smx_debug.data.frames import JobData, ns
from smx_debug.evaluate.result import RuleResult, encode_parameters
from smx_debug.evaluate.scan import boundaries, counts_before
from smx_debug.rules.registry import RuleParams

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


SCAN_COLUMNS = ["node", "mode", "scan", "scan_end", "steps", "mean", "std", "threshold", "outliers", "n_outliers",
                "fires"]
_SCAN_DTYPES: dict[str, Any] = {"node": object, "mode": object, "scan": "int64", "scan_end": "datetime64[ns, UTC]",
                "steps": "int64", "mean": "float64", "std": "float64", "threshold": "float64", "outliers": "int64",
                "n_outliers": "int64", "fires": bool}


def step_outlier_scans(
    steps: pd.DataFrame,
    *,
    stddev: float = 3.0,
    n_outliers: int = 10,
    mode: str | None = None,
    scan_interval_us: int = 60_000_000,
    start: object = None,
    end: object = None,
) -> pd.DataFrame:
    """What StepOutlier judges at each scan evaluation: one row per node, mode and scan (columns ``SCAN_COLUMNS``).

    Debugger's rule job evaluates every ``scan_interval_us`` (a scan ends each minute from the job's first minute,
    ``start``, default the first step's start) and judges, per node and phase, all the steps that ended before the
    scan's end (``steps`` so far, once more than 100): ``threshold`` is their mean + ``stddev`` x std (the
    population std, numpy's, as the rule), ``outliers`` the steps above it, and the scan ``fires`` when there are
    more than ``n_outliers``. A burst of slow steps can fire early and vanish in the whole job's statistics, whose
    spread the burst itself widens. ``mode`` keeps only that phase (TRAIN, EVAL).
    """
    rows: list[dict[str, Any]] = []
    if mode is not None:
        steps = steps[steps["mode"].astype(str).str.upper() == str(mode).upper()]
    if steps.empty:
        return pd.DataFrame(rows, columns=SCAN_COLUMNS).astype(_SCAN_DTYPES)
    t0 = int(pd.Timestamp(start).value) if start is not None else int(ns(steps["start"]).min())  # type: ignore[arg-type]
    t1 = int(pd.Timestamp(end).value) if end is not None else int(ns(steps["end"]).max())  # type: ignore[arg-type]
    bounds = boundaries(t0, t1, int(scan_interval_us))
    k_std = float(stddev)
    for (node, phase), grp in steps.groupby(["node", "mode"], sort=True, observed=True):
        grp = grp.sort_values("end", kind="stable")
        vals = grp["duration"].to_numpy(dtype=np.float64)
        n_at = counts_before(ns(grp["end"]), bounds)
        cs, cs2 = np.cumsum(vals), np.cumsum(vals**2)
        for k in np.flatnonzero(n_at > STEP_OUTLIER_MIN_STEPS):  # one pass per scan evaluation
            n = int(n_at[k])
            mean = cs[n - 1] / n
            std = float(np.sqrt(max(cs2[n - 1] / n - mean**2, 0.0)))
            thr = float(mean + k_std * std)
            n_out = int((vals[:n] > thr).sum())
            rows.append({"node": str(node), "mode": str(phase), "scan": int(k) + 1,
                         "scan_end": pd.Timestamp(int(bounds[k]), tz="UTC"), "steps": n, "mean": float(mean),
                         "std": std, "threshold": thr, "outliers": n_out, "n_outliers": int(n_outliers),
                         "fires": n_out > n_outliers})
    return pd.DataFrame(rows, columns=SCAN_COLUMNS).astype(_SCAN_DTYPES)


def step_outlier(data: JobData, params: RuleParams) -> RuleResult:
    """StepOutlier: step durations above mean + ``stddev`` standard deviations.

    Debugger: "Rule returns True if duration is larger than stddev * standard deviation" - per node
    and phase (TRAIN/EVAL, or only ``mode``), once a phase has more than 100 steps, the rule fires when
    more than ``n_outliers`` steps exceed ``mean + stddev * std`` of the steps so far
    (:func:`step_outlier_scans`). As in the rule job, each scan evaluation that finds the condition adds one to
    RuleTriggered and its outlier count to Violations. The message says at which scan it first fired, with that
    scan's figures, and what the whole job's steps show.
    """
    rp = encode_parameters(
        {"threshold": params.stddev, "mode": params.mode, "n_outliers": params.n_outliers,
         "stddev": params.stddev}
    )
    steps = data.steps
    if params.mode is not None:
        steps = steps[steps["mode"].astype(str).str.upper() == params.mode.upper()]
    if steps.empty:
        return RuleResult(rule="StepOutlier", details={"step_details": {}}, rule_parameters=rp)
    span = _span(data)
    assert span is not None
    k_std = params.stddev
    scans = step_outlier_scans(
        steps, stddev=k_std, n_outliers=params.n_outliers, scan_interval_us=params.scan_interval_us,
        start=pd.Timestamp(span[0], tz="UTC"), end=pd.Timestamp(span[1], tz="UTC"),
    )
    fired = scans[scans["fires"]]
    triggered, violations = len(fired), int(fired["outliers"].sum())
    details: dict[str, Any] = {}
    whole: list[str] = []
    for (node, mode), grp in steps.groupby(["node", "mode"], sort=True, observed=True):
        grp = grp.sort_values("end", kind="stable")
        vals = grp["duration"].to_numpy(dtype=np.float64)
        nums = grp["step"].to_numpy()
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
        whole.append(f"{node} {mode} {int(out.sum())} of {len(vals)} steps slower than {mean + k_std * std:.3f} s "
                     f"(mean {mean:.3f} s + {k_std:g} x std {std:.3f} s)")
    for entry in details.values():
        entry.pop("_n", None)
    message = ""
    if triggered:
        first = fired.iloc[0]
        message = (
            f"fired at scan {int(first['scan'])} (steps ended by {first['scan_end']:%H:%M:%S} UTC): {first['node']} "
            f"{first['mode']} had {int(first['outliers'])} of {int(first['steps'])} steps slower than "
            f"{first['threshold']:.3f} s (mean {first['mean']:.3f} s + {k_std:g} x std {first['std']:.3f} s), more "
            f"than n_outliers {params.n_outliers}; condition met at {triggered} of {len(scans)} scans; "
            f"over the whole job: " + "; ".join(whole)
        )
    return RuleResult(
        rule="StepOutlier",
        rule_triggered=triggered,
        violations=violations,
        details={"step_details": details},
        datapoints=len(steps),
        rule_parameters=rp,
        trigger_step=int(fired["scan"].min()) if triggered else None,
        message=message,
    )


def max_initialization_time(data: JobData, params: RuleParams) -> RuleResult:
    """MaxInitializationTime: the training loop starts too late.

    Debugger: "This rule helps to detect if the training intialization is taking too much time. The
    rule waits until first step is available" and fires once ``threshold`` minutes passed without a
    step. As in the rule job, a scan fires when its START is more than ``threshold`` minutes after the
    first scan's start and no step has been seen by the end of the scan (a step starting exactly at the
    scan's end counts as seen, as Debugger's inclusive time-range query does).
    """
    rp = encode_parameters({"threshold": params.threshold})
    span = _span(data)
    details: dict[str, Any] = {"step_num": {}}
    if span is None:
        return RuleResult(rule="MaxInitializationTime", details=details, rule_parameters=rp)
    t0 = data.system_span_ns[0] if data.system_span_ns is not None else span[0]
    interval_ns = params.scan_interval_us * 1000
    bounds = boundaries(t0, span[1], params.scan_interval_us)
    starts = np.sort(ns(data.steps["start"])) if not data.steps.empty else np.array([], dtype=np.int64)
    if len(starts):
        details["step_num"] = {"first": int(starts[0] // 1000)}
        if len(starts) > 1:
            details["step_num"]["last"] = int(starts[-1] // 1000)
    if data.system_span_ns is not None:
        details["job_start"] = data.system_span_ns[0] / 1e9
        details["job_end"] = data.system_span_ns[1] / 1e9
    scan_start = bounds - interval_ns
    waited = scan_start - scan_start[0] > params.threshold * 60 * 10**9
    no_step = np.searchsorted(starts, bounds, side="right") == 0
    hits = waited & no_step
    count = int(hits.sum())
    msg = ""
    if count:
        first = (starts[0] - t0) / 60e9 if len(starts) else None
        msg = (
            f"first step after {first:.1f} min" if first is not None else "no training step recorded"
        ) + f" (threshold {params.threshold} min)"
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


def dataloader(data: JobData, params: RuleParams) -> RuleResult:
    """Dataloader: too few or too many parallel dataloader processes for the CPU cores.

    Debugger: "This rule helps to detect how many dataloader processes are running in parallel and
    whether the total number is equal the number of available CPU cores" - the median number of
    distinct dataloader processes per second is compared with ``min_threshold`` and
    ``max_threshold`` percent of the cores.
    """
    rp = encode_parameters({"min_threshold": params.min_threshold, "max_threshold": params.max_threshold})
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
    bounds = boundaries(min(span[0], int(start.min())), max(span[1], int(end.max())), params.scan_interval_us)
    n_at = counts_before(sec * 10**9, bounds)
    violations = 0
    first: int | None = None
    for k in np.flatnonzero(n_at > DATALOADER_PATIENCE):  # one pass per scan evaluation
        med = int(np.median(parallel[: n_at[k]]))
        bad = int(med < cores * params.min_threshold / 100) + int(med > cores * params.max_threshold / 100)
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
