"""SmxDeadReluShare: dead ReLUs judged at the layer level, as the share of a layer's outputs that are zero.

Departs from DeadRelu, which calls a unit inactive when it is zero for 99% of the samples and fires when half of
a layer's units are: that fires when half the units are dead even if the layer still passes signal; this rule
fires when the layer as a whole passes (almost) nothing."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import (
    LastSeenEvaluator,
    OwnParams,
    SmxLastSeen,
    at_least,
    judge_statistic,
    share_zero,
    tensors,
)
from smx_debug.rules.registry import define

_REGEX = ".*relu_output"


class Params(OwnParams):
    share: float = Field(0.95, gt=0, le=1, description="share of a layer's ReLU outputs at zero that fires")
    tensor_regex: str = Field(_REGEX, description="regex of the ReLU outputs", json_schema_extra={"format": "regex"})


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in tensors(selection.names):
            judge_statistic(state, batch, name, "share_zero", share_zero, at_least(params.share),
                            f"{{v:.1%}} of its outputs are zero (limit {params.share:.0%})", label="share zero")


RULE = define(
    name="SmxDeadReluShare",
    profiles=("recommended",),
    summary="A ReLU layer outputs (almost) only zeros.",
    params=Params,
    description="At least `share` of a ReLU layer's outputs over the saved batch are zero: the layer passes "
                "almost no signal and its weights get almost no gradient.",
    advice="Lower the learning rate, initialise biases at zero (or small positive values) and weights with He "
           "initialisation, or use LeakyReLU/GELU.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("relu_output", include_regex=_REGEX, save_interval=500,
                                                statistics=("share_zero",)),),
)
