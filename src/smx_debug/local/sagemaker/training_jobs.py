"""The training-job lifecycle on the local AWS: StopTrainingJob, job statuses, and the profiler fields.

moto 5 has no StopTrainingJob, creates every training job as ``Completed`` and drops the profiler fields of
CreateTrainingJob. :func:`install` extends moto's public SageMaker backend and response classes:

- **StopTrainingJob**: a stop moves an ``InProgress`` job to ``Stopping`` at once. A job whose training runs
  here (:mod:`smx_debug.local.sagemaker.training_run` attaches its container, :func:`attach_container`) is told to stop
  as SageMaker tells the algorithm (SIGTERM) and becomes ``Stopped`` when its training has ended. For any other
  job, the first DescribeTrainingJob after the stop still shows ``Stopping`` and moves it on, so the next one
  shows ``Stopped`` (or call :func:`tick`). A stop of a job in any other status is a ``ValidationException``,
  as in SageMaker. Every call is counted: :func:`stop_calls`.
- **Profiler fields and Environment**: ``ProfilerConfig``, ``ProfilerRuleConfigurations`` and ``Environment`` of
  CreateTrainingJob are kept and returned by DescribeTrainingJob (with ``ProfilingStatus``); an Environment value
  over 512 characters, or more than 100 entries, is refused with SageMaker's ValidationException.
- **Job statuses**: :func:`set_training_job_status` sets TrainingJobStatus and SecondaryStatus (with the
  secondary status transitions and end time) as SageMaker would.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import moto.core.responses as moto_responses
import moto.sagemaker.exceptions as sagemaker_exceptions
import moto.sagemaker.models as sagemaker_models
import moto.sagemaker.responses as sagemaker_responses

from smx_debug.contracts import (
    ENVIRONMENT_ENTRIES_MAX,
    ENVIRONMENT_VALUE_MAX,
    JOB_COMPLETED,
    JOB_ENDED_STATUSES,
    JOB_FAILED,
    JOB_IN_PROGRESS,
    JOB_STOPPED,
    JOB_STOPPING,
    RULE_FIELDS,
)
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local.clients import client
from smx_debug.local.patching import patch_once
from smx_debug.local.sagemaker import execution_roles
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

_STATUSES = {  # TrainingJobStatus -> the SecondaryStatus SageMaker pairs with it
    JOB_IN_PROGRESS: "Training",
    JOB_COMPLETED: JOB_COMPLETED,
    JOB_FAILED: JOB_FAILED,
    JOB_STOPPING: JOB_STOPPING,
    JOB_STOPPED: JOB_STOPPED,
}
_lock = threading.RLock()  # moto state we change
_stop_counts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_pending_stop: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_profiler_fields: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_containers: weakref.WeakKeyDictionary[Any, Callable[[], None]] = weakref.WeakKeyDictionary()


def _backend(aws: LocalAws) -> Any:
    return sagemaker_models.sagemaker_backends[LOCAL_ACCOUNT_ID][aws.region]


def training_job(aws: LocalAws, name: str) -> Any:
    """moto's ``FakeTrainingJob`` named ``name`` (installs this module's behaviour first).

    Raises:
        NotFoundError: no such job on ``aws``.
    """
    install()
    try:
        return _backend(aws).training_jobs[name]
    except KeyError:
        raise NotFoundError(f"training job {name!r} does not exist in the local AWS") from None


def _transition(job: Any, status: str, secondary: str, message: str) -> None:
    now = datetime.now(UTC)
    job.training_job_status = status
    job.secondary_status = secondary
    job.last_modified_time = now
    transitions = list(getattr(job, "secondary_status_transitions", None) or [])
    if transitions and transitions[-1].get("EndTime") is None:
        transitions[-1] = {**transitions[-1], "EndTime": now}
    transitions.append({"Status": secondary, "StartTime": now, "StatusMessage": message})
    job.secondary_status_transitions = transitions
    if status in JOB_ENDED_STATUSES:
        job.training_end_time = now
    elif status == JOB_IN_PROGRESS:
        job.training_end_time = None


def _stop(backend: Any, name: str) -> None:
    job = backend.training_jobs.get(name)
    if job is None:
        raise sagemaker_exceptions.ValidationError(message="Requested resource not found.")
    with _lock:
        _stop_counts[job] = _stop_counts.get(job, 0) + 1
        if job.training_job_status != JOB_IN_PROGRESS:
            raise sagemaker_exceptions.ValidationError(
                message=f"The request was rejected because the training job is in status {job.training_job_status}."
            )
        _transition(job, JOB_STOPPING, JOB_STOPPING, "Stopping the training job")
        stop = _containers.get(job)
        if stop is None:
            _pending_stop[job] = True
    if stop is not None:
        stop()  # SIGTERM to its training; the container sets Stopped once it has ended


def _advance(job: Any) -> None:
    with _lock:
        if _pending_stop.pop(job, False) and job.training_job_status == JOB_STOPPING:
            _transition(job, JOB_STOPPED, JOB_STOPPED, "Training job stopped")


def _check_environment(environment: Any) -> None:
    """SageMaker's ValidationException for an Environment value over its 512 characters or more than its 100
    entries (botocore does not check a maximum before sending)."""
    if environment and len(environment) > ENVIRONMENT_ENTRIES_MAX:
        raise sagemaker_exceptions.ValidationError(message=(
            "1 validation error detected: Value at 'environment' failed to satisfy constraint: Member must have "
            f"length less than or equal to {ENVIRONMENT_ENTRIES_MAX}"))
    for key, value in (environment or {}).items():
        if isinstance(value, str) and len(value) > ENVIRONMENT_VALUE_MAX:
            raise sagemaker_exceptions.ValidationError(message=(
                f"1 validation error detected: Value at 'environment.{key}' failed to satisfy constraint: Member "
                f"must have length less than or equal to {ENVIRONMENT_VALUE_MAX}"))


def install() -> None:
    """Add StopTrainingJob, keep the profiler fields and check the execution role of CreateTrainingJob
    (:mod:`~smx_debug.local.sagemaker.execution_roles`), once per process. Idempotent."""
    execution_roles.install()
    patch_once(sagemaker_responses.SageMakerResponse, "stop_training_job", _stop_training_job)
    patch_once(sagemaker_responses.SageMakerResponse, "create_training_job", _create_training_job)
    patch_once(sagemaker_models.SageMakerModelBackend, "describe_training_job", _describe_training_job)


def _stop_training_job(original: Callable[..., Any] | None) -> Callable[..., Any]:
    """StopTrainingJob, which moto lacks (``original`` is None)."""

    def stop_training_job(self: Any) -> Any:
        _stop(self.sagemaker_backend, self._get_param("TrainingJobName"))
        return moto_responses.EmptyResult()

    return stop_training_job


def _create_training_job(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_training_job(self: Any) -> Any:
        _check_environment(self._get_param("Environment"))
        result = original(self)
        # moto drops the profiler fields and the Environment of the request; keep them as SageMaker does.
        job = self.sagemaker_backend.training_jobs.get(self._get_param("TrainingJobName"))
        if job is not None:
            _profiler_fields[job] = {
                key: self._get_param(key)
                for key in ("ProfilerConfig", RULE_FIELDS["profiler"][1], "Environment")
                if self._get_param(key) is not None
            }
        return result

    return create_training_job


def _describe_training_job(original: Callable[..., Any]) -> Callable[..., Any]:
    def describe_training_job(self: Any, training_job_name: str) -> dict[str, Any]:
        response: dict[str, Any] = dict(original(self, training_job_name))
        job = self.training_jobs.get(training_job_name)
        if job is not None and _profiler_fields.get(job):
            response.update(copy.deepcopy(_profiler_fields[job]))
            if "ProfilerConfig" in _profiler_fields[job]:
                response.setdefault("ProfilingStatus", "Enabled")
        if job is not None and _pending_stop.get(job):
            _advance(job)  # shown as Stopping this time, Stopped on the next describe
        return response

    return describe_training_job


def attach_container(aws: LocalAws, job: str, stop: Callable[[], None]) -> None:
    """While ``job``'s training runs here, a StopTrainingJob calls ``stop`` (which signals the training) instead
    of moving the job on by itself: the container sets ``Stopped`` when the training has ended."""
    with _lock:
        _containers[training_job(aws, job)] = stop


def detach_container(aws: LocalAws, job: str) -> None:
    """``job``'s training has ended (:func:`attach_container`)."""
    with _lock:
        _containers.pop(training_job(aws, job), None)


