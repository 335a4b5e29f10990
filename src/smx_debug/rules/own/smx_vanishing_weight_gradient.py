"""SmxVanishingWeightGradient: vanishing gradients judged on the gradients of weights only, per layer.

Departs from VanishingGradient, which judges every tensor of the gradients collection: the gradient of a bias
followed by a normalisation layer (BatchNorm, LayerNorm) is zero by construction (the normalisation subtracts the
mean the bias shifts), so VanishingGradient fires on every healthy run of such a network (issue 30)."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import (
    LEARNING_MODES,
    LastSeenEvaluator,
    SmxLastSeen,
    abs_mean,
    judge_one,
    statistic,
    tensors,
)
from smx_debug.rules.registry import define


class Params(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: float = Field(1e-7, ge=0, description="mean absolute gradient of a layer's weight below which the "
                                                     "rule fires")
    collection_names: str = Field("gradients", description="collections it checks")
    weight_regex: str = Field(r"weight[^./]*$", description="the gradients it judges (of weights, not biases)",
                              json_schema_extra={"format": "regex"})


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        weight = re.compile(params.weight_regex)
        for name in tensors(selection.names):
            if not weight.search(name):
                continue
            for step, mode, mean in statistic(batch, name, "abs_mean", abs_mean,
                                              modes=LEARNING_MODES):
                if not math.isfinite(mean):
                    continue  # SmxWeightGrowth's
                judge_one(state.tally, name, step, mode, mean, mean < params.threshold,
                          f"mean |gradient| {{v:.3g}} < {params.threshold:g}", statistic="mean |gradient|",
                          lower=params.threshold)


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
