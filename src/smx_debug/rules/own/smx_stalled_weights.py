"""SmxStalledWeights: a layer (or the whole model) stopped learning: the relative change of a weight between two
saved training steps is below a tolerance.

Departs from UnchangedTensor, which compares every tensor of any collection with numpy.allclose: on a network
with BatchNorm the biases before it never change and their gradients stay zero, so UnchangedTensor fires on every
healthy run (issue 30); integer labels and predictions repeat too. This rule judges float weights only (the
weights collection holds no biases), as the relative L2 change of a fixed sample of each weight's values (the
state keeps that sample, never a model's size). A weight is judged once it has changed: one that never changed
since its first save is frozen on purpose (a pretrained backbone under fine-tuning, frozen from step 0), and the
stop this rule looks for is a layer that was learning and stopped."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pydantic import Field

from smx_debug._lazy import lazy_module
from smx_debug.rules.definitions import CollectionRequirement, summary_tensor_name
from smx_debug.rules.own._shared import LEARNING_MODES, OwnParams, at_most, judge_one, records, tensors
from smx_debug.rules.registry import define

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

_SAMPLE = 512


@dataclass
class SmxWeightSamples:
    """The tally and, per weight, the sample of its last judged training record (``last``), that record's step
    (``seen``) and its (worker, mode) (``where``). The scheduled evaluator keeps the state without the samples
    (:meth:`shed`) and reads those records again (:meth:`refill`): a model's many weights never fill its budget."""

    tally: Any
    last: dict[str, list[float]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)
    where: dict[str, tuple[str, str]] = field(default_factory=dict)

    def shed(self, name: str, history: list[tuple[str, str, str, str, int]]) -> SmxWeightSamples:
        for tensor in self.last:
            worker, mode = self.where.get(tensor, ("", "TRAIN"))
            history.append((name, tensor, worker, mode, int(self.seen[tensor])))
        return replace(self, last={})

    def refill(self, key: tuple[str, str, str], step: int, value: Any) -> None:
        tensor = key[0]
        if self.seen.get(tensor) == step:
            self.last[tensor] = _sample(value)


def _sample(value: Any) -> list[float]:
    """A fixed sample of up to 512 of ``value``'s values, evenly spaced over its flattened order (statistic
    ``sample``: the hook saves the same sample, whose own sample is itself)."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    idx = np.linspace(0, flat.size - 1, min(flat.size, _SAMPLE)).astype(np.int64)
    return [float(v) for v in flat[idx]]


class Params(OwnParams):
    tolerance: float = Field(1e-4, ge=0, description="relative change of a weight between two saved training steps "
                                                     "at or below which the rule fires")
    collection_names: str = Field("weights", description="collections it checks (float tensors only)")


class Evaluator:
    state_types = (SmxWeightSamples,)

    def start(self, params: Params, tally: Any) -> SmxWeightSamples:
        return SmxWeightSamples(tally)

    def update(self, state: SmxWeightSamples, batch: Any, params: Params, selection: Any) -> None:
        series_of = batch.arrays
        for name in tensors(selection.names):
            summary = summary_tensor_name(name, "sample")
            stored = summary if summary in series_of and len(series_of[summary]) else name  # the sample, else raw
            for step, mode, value in records(batch, stored, modes=LEARNING_MODES):
                if state.seen.get(stored) == step:
                    continue
                sample = np.asarray(_sample(value))
                prev = state.last.get(stored)
                workers = series_of[stored].workers[series_of[stored].steps == step]
                state.last[stored], state.seen[stored] = sample.tolist(), step
                state.where[stored] = (str(workers[0]) if len(workers) else "", mode)
                if prev is None or len(prev) != len(sample) or not np.isfinite(sample).all():
                    continue
                before = np.asarray(prev)
                scale = float(np.sqrt(np.square(before).sum()))
                if scale == 0:
                    continue
                change = float(np.sqrt(np.square(sample - before).sum())) / scale
                changed_before = f"{stored}\0changed before"
                if change > params.tolerance:
                    state.seen[changed_before] = 1
                elif changed_before not in state.seen:
                    continue  # frozen since its first save: frozen on purpose (a fine-tuned model's backbone)
                judge_one(state.tally, name, step, mode, change, at_most(params.tolerance),
                          f"changed by {{v:.3g}} (relative L2) since its last saved step (tolerance "
                          f"{params.tolerance:g})", statistic="relative change")


RULE = define(
    name="SmxStalledWeights",
    profiles=("recommended",),
    summary="A weight stopped changing between saved training steps.",
    params=Params,
    description="A weight that had been changing changed by at most `tolerance` (relative L2 change) between two "
                "saved training steps: its layer was frozen, lost its gradient, or the learning rate fell to (nearly) "
                "zero. A weight that never changed since its first save (frozen on purpose) is not judged.",
    advice="Check that every layer's parameters are given to the optimizer with requires_grad=True, that the "
           "learning-rate schedule did not fall to zero, and that the layer receives a gradient (dead or "
           "saturated activations before it).",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("weights", save_interval=500, statistics=("sample",)),),
    saved_steps_needed=2,
)
