"""Tensor rules on a trial that is still being written: status transitions the moment a rule fires.

Each :meth:`TensorLiveEvaluator.update` reads only the steps every worker saved since the previous one (the
:class:`~smx_debug.evaluate.tensor_eval.TensorEvaluator`'s cursor), folds them into each rule's state and
returns the transitions a Debugger rule job would emit (``InProgress -> IssuesFound``); :meth:`finish` settles
the rest once the training has ended. ``smx-debug rules evaluate TRIAL --rule R --live`` prints them.

Example::

    from smx_debug.evaluate.tensor_live import TensorLiveEvaluator
    from smx_debug.tensors import create_trial

    live = TensorLiveEvaluator(create_trial("s3://bucket/job/debug-output"), ["ExplodingTensor"])
    while not live.ended:
        for t in live.update():
            print(t.rule, t.status, t.result.message)
        time.sleep(30)
    live.finish()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from smx_debug.contracts import RuleEvaluationStatus
from smx_debug.evaluate.live import StatusBoard, Transition
from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.rules.configured import RuleLike

__all__ = ["TensorLiveEvaluator"]


class TensorLiveEvaluator:
    """Live statuses of tensor rule configurations over one trial.

    Args:
        trial: a :class:`smx_debug.tensors.Trial` being written (``create_trial(path)``).
        rules: rule classes (defaults) and/or ``ConfiguredRule`` objects; None: every tensor rule.
        clock: "now" in epoch seconds (StalledTrainingRule counts the silence since the last saved step).
    """

    def __init__(self, trial: Any, rules: Iterable[RuleLike] | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.evaluator = TensorEvaluator(trial, rules, clock=clock)
        self.board = StatusBoard(c.name for c in self.evaluator.configs)

    @property
    def status(self) -> dict[str, RuleEvaluationStatus]:
        """Each configuration's status, by configuration name."""
        return self.board.status

    @property
    def results(self) -> dict[str, RuleResult]:
        """Each configuration's result so far."""
        return self.evaluator.results()

    @property
    def ended(self) -> bool:
        """Whether the training has ended (the trial's end marker) and every step it wrote was read."""
        return bool(self.evaluator.feed.trial.loaded_all_steps)

    def update(self) -> list[Transition]:
        """Read the steps saved since the last update; the transitions of the configurations that fired."""
        return self.board.judge(self.evaluator.refresh())

    def finish(self) -> list[Transition]:
        """The training ended: every configuration still in progress becomes ``NoIssuesFound``."""
        return self.board.finish(self.evaluator.results())
