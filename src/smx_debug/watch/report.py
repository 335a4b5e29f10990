"""What a run works with and yields: its AWS :class:`Clients`, its time bound (:class:`RunBudget`), each watched
job's :class:`RunOutcome` and the run's :class:`RunReport`.

Below every step of the pipeline (:mod:`smx_debug.watch.run`: discover, read, evaluate, act, save), which each
record into the report; the triggers are the action core's :class:`smx_debug.actions.verify.Trigger`.

Time bound (:class:`RunBudget`): an evaluation starts work only while its worst case fits in what is left of the
invocation, after a margin kept for the finish.

Lambda kills an invocation at its timeout: a run killed mid-way saves no cursor, puts no job error and leaves its
leases held until they expire, and the next run redoes the same work from the same cursors (and may be killed
again). So every evaluation (a whole run's or a shard's, :func:`smx_debug.watch.run.evaluate_jobs`) holds a
:class:`RunBudget` over the invocation's :class:`~smx_debug.actions.runtime.Deadline` (Lambda's
``get_remaining_time_in_millis``; ``call_seconds``: one AWS call's worst case, botocore's retries x timeouts,
:func:`smx_debug.actions.settings.call_budget_seconds`, 24 s by default):

- **the margin** (:attr:`RunBudget.reserve`) is one call's worst case: it is kept for what always happens at the
  end (the cursors saved and the job leases released in the same BatchWriteItem calls, the run lease released, the
  job errors put: a few calls that normally take milliseconds; the margin lets one of them go through its retries);
- **a step that makes AWS calls for many jobs** (the job leases, discovery, the CloudWatch read, the profiler
  read, the fleet append) starts only while one call's worst case fits before the margin;
- **a job's own step** (its rules, its tensors, its actions) starts only while the longest job step measured in
  this run still fits (a job that reads tensors: at least one call's worst case); the measure is what Lambda's
  clock lost during the step, so a slow S3 or an action core that waited shows at once;
- **the action core** gets the invocation's deadline less the margin (:meth:`RunBudget.for_actions`): a claim or
  an action whose call would not fit before the margin is not started (the ledger then does the rest next run).

A job that could not be started keeps its cursor, is counted under ``out-of-time`` (``EvaluatorJobErrors``) and,
being the furthest behind, goes first in the next run. Without a deadline (a direct call, a test, the demo)
nothing is bounded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from smx_debug.actions.runtime import Deadline
from smx_debug.actions.verify import Trigger
from smx_debug.data.job_errors import AWS_ERROR, INTERNAL, OUT_OF_TIME, JobError, job_error, reason_of

ENDED = "ended"  # a RunOutcome status: the ended job's last minutes are appended, its cursor marked complete


@dataclass(frozen=True)
class Clients:
    """The AWS clients a run uses (injected; the handler builds them once per cold start)."""

    sagemaker: Any
    cloudwatch: Any
    dynamodb: Any
    s3: Any


@dataclass
class RunOutcome:
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

    def fail_on(self, exc: BaseException, *, doing: str, otherwise: str = INTERNAL) -> None:
        """Fail the job for ``exc``, met while ``doing`` (its reason: the AWS error's, else ``otherwise``)."""
        self.fail(job_error(exc, job=self.job, doing=doing, otherwise=otherwise))

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
    outcomes: dict[str, RunOutcome] = field(default_factory=dict)
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
        cursor is kept and it goes first next run (:class:`smx_debug.watch.report.RunBudget`)."""
        for job in jobs:
            self.outcomes.setdefault(job, RunOutcome(job=job)).fail(JobError(OUT_OF_TIME, why))

    def fail_unfinished(self, jobs: Iterable[str], exc: BaseException, *, of: str, doing: str) -> None:
        """Fail each of ``jobs`` not finished yet (evaluated, without data, held or failed) for ``exc``, which
        broke the evaluation ``of`` (a shard) while ``doing``: one error, counted once per job."""
        error = job_error(exc, job=of, doing=doing)
        for job in jobs:
            outcome = self.outcomes.setdefault(job, RunOutcome(job=job))
            if outcome.status not in ("evaluated", "no data", "held", "failed"):
                outcome.fail(error)

    def run_error(self, exc: BaseException, message: str) -> None:
        """Record an AWS error of the run's own (not a job's) that did not fail it."""
        self.errors.append(JobError(reason_of(exc, AWS_ERROR), message))

    def run_out_of_time(self, message: str) -> None:
        """Record a step of the run's own left to the next run for time."""
        self.errors.append(JobError(OUT_OF_TIME, message))

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


@dataclass
class RunBudget:
    """What is left of one invocation for an evaluation's work, and the longest job step measured so far."""

    deadline: Deadline | None = None
    longest: float = 0.0

    @property
    def bounded(self) -> bool:
        return self.deadline is not None and self.deadline.remaining_ms is not None

    @property
    def call_seconds(self) -> float:
        """One AWS call's worst case (0 when unbounded)."""
        return self.deadline.call_seconds if self.deadline is not None and self.bounded else 0.0

    @property
    def reserve(self) -> float:
        """Seconds kept for the finish: one call's worst case."""
        return self.call_seconds

    def left(self) -> float:
        """Seconds left for work, the margin kept (infinite when unbounded)."""
        return self.deadline.left() - self.reserve if self.deadline is not None and self.bounded else math.inf

    def short_of(self, need: float) -> str | None:
        """None if ``need`` seconds fit before the margin, else why the work is not started."""
        left = self.left()
        if left >= need:
            return None
        return (f"not started: {left + self.reserve:.1f} s of the invocation left, {self.reserve:g} s of them kept "
                f"to save cursors, release leases and put job errors, and this may take {need:.3g} s; tried "
                "again next run from its cursor (the jobs furthest behind go first)")

    def short_of_call(self) -> str | None:
        """None if one AWS call's worst case fits before the margin."""
        return self.short_of(self.call_seconds)

    def short_of_job(self, *, calls: bool) -> str | None:
        """None if a job's step fits: the longest measured in this run, at least one call if the step makes calls."""
        return self.short_of(max(self.longest, self.call_seconds if calls else 0.0))

    @contextmanager
    def step(self) -> Iterator[None]:
        """Measure one job's step on the invocation's clock (its longest becomes the next jobs' estimate)."""
        before = self.left()
        try:
            yield
        finally:
            if self.bounded:
                self.longest = max(self.longest, before - self.left())

    def for_actions(self) -> Deadline | None:
        """The action core's deadline: the invocation's, less the margin (None when unbounded)."""
        return None if self.deadline is None else self.deadline.keeping(self.reserve)
