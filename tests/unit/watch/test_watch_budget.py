"""The evaluator's time bound, unit by unit: the margin kept for the finish, one call's worst case for the
batched steps, the longest measured job step for the next job, the action core's deadline less the margin."""

from __future__ import annotations

import math

import pytest
from lambda_support import Clock, Context

from smx_debug.actions.runtime import Deadline
from smx_debug.watch.state import RunBudget

CALL = 24.0


def _budget(clock: Clock, left: float) -> RunBudget:
    return RunBudget(Deadline.of(Context(clock, left), CALL))


@pytest.mark.parametrize(("left", "fits"), [(48.0, True), (47.9, False)])
def test_budget_one_call_fits_only_with_the_margin_kept(left: float, fits: bool) -> None:
    late = _budget(Clock(), left).short_of_call()
    assert (late is None) is fits
    if late is not None:
        assert "kept to save cursors, release leases and put job errors" in late


def test_budget_next_job_needs_the_longest_step_measured_and_a_call_if_it_reads_tensors() -> None:
    clock = Clock()
    budget = _budget(clock, 40.0)  # 16 s for work after the 24 s margin
    assert budget.short_of_job(calls=False) is None  # nothing measured yet
    assert budget.short_of_job(calls=True) is not None  # 16 s < one call's 24 s
    with budget.step():
        clock.now += 5.0
    with budget.step():
        clock.now += 2.0
    assert budget.longest == 5.0 and budget.left() == 9.0
    assert budget.short_of_job(calls=False) is None
    clock.now += 4.5  # 4.5 s left for work, the longest step took 5
    assert budget.short_of_job(calls=False) is not None


def test_budget_actions_get_the_deadline_less_the_margin() -> None:
    clock = Clock()
    actions = _budget(clock, 60.0).for_actions()
    assert actions is not None and actions.left() == 36.0 and actions.call_seconds == CALL


def test_budget_without_a_deadline_is_unbounded() -> None:
    for budget in (RunBudget(), RunBudget(Deadline.of(None, CALL))):
        assert budget.left() == math.inf and budget.reserve == 0.0
        assert budget.short_of_call() is None and budget.short_of_job(calls=True) is None
        with budget.step():
            pass
        assert budget.longest == 0.0
