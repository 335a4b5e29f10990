"""SmxOverfitMeans: overfitting judged on interval means: the mean validation loss of a pass against the mean
training loss of the interval before it.

Departs from Overfit, which compares one saved validation batch with one saved training batch: their noise alone
flags 13 of 20 healthy runs of the detection benchmark. This rule reads the scalars ``train_loss_mean`` and
``val_loss_mean`` (smx_debug.hook saves them for a plan with the recommended profile; a script may save them with
``hook.save_scalar``)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from smx_debug.rules.definitions import TRAIN_LOSS_MEAN, VAL_LOSS_MEAN
from smx_debug.rules.own._shared import LastSeenEvaluator, SmxLastSeen, judge_one, records
from smx_debug.rules.registry import define


class Params(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor_regex: str = Field(f".*{TRAIN_LOSS_MEAN}|.*{VAL_LOSS_MEAN}",
                              description="regex of the interval means it reads (training and validation)",
                              json_schema_extra={"format": "regex"})
    eval_regex: str = Field(f".*{VAL_LOSS_MEAN}", description="which of them are the validation passes' means (the "
                                                           "others: the training loss's)",
                            json_schema_extra={"format": "regex"})
    ratio_threshold: float = Field(0.5, ge=0, description="largest allowed (validation - training) / training "
                                                          "ratio of the means")
    patience: int = Field(1, gt=0, description="consecutive passes over the ratio that fire")


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        import math

        val = re.compile(params.eval_regex)
        seen: list[tuple[int, int, str, str, float]] = []  # (step, 0 train / 1 eval, tensor, mode, value)
        for name in selection.names:
            kind = 1 if val.search(name) else 0
            seen += [(step, kind, name, mode, float(v.reshape(-1)[0])) for step, mode, v in records(batch, name)]
        for step, kind, name, mode, value in sorted(seen):
            if not kind:
                state.last["train"] = [value]
                continue
            if "train" not in state.last or state.seen.get("eval", -1) >= step:
                continue
            state.seen["eval"] = step
            base = state.last["train"][0]
            if not (math.isfinite(base) and math.isfinite(value)) or base <= 0:
                continue
            ratio = (value - base) / base
            over = state.seen.get("over", 0) + 1 if ratio > params.ratio_threshold else 0
            state.seen["over"] = over
            judge_one(state.tally, name, step, mode, ratio, over >= params.patience,
                      f"(validation - training) / training mean loss is {{v:.3g}} (threshold "
                      f"{params.ratio_threshold:g}, {params.patience} pass(es))", statistic="loss gap ratio",
                      upper=params.ratio_threshold)


RULE = define(
    name="SmxOverfitMeans",
    profiles=("recommended",),
    summary="The mean validation loss is far above the mean training loss.",
    params=Params,
    description="The mean loss of a validation pass exceeded the mean training loss of the interval before it by "
                "more than `ratio_threshold` (relative) for `patience` passes (interval means, not single batches).",
    advice="Add data or augmentation, regularise (weight decay, dropout), stop earlier, or use a smaller model.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    saved_steps_needed="patience",
)
