"""The statistics the Debugger profiler report shows, computed from our DataFrames (vectorised)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from smx_debug.errors import ConfigError

PERCENTILES = (0.5, 0.9, 0.95, 0.99)
# smdebug_rulesconfig's StepOutlier default: a step is an outlier above mean + 3 standard deviations.
DEFAULT_STDDEV = 3.0


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ConfigError(f"{what} lacks columns {missing}", field=what, value=list(df.columns))


def unit_of(dimension: str) -> tuple[str, float]:
    """The display unit of a system-metric dimension and the factor from its recorded value to that unit.

    Utilizations are percent, byte rates MB/s (10^6 bytes per second), IOPS operations per second.
    """
    if dimension.endswith("Utilization") or dimension.endswith("Percent"):
        return "%", 1.0
    if "BytesPerSecond" in dimension:
        return "MB/s", 1e-6
    if dimension == "IOPS":
        return "ops/s", 1.0
    return "", 1.0


def utilization_stats(
    system: pd.DataFrame, by: Sequence[str] = ("node", "dimension"), *, decimals: int = 2
) -> pd.DataFrame:
    """Per group (default node and dimension): count, mean, min, max, p50, p90, p95, p99 of ``value``.

    Each row carries its ``unit`` (see :func:`unit_of`: %, MB/s, ops/s) and its numbers in that unit, rounded to
    ``decimals``, so a table mixing utilizations and byte rates reads as plain numbers. Grouping without
    ``dimension`` keeps the recorded values and an empty unit.
    """
    _need(system, [*by, "value"], "system")
    if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
        raise ConfigError(f"decimals must be a non-negative integer, got {decimals!r}", field="decimals",
                          value=decimals)
    g = system.groupby(list(by), observed=True, sort=True)["value"]
    out = g.agg(["count", "mean", "min", "max"])
    q = g.quantile(np.array(PERCENTILES)).unstack(-1)
    q.columns = [f"p{round(p * 100)}" for p in PERCENTILES]
    out = out.join(q).reset_index()
    values = ["mean", "min", "max", *q.columns]
    if "dimension" in out.columns:
        units = [unit_of(str(d)) for d in out["dimension"]]
        factor = np.array([f for _, f in units])
        out[values] = out[values].to_numpy() * factor[:, None]
        out.insert(list(out.columns).index("dimension") + 1, "unit", [u for u, _ in units])
    out[values] = out[values].round(decimals)
    out["count"] = out["count"].astype("int64")
    return out


def training_phases(
    steps: pd.DataFrame, job_start: object = None, job_end: object = None
) -> pd.DataFrame:
    """Initialization (job start to first step), training loop, finalization (last step to job end).

    ``job_start``/``job_end`` default to the first step start and the last step end (the outer phases are
    then empty); pass the job's times (DescribeTrainingJob, or the first and last system metric).
    """
    _need(steps, ["start", "end"], "steps")
    if steps.empty:
        raise ConfigError("steps is empty: no training steps to find phases in", field="steps", value=0)
    first, last = steps["start"].min(), steps["end"].max()
    start = pd.Timestamp(job_start) if job_start is not None else first  # type: ignore[arg-type]
    end = pd.Timestamp(job_end) if job_end is not None else last  # type: ignore[arg-type]
    start = start.tz_localize("UTC") if start.tzinfo is None else start
    end = end.tz_localize("UTC") if end.tzinfo is None else end
    bounds = [
        ("initialization", start, min(first, end)),
        ("training_loop", first, last),
        ("finalization", max(last, start), end),
    ]
    total = max((end - start).total_seconds(), 0.0)
    rows = []
    for phase, a, b in bounds:
        secs = max((b - a).total_seconds(), 0.0)
        rows.append({"phase": phase, "start": a, "end": b, "seconds": secs,
                     "percent": 100.0 * secs / total if total else np.nan})
    return pd.DataFrame(rows)


def _check_stddev(stddev: float) -> None:
    if isinstance(stddev, bool) or not isinstance(stddev, int | float) or not stddev > 0:
        raise ConfigError(f"stddev must be a positive number, got {stddev!r}", field="stddev", value=stddev)


def step_statistics(
    steps: pd.DataFrame, stddev: float = DEFAULT_STDDEV, by: Sequence[str] = ("node", "rank", "mode")
) -> pd.DataFrame:
    """Per group: count, mean, std, min, p50, p95, max of ``duration`` (``unit`` s) and the number of outliers.

    An outlier is a step with duration > mean + ``stddev`` * std of its group, std being the population standard
    deviation (numpy's, as StepOutlier's code). These are the whole job's statistics; StepOutlier judges the steps
    seen so far at each scan, and a burst of slow steps it fired on can be within the whole job's spread: the
    rule's own view is :func:`smx_debug.evaluate.step_rules.step_outlier_scans` (``analysis.step_outlier_scans``).
    """
    _check_stddev(stddev)
    _need(steps, [*by, "duration"], "steps")
    g = steps.groupby(list(by), observed=True, sort=True)["duration"]
    out = g.agg(["count", "mean", "min", "max"])
    out["std"] = g.std(ddof=0)
    q = g.quantile(np.array([0.5, 0.95])).unstack(-1)
    q.columns = ["p50", "p95"]
    out = out.join(q)
    thr = g.transform("mean") + stddev * g.transform(lambda v: v.std(ddof=0))
    out["outliers"] = (steps["duration"] > thr).groupby([steps[c] for c in by], observed=True).sum()
    out["threshold"] = out["mean"] + stddev * out["std"]
    out = out[["count", "mean", "std", "min", "p50", "p95", "max", "threshold", "outliers"]].reset_index()
    out.insert(len(by), "unit", "s")
    return out


def step_outliers(
    steps: pd.DataFrame, stddev: float = DEFAULT_STDDEV, by: Sequence[str] = ("node", "rank", "mode")
) -> pd.DataFrame:
    """The steps whose duration exceeds mean + ``stddev`` * std of their group (population std), with that threshold."""
    _check_stddev(stddev)
    _need(steps, [*by, "duration"], "steps")
    g = steps.groupby(list(by), observed=True, sort=False)["duration"]
    thr = g.transform("mean") + stddev * g.transform(lambda v: v.std(ddof=0))
    out = steps[steps["duration"] > thr].copy()
    out["threshold"] = thr[out.index]
    return out.reset_index(drop=True)
