"""What an evaluation of one watched job yields: the :class:`Trigger` s it found and its :class:`JobOutcome`.

Their own module so that the run (:mod:`smx_debug.watch.run`) and the tensor evaluation
(:mod:`smx_debug.watch.tensors`, which the run calls) both import them at module level, without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from smx_debug.contracts import RuleKind
from smx_debug.data.job_errors import JobError

__all__ = ["JobOutcome", "Trigger"]


@dataclass(frozen=True)
class Trigger:
    """A rule configuration whose condition the evaluator found met, in the shape a Debugger status has."""

    job: str
    name: str  # RuleConfigurationName
    rule: str  # rule class
    kind: RuleKind
    step: int | None
    message: str
    status_details: str


@dataclass
class JobOutcome:
    """What a run did for one watched job: status ``evaluated``, ``no data``, ``failed`` (an error stopped it;
    its cursor did not advance) or ``held`` (another evaluation holds its job lease), its triggers, notes, the
    action core's answer and the errors met."""

    job: str
    status: str = "skipped"
    triggers: list[Trigger] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    response: Mapping[str, Any] | None = None
    errors: list[JobError] = field(default_factory=list)

    def fail(self, error: JobError) -> None:
        """Record an error that ends this job's run (its cursor keeps its data and ``through``)."""
        self.status = "failed"
        self.record(error)

    def record(self, error: JobError) -> None:
        """Record an error the job survived (a bad watch spec: the default rules applied)."""
        self.errors.append(error)
        self.notes.append(error.message)
