"""Live evaluation: re-evaluate as data arrives and report the status changes a rule job would emit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict

from smx_debug.contracts import (
    ISSUES_FOUND,
    NO_ISSUES_FOUND,
    RULE_IN_PROGRESS,
    RuleEvaluationStatus,
    condition_met_details,
)
from smx_debug.data.frames import (
    JobData,
    empty_dataloader,
    empty_scalars,
    empty_steps,
    empty_system,
)
from smx_debug.evaluate.registry import run
from smx_debug.evaluate.result import RuleResult
from smx_debug.rules.configured import ConfiguredRule, RuleLike, configure
from smx_debug.rules.params import PROFILER_RULES


class Transition(BaseModel):
    """One ``RuleEvaluationStatus`` change, with a ``StatusDetails`` text like AWS's.

    ``rule`` is the configuration name (``RuleConfigurationName``); ``result.rule`` is the rule class.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    previous: RuleEvaluationStatus | None
    status: RuleEvaluationStatus
    step: int | None
    status_details: str
    result: RuleResult

    def as_status(self) -> dict[str, Any]:
        """The entry as in DescribeTrainingJob's ``ProfilerRuleEvaluationStatuses``."""
        out: dict[str, Any] = {"RuleConfigurationName": self.rule, "RuleEvaluationStatus": self.status}
        if self.status_details:
            out["StatusDetails"] = self.status_details
        return out


class StatusBoard:
    """Each rule configuration's ``RuleEvaluationStatus`` as a rule job reports it, from its results so far.

    Statuses start at ``InProgress``. A configuration whose condition is met moves to ``IssuesFound`` with
    ``StatusDetails`` "RuleEvaluationConditionMet: Evaluation of the rule X at step N resulted in the condition
    being met" and stays there, as a Debugger rule job stops once it fires; :meth:`finish` moves the rest to
    ``NoIssuesFound``. Shared by the live evaluators of profiler/scalar data and of tensors.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.status: dict[str, RuleEvaluationStatus] = dict.fromkeys(names, RULE_IN_PROGRESS)
        self.results: dict[str, RuleResult] = {}

    def in_progress(self) -> list[str]:
        """The configurations still being evaluated."""
        return [name for name, status in self.status.items() if status == RULE_IN_PROGRESS]

    def judge(self, results: Mapping[str, RuleResult]) -> list[Transition]:
        """Take new results of configurations in progress; the transitions of those that fired."""
        out = []
        for rule, result in results.items():
            if self.status.get(rule) != RULE_IN_PROGRESS:
                continue
            self.results[rule] = result
            if result.triggered:
                step = result.trigger_step if result.trigger_step is not None else 0
                details = condition_met_details(rule, step)
                out.append(self._move(rule, ISSUES_FOUND, step, details, result))
        return out

    def finish(self, results: Mapping[str, RuleResult] | None = None) -> list[Transition]:
        """The training job ended: every configuration still in progress becomes ``NoIssuesFound`` (with its
        result from ``results`` when given, else its last one)."""
        out = []
        for rule in self.in_progress():
            result = (results or {}).get(rule) or self.results[rule]
            out.append(self._move(rule, NO_ISSUES_FOUND, None, "", result))
        return out

    def _move(self, rule: str, status: RuleEvaluationStatus, step: int | None, details: str, result: RuleResult) -> Transition:
        previous = self.status[rule]
        self.status[rule] = status
        self.results[rule] = result
        return Transition(rule=rule, previous=previous, status=status, step=step, status_details=details, result=result)


def _concat(old: pd.DataFrame, new: pd.DataFrame | None) -> pd.DataFrame:
    if new is None or new.empty:
        return old
    if old.empty:
        return new.reset_index(drop=True)
    return pd.concat([old, new], ignore_index=True)


class LiveEvaluator:
    """Keeps the data seen so far and each rule's status; :meth:`update` returns the transitions.

    Statuses start at ``InProgress``. A rule whose condition is met moves to ``IssuesFound`` with
    ``StatusDetails`` "RuleEvaluationConditionMet: Evaluation of the rule X at step N resulted in the
    condition being met" (N is the scan evaluation for profiler rules, the training step for scalar
    rules) and stays there, as a Debugger rule job stops once it fires. :meth:`finish` moves the rest
    to ``NoIssuesFound``.

    Rules are :class:`ConfiguredRule` objects or rule class names (default: every profiler rule); statuses,
    results and transitions are keyed by configuration name, so one rule configured twice is two statuses.

    Example::

        live = LiveEvaluator(rules=["CPUBottleneck"], overrides={"CPUBottleneck": {"patience": 100}})
        for frame in reader_refreshes:           # e.g. SystemMetricsReader.refresh() results
            for t in live.update(system=frame):
                print(t.rule, t.status, t.status_details)
        live.finish()
    """

    def __init__(
        self,
        rules: Iterable[RuleLike] | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        configs = configure(list(rules) if rules is not None else list(PROFILER_RULES), overrides)
        self.configs: dict[str, ConfiguredRule] = {c.name: c for c in configs}
        self.board = StatusBoard(self.configs)
        self._system = empty_system()
        self._steps = empty_steps()
        self._scalars = empty_scalars()
        self._dataloader = empty_dataloader()

    @property
    def status(self) -> dict[str, RuleEvaluationStatus]:
        """Each configuration's status."""
        return self.board.status

    @property
    def results(self) -> dict[str, RuleResult]:
        """Each configuration's last result."""
        return self.board.results

    @property
    def data(self) -> JobData:
        """Everything received so far."""
        return JobData(system=self._system, steps=self._steps, scalars=self._scalars, dataloader=self._dataloader)

    def update(
        self,
        system: pd.DataFrame | None = None,
        *,
        steps: pd.DataFrame | None = None,
        scalars: pd.DataFrame | None = None,
        dataloader: pd.DataFrame | None = None,
        now: datetime | None = None,
        replace: bool = False,
    ) -> list[Transition]:
        """Add new rows (any frame may be None) and re-evaluate the rules still in progress.

        With ``replace=True`` the frames given are the whole data so far (as ``SystemMetricsReader.refresh()``
        returns it) and replace what was kept instead of being appended.
        """
        join = (lambda old, new: old if new is None else new) if replace else _concat
        self._system = join(self._system, system)
        self._steps = join(self._steps, steps)
        self._scalars = join(self._scalars, scalars)
        self._dataloader = join(self._dataloader, dataloader)
        data = JobData(
            system=self._system, steps=self._steps, scalars=self._scalars, dataloader=self._dataloader,
            as_of_ns=None if now is None else int(pd.Timestamp(now).value),
        )
        return self.board.judge({rule: run(self.configs[rule], data) for rule in self.board.in_progress()})

    def finish(self) -> list[Transition]:
        """The training job ended: every rule still in progress becomes ``NoIssuesFound``."""
        missing = [rule for rule in self.board.in_progress() if rule not in self.board.results]
        return self.board.finish({rule: run(self.configs[rule], self.data) for rule in missing})
