"""SmxClassImbalance: the training labels' classes are imbalanced, judged on the labels alone.

Departs from ClassImbalance, which also fires when a class's share of mispredictions, counted from the first saved
step, exceeds `threshold_misprediction` (0.7): an untrained model mispredicts most classes, so once the hook saves
enough labels (a recommended-profile plan's hook keeps the latest >= 512 of each save) it fired at the first save on
3 of 7 healthy runs of the independent check (docs/rules.md). Mispredictions measure the model, not the data; the
loss rules judge the model. It also waits for `samples_per_class` labels per class seen besides `samples` in all:
with 100 balanced classes and 500 labels, chance alone puts the largest/smallest count ratio above 10."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from smx_debug._lazy import lazy_module
from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import (
    LEARNING_MODES,
    LastSeenEvaluator,
    OwnParams,
    SmxLastSeen,
    above,
    judge_one,
    records,
)
from smx_debug.rules.registry import define

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

_REGEX = ".*labels"
_MAX_CLASSES = 100_000  # a label beyond this is not a class id (the counts would not be a few numbers)


class Params(OwnParams):
    threshold_imbalance: float = Field(10.0, gt=1, description="largest/smallest count of the classes seen that "
                                                               "fires")
    samples: int = Field(500, gt=0, description="labels seen in all before the rule judges")
    samples_per_class: int = Field(30, gt=0, description="labels seen per class seen before the rule judges")
    tensor_regex: str = Field(_REGEX, description="regex of the labels tensors (integer class ids)",
                              json_schema_extra={"format": "regex"})


def _label_records(batch: Any, name: str) -> Any:
    """``(global step, mode, class ids)`` of each saved training record of ``name`` holding integer class ids."""
    for step, mode, value in records(batch, name, modes=LEARNING_MODES, integers=True):
        ids = value.reshape(-1)
        if ids.min() >= 0 and ids.max() < _MAX_CLASSES:
            yield step, mode, ids


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in selection.names:
            for step, mode, ids, _ in state.unseen(name, _label_records(batch, name)):
                counts = np.asarray(state.last.get(name, []), dtype=np.float64)
                new = np.bincount(ids).astype(np.float64)
                if len(new) > len(counts):
                    counts = np.pad(counts, (0, len(new) - len(counts)))
                counts[: len(new)] += new
                state.last[name] = counts.tolist()
                seen = counts[counts > 0]
                total = float(counts.sum())
                if total < params.samples or total < params.samples_per_class * len(seen):
                    continue
                ratio = float(seen.max() / seen.min()) if len(seen) > 1 else 1.0
                judge_one(state.tally, name, step, mode, ratio, above(params.threshold_imbalance),
                          f"largest/smallest class count {{v:.4g}} over {int(total)} labels of {len(seen)} classes "
                          f"(threshold {params.threshold_imbalance:g})", statistic="largest/smallest class count")


RULE = define(
    name="SmxClassImbalance",
    profiles=("recommended",),
    summary="The classes of the training labels are imbalanced.",
    params=Params,
    description="Among the training labels seen so far (at least `samples`, and `samples_per_class` per class seen), "
                "the largest class count is more than `threshold_imbalance` times the smallest (labels only: a "
                "model's mispredictions are not judged).",
    advice="Resample or reweight the classes (torch.utils.data.WeightedRandomSampler, a class-weighted loss), or "
           "check the data pipeline for a filter or a sort that drops classes.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("labels", include_regex=_REGEX, save_interval=500),),
)
