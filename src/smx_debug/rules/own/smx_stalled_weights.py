"""SmxStalledWeights: a layer (or the whole model) stopped learning: the relative change of a weight between two
saved training steps is below a tolerance.

Departs from UnchangedTensor, which compares every tensor of any collection with numpy.allclose: on a network
with BatchNorm the biases before it never change and their gradients stay zero, so UnchangedTensor fires on every
healthy run (issue 30); integer labels and predictions repeat too. This rule judges float weights only (the
weights collection holds no biases), as the relative L2 change of a fixed sample of each weight's values (the
state keeps that sample, never a model's size)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import LEARNING_MODES, SmxLastSeen, judge_one, records
from smx_debug.rules.registry import define

_SAMPLE = 512


class Params(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tolerance: float = Field(1e-4, ge=0, description="relative change of a weight between two saved training steps "
                                                     "at or below which the rule fires")
    collection_names: str = Field("weights", description="collections it checks (float tensors only)")


class Evaluator:
    state_types = (SmxLastSeen,)

    def start(self, params: Params, tally: Any) -> SmxLastSeen:
        return SmxLastSeen(tally)

    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        import numpy as np

        for name in selection.names:
            for step, mode, value in records(batch, name, modes=LEARNING_MODES):
                flat = value.reshape(-1)
                idx = np.linspace(0, flat.size - 1, min(flat.size, _SAMPLE)).astype(np.int64)
                sample = flat[idx]
                prev = state.last.get(name)
                if state.seen.get(name) == step:
                    continue
                state.last[name], state.seen[name] = [float(v) for v in sample], step
                if prev is None or len(prev) != len(sample) or not np.isfinite(sample).all():
                    continue
                before = np.asarray(prev)
                scale = float(np.sqrt(np.square(before).sum()))
                if scale == 0:
                    continue
                change = float(np.sqrt(np.square(sample - before).sum())) / scale
                judge_one(state.tally, name, step, mode, change, change <= params.tolerance,
                          f"changed by {{v:.3g}} (relative L2) since its last saved step (tolerance "
                          f"{params.tolerance:g})", statistic="relative change", lower=params.tolerance)


RULE = define(
    name="SmxStalledWeights",
    summary="A weight stopped changing between saved training steps.",
    params=Params,
    description="A weight changed by at most `tolerance` (relative L2 change) between two saved training steps: "
                "its layer is frozen, gets no gradient, or the learning rate is (nearly) zero.",
    advice="Check that every layer's parameters are given to the optimizer with requires_grad=True, that the "
           "learning-rate schedule did not fall to zero, and that the layer receives a gradient (dead or "
           "saturated activations before it).",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("weights", save_interval=500),),
    saved_steps_needed=2,
)
