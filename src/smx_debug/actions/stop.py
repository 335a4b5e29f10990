"""Stop a training job exactly once, through the ledger (used by the rule actions and the retraining loop).

Imports only botocore and the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.actions.deadline import Deadline
from smx_debug.actions.ledger import LedgerLike
from smx_debug.actions.once import Once, once
from smx_debug.contracts import JOB_IN_PROGRESS, stop_key

__all__ = ["describe_status", "stop_once"]


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
