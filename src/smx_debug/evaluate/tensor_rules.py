"""Debugger's built-in rules on tensors, judged per saved record: VanishingGradient, ExplodingTensor, AllZero,
TensorVariance, UnchangedTensor, WeightUpdateRatio, DeadRelu, SaturatedActivation and PoorWeightInitialization.

Each rule is a :class:`TensorRule`: :meth:`~TensorRule.select` names the tensors it reads (or what to add to the
plan), :meth:`~TensorRule.update` folds one :class:`~smx_debug.evaluate.tensor_data.TensorBatch` into its state
and :meth:`~TensorRule.result` gives the verdict so far. Nothing here reads storage. The definitions, their
sources and where we chose between sources: docs/rules.md, "Tensor rules".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_data import Stat, TensorBatch, per_record
from smx_debug.evaluate.tensor_verdict import (
    Selection,
    Tally,
    by_collection,
    by_regex,
    select_tensors,
    split_list,
)
from smx_debug.rules.registry import RuleParams
from smx_debug.tensors.arrays import TensorValues

Collections = Mapping[str, Callable[[str], bool]]
_LEARNING_MODES = ("TRAIN", "GLOBAL")  # modes in which parameters change


class TensorRule:
    """One tensor rule: select, fold batches into a state, give the verdict. Subclasses set ``name``. Every method
    gets its configuration's typed parameters (:attr:`~smx_debug.rules.configured.ConfiguredRule.params`)."""

    name: ClassVar[str] = ""
    state_types: ClassVar[tuple[type, ...]] = ()
    """The dataclasses its state holds besides :class:`Tally` (the tensor state's allow-list is derived from them)."""

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        """The tensors the rule reads (default: ``collection_names`` and ``tensor_regex``, else all)."""
        return select_tensors(params, names, collections)

    def start(self, params: RuleParams) -> Any:
        """A fresh state."""
        return Tally(self.name)

    def update(self, state: Any, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        """Fold the batch's records of the selected tensors into ``state``."""
        raise NotImplementedError

    def result(self, state: Any, params: RuleParams) -> RuleResult:
        """The verdict over everything folded so far."""
        result: RuleResult = state.result(params)
        return result




class VanishingGradient(TensorRule):
    """The mean absolute value of a gradient falls below ``threshold`` ([guide], [2019-docs])."""

    name = "VanishingGradient"

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return by_collection("gradients", names, collections)

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        thr = params.threshold
        for name in selection.names:
            stat = batch.reduction(name, "abs_mean")
            if stat is not None:
                state.add(stat, stat.values < thr, f"mean absolute gradient {{v:.4g}} < threshold {thr:g}",
                          statistic="mean absolute gradient", lower=thr)


class ExplodingTensor(TensorRule):
    """A tensor holds NaN (or, unless ``only_nan``, infinite) values ([guide], [2019-docs])."""

    name = "ExplodingTensor"

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        only_nan = params.only_nan
        what = "NaN" if only_nan else "NaN or infinite"
        bad: Callable[[np.ndarray], np.ndarray] = np.isnan if only_nan else (lambda x: ~np.isfinite(x))
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is not None and len(series):
                stat = per_record(series, lambda x: bad(x).reshape(len(x), -1).sum(axis=1))
                state.add(stat, stat.values > 0, f"{{v:.0f}} {what} values", statistic=f"{what} values", upper=0.0)
                continue
            # Saved reductions only: a NaN makes every reduction NaN, an infinity every max/norm/sum infinite.
            for reduction in sorted(batch.saved_reductions(name)):
                saved = batch.reduction(name, reduction)
                if saved is not None:
                    state.add(saved, bad(saved.values), f"its {reduction or 'value'} is {{v}}",
                              statistic=f"saved {reduction or 'value'} (fires when not finite)")
                    break


class AllZero(TensorRule):
    """At least ``threshold`` percent of a tensor's values are zero ([guide])."""

    name = "AllZero"

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        thr = params.threshold

        describe = f"{{v:.4g}}% of its values are zero (threshold {thr:g}%)"

        for name in selection.names:
            series = batch.arrays.get(name)
            if series is not None and len(series):
                stat = per_record(series, lambda x: (x == 0).reshape(len(x), -1).mean(axis=1) * 100)
                state.add(stat, stat.values >= thr, describe, judged=~np.isnan(stat.values),
                          statistic="% of values zero", upper=thr)
                continue
            # Reductions only: all zero <=> max |x| == 0; a share below 100% cannot be told from reductions.
            for reduction in ("abs_max", "l1", "l2"):
                saved = batch.reduction(name, reduction)
                if saved is not None:
                    share = np.where(saved.values == 0, 100.0, 0.0 if thr >= 100 else np.nan)
                    state.add(Stat(name, saved.steps, saved.modes, saved.mode_steps, saved.workers, share),
                              share >= thr, describe, judged=~np.isnan(share), statistic="% of values zero", upper=thr)
                    break


class TensorVariance(TensorRule):
    """A tensor's variance is above ``max_threshold`` or below ``min_threshold`` ([guide]); with both None
    (the guide's defaults) there is nothing to compare with, and the result says so."""

    name = "TensorVariance"

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        hi, lo = params.max_threshold, params.min_threshold
        if hi is None and lo is None:
            state.hint = ("max_threshold and min_threshold are both unset (the guide's defaults are None): set one "
                          "or both to judge the variance")
            return
        for name in selection.names:
            stat = batch.reduction(name, "variance")
            if stat is None:
                continue
            v = stat.values
            bad = np.zeros(len(v), bool)
            if hi is not None:
                bad |= v > hi
            if lo is not None:
                bad |= v < lo
            state.add(stat, bad, f"variance {{v:.4g}} outside [{lo}, {hi}]", statistic="variance", lower=lo, upper=hi)


def _allclose_rows(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """``numpy.allclose(a[k], b[k])`` for each row k (``b`` is the reference: |a-b| <= atol + rtol*|b|)."""
    if not len(a):
        return np.zeros(0, bool)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= atol + rtol * np.abs(b)
    close |= a == b  # equal infinities
    if equal_nan:
        close |= np.isnan(a) & np.isnan(b)
    return np.asarray(close.reshape(len(a), -1).all(axis=1))


@dataclass
class _History:
    """The last values of each (tensor, worker, mode), for rules that compare steps."""

    tally: Tally
    last: dict[tuple[str, str, str], list[tuple[int, np.ndarray]]] = field(default_factory=dict)

    def shed(self, name: str, history: list[tuple[str, str, str, str, int]]) -> _History:
        """This state without the raw values it compares (a model's size), which :meth:`refill` takes back:
        where they are, (configuration ``name``, tensor, worker, mode, step), is added to ``history``."""
        for (tensor, worker, mode), kept in self.last.items():
            history.extend((name, tensor, worker, mode, int(step)) for step, _ in kept)
        return replace(self, last={})

    def refill(self, key: tuple[str, str, str], step: int, value: np.ndarray) -> None:
        """Take back one value :meth:`shed` left out (read again from the trial)."""
        kept = self.last.setdefault(key, [])
        kept.append((step, value))
        kept.sort(key=lambda item: item[0])


def _groups(series: TensorValues, modes: Sequence[str]) -> list[tuple[tuple[str, str], np.ndarray]]:
    """Record positions per (worker, mode) among ``modes``, in step order."""
    out = []
    for worker in dict.fromkeys(series.workers.tolist()):
        for mode in modes:
            idx = np.flatnonzero((series.workers == worker) & (series.modes == mode))
            if len(idx):
                out.append(((str(worker), mode), idx))
    return out


def _with_history(series: TensorValues, idx: np.ndarray, prev: list[tuple[int, np.ndarray]]
                  ) -> tuple[np.ndarray, np.ndarray | None, list[np.ndarray]]:
    """The group's steps with the carried-over previous records first, and its values: stacked (float64) when
    they share a shape, else one array per record."""
    steps = np.concatenate([np.array([s for s, _ in prev], np.int64), series.steps[idx]])
    base = series.stacked
    if base is not None and all(v.shape == base.shape[1:] for _, v in prev):
        head = np.array([v for _, v in prev], np.float64).reshape(len(prev), *base.shape[1:])
        return steps, np.concatenate([head, base[idx]]), []
    return steps, None, [v for _, v in prev] + [series.values[i] for i in idx]


class UnchangedTensor(TensorRule):
    """A tensor equals (``numpy.allclose``) its values at the previous ``num_steps - 1`` saved steps ([guide],
    [2019-test]); compared within TRAIN (or GLOBAL) steps of one worker, since nothing learns in EVAL."""

    name = "UnchangedTensor"
    state_types = (_History,)

    def start(self, params: RuleParams) -> _History:
        return _History(Tally(self.name))

    def result(self, state: _History, params: RuleParams) -> RuleResult:
        return state.tally.result(params)

    def update(self, state: _History, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        n = params.num_steps
        rtol, atol, equal_nan = params.rtol, params.atol, params.equal_nan
        describe = f"unchanged (numpy.allclose, rtol {rtol:g}, atol {atol:g}) over its last {n} saved steps"
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None or not len(series):
                continue
            for (worker, mode), idx in _groups(series, _LEARNING_MODES):
                key = (name, worker, mode)
                prev = state.last.get(key, [])
                steps, stacked, values = _with_history(series, idx, prev)
                k0, total = len(prev), len(steps)
                rows = np.arange(k0, total)
                same = np.ones(len(rows), bool)
                for lag in range(1, n):
                    have = same & (rows - lag >= 0)  # a row that changed at a smaller lag is not compared again
                    same &= have
                    if stacked is not None:
                        same[have] = _allclose_rows(stacked[rows[have] - lag], stacked[rows[have]], rtol, atol,
                                                    equal_nan)
                    else:
                        same[have] = [values[i - lag].shape == values[i].shape and bool(np.allclose(
                            values[i - lag], values[i], rtol=rtol, atol=atol, equal_nan=equal_nan))
                            for i in rows[have].tolist()]
                stat = Stat(name, steps[k0:], np.full(len(same), mode, object), series.mode_steps[idx],
                            np.full(len(same), worker, object), same.astype(np.float64))
                state.tally.add(stat, same, describe, judged=rows >= n - 1,
                                statistic=f"unchanged over {n} saved steps (1: yes)", upper=0.5)
                keep = range(max(total - (n - 1), 0), total) if n > 1 else range(0)
                state.last[key] = [(int(steps[i]), stacked[i] if stacked is not None else values[i]) for i in keep]


class WeightUpdateRatio(TensorRule):
    """``||w_s - w_p|| / (||w_p|| + epsilon)`` between a weight at saved step s and at the previous saved step p
    (with ``num_steps``: only when p >= s - num_steps) is above ``large_threshold`` or below ``small_threshold``
    ([guide]); TRAIN (or GLOBAL) steps, per worker."""

    name = "WeightUpdateRatio"
    state_types = (_History,)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return by_collection("weights", names, collections)

    def start(self, params: RuleParams) -> _History:
        return _History(Tally(self.name))

    def result(self, state: _History, params: RuleParams) -> RuleResult:
        return state.tally.result(params)

    def update(self, state: _History, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        large, small, eps = params.large_threshold, params.small_threshold, params.epsilon
        window = params.num_steps
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None or not len(series):
                if batch.saved_reductions(name):
                    state.tally.hint = (f"{name} was saved as reductions only: WeightUpdateRatio needs the weights' "
                                        f"values (save_raw_tensor)")
                continue
            for (worker, mode), idx in _groups(series, _LEARNING_MODES):
                key = (name, worker, mode)
                prev = state.last.get(key, [])
                steps, stacked, values = _with_history(series, idx, prev)
                k0 = len(prev)
                ratios = np.full(len(steps), np.nan)
                if stacked is not None and len(stacked) > 1:
                    flat = stacked.reshape(len(stacked), -1)
                    ratios[1:] = (np.sqrt(((flat[1:] - flat[:-1]) ** 2).sum(axis=1))
                                  / (np.sqrt((flat[:-1] ** 2).sum(axis=1)) + eps))
                elif stacked is None:
                    for i in range(1, len(values)):
                        if values[i].shape == values[i - 1].shape:
                            w, p = np.asarray(values[i], np.float64), np.asarray(values[i - 1], np.float64)
                            ratios[i] = np.linalg.norm(w - p) / (np.linalg.norm(p) + eps)
                if window is not None:
                    ratios[1:][steps[:-1] < steps[1:] - window] = np.nan
                ratios = ratios[k0:]
                judged = ~np.isnan(ratios)
                stat = Stat(name, steps[k0:], np.full(len(ratios), mode, object), series.mode_steps[idx],
                            np.full(len(ratios), worker, object), ratios)
                bad = judged & ((ratios > large) | (ratios < small))
                state.tally.add(stat, bad, f"update/weight ratio {{v:.4g}} outside [{small:g}, {large:g}]",
                                judged=judged, statistic="update/weight ratio", lower=small, upper=large)
                last = stacked[-1] if stacked is not None else values[-1]
                state.last[key] = [(int(steps[-1]), last)]


def _per_unit(x: np.ndarray) -> np.ndarray:
    """Records x samples x units: axis 1 of a record is its batch; a 1-d record is one sample."""
    if x.ndim <= 2:
        return x.reshape(len(x), 1, -1)
    return x.reshape(x.shape[0], x.shape[1], -1)


def _inactive_layer_share(active: np.ndarray, threshold_inactivity: float) -> np.ndarray:
    """Per record: the percentage of units active in less than ``threshold_inactivity`` % of the samples."""
    share_active = active.mean(axis=1) * 100  # records x units
    return np.asarray((share_active < threshold_inactivity).mean(axis=1) * 100)


class DeadRelu(TensorRule):
    """A ReLU unit is dead at a step when it is active (output > 0) in less than ``threshold_inactivity`` % of
    the batch's samples; a layer fires when more than ``threshold_layer`` % of its units are dead ([guide])."""

    name = "DeadRelu"

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return by_regex(split_list(params.tensor_regex, field="tensor_regex"), names, what="tensor_regex")

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        inact, layer = params.threshold_inactivity, params.threshold_layer
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None or not len(series):
                continue
            def dead(x: np.ndarray) -> np.ndarray:
                return _inactive_layer_share(_per_unit(x) > 0, inact)

            stat = per_record(series, dead)
            state.add(stat, stat.values > layer,
                      f"{{v:.4g}}% of its units are dead (active in < {inact:g}% of samples; threshold_layer "
                      f"{layer:g}%)", judged=~np.isnan(stat.values), statistic="% of units dead", upper=layer)


class SaturatedActivation(TensorRule):
    """A tanh/sigmoid unit is saturated at a step when its input lies inside (min, max) for less than
    ``threshold_inactivity`` % of the samples; a layer fires when more than ``threshold_layer`` % of its units
    are saturated ([guide]). The kind is read from the tensor's name (``tanh``/``sigmoid``)."""

    name = "SaturatedActivation"

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        inact, layer = params.threshold_inactivity, params.threshold_layer
        for name in selection.names:
            low = name.lower()
            kind = "tanh" if "tanh" in low else "sigmoid" if "sigmoid" in low else None
            series = batch.arrays.get(name)
            if kind is None:  # listed in Details: the name says neither tanh nor sigmoid
                unknown = state.extra.setdefault("not_tanh_or_sigmoid", [])
                if name not in unknown:
                    unknown.append(name)
                continue
            if series is None or not len(series):
                continue
            lo, hi = getattr(params, f"threshold_{kind}_min"), getattr(params, f"threshold_{kind}_max")

            def share(x: np.ndarray, lo: float = lo, hi: float = hi) -> np.ndarray:
                u = _per_unit(x)
                return _inactive_layer_share((u > lo) & (u < hi), inact)

            stat = per_record(series, share)
            state.add(stat, stat.values > layer,
                      f"{{v:.4g}}% of its {kind} units are saturated (input outside ({lo:g}, {hi:g}) in > "
                      f"{100 - inact:g}% of samples; threshold_layer {layer:g}%)", judged=~np.isnan(stat.values),
                      statistic=f"% of {kind} units saturated", upper=layer)


@dataclass
class _InitState:
    tally: Tally
    analysed: list[int] = field(default_factory=list)  # global steps analysed so far (TRAIN/GLOBAL)
    best: dict[str, tuple[float, int]] = field(default_factory=dict)  # loss -> (best value, saved steps since)


def _window_values(found: Iterable[Any], window: set[int], keep: Callable[[Any], bool] = lambda v: True
                   ) -> dict[int, list[Any]]:
    """The values saved at ``window``'s steps, by step: each tensor's (``found``: its series, None for a tensor
    not in the batch) first worker's, those ``keep`` accepts."""
    per_step: dict[int, list[Any]] = {}
    for series in found:
        if series is None or not len(series.steps):
            continue
        for step, worker, v in zip(series.steps, series.workers, series.values, strict=True):
            if int(step) in window and worker == series.workers[0] and keep(v):
                per_step.setdefault(int(step), []).append(v)
    return per_step


class PoorWeightInitialization(TensorRule):
    """Over the first ``steps`` saved TRAIN steps, any of: the largest / smallest variance of the activation
    inputs across layers is above ``threshold``; the 5th-95th percentile range of all gradients is below
    ``distribution_range``; a loss has not reached a new minimum for ``patience`` saved steps ([guide])."""

    name = "PoorWeightInitialization"
    state_types = (_InitState,)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        acts = by_regex(split_list(params.activation_inputs_regex, field="activation_inputs_regex"), names,
                        what="activation_inputs_regex")
        return acts | by_collection("gradients", names, collections) | by_collection("losses", names, collections)

    def start(self, params: RuleParams) -> _InitState:
        return _InitState(Tally(self.name))

    def result(self, state: _InitState, params: RuleParams) -> RuleResult:
        return state.tally.result(params, details={"analysed_steps": list(state.analysed)})

    def update(self, state: _InitState, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        limit = params.steps
        if len(state.analysed) >= limit:
            return
        acts = set(by_regex(split_list(params.activation_inputs_regex, field="activation_inputs_regex"),
                            selection.names, what="").names)
        grads = {n for n in by_collection("gradients", selection.names, batch.collections).names} - acts
        losses = {n for n in by_collection("losses", selection.names, batch.collections).names} - acts - grads
        steps: set[int] = set()
        for name in selection.names:
            s = batch.arrays.get(name)
            if s is not None:
                steps.update(int(x) for x, m in zip(s.steps, s.modes, strict=True) if m in _LEARNING_MODES)
        new = sorted(steps)[: limit - len(state.analysed)]
        if not new:
            return
        state.analysed.extend(new)
        window = set(new)
        self._variances(state.tally, batch, params.threshold, sorted(acts), window)
        self._gradients(state.tally, batch, params.distribution_range, sorted(grads), window)
        self._losses(state, batch, params.patience, sorted(losses), window)

    @staticmethod
    def _variances(tally: Tally, batch: TensorBatch, thr: float, names: list[str], window: set[int]) -> None:
        """The largest/smallest variance across the activation inputs, per step, against ``thr``."""
        per_step = _window_values((batch.reduction(name, "variance") for name in names), window)
        for step in sorted(step for step, layers in per_step.items() if len(layers) >= 2):  # a ratio: two layers
            vs = np.asarray(per_step[step], np.float64)
            lo, hi = float(vs.min()), float(vs.max())
            ratio = hi / lo if lo > 0 else np.inf
            tally.add_one(f"activation inputs ({len(vs)} layers)", step, ratio, bool(ratio > thr),
                                f"largest/smallest variance across layers {{v:.4g}} > threshold {thr:g}",
                                statistic="largest/smallest variance across layers", upper=thr)

    @staticmethod
    def _gradients(tally: Tally, batch: TensorBatch, rng: float, names: list[str], window: set[int]) -> None:
        """The 5th-95th percentile range of all gradients, per step, against ``rng``."""
        per_step = _window_values((batch.arrays.get(name) for name in names), window,
                                  keep=lambda v: v.dtype.kind in "fiub")
        for step in sorted(per_step):
            values = np.concatenate([np.asarray(v, np.float64).ravel() for v in per_step[step]])
            values = values[np.isfinite(values)]
            if not len(values):
                continue
            p5, p95 = np.percentile(values, [5, 95])
            width = float(p95 - p5)
            tally.add_one(f"gradients ({len(per_step[step])} tensors)", step, width, width < rng,
                                f"5th-95th percentile range of the gradients {{v:.4g}} < distribution_range {rng:g}",
                                statistic="5th-95th percentile range of the gradients", lower=rng)

    @staticmethod
    def _losses(state: _InitState, batch: TensorBatch, patience: int, names: list[str], window: set[int]) -> None:
        """Each loss's saved steps since its last new minimum, against ``patience``."""
        for name in names:
            stat = batch.reduction(name, "mean")
            if stat is None:
                continue
            keep = np.array([int(s) in window and m in _LEARNING_MODES and w == stat.workers[0]
                             for s, m, w in zip(stat.steps, stat.modes, stat.workers, strict=True)], bool)
            for step, v in zip(stat.steps[keep], stat.values[keep], strict=True):
                best, since = state.best.get(name, (np.inf, -1))
                since = 0 if v < best else since + 1
                state.best[name] = (min(best, float(v)), since)
                state.tally.add_one(name, int(step), float(v), since >= patience,
                                    f"loss {{v:.4g}}: no new minimum for {patience} saved steps", statistic="loss")
