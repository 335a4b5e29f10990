"""SmxLossPlateau: the training loss stopped decreasing, judged on interval means over a window of saves.

Departs from LossNotDecreasing, which compares the single batch saved at one step with the one saved `num_steps`
saved steps before (at Debugger's save interval, one batch of 128 every 500 steps): its noise alone flags 16 of 20
healthy runs of the detection benchmark. This rule reads the mean training loss of each save interval (the scalar
``train_loss_mean``: smx_debug.hook saves it for a plan with the recommended profile, a script may save it with
``hook.save_scalar``) and fires when it fell by less than `min_decrease_percent` over `window` intervals."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from smx_debug.rules.definitions import TRAIN_LOSS_MEAN
from smx_debug.rules.own._shared import LastSeenEvaluator, SmxLastSeen, judge_one, records
from smx_debug.rules.registry import define


class Params(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor_regex: str = Field(f".*{TRAIN_LOSS_MEAN}", description="regex of the interval means of the training loss",
                              json_schema_extra={"format": "regex"})
    window: int = Field(2, gt=0, description="save intervals over which the mean loss must decrease")
    min_decrease_percent: float = Field(0.5, ge=0, le=100,
                                        description="smallest decrease of the mean loss over the window, in percent")


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        import math

        for name in selection.names:
            for step, mode, value in records(batch, name):
                if state.seen.get(name, -1) >= step:
                    continue
                state.seen[name] = step
                mean = float(value.reshape(-1)[0])
                kept = [*state.last.get(name, []), mean][-(params.window + 1):]
                state.last[name] = kept
                if len(kept) <= params.window or not all(math.isfinite(v) for v in kept) or kept[0] == 0:
                    continue
                decrease = (kept[0] - kept[-1]) / abs(kept[0]) * 100
                judge_one(state.tally, name, step, mode, decrease, decrease < params.min_decrease_percent,
                          f"the mean loss fell {{v:.3g}}% over {params.window} save intervals (at least "
                          f"{params.min_decrease_percent:g}% expected)", statistic="decrease, %",
                          lower=params.min_decrease_percent)


RULE = define(
    name="SmxLossPlateau",
    profiles=("recommended",),
    summary="The mean training loss stopped decreasing over a window of save intervals.",
    params=Params,
    description="The training loss's interval mean fell by less than `min_decrease_percent` over the last "
                "`window` save intervals (interval means, not single batches).",
    advice="Raise the learning rate or check its schedule, check that the optimizer holds every parameter, and "
           "stop the job if the model has converged.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    saved_steps_needed="window",
)
