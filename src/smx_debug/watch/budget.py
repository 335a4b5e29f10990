"""The evaluator's time bound: an evaluation starts work only while its worst case fits in what is left of the
invocation, after a margin kept for the finish.

Lambda kills an invocation at its timeout: a run killed mid-way saves no cursor, puts no job error and leaves its
leases held until they expire, and the next run redoes the same work from the same cursors (and may be killed
again). So every evaluation (a whole run's or a shard's, :func:`smx_debug.watch.run.evaluate_jobs`) holds a
:class:`RunBudget` over the invocation's :class:`~smx_debug.actions.deadline.Deadline` (Lambda's
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
nothing is bounded. Imports only the standard library and the actions' deadline.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from smx_debug.actions.deadline import Deadline


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
