"""SmxOverfitMeans: overfitting judged as Prechelt's generalisation loss on the interval means of the validation
loss: the mean loss of a validation pass against the best (lowest) mean of the passes before it.

Departs from Overfit, which compares one saved validation batch with one saved training batch: their noise alone
flags 13 of 20 healthy runs of the detection benchmark. It also departs from a gap between the validation and the
training means: a model that generalises well still has a validation loss above a training loss that tends to zero
as it converges (on the independent check of docs/rules.md a gap ratio of 0.5 flagged 4 of 7 healthy runs, among them
runs whose validation loss never rose). What ends a healthy run's progress is a validation loss that rises while
the training continues: L. Prechelt, "Early Stopping - But When?" (1998), criterion GL, the rise of the validation
loss over its minimum so far. This rule reads the scalar ``val_loss_mean`` (smx_debug.hook saves it for a plan with
the recommended profile; a script may save it with ``hook.save_scalar``)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import VAL_LOSS_MEAN
from smx_debug.rules.own._shared import LastSeenEvaluator, OwnParams, SmxLastSeen, above, judge_one, records
from smx_debug.rules.registry import define


class Params(OwnParams):
    tensor_regex: str = Field(f".*{VAL_LOSS_MEAN}", description="regex of the validation passes' mean losses",
                              json_schema_extra={"format": "regex"})
    rise_percent: float = Field(10.0, gt=0, description="rise of a pass's mean validation loss over the lowest mean "
                                                        "of the passes before it, in percent, that counts")
    patience: int = Field(2, gt=0, description="consecutive passes over `rise_percent` that fire")


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in selection.names:
            for step, mode, value, _ in state.unseen(name, records(batch, name)):
                mean = float(value.reshape(-1)[0])
                if not math.isfinite(mean):
                    continue  # a diverging loss is the growth rules' business
                best = state.last.get(name)
                if not best or best[0] <= 0:
                    state.last[name] = [mean]
                    continue
                rise = (mean / best[0] - 1) * 100
                over_key = f"{name}\0passes over"
                over = state.seen.get(over_key, 0) + 1 if rise > params.rise_percent else 0
                state.seen[over_key] = over
                state.last[name] = [min(best[0], mean)]
                judge_one(state.tally, name, step, mode, rise, above(params.rise_percent),
                          f"the mean validation loss is {{v:.3g}}% above its lowest so far ({best[0]:.4g}); over "
                          f"{params.rise_percent:g}% for {over} consecutive pass(es), {params.patience} fire",
                          statistic="rise over the best, %", fires=over >= params.patience)


RULE = define(
    name="SmxOverfitMeans",
    profiles=("recommended",),
    summary="The mean validation loss rose above its best for consecutive validation passes.",
    params=Params,
    description="The mean loss of `patience` consecutive validation passes exceeded the lowest mean of the passes "
                "before it by more than `rise_percent` (Prechelt's generalisation loss, on interval means).",
    advice="Stop at the best checkpoint, add data or augmentation, regularise (weight decay, dropout), or use a "
           "smaller model.",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    saved_steps_needed="patience",
)
