"""LossNotDecreasing, Overfit, Overtraining and StalledTrainingRule on a trial's tensors.

The definitions are those of the scalar rules (:mod:`smx_debug.evaluate.scalar_rules`, one owner): these
classes only pick the loss tensors (scalars of the ``losses`` collection, ``collection_names``,
``tensor_regex``), keep their values across batches (one number per saved step: small) and hand the series to the
scalar rules, with global steps as steps. StalledTrainingRule reads each saved step's wall time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.data.frames import JobData
from smx_debug.evaluate import scalar_rules
from smx_debug.evaluate.result import RuleResult, Trace, encode_set_parameters
from smx_debug.evaluate.tensor_data import TensorBatch
from smx_debug.evaluate.tensor_rules import Collections, TensorRule
from smx_debug.evaluate.tensor_verdict import TRACE_POINTS, Selection, by_collection, by_regex, split_list
from smx_debug.rules.registry import RuleParams


@dataclass
class _Series:
    """The loss values seen so far, one row per (tensor, saved record)."""

    metric: list[np.ndarray] = field(default_factory=list)
    mode: list[np.ndarray] = field(default_factory=list)
    step: list[np.ndarray] = field(default_factory=list)
    value: list[np.ndarray] = field(default_factory=list)
    hint: str = ""
    names: set[str] = field(default_factory=set)

    def frame(self) -> pd.DataFrame:
        """The scalars frame the scalar rules read; ``timestamp`` orders by global step (Overfit pairs EVAL values
        with the TRAIN values before them)."""
        if not self.step:
            return pd.DataFrame({"metric": pd.Series([], dtype=object), "mode": pd.Series([], dtype=object),
                                 "step": pd.Series([], dtype="int64"),
                                 "timestamp": pd.Series([], dtype="datetime64[ns, UTC]"),
                                 "value": pd.Series([], dtype="float64")})
        step = np.concatenate(self.step)
        return pd.DataFrame({"metric": np.concatenate(self.metric), "mode": np.concatenate(self.mode),
                             "step": step, "timestamp": pd.to_datetime(step, unit="ns", utc=True),
                             "value": np.concatenate(self.value)})


def _scalar_records(batch: TensorBatch, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(global steps, modes, values) of the one-element records of ``name`` (losses must be scalars)."""
    series = batch.arrays.get(name)
    if series is not None and series.block is not None:
        if series.block[0].size != 1 or series.block.dtype.kind not in "fiub":
            return None
        return series.steps, series.modes, series.block.reshape(len(series)).astype(np.float64)
    if series is not None and len(series):
        keep = np.array([v.size == 1 and v.dtype.kind in "fiub" for v in series.values], bool)
        values = np.array([float(v.reshape(-1)[0]) for v, k in zip(series.values, keep, strict=True) if k])
        return series.steps[keep], series.modes[keep], values
    stat = batch.reduction(name, "mean") if "" in batch.saved_reductions(name) else None
    if stat is None:
        return None
    return stat.steps, stat.modes, stat.values


def _exact(names: Sequence[str]) -> str:
    return "^(?:" + "|".join(re.escape(n) for n in names) + ")$"


