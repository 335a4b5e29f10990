"""SmxWeightScale: a poor initialisation seen on the weights themselves: a weight matrix whose standard deviation
times the square root of its fan-in is far above what PyTorch's, Glorot's or He's initialisations give (0.58 to
1.41).

Departs from PoorWeightInitialization, which compares the variance of ReLU inputs across layers over 10 saved steps
and needs ReLU modules: this one reads the weights a plan saves anyway, on any architecture, from the first saved
step. Judged once per weight, on its first saved training step (trained weights legitimately grow)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import CollectionRequirement
from smx_debug.rules.own._shared import (
    LEARNING_MODES,
    LastSeenEvaluator,
    OwnParams,
    SmxLastSeen,
    above,
    init_scale,
    judge_statistic,
    judged_tensors,
)
from smx_debug.rules.registry import define


class Params(OwnParams):
    limit: float = Field(2.0, gt=0, description="std(w) x sqrt(fan-in) above which the rule fires (judged on each "
                                                "weight's first saved training step: its initialisation)")
    collection_names: str = Field("weights", description="collections it checks (matrices and kernels only)")
    skip_regex: str = Field(".*(emb|wte|wpe|norm|bn).*",
                            description="weights it skips (embeddings are N(0, 1) by design: nn.Embedding, GPT-2's "
                                        "wte/wpe; normalisation scales)",
                            json_schema_extra={"format": "regex"})


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in judged_tensors(batch, selection.names, skip=params.skip_regex, flags=re.IGNORECASE):
            judge_statistic(state, batch, name, "init_scale", init_scale, above(params.limit),
                            f"std(w) x sqrt(fan-in) is {{v:.3g}} (limit {params.limit:g})",
                            label="std(w) x sqrt(fan-in)", modes=LEARNING_MODES, finite=True,
                            once=True)  # the first saved training step only: how the weight was initialised


RULE = define(
    name="SmxWeightScale",
    profiles=("recommended",),
    summary="A weight matrix is far larger than a standard initialisation makes it.",
    params=Params,
    description="At the first saved training step, the standard deviation of a weight matrix times the square root "
                "of its fan-in is above `limit` "
                "(PyTorch's default, Glorot's and He's initialisations give 0.58 to 1.41): activations grow layer "
                "after layer and the network trains poorly.",
    advice="Initialise the weights with the framework's default, Glorot (xavier_uniform_) or He (kaiming_normal_) "
           "initialisation instead of a fixed standard deviation; if the weights grew during training, lower the "
           "learning rate.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    collections=(CollectionRequirement("weights", save_interval=500, statistics=("init_scale",)),),
)
