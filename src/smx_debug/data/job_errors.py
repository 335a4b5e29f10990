"""Why reading or judging one job failed, as a reason: the evaluator's per-job isolation counts its failures by it.

One job's failure is that job's, counted by reason, and never the run's.

A run works for every watched job of the account. A failure met for one job (access denied, throttling past
botocore's retries, poisoned data, a bad watch spec, a defect of ours) becomes a :class:`JobError` of that job
(:func:`job_error`): a note in the run's report, one count in the ``EvaluatorJobErrors`` metric of its reason
(:func:`publish_job_errors`, dimension ``Reason``, reasons in ``contracts.JOB_ERROR_REASONS``), and the job's
cursor is not written, so the next run tries it again from where it was. Only what breaks the whole run (the
running jobs cannot be listed, the cursors cannot be read or written) fails the invocation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

from smx_debug.contracts import JOB_ERROR_REASONS
from smx_debug.errors import AccessDeniedError, OutOfTimeError, translate_client_error

ACCESS_DENIED, THROTTLED, AWS_ERROR, WATCH_SPEC, BAD_DATA, INTERNAL, OUT_OF_TIME = JOB_ERROR_REASONS
_log = logging.getLogger(__name__)
_THROTTLING = ThrottledRetryableChecker()  # the error codes botocore's standard retry mode treats as throttling


@dataclass(frozen=True)
class JobError:
    """Why a job failed in a run: a reason of ``contracts.JOB_ERROR_REASONS`` and what happened."""

    reason: str
    message: str


def reason_of(exc: BaseException, otherwise: str) -> str:
    """The reason an exception is counted under; ``otherwise`` for one that is not an AWS error. A reader's
    SmxDebugError raised from an AWS error (``AccessDeniedError`` from S3's AccessDenied) counts as that error; the
    action core refusing a call that would not fit in the invocation (``OutOfTimeError``) counts as ``out-of-time``."""
    if isinstance(exc, OutOfTimeError):
        return OUT_OF_TIME
    cause = exc.__cause__
    if not isinstance(exc, ClientError | BotoCoreError) and isinstance(cause, ClientError | BotoCoreError):
        return reason_of(cause, otherwise)
    if isinstance(exc, ClientError):
        if isinstance(translate_client_error(exc), AccessDeniedError):
            return ACCESS_DENIED
        throttled = _THROTTLING.is_retryable(RetryContext(attempt_number=1, parsed_response=dict(exc.response)))
        return THROTTLED if throttled else AWS_ERROR
    if isinstance(exc, BotoCoreError):
        return AWS_ERROR
    return otherwise


def job_error(exc: BaseException, *, job: str, doing: str, otherwise: str = INTERNAL) -> JobError:
    """The :class:`JobError` for ``exc``, met while ``doing`` something for ``job``.

    An exception that is no AWS error counts as ``otherwise`` (``bad-data`` while reading or evaluating the
    job's data, else ``internal``); an ``internal`` one is logged with its traceback, since it is a defect.
    """
    reason = reason_of(exc, otherwise)
    if reason == INTERNAL:
        _log.warning("evaluator: %s for %s failed", doing, job, exc_info=exc)
    text = f"{type(exc).__name__}: {exc}"
    return JobError(reason, f"{doing} failed ({reason}), tried again next run: {text[:400]}")