class _LossRule(TensorRule):
    """Collect the loss series; the verdict is the scalar rule's on it."""

    scalar: Callable[..., RuleResult]  # (data, params, *, losses): the scalar rule
    state_types = (_Series,)
    needs = "the loss tensors hold too few saved steps to compare"

    def start(self, params: RuleParams) -> _Series:
        return _Series()

    def update(self, state: _Series, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        state.hint = selection.hint
        for name in selection.names:
            got = _scalar_records(batch, name)
            if got is None or not len(got[0]):
                continue
            steps, modes, values = got
            state.names.add(name)
            state.metric.append(np.full(len(steps), name, object))
            state.mode.append(np.asarray(modes, object))
            state.step.append(np.asarray(steps, np.int64))
            state.value.append(np.asarray(values, np.float64))

    def result(self, state: _Series, params: RuleParams) -> RuleResult:
        shown = encode_set_parameters(params)
        if not state.names:
            hint = state.hint or "no scalar loss tensor saved yet"
            return RuleResult(rule=self.name, rule_parameters=shown, message=f"no data: {hint}")
        frame = state.frame()
        result = type(self).scalar(JobData(scalars=frame), params, losses=_exact(sorted(state.names)))
        update: dict[str, Any] = {"rule_parameters": shown, "trace": _loss_trace(frame)}
        if result.datapoints == 0 and not result.message:
            update["message"] = f"no data: {self.needs}"
        return result.model_copy(update=update)


def _thin(steps: np.ndarray, values: np.ndarray) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """At most TRACE_POINTS points: every k-th one."""
    k = max(1, -(-len(steps) // TRACE_POINTS))
    return tuple(int(x) for x in steps[::k]), tuple(float(x) for x in values[::k])


def _loss_trace(frame: pd.DataFrame) -> Trace | None:
    """The chart of the loss tensor with the most saved values (its TRAIN values, if it has any)."""
    if frame.empty:
        return None
    name = frame["metric"].value_counts().index[0]
    rows = frame[frame["metric"] == name]
    if (rows["mode"] == "TRAIN").any():
        rows = rows[rows["mode"] == "TRAIN"]
    rows = rows.sort_values("step", kind="stable")
    steps, values = _thin(rows["step"].to_numpy(np.int64), rows["value"].to_numpy(np.float64))
    mode = str(rows["mode"].iloc[0])
    return Trace(tensor=str(name), statistic=f"loss ({mode})", steps=steps, values=values)


def _losses_selection(params: RuleParams, names: Sequence[str], collections: Collections, *,
                      use_losses: bool) -> Selection:
    out = Selection(())
    if use_losses:
        out = out | by_collection("losses", names, collections)
    for c in split_list(params.collection_names, field="collection_names"):
        out = out | by_collection(c, names, collections)
    regexes = split_list(params.tensor_regex, field="tensor_regex")
    if regexes:
        out = out | by_regex(regexes, names, what="tensor_regex")
    if not use_losses and not regexes and not out.names and not out.hint:
        return Selection((), "set tensor_regex or collection_names, or use_losses_collection")
    return out


class LossNotDecreasing(_LossRule):
    """LossNotDecreasing on the loss tensors (definition: :func:`scalar_rules.loss_not_decreasing`)."""

    name = "LossNotDecreasing"
    scalar = staticmethod(scalar_rules.loss_not_decreasing)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return _losses_selection(params, names, collections, use_losses=params.use_losses_collection)


class Overfit(_LossRule):
    """Overfit on the loss tensors' TRAIN and EVAL values (definition: :func:`scalar_rules.overfit`)."""

    name = "Overfit"
    scalar = staticmethod(scalar_rules.overfit)
    needs = ("Overfit compares EVAL losses with the TRAIN losses before them, and the trial has no loss saved in "
             "both modes (call hook.set_mode(smd.modes.EVAL) around validation)")

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        if params.tensor_regex:
            return by_regex(split_list(params.tensor_regex, field="tensor_regex"), names, what="tensor_regex")
        return by_collection("losses", names, collections)


class Overtraining(_LossRule):
    """Overtraining on the ``losses`` collection (definition: :func:`scalar_rules.overtraining`)."""

    name = "Overtraining"
    scalar = staticmethod(scalar_rules.overtraining)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return by_collection("losses", names, collections)


@dataclass
class _Times:
    steps: dict[int, float] = field(default_factory=dict)
    now: float | None = None

    def shed(self, name: str, history: list[tuple[str, str, str, str, int]]) -> _Times:
        """This state with only the last step's wall time: only the silence after it can still fire."""
        if not self.steps:
            return self
        last = max(self.steps)
        return replace(self, steps={last: self.steps[last]})


class StalledTrainingRule(TensorRule):
    """No new saved step for more than ``threshold`` seconds (definition: :func:`scalar_rules.stalled_training`,
    on each saved step's wall time; live, the silence up to now counts too)."""

    name = "StalledTrainingRule"
    state_types = (_Times,)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return Selection(tuple(names), "" if names else "the trial holds no saved step yet")

    def start(self, params: RuleParams) -> _Times:
        return _Times()

    def update(self, state: _Times, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        state.steps.update(batch.wall_times)
        state.now = batch.now

    def result(self, state: _Times, params: RuleParams) -> RuleResult:
        shown = encode_set_parameters(params)
        if not state.steps:
            return RuleResult(rule=self.name, rule_parameters=shown,
                              message="no data: no saved step with a wall time yet")
        steps = np.array(sorted(state.steps), np.int64)
        times = np.array([state.steps[s] for s in steps.tolist()], np.float64)
        ts = pd.to_datetime(np.round(times * 1e9).astype(np.int64), utc=True)
        frame = pd.DataFrame({"metric": "step", "mode": "GLOBAL", "step": steps, "timestamp": ts, "value": 0.0})
        as_of = None if state.now is None else int(state.now * 1e9)
        result = scalar_rules.stalled_training(JobData(scalars=frame, as_of_ns=as_of), params)
        order = np.argsort(times, kind="stable")
        gap = np.diff(times[order])
        gaps = gap > params.threshold
        first = int(steps[order][1:][gaps][0]) if gaps.any() else None
        at, seconds = _thin(steps[order][1:], gap)
        trace = Trace(tensor="saved steps", statistic="seconds since the previous saved step", steps=at,
                      values=seconds, upper=params.threshold) if len(gap) else None
        return result.model_copy(update={"rule_parameters": shown, "trigger_step": first, "trace": trace})
