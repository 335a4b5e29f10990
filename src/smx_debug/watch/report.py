"""What a run works with and yields: its AWS :class:`Clients`, each watched job's :class:`JobOutcome` and the
run's :class:`RunReport`.

Below every step of the pipeline (:mod:`smx_debug.watch.run`: discover, read, evaluate, act, save), which each
record into the report; the triggers are the action core's :class:`smx_debug.actions.verify.Trigger`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from smx_debug.actions.verify import Trigger
from smx_debug.data.job_errors import OUT_OF_TIME, JobError

ENDED = "ended"  # a JobOutcome status: the ended job's last minutes are appended, its cursor marked complete


@dataclass(frozen=True)
class Clients:
    """The AWS clients a run uses (injected; the handler builds them once per cold start)."""

    sagemaker: Any
    cloudwatch: Any
    dynamodb: Any
    s3: Any


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


@dataclass
class RunReport:
    """A run's summary: jobs seen, evaluated, failed and triggered, and what it asked AWS for.

    ``errors`` are the run's own problems that did not fail it (the opt-in Search, the lease release);
    ``skipped`` says why the run did nothing (another run held the lease).
    """

    now: float
    running: int = 0
    watched: int = 0
    outcomes: dict[str, JobOutcome] = field(default_factory=dict)
    metrics_requested: int = 0
    datapoints: int = 0
    get_metric_data_calls: int = 0
    errors: list[JobError] = field(default_factory=list)
    skipped: str | None = None
    shards: int = 0

    @property
    def triggers(self) -> list[Trigger]:
        return [t for o in self.outcomes.values() for t in o.triggers]

    def out_of_time(self, jobs: Iterable[str], why: str) -> None:
        """Fail each of ``jobs`` ``out-of-time`` (its outcome made when the run had none yet): not started, so its
        cursor is kept and it goes first next run (:mod:`smx_debug.watch.budget`)."""
        for job in jobs:
            self.outcomes.setdefault(job, JobOutcome(job=job)).fail(JobError(OUT_OF_TIME, why))

    def error_counts(self) -> dict[str, int]:
        """This run's errors by reason: each job counted once per reason, plus the run's own."""
        reasons = [r for o in self.outcomes.values() for r in dict.fromkeys(e.reason for e in o.errors)]
        return dict(Counter(reasons + [e.reason for e in self.errors]))

    def summary(self) -> dict[str, Any]:
        """JSON-able, for the Lambda's log line and return value."""
        return {
            "running": self.running,
            "watched": self.watched,
            "evaluated": sum(o.status == "evaluated" for o in self.outcomes.values()),
            "failed": {j: [e.reason for e in o.errors] for j, o in self.outcomes.items() if o.status == "failed"},
            "job_errors": self.error_counts(),
            "triggers": [{"job": j, "rule": t.rule, "step": t.step} for j, o in self.outcomes.items() for t in o.triggers],
            "problems": {j: o.notes for j, o in self.outcomes.items() if o.notes},
            "metrics_requested": self.metrics_requested,
            "get_metric_data_calls": self.get_metric_data_calls,
            "held": sorted(j for j, o in self.outcomes.items() if o.status == "held"),
            "ended": sorted(j for j, o in self.outcomes.items() if o.status == ENDED),
            "errors": [e.message for e in self.errors],
            "skipped": self.skipped,
            "shards": self.shards,
        }
