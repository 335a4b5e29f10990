"""A training job's container on the local AWS: run an entry point as SageMaker runs it with a DebugHookConfig.

moto records a CreateTrainingJob and never trains. :func:`run_training` plays the container's part for a job
that exists on the local AWS, as SageMaker does for a job with a ``DebugHookConfig``:

1. the job goes ``InProgress``;
2. the job's ``DebugHookConfig`` is written to ``/opt/ml/input/config/debughookconfig.json`` of the container,
   with ``LocalPath`` (default ``/opt/ml/output/tensors``) - the container's ``/opt/ml`` is ``<workdir>/opt/ml``
   here - and the entry point runs with ``SMDEBUG_CONFIG_FILE_PATH`` pointing at it and ``TRAINING_JOB_NAME`` set
   (so a hook knows it runs on SageMaker and leaves the end-of-training marker to the platform);
3. ``LocalPath`` is uploaded to ``<DebugHookConfig.S3OutputPath>/<job>/debug-output/`` and the platform's
   ``training_job_end.ts`` marker is written there;
4. the job goes ``Completed``, or ``Failed`` with a FailureReason when the entry point exits non-zero or the
   upload is refused (a missing bucket: S3's own ``NoSuchBucket``), as SageMaker reports an AlgorithmError or a
   ClientError.

A job without a ``DebugHookConfig`` (or a job name the local AWS does not know) is refused with a ConfigError or
NotFoundError before anything runs. Only what SageMaker gives the container is given: no credentials or
endpoints are added to the entry point's environment beyond the caller's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.contracts import DEBUG_OUTPUT
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local import training_jobs
from smx_debug.local.clients import client
from smx_debug.local.server import LocalAws
from smx_debug.tensors.layout import END_OF_JOB

__all__ = ["CONTAINER_CONFIG", "DEFAULT_LOCAL_PATH", "TrainingRun", "run_training"]

CONTAINER_CONFIG = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"
_TAIL = 800  # characters of the entry point's stderr kept in FailureReason


@dataclass(frozen=True)
class TrainingRun:
    """What a local training run did."""

    job_name: str
    status: str
    """``Completed`` or ``Failed`` (the job's TrainingJobStatus afterwards)."""
    returncode: int
    debug_output: str
    """``s3://<bucket>/<S3OutputPath prefix>/<job>/debug-output/``: the trial's root, for ``create_trial``."""
    uploaded: int
    """Files uploaded from LocalPath (the end marker not counted)."""
    failure_reason: str | None = None
    stdout: str = ""
    stderr: str = ""


def _container_path(workdir: Path, path: str) -> Path:
    """A container path (``/opt/ml/...``) under ``workdir``; a relative LocalPath is taken from workdir too."""
    return workdir / path.lstrip("/")


def _split_s3(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def run_training(
    aws: LocalAws,
    job_name: str,
    entry_point: str | os.PathLike[str],
    *,
    workdir: str | os.PathLike[str],
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> TrainingRun:
    """Run ``entry_point`` (a Python script) as job ``job_name``'s training, then upload its tensors.

    Raises:
        NotFoundError: the local AWS has no job ``job_name``, or the script does not exist.
        ConfigError: the job has no DebugHookConfig, or ``workdir`` already holds a container's output.
    """
    script = Path(entry_point)
    if not script.is_file():
        raise NotFoundError(f"entry point {str(script)!r} does not exist")
    sagemaker = client(aws, "sagemaker")
    training_jobs.training_job(aws, job_name)  # NotFoundError for an unknown job
    desc = sagemaker.describe_training_job(TrainingJobName=job_name)
    hook_config: dict[str, Any] | None = desc.get("DebugHookConfig")
    if not hook_config:
        raise ConfigError(f"training job {job_name!r} has no DebugHookConfig: nothing tells a hook what to save "
                          "(launch it with a plan whose guard is 'debugger' or 'both')",
                          field="DebugHookConfig", value=None)
    root = Path(workdir)
    local_path = _container_path(root, hook_config.get("LocalPath") or DEFAULT_LOCAL_PATH)
    if local_path.exists() and any(local_path.iterdir()):
        raise ConfigError(f"workdir {str(root)!r} already holds a container's tensors ({local_path}); give each "
                          "run a new workdir", field="workdir", value=str(root))
    config_file = _container_path(root, CONTAINER_CONFIG)
    config_file.parent.mkdir(parents=True, exist_ok=True)
    local_path.mkdir(parents=True, exist_ok=True)
    # SageMaker hands the container the job's DebugHookConfig as given, LocalPath filled in
    config_file.write_text(json.dumps({**hook_config, "LocalPath": str(local_path)}, indent=2))

    training_jobs.set_training_job_status(aws, job_name, "InProgress")
    child_env = {**os.environ, **(env or {}), "SMDEBUG_CONFIG_FILE_PATH": str(config_file),
                 "TRAINING_JOB_NAME": job_name}
    proc = subprocess.run([sys.executable, str(script), *args], env=child_env, cwd=root, capture_output=True,
                          text=True, timeout=timeout, check=False)

    bucket, prefix = _split_s3(str(hook_config["S3OutputPath"]))
    out_prefix = "/".join(p for p in (prefix, job_name, DEBUG_OUTPUT) if p) + "/"
    debug_output = f"s3://{bucket}/{out_prefix}"
    failure: str | None = None
    uploaded = 0
    if proc.returncode != 0:
        failure = (f"AlgorithmError: the entry point exited with code {proc.returncode}: "
                   f"{proc.stderr.strip()[-_TAIL:]}")
    try:
        uploaded = _upload(client(aws, "s3"), local_path, bucket, out_prefix)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        failure = failure or f"ClientError: uploading the debug output to {debug_output} failed ({code})"
    _finish(aws, job_name, failure)
    return TrainingRun(job_name=job_name, status="Failed" if failure else "Completed", returncode=proc.returncode,
                       debug_output=debug_output, uploaded=uploaded, failure_reason=failure, stdout=proc.stdout,
                       stderr=proc.stderr)


def _upload(s3: Any, local_path: Path, bucket: str, prefix: str) -> int:
    """Upload every finished file under ``local_path`` (not a writer's ``.tmp``), then the end marker."""
    count = 0
    for path in sorted(local_path.rglob("*")):
        if path.is_file() and not path.name.endswith(".tmp"):
            s3.put_object(Bucket=bucket, Key=prefix + path.relative_to(local_path).as_posix(),
                          Body=path.read_bytes())
            count += 1
    s3.put_object(Bucket=bucket, Key=prefix + END_OF_JOB, Body=b"")
    return count


def _finish(aws: LocalAws, job_name: str, failure: str | None) -> None:
    if failure is None:
        training_jobs.set_training_job_status(aws, job_name, "Completed")
        return
    training_jobs.set_training_job_status(aws, job_name, "Failed")
    training_jobs.training_job(aws, job_name).failure_reason = failure[:1024]  # SageMaker's limit
