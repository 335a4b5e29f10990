"""Claim, act, complete: the one way every action (metric, stop, notify, retrain) runs exactly once.

1. Claim the action's ledger key (a lease, see :mod:`smx_debug.actions.ledger`).
2. Lost to a completed record: the action was done, return that record.
   Lost to a live claim: another invocation is acting right now, or died while acting and its lease has not
   run out. Raise :class:`ClaimInProgressError`, so this invocation fails and the platform redelivers the
   event later (Lambda's retries come 1 and 2 minutes after a failure, after the lease has run out); the
   redelivery then either sees the record done or takes the expired claim over. Returning normally here
   would lose the event when the holder had died.
3. Act. An exception releases the claim (so a retry may act at once) and propagates, except when the request
   may have taken effect and the action cannot tell afterwards (``repeatable=False``: a message published, a
   datapoint put) and the answer was lost on the way back (:data:`ANSWER_LOST`: a read timeout, a connection
   closed mid-answer). That claim is kept until its lease runs out, so the immediate redelivery finds it live and
   fails with :class:`ClaimInProgressError` instead of acting twice; a redelivery after the lease acts again
   (docs/actions.md, "A lost answer").
4. Complete: record the outcome; the record is kept for the ledger's retention (TTL). The action has happened by
   now, so a throttled complete is tried again (up to :data:`COMPLETE_ATTEMPTS` times, on top of botocore's own
   retries) rather than failing the invocation, whose redelivery would act a second time.

A process that dies between 1 and 4 releases nothing: its claim blocks others until the lease runs out,
then the next delivery takes it over.

:func:`stop_once` is the stop through this path (StopTrainingJob under ``<job>#stop``), for the rule actions and
the retraining loop alike. Imports only botocore and the standard library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from smx_debug.actions.ledger import DONE, LedgerLike
from smx_debug.actions.runtime import Deadline
from smx_debug.contracts import JOB_IN_PROGRESS, LEDGER_LEASE_ATTRIBUTE, stop_key
from smx_debug.errors import SmxDebugError

# The request was sent and its answer never came: it may have taken effect. (A connection that could not be
# made, EndpointConnectionError or ConnectTimeoutError, sent nothing: its claim is released.)
ANSWER_LOST: tuple[type[Exception], ...] = (ReadTimeoutError, ConnectionClosedError)

COMPLETE_ATTEMPTS = 4
# DynamoDB's answers that mean "not now": the update can be sent again unchanged.
_THROTTLED = frozenset({
    "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded", "InternalServerError",
})


class ClaimInProgressError(SmxDebugError, RuntimeError):
    """Raised when another invocation holds a live claim on the action; retry after its lease runs out."""

    def __init__(self, key: str, holder: Mapping[str, str] | None) -> None:
        self.key = key
        self.holder = dict(holder or {})
        until = self.holder.get(LEDGER_LEASE_ATTRIBUTE, "?")
        super().__init__(
            f"ledger {key!r}: claimed by {self.holder.get('actor', 'another invocation')} "
            f"until {until} (epoch s); redeliver after the lease runs out"
        )


@dataclass(frozen=True)
class Once:
    """What :func:`once` did: ``acted`` (this call acted) and the record (its outcome, or the earlier one)."""

    key: str
    acted: bool
    record: Mapping[str, object] = field(default_factory=dict)


def once(
    ledger: LedgerLike,
    key: str,
    record: Mapping[str, object],
    act: Callable[[], Mapping[str, object]],
    *,
    repeatable: bool = True,
    deadline: Deadline | None = None,
) -> Once:
    """Run ``act`` at most once per ``key`` across invocations; ``act`` returns the outcome to record.

    ``repeatable``: whether ``act`` run again finds out what an earlier run did (StopTrainingJob on a stopped
    job, StartExecution under the same name). False (Publish, PutMetricData): a lost answer keeps the claim.

    ``deadline``: the claim and the action each start only while one call's worst case fits in what is left of
    the invocation; a claim taken too late to act is released (:class:`smx_debug.actions.runtime.Deadline`).

    Raises:
        ClaimInProgressError: another invocation holds a live claim on ``key``.
        OutOfTimeError: too little of the invocation is left; nothing is left claimed.
    """
    if deadline is not None:
        deadline.require(f"claim {key!r}")
    held = ledger.claim_or_holder(key, record)
    if held is None:
        return _act(ledger, key, act, repeatable, deadline)
    if held.get("state") == DONE:
        return Once(key=key, acted=False, record=held)
    raise ClaimInProgressError(key, held)


def _act(ledger: LedgerLike, key: str, act: Callable[[], Mapping[str, object]], repeatable: bool,
         deadline: Deadline | None) -> Once:
    if deadline is not None and not deadline.fits():
        ledger.release(key)  # claimed too late to act: the redelivery takes it at once
        deadline.require(f"act on {key!r}")
    try:
        outcome = dict(act())
    except ANSWER_LOST:
        if repeatable:
            ledger.release(key)
        raise  # not repeatable: the claim stays until its lease runs out (it may have happened)
    except Exception:
        ledger.release(key)
        raise
    _complete(ledger, key, outcome)
    return Once(key=key, acted=True, record=outcome)


def _complete(ledger: LedgerLike, key: str, outcome: Mapping[str, object],
              sleep: Callable[[float], None] = time.sleep) -> None:
    """Record the outcome of an action that has happened; only throttling is tried again (the update is
    idempotent), anything else propagates."""
    for attempt in range(1, COMPLETE_ATTEMPTS + 1):
        try:
            ledger.complete(key, outcome)
            return
        except Exception as exc:
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
            if code not in _THROTTLED or attempt == COMPLETE_ATTEMPTS:
                raise
            sleep(0.1 * 2**attempt)


def describe_status(sagemaker: Any, job_name: str) -> str | None:
    """The job's current status, or None if SageMaker does not know the job."""
    try:
        return str(sagemaker.describe_training_job(TrainingJobName=job_name)["TrainingJobStatus"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ValidationException":
            return None
        raise


def stop_once(sagemaker: Any, ledger: LedgerLike, job_name: str, record: Mapping[str, object],
              deadline: Deadline | None = None) -> Once:
    """StopTrainingJob ``job_name`` under the ledger key ``<job>#stop``: whoever asks first (a rule action,
    the retraining loop) stops it; everyone else finds the record. A job that left InProgress before the
    call is recorded as not stopped, not raised."""

    def act() -> dict[str, object]:
        try:
            sagemaker.stop_training_job(TrainingJobName=job_name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ValidationException":
                raise
            return {"outcome": f"not stopped: job was {describe_status(sagemaker, job_name) or 'unknown'}"}
        return {"outcome": "stopped", "previous_status": JOB_IN_PROGRESS}

    return once(ledger, stop_key(job_name), {"action": "stop", "job": job_name, **record}, act, deadline=deadline)
