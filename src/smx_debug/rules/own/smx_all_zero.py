"""SmxAllZero: a float weight or weight gradient that is entirely zero.

Departs from AllZero, which judges every saved tensor: the integer predictions of an untrained classifier are all
class 0 at the first saved step, so AllZero fires on healthy runs (issue 30); labels are data, not model state.
This rule skips the labels and predictions collections, integer tensors and bias gradients (zero by construction
before a normalisation layer)."""

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
    judged_tensors,
    share_zero,
)
from smx_debug.rules.registry import define


class Params(OwnParams):
    threshold: float = Field(1.0, gt=0, le=1, description="share of zero values that fires")
    collection_names: str = Field("weights,gradients", description="collections it checks")
    skip_collections: str = Field("labels,predictions", description="collections it never judges")
    skip_regex: str = Field("bias$", description="tensors it never judges", json_schema_extra={"format": "regex"})


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in judged_tensors(batch, selection.names, skip=params.skip_regex,
                                   skip_collections=params.skip_collections):
            judge_statistic(state, batch, name, "share_zero", share_zero, at_least(params.threshold),  # floats only
                            f"{{v:.0%}} of its values are zero (threshold {params.threshold:.0%})", label="share zero")


RULE = define(
    name="SmxAllZero",
    profiles=("recommended",),
    summary="A float weight or weight gradient is all zeros (labels, predictions and biases skipped).",
    params=Params,
    description="At least `threshold` of a float weight's or weight gradient's values are zero: the layer gets "
                "no gradient or was zeroed. Labels, predictions, integer tensors and bias gradients are not judged.",
    advice="Look for dead activations or a detached graph before the layer, and for code that zeroes weights "
           "(a pruning mask, an initialisation to zeros).",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("weights", save_interval=500, statistics=("share_zero",)),
                 CollectionRequirement("gradients", save_interval=500, statistics=("share_zero",))),
)
