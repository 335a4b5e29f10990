"""SmxLossPlateau: the training loss was decreasing and stopped, judged on interval means over windows of steps.

Departs from LossNotDecreasing, which compares the single batch saved at one step with the one saved `num_steps`
saved steps before (at Debugger's save interval, one batch of 128 every 500 steps): its noise alone flags 16 of 20
healthy runs of the detection benchmark. It also departs from a plain "decreased by less than x% over a window":
a run that has converged decreases by less than any x% too, and on runs trained to convergence (the independent
check of docs/rules.md) that definition flagged 3 of 7 healthy runs. This rule reads the mean training loss of each
save interval (the scalar ``train_loss_mean``: smx_debug.hook saves it for a plan with the recommended profile, a
script may save it with ``hook.save_scalar``), averages it over consecutive windows of about `window_steps` steps, and
fires when the loss fell by at least `was_decreasing_percent` over one window and then by less than
`min_decrease_percent` over the next: a decrease that stops abruptly (a learning rate cut to nothing, an optimizer
that lost its parameters), not one that tapers off as the run converges."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from smx_debug.rules.definitions import TRAIN_LOSS_MEAN
from smx_debug.rules.own._shared import LastSeenEvaluator, OwnParams, SmxLastSeen, below, judge_one, records
from smx_debug.rules.registry import define

_MAX_WINDOW = 50  # save intervals averaged in one window at the most (the state keeps 3 windows of means)


class Params(OwnParams):
    tensor_regex: str = Field(f".*{TRAIN_LOSS_MEAN}", description="regex of the interval means of the training loss",
                              json_schema_extra={"format": "regex"})
    window_steps: int = Field(500, gt=0, description="steps a window averages (whole save intervals, at least one)")
    min_decrease_percent: float = Field(0.5, ge=0, le=100,
                                        description="a decrease over the last window below this, in percent, is a "
                                                    "stop")
    was_decreasing_percent: float = Field(2.0, ge=0, le=100,
                                          description="the decrease over the window before, in percent, that makes "
                                                      "the run one that was still learning")


def _window(steps_between: int, params: Params) -> int:
    """Save intervals in one window: ``window_steps`` rounded up to whole intervals."""
    return max(1, min(_MAX_WINDOW, math.ceil(params.window_steps / max(1, steps_between))))


class Evaluator(LastSeenEvaluator):
    def update(self, state: SmxLastSeen, batch: Any, params: Params, selection: Any) -> None:
        for name in selection.names:
            for step, mode, value, last_step in state.unseen(name, records(batch, name)):
                gap_key = f"{name}\0steps between saves"
                if last_step >= 0 and gap_key not in state.seen:
                    state.seen[gap_key] = step - last_step  # the save interval, in global steps, from the first two
                mean = float(value.reshape(-1)[0])
                k = _window(state.seen.get(gap_key, params.window_steps), params)
                kept = [*state.last.get(name, []), mean][-3 * _MAX_WINDOW:]
                state.last[name] = kept
                if gap_key not in state.seen or len(kept) < 3 * k:
                    continue
                n = len(kept)
                before, previous, current = (sum(kept[n - i * k:n - (i - 1) * k]) / k for i in (3, 2, 1))
                if not all(math.isfinite(v) and v > 0 for v in (before, previous, current)):
                    continue  # a diverging loss is the growth rules' business
                was = (before - previous) / before * 100
                now = (previous - current) / previous * 100
                if was < params.was_decreasing_percent:
                    continue  # not learning any more, or not yet: nothing stopped here
                judge_one(state.tally, name, step, mode, now, below(params.min_decrease_percent),
                          f"the mean loss fell {{v:.3g}}% over the last {k} save interval(s), after {was:.3g}% over "
                          f"the {k} before (a stop below {params.min_decrease_percent:g}%)", statistic="decrease, %")


RULE = define(
    name="SmxLossPlateau",
    summary="The mean training loss was decreasing and stopped abruptly.",
    params=Params,
    description="The training loss's mean over a window of about `window_steps` steps fell by less than "
                "`min_decrease_percent`, right after a window over which it fell by at least "
                "`was_decreasing_percent` (interval means, not single batches; a run converging slowly is not "
                "judged).",
    advice="Check the learning-rate schedule (a step to a tiny rate), that the optimizer holds every parameter and "
           "that the gradients reach the weights (frozen layers, a detached graph).",
    evaluates_on=("tensors",),
    evaluator=Evaluator(),
    saved_steps_needed=3,
)
