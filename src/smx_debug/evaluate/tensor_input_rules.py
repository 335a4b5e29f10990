"""Debugger's rules on what goes into a model and comes out: ClassImbalance, Confusion (labels and
predictions), CheckInputImages (input images) and NLPSequenceRatio (token sequences).

Labels and predictions are tensors the training script saves itself (``hook.save_tensor("labels", y)``): no
built-in collection holds them for PyTorch. Definitions and sources: docs/rules.md, "Tensor rules".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smx_debug.errors import ConfigError
from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_data import TensorBatch, TensorSeries
from smx_debug.evaluate.tensor_rules import Collections, TensorRule
from smx_debug.evaluate.tensor_verdict import Selection, Tally, by_collection, by_regex, split_list

__all__ = ["CheckInputImages", "ClassImbalance", "Confusion", "NLPSequenceRatio"]


def _records(series: TensorSeries | None) -> dict[tuple[int, str], np.ndarray]:
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
    labels: dict[int, int] = field(default_factory=dict)
    compared: dict[int, int] = field(default_factory=dict)
    wrong: dict[int, int] = field(default_factory=dict)
    samples: int = 0
    unpaired: int = 0


class ClassImbalance(TensorRule):
    """Once ``samples`` labels were seen (all steps so far), at each step: the largest / smallest class count
    is above ``threshold_imbalance``, or a class's share of mispredictions is above ``threshold_misprediction``
    ([guide], [2019-test])."""

    name = "ClassImbalance"

    def select(self, params: Mapping[str, Any], names: Sequence[str], collections: Collections) -> Selection:
        labels = by_regex(split_list(params["labels_regex"], field="labels_regex"), names, what="labels_regex")
        return labels | by_regex(split_list(params["predictions_regex"], field="predictions_regex"), names,
                                 what="predictions_regex") if labels.names else labels

    def start(self, params: Mapping[str, Any]) -> _Counts:
        return _Counts(Tally(self.name))

    def result(self, state: _Counts, params: Mapping[str, Any]) -> RuleResult:
        return state.tally.result(params, details={
            "samples": state.samples, "class_counts": {str(k): v for k, v in sorted(state.labels.items())},
            "mispredicted": {str(k): state.wrong.get(k, 0) for k in sorted(state.compared)},
            "steps_without_matching_predictions": state.unpaired})

    def update(self, state: _Counts, batch: TensorBatch, params: Mapping[str, Any], selection: Selection) -> None:
        label_names = by_regex(split_list(params["labels_regex"], field="labels_regex"), selection.names, what="").names
        pred_names = [n for n in by_regex(split_list(params["predictions_regex"], field="predictions_regex"),
                                          selection.names, what="").names if n not in label_names]
        imb, mis, need = float(params["threshold_imbalance"]), float(params["threshold_misprediction"]), int(
            params["samples"])
        for step, worker, y, p in _pairs(batch, label_names, pred_names, argmax=bool(params["argmax"])):
            classes, counts = np.unique(y, return_counts=True)
            for c, n in zip(classes.tolist(), counts.tolist(), strict=True):
                state.labels[c] = state.labels.get(c, 0) + n
            state.samples += len(y)
            if p is None:
                state.unpaired += 1
            else:
                for c in classes.tolist():
                    mine = y == c
                    state.compared[c] = state.compared.get(c, 0) + int(mine.sum())
                    state.wrong[c] = state.wrong.get(c, 0) + int((p[mine] != c).sum())
            if state.samples < need:
                continue
            counts_now = np.array(list(state.labels.values()), np.float64)
            ratio = float(counts_now.max() / counts_now.min()) if len(counts_now) > 1 else 1.0
            state.tally.add_one("labels", step, ratio, ratio > imb,
                                f"largest/smallest class count {{v:.4g}} > threshold_imbalance {imb:g} "
                                          f"(after {state.samples} labels)", worker=worker)
            for c in sorted(state.compared):
                share = state.wrong.get(c, 0) / state.compared[c]
                state.tally.add_one(f"class {c}", step, share, share > mis,
                                    f"{{v:.3g}} of class {c}'s samples mispredicted > "
                                                   f"threshold_misprediction {mis:g}", worker=worker)


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

    def select(self, params: Mapping[str, Any], names: Sequence[str], collections: Collections) -> Selection:
        labels = _named_or_collection(str(params["labels"]), str(params["labels_collection"]), names, collections)
        preds = _named_or_collection(str(params["predictions"]), str(params["predictions_collection"]), names,
                                     collections)
        if not labels.names or not preds.names:
            return Selection((), "; ".join(h for h in (labels.hint, preds.hint) if h))
        return labels | preds

    def update(self, state: Tally, batch: TensorBatch, params: Mapping[str, Any], selection: Selection) -> None:
        labels = _named_or_collection(str(params["labels"]), str(params["labels_collection"]), selection.names,
                                      batch.collections).names
        preds = [n for n in _named_or_collection(str(params["predictions"]), str(params["predictions_collection"]),
                                                 selection.names, batch.collections).names if n not in labels]
        lo, hi = float(params["min_diag"]), float(params["max_off_diag"])
        for step, worker, y, p in _pairs(batch, labels, preds, argmax=False):
            if p is None or not len(y) or min(y.min(), p.min()) < 0:
                continue
            k = int(params["category_no"]) if params.get("category_no") is not None else int(max(y.max(), p.max())) + 1
            if max(y.max(), p.max()) >= k:
                raise ConfigError(f"Confusion.category_no is {k} but step {step} holds class "
                                  f"{int(max(y.max(), p.max()))}", field="category_no", value=k)
            m = np.zeros((k, k), np.int64)
            np.add.at(m, (y, p), 1)
            cols = m.sum(axis=0)
            seen = np.flatnonzero(cols)
            with np.errstate(invalid="ignore", divide="ignore"):
                norm = m[:, seen] / cols[seen]
            diag = norm[seen, np.arange(len(seen))]
            off = norm.copy()
            off[seen, np.arange(len(seen))] = 0
            bad_diag = diag < lo
            bad_off = off.max(axis=0) > hi
            worst = float(diag.min()) if len(diag) else 1.0
            bad = bool(bad_diag.any() or bad_off.any())
            column = int(seen[np.argmax(bad_diag | bad_off)]) if bad else -1
            pairs = len(y)
            state.add_one("confusion", step, worst, bad,
                          f"predicted class {column}: diagonal share {{v:.3g}} (min_diag "
                                                       f"{lo:g}) or an off-diagonal share above max_off_diag {hi:g} "
                                                       f"({pairs} pairs)", worker=worker)


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

    def select(self, params: Mapping[str, Any], names: Sequence[str], collections: Collections) -> Selection:
        return by_regex(split_list(params["regex"], field="regex"), names, what="regex")

    def start(self, params: Mapping[str, Any]) -> _Means:
        return _Means(Tally(self.name))

    def result(self, state: _Means, params: Mapping[str, Any]) -> RuleResult:
        means = {n: (state.sums[n] / max(state.counts[n], 1)).tolist() for n in state.sums}
        return state.tally.result(params, details={"channel_means": means, "images": dict(state.samples)})

    def update(self, state: _Means, batch: TensorBatch, params: Mapping[str, Any], selection: Selection) -> None:
        ch, need, thr = int(params["channel"]), int(params["threshold_samples"]), float(params["threshold_mean"])
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None:
                continue
            for step, worker, value in zip(series.steps, series.workers, series.values, strict=True):
                v = np.asarray(value)
                if v.dtype.kind not in "fiub" or v.ndim <= max(ch, 1):
                    state.tally.extra.setdefault("not_images", {})[name] = list(v.shape)
                    continue
                moved = np.moveaxis(v.astype(np.float64), ch, -1).reshape(-1, v.shape[ch])
                state.sums[name] = state.sums.get(name, 0) + moved.sum(axis=0)
                state.counts[name] = state.counts.get(name, 0) + len(moved)
                state.samples[name] = state.samples.get(name, 0) + v.shape[0]
                if state.samples[name] < need:
                    continue
                worst = float(np.abs(state.sums[name] / state.counts[name]).max())
                state.tally.add_one(name, int(step), worst, worst > thr,
                                    f"a channel's mean is {{v:.4g}} (|mean| > "
                                                                     f"threshold_mean {thr:g}, over {state.samples[name]} images)",
                                    worker=str(worker))


class NLPSequenceRatio(TensorRule):
    """At each step, the percentage of an input sequence tensor's tokens equal to each of ``token_values`` is
    above the matching ``token_thresholds_percent`` ([guide])."""

    name = "NLPSequenceRatio"

    def select(self, params: Mapping[str, Any], names: Sequence[str], collections: Collections) -> Selection:
        return by_regex(split_list(params["tensor_regex"], field="tensor_regex"), names, what="tensor_regex")

    @staticmethod
    def _tokens(params: Mapping[str, Any]) -> list[tuple[float, float]]:
        values = split_list(str(params["token_values"]), field="token_values")
        limits = split_list(str(params["token_thresholds_percent"]), field="token_thresholds_percent")
        if len(values) != len(limits):
            raise ConfigError(f"NLPSequenceRatio: token_values {params['token_values']!r} and "
                              f"token_thresholds_percent {params['token_thresholds_percent']!r} must list as many "
                              f"items", field="token_thresholds_percent", value=params["token_thresholds_percent"])
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

    def update(self, state: Tally, batch: TensorBatch, params: Mapping[str, Any], selection: Selection) -> None:
        tokens = self._tokens(params)
        for name in selection.names:
            series = batch.arrays.get(name)
            if series is None or not len(series):
                continue
            for token, limit in tokens:
                def share(x: np.ndarray, t: float = token) -> np.ndarray:
                    return np.asarray((x == t).reshape(len(x), -1).mean(axis=1) * 100)

                stat = series.stat(share)
                state.add(stat, stat.values > limit,
                          f"{{v:.4g}}% of its tokens are {token:g} (> {limit:g}%)",
                          judged=~np.isnan(stat.values))
