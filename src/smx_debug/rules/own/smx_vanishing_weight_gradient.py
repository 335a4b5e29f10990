"""SmxVanishingWeightGradient: vanishing gradients judged on the gradients of weights only, per layer.

Departs from VanishingGradient, which judges every tensor of the gradients collection: the gradient of a bias
followed by a normalisation layer (BatchNorm, LayerNorm) is zero by construction (the normalisation subtracts the
mean the bias shifts), so VanishingGradient fires on every healthy run of such a network (issue 30)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import (
    LEARNING_MODES,
    LastSeenEvaluator,
    OwnParams,
    SmxLastSeen,
    abs_mean,
    below,
    judge_statistic,
    judged_tensors,
)
from smx_debug.rules.registry import define


class Params(OwnParams):
    threshold: float = Field(1e-7, ge=0, description="mean absolute gradient of a layer's weight below which the "
                                                     "rule fires")
    collection_names: str = Field("gradients", description="collections it checks")
    weight_regex: str = Field(r"weight[^./]*$", description="the gradients it judges (of weights, not biases)",
                              json_schema_extra={"format": "regex"})


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in judged_tensors(batch, selection.names, only=params.weight_regex):
            judge_statistic(state, batch, name, "abs_mean", abs_mean, below(params.threshold),
                            f"mean |gradient| {{v:.3g}} < {params.threshold:g}", label="mean |gradient|",
                            modes=LEARNING_MODES, finite=True)  # a NaN or infinite mean is SmxWeightGrowth's


RULE = define(
    name="SmxVanishingWeightGradient",
    profiles=("recommended",),
    summary="The gradient of a layer's weights vanished (biases are not judged).",
    params=Params,
    description="The mean absolute gradient of a layer's weights fell below `threshold`: the layer stopped "
                "learning. Bias gradients are not judged (a bias followed by a normalisation layer has a zero "
                "gradient by construction).",
    advice="Use ReLU-family activations instead of deep sigmoid/tanh stacks, add normalisation layers or residual "
           "connections, and check the initialisation of the layers before the first vanishing one.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("gradients", save_interval=500, statistics=("abs_mean",)),),
)
