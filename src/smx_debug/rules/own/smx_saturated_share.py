"""SmxSaturatedShare: tanh/sigmoid saturation judged as the share of a layer's pre-activations beyond the range.

Departs from SaturatedActivation, which calls a unit saturated only when it is out of range for more than 99% of
the samples, and fires when half of a layer's units are: on a tanh network with 70% of its inputs beyond +-9.5
no unit is out of range for 99% of the samples, and it never fires (issue 30)."""

from __future__ import annotations

import functools
from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import CollectionRequirement, share_beyond
from smx_debug.rules.own._shared import (
    LastSeenEvaluator,
    OwnParams,
    SmxLastSeen,
    above,
    judge_statistic,
    share_abs_beyond,
    tensors,
)
from smx_debug.rules.registry import define

_REGEX = ".*tanh_input|.*sigmoid_input"


class Params(OwnParams):
    share: float = Field(0.2, gt=0, le=1, description="share of a layer's pre-activations beyond the range that "
                                                      "fires")
    tensor_regex: str = Field(_REGEX, description="regex of the activation inputs",
                              json_schema_extra={"format": "regex"})
    tanh_limit: float = Field(5.0, gt=0, description="|tanh input| beyond which it is saturated (tanh' < 2e-4)")
    sigmoid_limit: float = Field(9.0, gt=0, description="|sigmoid input| beyond which it is saturated "
                                                        "(sigmoid' < 1.3e-4)")


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in tensors(selection.names):
            limit = params.sigmoid_limit if "sigmoid" in name.lower() else params.tanh_limit
            judge_statistic(state, batch, name, share_beyond(limit), functools.partial(share_abs_beyond, limit),
                            above(params.share), f"{{v:.0%}} of its inputs beyond +-{limit:g} (limit {params.share:.0%})",
                            label="share saturated")


RULE = define(
    name="SmxSaturatedShare",
    profiles=("recommended",),
    summary="A large share of a tanh or sigmoid layer's inputs is in the saturated range.",
    params=Params,
    description="More than `share` of a tanh (sigmoid) layer's inputs lie beyond +-`tanh_limit` "
                "(+-`sigmoid_limit`), where the activation's derivative is nearly zero: those units pass almost no "
                "gradient.",
    advice="Lower the initial weight scale (Glorot initialisation for tanh/sigmoid), normalise the inputs, add a "
           "normalisation layer before the activation, or lower the learning rate.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement(
        "smx_saturation_inputs", include_regex=_REGEX, save_interval=500,
        statistics=(share_beyond(Params().tanh_limit), share_beyond(Params().sigmoid_limit))),),
)
