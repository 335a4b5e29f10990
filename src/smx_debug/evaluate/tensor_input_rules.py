"""Debugger's rules on what goes into a model and comes out: ClassImbalance, Confusion (labels and
predictions), CheckInputImages (input images) and NLPSequenceRatio (token sequences).

Labels and predictions are tensors the training script saves itself (``hook.save_tensor("labels", y)``): no
built-in collection holds them for PyTorch. Definitions and sources: docs/rules.md, "Tensor rules".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from smx_debug.errors import ConfigError
from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_data import Stat, TensorBatch, per_record
from smx_debug.evaluate.tensor_rules import Collections, TensorRule
from smx_debug.evaluate.tensor_verdict import Selection, Tally, by_collection, by_regex, split_list
from smx_debug.rules.registry import RuleParams
from smx_debug.tensors.arrays import TensorValues


def _records(series: TensorValues | None) -> dict[tuple[int, str], np.ndarray]:
    if series is None:
        return {}
    return {(int(s), str(w)): v for s, w, v in zip(series.steps, series.workers, series.values, strict=True)}


def _classes(value: np.ndarray, *, argmax: bool) -> np.ndarray | None:
    """Class ids of one record: ``argmax`` over the last axis when asked (a vector of probabilities per
    sample), else the values rounded to integers. None for strings and empty records."""
    v = np.asarray(value)
    if v.dtype.kind not in "fiub" or not v.size:
        return None
    if argmax:
        return np.asarray(v.reshape(-1, v.shape[-1]).argmax(axis=-1), np.int64)
    return np.rint(v.astype(np.float64).ravel()).astype(np.int64)


def _pairs(batch: TensorBatch, labels: Sequence[str], predictions: Sequence[str], *, argmax: bool
           ) -> list[tuple[int, str, np.ndarray, np.ndarray | None]]:
    """Per (step, worker) in step order: the labels of all label tensors together, and the predictions (None
    when absent or of another length)."""
    got: dict[tuple[int, str], tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for names, side in ((labels, 0), (predictions, 1)):
        for name in names:
            for key, value in _records(batch.arrays.get(name)).items():
                cls = _classes(value, argmax=argmax if side else False)
                if cls is not None:
                    got.setdefault(key, ([], []))[side].append(cls)
    out = []
    for (step, worker), (ys, ps) in sorted(got.items()):
        if not ys:
            continue
        y = np.concatenate(ys)
        p = np.concatenate(ps) if ps else None
        out.append((step, worker, y, p if p is not None and len(p) == len(y) else None))
    return out


@dataclass
class _Counts:
    tally: Tally
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per class: labels seen
    compared: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ... with a prediction
    wrong: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # ... mispredicted
    samples: int = 0
    unpaired: int = 0


def _grow(a: np.ndarray, k: int) -> np.ndarray:
    return np.concatenate([a, np.zeros(k - len(a), np.int64)]) if len(a) < k else a


class ClassImbalance(TensorRule):
    """Once ``samples`` labels were seen (all steps so far), at each step: the largest / smallest class count
    is above ``threshold_imbalance``, or a class's share of mispredictions is above ``threshold_misprediction``
    ([guide], [2019-test])."""

    name = "ClassImbalance"
    state_types = (_Counts,)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        labels = by_regex(split_list(params.labels_regex, field="labels_regex"), names, what="labels_regex")
        return labels | by_regex(split_list(params.predictions_regex, field="predictions_regex"), names,
                                 what="predictions_regex") if labels.names else labels

    def start(self, params: RuleParams) -> _Counts:
        return _Counts(Tally(self.name))

    def result(self, state: _Counts, params: RuleParams) -> RuleResult:
        return state.tally.result(params, details={
            "samples": state.samples,
            "class_counts": {str(c): int(n) for c, n in enumerate(state.labels.tolist()) if n},
            "mispredicted": {str(c): int(state.wrong[c]) for c in range(len(state.compared)) if state.compared[c]},
            "steps_without_matching_predictions": state.unpaired})

    def update(self, state: _Counts, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        label_names = by_regex(split_list(params.labels_regex, field="labels_regex"), selection.names, what="").names
        pred_names = [n for n in by_regex(split_list(params.predictions_regex, field="predictions_regex"),
                                          selection.names, what="").names if n not in label_names]
        imb, mis, need = params.threshold_imbalance, params.threshold_misprediction, params.samples
        pairs = [(s, w, y, p) for s, w, y, p in _pairs(batch, label_names, pred_names, argmax=params.argmax)
                 if len(y) and y.min() >= 0]
        if not pairs:
            return
        n = len(pairs)
        k = max(len(state.labels), max(int(y.max()) for _, _, y, _ in pairs) + 1)
        rec = np.repeat(np.arange(n), [len(y) for _, _, y, _ in pairs])
        y_all = np.concatenate([y for _, _, y, _ in pairs])
        per = np.bincount(rec * k + y_all, minlength=n * k).reshape(n, k)
        paired = np.array([p is not None for _, _, _, p in pairs])
        state.unpaired += int((~paired).sum())
        ok = paired[rec]
        p_all = np.concatenate([p if p is not None else np.full(len(y), -1) for _, _, y, p in pairs])
        wrong = np.bincount(rec[ok] * k + y_all[ok], weights=(p_all[ok] != y_all[ok]), minlength=n * k).reshape(n, k)
        compared = np.bincount(rec[ok] * k + y_all[ok], minlength=n * k).reshape(n, k)
        labels = _grow(state.labels, k) + np.cumsum(per, axis=0)
        wrong_c = _grow(state.wrong, k) + np.cumsum(wrong, axis=0).astype(np.int64)
        compared_c = _grow(state.compared, k) + np.cumsum(compared, axis=0)
        samples = state.samples + np.cumsum(per.sum(axis=1))
        state.labels, state.wrong, state.compared, state.samples = labels[-1], wrong_c[-1], compared_c[-1], int(
            samples[-1])
        if state.samples < need:
            state.tally.hint = f"{state.samples} labels seen so far; the rule judges once {need} (samples) were seen"
        judged = samples >= need
        steps = np.array([s for s, _, _, _ in pairs], np.int64)
        workers = np.array([w for _, w, _, _ in pairs], object)
        modes = np.full(n, "GLOBAL", object)
        seen = np.where(labels > 0, labels, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where((labels > 0).sum(axis=1) > 1, np.nanmax(seen, axis=1) / np.nanmin(seen, axis=1), 1.0)
        state.tally.add(Stat("labels", steps, modes, steps, workers, ratio), ratio > imb,
                        f"largest/smallest class count {{v:.4g}} > threshold_imbalance {imb:g}", judged=judged,
                        statistic="largest/smallest class count (all labels so far)", upper=imb)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = wrong_c / compared_c
        for c in range(k):
            has = judged & (compared_c[:, c] > 0)
            if has.any():
                state.tally.add(Stat(f"class {c}", steps, modes, steps, workers, share[:, c]), share[:, c] > mis,
                                f"{{v:.3g}} of class {c}'s samples mispredicted > threshold_misprediction {mis:g}",
                                judged=has, statistic=f"share of class {c} mispredicted (so far)", upper=mis)


def _named_or_collection(name: str, collection: str, names: Sequence[str], collections: Collections) -> Selection:
    if name in names:
        return Selection((name,))
    coll = by_collection(collection, names, collections)
    if coll.names:
        return coll
    return Selection((), f"no tensor named {name!r} and {coll.hint}")


class Confusion(TensorRule):
    """At each step, the confusion matrix of that step's labels and predictions (``confusion[label][prediction]``
    incremented per pair) fails when, for a predicted class i, ``confusion[i][i] / sum_j confusion[j][i]`` is
    below ``min_diag`` or an off-diagonal ``confusion[j][i] / sum_j confusion[j][i]`` is above ``max_off_diag``
    ([guide] read per column, as its off-diagonal formula and [2019-test] require; docs/rules.md)."""

    name = "Confusion"

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        labels = _named_or_collection(params.labels, params.labels_collection, names, collections)
        preds = _named_or_collection(params.predictions, params.predictions_collection, names,
                                     collections)
        if not labels.names or not preds.names:
            return Selection((), "; ".join(h for h in (labels.hint, preds.hint) if h))
        return labels | preds

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        labels = _named_or_collection(params.labels, params.labels_collection, selection.names,
                                      batch.collections).names
        preds = [n for n in _named_or_collection(params.predictions, params.predictions_collection,
                                                 selection.names, batch.collections).names if n not in labels]
        lo, hi = params.min_diag, params.max_off_diag
        rows: list[tuple[int, str, float, bool]] = []
        for step, worker, y, p in _pairs(batch, labels, preds, argmax=False):
            if p is None or not len(y) or min(y.min(), p.min()) < 0:
                continue
            k = params.category_no if params.category_no is not None else int(max(y.max(), p.max())) + 1
            if max(y.max(), p.max()) >= k:
                raise ConfigError(f"Confusion.category_no is {k} but step {step} holds class "
                                  f"{int(max(y.max(), p.max()))}", field="category_no", value=k)
            m = np.bincount(y * k + p, minlength=k * k).reshape(k, k)
            cols = m.sum(axis=0)
            seen = np.flatnonzero(cols)
            norm = m[:, seen] / cols[seen]
            diag = norm[seen, np.arange(len(seen))]
            off = norm.copy()
            off[seen, np.arange(len(seen))] = 0
            worst = float(diag.min()) if len(diag) else 1.0
            rows.append((step, worker, worst, bool((diag < lo).any() or (off.max(axis=0) > hi).any())))
        if rows:
            steps = np.array([r[0] for r in rows], np.int64)
            stat = Stat(f"{'+'.join(labels)} vs {'+'.join(preds)}", steps, np.full(len(rows), "GLOBAL", object), steps,
                        np.array([r[1] for r in rows], object), np.array([r[2] for r in rows], np.float64))
            state.add(stat, np.array([r[3] for r in rows]),
                      f"the smallest share of a predicted class on the diagonal is {{v:.3g}} (min_diag {lo:g}), or a "
                      f"share off it is above max_off_diag {hi:g}",
                      statistic="smallest share of a predicted class on the diagonal", lower=lo)


@dataclass
class _Means:
    tally: Tally
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)


class CheckInputImages(TensorRule):
    """Once ``threshold_samples`` images of an input tensor were seen (all steps so far; axis 0 is the batch),
    the mean of a color channel (axis ``channel``) differs from 0 by more than ``threshold_mean`` ([guide],
    [2019-test]: FashionMNIST without normalization fires at step 7 with batches of 64)."""

    name = "CheckInputImages"
    state_types = (_Means,)

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return by_regex(split_list(params.regex, field="regex"), names, what="regex")

    def start(self, params: RuleParams) -> _Means:
        return _Means(Tally(self.name))

    def result(self, state: _Means, params: RuleParams) -> RuleResult:
        means = {n: (state.sums[n] / max(state.counts[n], 1)).tolist() for n in state.sums}
        return state.tally.result(params, details={"channel_means": means, "images": dict(state.samples)})

    def update(self, state: _Means, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        ch, need, thr = params.channel, params.threshold_samples, params.threshold_mean
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None or not len(series):
                continue
            x = series.stacked
            if x is None or x.ndim <= max(ch, 1) + 1:  # records x batch x ... with the channel axis
                state.tally.extra.setdefault("not_images", {})[name] = [list(v.shape) for v in series.values[:1]]
                continue
            moved = np.moveaxis(x, ch + 1, -1)
            pixels = moved.reshape(len(x), -1, x.shape[ch + 1])
            sums = np.cumsum(pixels.sum(axis=1), axis=0) + state.sums.get(name, 0)
            counts = np.cumsum(np.full(len(x), pixels.shape[1])) + state.counts.get(name, 0)
            samples = np.cumsum(np.full(len(x), x.shape[1])) + state.samples.get(name, 0)
            state.sums[name], state.counts[name], state.samples[name] = sums[-1], int(counts[-1]), int(samples[-1])
            worst = np.abs(sums / counts[:, None]).max(axis=1)
            stat = Stat(name, series.steps, series.modes, series.mode_steps, series.workers, worst)
            state.tally.add(stat, worst > thr, f"a channel's mean is {{v:.4g}} (|mean| > threshold_mean {thr:g})",
                            judged=samples >= need, statistic="largest |channel mean| (all images so far)", upper=thr)


class NLPSequenceRatio(TensorRule):
    """At each step, the percentage of an input sequence tensor's tokens equal to each of ``token_values`` is
    above the matching ``token_thresholds_percent`` ([guide])."""

    name = "NLPSequenceRatio"

    def select(self, params: RuleParams, names: Sequence[str], collections: Collections) -> Selection:
        return by_regex(split_list(params.tensor_regex, field="tensor_regex"), names, what="tensor_regex")

    @staticmethod
    def _tokens(params: RuleParams) -> list[tuple[float, float]]:
        values = split_list(params.token_values, field="token_values")
        limits = split_list(params.token_thresholds_percent, field="token_thresholds_percent")
        if len(values) != len(limits):
            raise ConfigError(f"NLPSequenceRatio: token_values {params.token_values!r} and "
                              f"token_thresholds_percent {params.token_thresholds_percent!r} must list as many "
                              f"items", field="token_thresholds_percent", value=params.token_thresholds_percent)
        out = []
        for field_name, items in (("token_values", values), ("token_thresholds_percent", limits)):
            for item in items:
                try:
                    float(item)
                except ValueError:
                    raise ConfigError(f"NLPSequenceRatio.{field_name}: {item!r} is not a number", field=field_name,
                                      value=item) from None
        for v, t in zip(values, limits, strict=True):
            out.append((float(v), float(t)))
        return out

    def update(self, state: Tally, batch: TensorBatch, params: RuleParams, selection: Selection) -> None:
        tokens = self._tokens(params)
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None or not len(series):
                continue
            for token, limit in tokens:
                def share(x: np.ndarray, t: float = token) -> np.ndarray:
                    return np.asarray((x == t).reshape(len(x), -1).mean(axis=1) * 100)

                stat = per_record(series, share)
                state.add(stat, stat.values > limit,
                          f"{{v:.4g}}% of its tokens are {token:g} (> {limit:g}%)",
                          judged=~np.isnan(stat.values), statistic=f"% of tokens equal to {token:g}", upper=limit)
