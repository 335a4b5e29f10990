"""Rules on scalar series (loss and metrics): LossNotDecreasing, Overfit, Overtraining, StalledTrainingRule.

The input is the scalars frame (``metric``, ``mode``, ``step``, ``timestamp``, ``value``) read from the
SageMaker-metrics files smdebug writes (``loss_TRAIN`` -> metric ``loss``, mode ``TRAIN``) or from
CloudWatch. ``tensor_regex`` None selects the losses (metric names containing "loss"). Each rule gets its
configuration's typed parameters (:attr:`~smx_debug.rules.configured.ConfiguredRule.params`); ``losses`` (the
tensor rules' exact names of the loss tensors they collected) replaces ``tensor_regex``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.data.frames import JobData, ns
from smx_debug.errors import ConfigError
from smx_debug.evaluate.result import RuleResult, encode_set_parameters
from smx_debug.rules.registry import RuleParams


def _losses(data: JobData, regex: str | None) -> pd.DataFrame:
    sc = data.scalars.reset_index(drop=True)
    if sc.empty:
        return sc
    names = sc["metric"].astype(str)
    if regex is None:
        mask = names.str.contains("loss", case=False, regex=False)
    else:
        try:
            mask = names.str.fullmatch(regex) | names.str.contains(regex, regex=True)
        except re.error as exc:
            raise ConfigError(f"tensor_regex {regex!r} is not a valid regular expression: {exc}",
                              field="tensor_regex", value=regex) from exc
    return sc[mask.to_numpy()]


def _run_length(flags: np.ndarray) -> np.ndarray:
    """Length of the run of True ending at each position (0 where False)."""
    c = np.cumsum(flags)
    reset = np.maximum.accumulate(np.where(~flags, c, 0))
    return np.asarray(c - reset)


def _check_points(steps: np.ndarray, num_steps: int) -> np.ndarray:
    """Indices of the checked steps: the first saved step, then each first saved step at least
    ``num_steps`` after the previous check (one binary search per check)."""
    out = [0]
    while True:
        nxt = int(np.searchsorted(steps, steps[out[-1]] + num_steps, side="left"))
        if nxt >= len(steps):
            return np.asarray(out, dtype=np.int64)
        out.append(nxt)


def loss_not_decreasing(data: JobData, params: RuleParams, *, losses: str | None = None) -> RuleResult:
    """LossNotDecreasing: the loss does not go down.

    Debugger developer guide: "The rule compares the loss for this step with the loss at a step which is
    at least num_steps behind the current step ... At step 21, loss for step 21 is compared with loss for
    step 9. The next step at which loss is checked is step 33": the first saved step is the baseline, and
    each next check is the first saved step at least ``num_steps`` after the previous check. A check
    fails when the loss did not decrease by at least ``diff_percent`` percent; without ``mode`` it uses the first mode
    present of EVAL, TRAIN, GLOBAL. A check where the loss also rose by more than
    ``increase_threshold_percent`` is listed under ``increases`` in Details.
    """
    rp = encode_set_parameters(params)
    sc = _losses(data, params.tensor_regex if losses is None else losses)
    if sc.empty:
        return RuleResult(rule="LossNotDecreasing", rule_parameters=rp)
    modes = [params.mode.upper()] if params.mode is not None else ["EVAL", "TRAIN", "GLOBAL"]
    present = set(sc["mode"].astype(str).str.upper())
    mode = next((m for m in modes if m in present), None)
    if mode is None:
        return RuleResult(rule="LossNotDecreasing", rule_parameters=rp)
    sc = sc[sc["mode"].astype(str).str.upper() == mode]
    count, increases, first, reasons = 0, 0, None, []
    details: dict[str, Any] = {}
    for metric, grp in sc.groupby("metric", sort=True):
        per_step = grp.groupby("step")["value"].mean().sort_index()
        steps, vals = per_step.index.to_numpy(), per_step.to_numpy(dtype=np.float64)
        chk = _check_points(steps, params.num_steps)
        s_chk, v_chk = steps[chk], vals[chk]
        if len(v_chk) < 2:
            continue
        prev, cur = v_chk[:-1], v_chk[1:]
        with np.errstate(divide="ignore", invalid="ignore"):
            dec = np.where(prev != 0, (prev - cur) / np.abs(prev) * 100, 0.0)
        viol = dec < params.diff_percent
        inc = -dec > params.increase_threshold_percent
        count += int(viol.sum())
        increases += int(inc.sum())
        if viol.any():
            at = int(s_chk[1:][viol][0])
            first = at if first is None else min(first, at)
            reasons.append(f"{metric} ({mode}) decreased by less than {params.diff_percent}% at "
                           f"{int(viol.sum())} of {len(viol)} checks, first at step {at}")
        details[str(metric)] = {
            "mode": mode,
            "checks": len(viol),
            "not_decreasing_steps": s_chk[1:][viol].tolist(),
            "increases": s_chk[1:][inc].tolist(),
        }
    return RuleResult(
        rule="LossNotDecreasing", rule_triggered=count, violations=count, details=details,
        datapoints=len(sc), rule_parameters=rp, trigger_step=first, message="; ".join(reasons),
    )


def overfit(data: JobData, params: RuleParams, *, losses: str | None = None) -> RuleResult:
    """Overfit: validation loss pulls away from training loss.

    Debugger developer guide: ``ratio_threshold`` is "the maximum ratio of the difference between the
    mean validation loss and mean training loss to the mean training loss. If this threshold is
    exceeded for a patience number of steps, the model is being overfit"; comparison starts at
    ``start_step``. Each EVAL value is compared with the mean TRAIN value since the previous EVAL value.
    """
    rp = encode_set_parameters(params)
    sc = _losses(data, params.tensor_regex if losses is None else losses)
    count, first, reasons, datapoints = 0, None, [], 0
    details: dict[str, Any] = {}
    if not sc.empty:
        mode = sc["mode"].astype(str).str.upper()
        for metric, grp in sc.groupby("metric", sort=True):
            m = mode.loc[grp.index]
            train, evl = grp[m == "TRAIN"], grp[m == "EVAL"]
            if train.empty or evl.empty:
                continue
            evl = evl[evl["step"] >= params.start_step].sort_values("timestamp", kind="stable")
            train = train.sort_values("timestamp", kind="stable")
            e_ts, t_ts = ns(evl["timestamp"]), ns(train["timestamp"])
            bucket = np.searchsorted(e_ts, t_ts, side="left")
            sums = np.bincount(bucket, weights=train["value"].to_numpy(), minlength=len(e_ts) + 1)[: len(e_ts)]
            cnts = np.bincount(bucket, minlength=len(e_ts) + 1)[: len(e_ts)]
            t_mean = pd.Series(np.where(cnts > 0, sums / np.maximum(cnts, 1), np.nan)).ffill().to_numpy()
            v = evl["value"].to_numpy(dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = (v - t_mean) / np.abs(t_mean)
            exceed = np.nan_to_num(ratio, nan=-np.inf) > params.ratio_threshold
            fire = _run_length(exceed) >= params.patience
            datapoints += len(v)
            steps = evl["step"].to_numpy()
            count += int(fire.sum())
            if fire.any():
                at = int(steps[fire][0])
                first = at if first is None else min(first, at)
                j = int(np.flatnonzero(fire)[0])
                reasons.append(f"{metric}: validation {v[j]:.4g} vs training {t_mean[j]:.4g} "
                               f"(ratio {ratio[j]:.2f} > {params.ratio_threshold}) from EVAL step {at}")
            finite = ratio[~np.isnan(ratio)]  # a diverged run's ratios are all NaN: no max, and no warning
            details[str(metric)] = {"max_ratio": float(finite.max()) if len(finite) else None,
                                    "overfit_steps": steps[fire].tolist()}
    return RuleResult(
        rule="Overfit", rule_triggered=count, violations=count, details=details, datapoints=datapoints,
        rule_parameters=rp, trigger_step=first, message="; ".join(reasons),
    )


def _best_with_delta(values: np.ndarray, delta: float) -> np.ndarray:
    """Running best that only moves on an improvement of more than ``delta`` (sequential by nature)."""
    step = np.frompyfunc(lambda best, v: v if v < best - delta else best, 2, 1)
    with np.errstate(invalid="ignore"):  # NaN losses (a diverged run) never improve; numpy need not say so
        return np.asarray(step.accumulate(values.astype(object)), dtype=np.float64)


def overtraining(data: JobData, params: RuleParams, *, losses: str | None = None) -> RuleResult:
    """Overtraining: training or validation loss stopped improving.

    Debugger developer guide: ``patience_train`` / ``patience_validation`` are "the number of steps to
    wait before the training/validation loss is considered to not to be improving anymore" and
    ``delta`` is "the minimum threshold by how much the error should improve before it is considered
    as a new optimum".
    """
    rp = encode_set_parameters(params)
    sc = _losses(data, losses)  # None: names containing "loss" (the tensor rule passes its own)
    count, first, reasons = 0, None, []
    details: dict[str, Any] = {}
    if not sc.empty:
        mode = sc["mode"].astype(str).str.upper()
        for (metric, m), grp in sc.assign(_m=mode).groupby(["metric", "_m"], sort=True):
            patience = {"TRAIN": params.patience_train, "EVAL": params.patience_validation}.get(str(m))
            if patience is None:
                continue
            per_step = grp.groupby("step")["value"].mean().sort_index()
            vals = per_step.to_numpy(dtype=np.float64)
            best = _best_with_delta(vals, params.delta)
            improved = np.concatenate([[True], best[1:] != best[:-1]])
            fire = _run_length(~improved) >= patience
            count += int(fire.sum())
            if fire.any():
                at = int(per_step.index[fire][0])
                first = at if first is None else min(first, at)
                reasons.append(f"{metric} ({m}) has not improved by {params.delta} for {patience} steps "
                               f"from step {at}")
            details[f"{metric}_{m}"] = {"best": float(best[-1]), "stalled_steps": int(fire.sum())}
    return RuleResult(
        rule="Overtraining", rule_triggered=count, violations=count, details=details, datapoints=len(sc),
        rule_parameters=rp, trigger_step=first, message="; ".join(reasons),
    )


def stalled_training(data: JobData, params: RuleParams) -> RuleResult:
    """StalledTrainingRule: no new output for ``threshold`` seconds.

    Debugger developer guide: ``threshold`` is "a threshold that defines by how much time in seconds
    the rule waits for a tensor output until it fires a stalled training issue". We look at the
    timestamps of scalars and step ends: every gap longer than the threshold counts, and in live mode
    so does the silence from the last output to ``as_of``.
    """
    rp = encode_set_parameters(params)
    parts = [ns(data.scalars["timestamp"])] if not data.scalars.empty else []
    if not data.steps.empty:
        parts.append(ns(data.steps["end"]))
    if not parts:
        return RuleResult(rule="StalledTrainingRule", rule_parameters=rp)
    ts = np.unique(np.concatenate(parts))
    limit = params.threshold * 10**9
    points = ts if data.as_of_ns is None else np.append(ts, max(int(data.as_of_ns), int(ts[-1])))
    gaps = np.diff(points)
    viol = gaps > limit
    count = int(viol.sum())
    longest = float(gaps.max() / 1e9) if len(gaps) else 0.0
    details = {"longest_gap_s": longest, "last_output": float(ts[-1] / 1e9), "stalls": int(count)}
    msg = f"no output for {longest:.0f} s (threshold {params.threshold} s)" if count else ""
    return RuleResult(
        rule="StalledTrainingRule", rule_triggered=count, violations=count, details=details,
        datapoints=len(ts), rule_parameters=rp, trigger_step=None, message=msg,
    )