def stop_calls(aws: LocalAws, job: str) -> int:
    """How many StopTrainingJob calls the local server received for ``job`` (accepted or rejected)."""
    return _stop_counts.get(training_job(aws, job), 0)


def tick(aws: LocalAws) -> list[str]:
    """Advance every Stopping job to Stopped; returns their names."""
    done: list[str] = []
    for name, job in list(_backend(aws).training_jobs.items()):
        if _pending_stop.get(job):
            _advance(job)
            done.append(name)
    return done


def set_training_job_status(
    aws: LocalAws, job: str, status: str, secondary_status: str | None = None
) -> None:
    """Set a job's TrainingJobStatus (and SecondaryStatus, by default the one SageMaker pairs with it).

    Raises:
        ConfigError: ``status`` is not a TrainingJobStatus.
        NotFoundError: no such job.
    """
    if status not in _STATUSES:
        raise ConfigError(f"status: {status!r} is not one of {sorted(_STATUSES)}", field="status", value=status)
    fake = training_job(aws, job)
    with _lock:
        _pending_stop.pop(fake, None)
        _transition(fake, status, secondary_status or _STATUSES[status], f"Set to {status} by smx-debug (local)")


def create_training_job(aws: LocalAws, name: str, tags: Mapping[str, str] | None = None, **fields: Any) -> None:
    """CreateTrainingJob on the local AWS with the fields SageMaker requires (moto creates it Completed): the one
    minimal request of the tests, the benchmarks and the examples. ``fields`` add to or replace the request's;
    the role is the local SageMaker execution role (:func:`~smx_debug.local.sagemaker.execution_roles.execution_role`)."""
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": f"{LOCAL_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                   "TrainingInputMode": "File"},
        "RoleArn": fields["RoleArn"] if "RoleArn" in fields else execution_roles.execution_role(aws),
        "OutputDataConfig": {"S3OutputPath": "s3://smx-out/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        **fields,
    }
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    client(aws, "sagemaker").create_training_job(**request)
