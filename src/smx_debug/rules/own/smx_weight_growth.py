"""SmxWeightGrowth: an explosion seen as growth of a weight's norm between saved steps, beside inf/NaN.

Departs from ExplodingTensor, which fires only on inf/NaN: a 100x or 400x learning rate blows the weights up by
orders of magnitude while every value stays finite, and ExplodingTensor never fires (issue 30). Measured on the
detection benchmark: docs/rules.md, "Recommended profile"."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import (
    LEARNING_MODES,
    LastSeenEvaluator,
    OwnParams,
    SmxLastSeen,
    above,
    count_nonfinite,
    in_collections,
    judge_one,
    l2_norm,
    statistic,
    tensors,
)
from smx_debug.rules.registry import define


class Params(OwnParams):
    factor: float = Field(10.0, gt=1, description="growth of a weight's L2 norm from one saved step to the next "
                                                 "that fires")
    collection_names: str = Field("weights,gradients,losses",
                                  description="collections whose values must stay finite")
    growth_collections: str = Field("weights", description="collections whose norm growth is judged")


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in tensors(selection.names):
            growth = in_collections(batch, name, params.growth_collections)
            norms = {(step, mode): norm for step, mode, norm in statistic(
                batch, name, "l2", l2_norm, modes=LEARNING_MODES)} if growth else {}
            for step, mode, bad in statistic(batch, name, "count_nonfinite", count_nonfinite):
                if bad:
                    judge_one(state.tally, name, step, mode, bad, above(params.factor), "{v:g} NaN or infinite values",
                              statistic="L2 norm growth", fires=True)
                    continue
                norm = norms.get((step, mode))
                if norm is None:
                    continue
                prev = state.last.get(name)
                state.last[name] = [norm]
                if not prev or prev[0] <= 0:
                    continue
                ratio = norm / prev[0]
                judge_one(state.tally, name, step, mode, ratio, above(params.factor),
                          f"L2 norm grew {{v:.3g}}x since its last saved step (factor {params.factor:g})",
                          statistic="L2 norm growth")


RULE = define(
    name="SmxWeightGrowth",
    profiles=("recommended",),
    summary="A weight's norm grew by a large factor between saved steps, or a value is NaN or infinite.",
    params=Params,
    description="The L2 norm of a weight grew more than `factor` times from one saved step to the next, or a "
                "weight, gradient or loss holds NaN or infinite values: the training is diverging, even where every "
                "value is still finite.",
    advice="Lower the learning rate (or warm it up), clip gradients (torch.nn.utils.clip_grad_norm_), and check "
           "the step at which the growth began for a learning-rate schedule change or a bad batch.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("weights", save_interval=500, statistics=("l2", "count_nonfinite")),
                 CollectionRequirement("gradients", save_interval=500, statistics=("count_nonfinite",)),
                 CollectionRequirement("losses", save_interval=500)),
    saved_steps_needed=2,
)
