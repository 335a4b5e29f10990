"""A training job's container on the local AWS: run an entry point as SageMaker runs it, with or without Debugger.

moto records a CreateTrainingJob and never trains. :func:`start_training` plays the container's part for a job
that exists on the local AWS. As SageMaker does, it gives the entry point the job's ``Environment``,
``TRAINING_JOB_NAME`` and the job's execution role (:func:`smx_debug.local.sagemaker.container_role.container_environment`:
the role session's credentials, the local endpoint; the server authorizes its calls with the local IAM), in place
of the caller's AWS credentials. For a job with a ``DebugHookConfig``:

1. the job goes ``InProgress``;
2. the job's ``DebugHookConfig`` is written to ``/opt/ml/input/config/debughookconfig.json`` of the container,
   with ``LocalPath`` (default ``/opt/ml/output/tensors``) - the container's ``/opt/ml`` is ``<workdir>/opt/ml``
   here - and the entry point runs with ``SMDEBUG_CONFIG_FILE_PATH`` pointing at it and ``TRAINING_JOB_NAME`` set
   (so a hook knows it runs on SageMaker and leaves the end-of-training marker to the platform);
3. while it trains, what it has written under ``LocalPath`` is uploaded every ``upload_interval`` seconds to
   ``<DebugHookConfig.S3OutputPath>/<job>/debug-output/`` (SageMaker uploads that folder continuously, so rules
   read the tensors of a running job): finished files only (a writer's ``.tmp`` is a write in progress), event
   files before their index files;
4. a StopTrainingJob of the running job sends the entry point SIGTERM, as SageMaker does; if it has not ended
   ``stop_grace`` seconds later (SageMaker waits 120 s) it is killed. The job shows ``Stopping`` until then;
5. when the entry point has ended, the rest of ``LocalPath`` is uploaded with the platform's
   ``training_job_end.ts`` marker, and the job goes ``Stopped`` (it was stopped), ``Completed``, or ``Failed``
   with a FailureReason when the entry point exited non-zero or the upload was refused (a missing bucket: S3's
   own ``NoSuchBucket``), as SageMaker reports an AlgorithmError or a ClientError.

A job without a ``DebugHookConfig`` whose ``Environment`` has the hook's settings (``SMX_DEBUG_OUTPUT``, what
``plan.to_model_trainer_kwargs()`` renders) gets no config file and no upload, as on SageMaker: its hook writes its
trial to ``<SMX_DEBUG_OUTPUT>/<job>/debug-output/`` itself, as the execution role, and marks its end. The job's
status follows the entry point as above.

:func:`run_training` is the same, waiting for the end. A job with neither (or a job name the local AWS does not
know) is refused with a ConfigError or NotFoundError before anything runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Required, TypedDict, Unpack

from botocore.exceptions import ClientError

from smx_debug.contracts import (
    DEBUG_OUTPUT,
    HOOK_OUTPUT_ENV,
    JOB_COMPLETED,
    JOB_FAILED,
    JOB_IN_PROGRESS,
    JOB_STOPPED,
    TRAINING_JOB_NAME_ENV,
    hook_trial_uri,
)
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local.clients import client
from smx_debug.local.iam.plugin import PLUGIN_ENV
from smx_debug.local.sagemaker import training_jobs
from smx_debug.local.sagemaker.container_role import container_environment
from smx_debug.local.server import LocalAws
from smx_debug.tensors.layout import END_OF_JOB

CONTAINER_CONFIG = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_LOCAL_PATH = "/opt/ml/output/tensors"
_TAIL = 800  # characters of the entry point's stderr kept in FailureReason
# the caller's own AWS settings, which SageMaker does not give a container (it gives the role's session)
_CALLER_ONLY = frozenset({"AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL_S3",
                          "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", PLUGIN_ENV})
_UPLOAD_ORDER = {"collections": 0, "events": 1, "index": 2}  # an index is uploaded after its event file


@dataclass(frozen=True)
class TrainingRun:
    """What a local training run did."""

    job_name: str
    status: str
    """``Completed``, ``Stopped`` or ``Failed`` (the job's TrainingJobStatus afterwards)."""
    returncode: int
    """The entry point's exit code (negative: the signal that ended it, -15 SIGTERM, -9 SIGKILL)."""
    debug_output: str
    """``s3://<bucket>/<S3OutputPath prefix>/<job>/debug-output/``: the trial's root, for ``create_trial``."""
    uploaded: int
    """Files uploaded from LocalPath (the end marker not counted; 0 without a DebugHookConfig)."""
    failure_reason: str | None = None
    stdout: str = ""
    stderr: str = ""


def _container_path(workdir: Path, path: str) -> Path:
    """A container path (``/opt/ml/...``) under ``workdir``; a relative LocalPath is taken from workdir too."""
    return workdir / path.lstrip("/")


def _split_s3(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def start_training(
    aws: LocalAws,
    job_name: str,
    entry_point: str | os.PathLike[str],
    *,
    workdir: str | os.PathLike[str],
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    upload_interval: float = 2.0,
    stop_grace: float = 120.0,
) -> RunningTraining:
    """Start ``entry_point`` (a Python script) as job ``job_name``'s training; its tensors reach S3 while it runs
    (see the module docstring). :meth:`RunningTraining.wait` ends it.

    Raises:
        NotFoundError: the local AWS has no job ``job_name``, or the script does not exist.
        ConfigError: the job has neither a DebugHookConfig nor ``SMX_DEBUG_OUTPUT`` in its Environment, or
            ``workdir`` already holds a container's output.
    """
    script = Path(entry_point)
    if not script.is_file():
        raise NotFoundError(f"entry point {str(script)!r} does not exist")
    sagemaker = client(aws, "sagemaker")
    training_jobs.training_job(aws, job_name)  # NotFoundError for an unknown job
    desc = sagemaker.describe_training_job(TrainingJobName=job_name)
    hook_config: dict[str, Any] | None = desc.get("DebugHookConfig")
    environment: dict[str, str] = dict(desc.get("Environment") or {})
    if not hook_config and not environment.get(HOOK_OUTPUT_ENV):
        raise ConfigError(f"training job {job_name!r} has no DebugHookConfig and no {HOOK_OUTPUT_ENV} in its "
                          "Environment: nothing tells a hook what to save (launch it with what a plan with tensor "
                          "rules renders: its DebugHookConfig, or to_model_trainer_kwargs()'s environment)",
                          field="DebugHookConfig", value=None)
    root = Path(workdir)
    local_path = _container_path(root, (hook_config or {}).get("LocalPath") or DEFAULT_LOCAL_PATH)
    if local_path.exists() and any(local_path.iterdir()):
        raise ConfigError(f"workdir {str(root)!r} already holds a container's tensors ({local_path}); give each "
                          "run a new workdir", field="workdir", value=str(root))
    config_file = _container_path(root, CONTAINER_CONFIG)
    config_file.parent.mkdir(parents=True, exist_ok=True)
    local_path.mkdir(parents=True, exist_ok=True)
    # the caller's environment stands for the image's; the job's Environment, its name and its role's session
    # (instead of any credentials of the caller's) are SageMaker's
    container_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in _CALLER_ONLY}
    container_env.update({**environment, **container_environment(aws, job_name, str(desc["RoleArn"])),
                          "SMDEBUG_CONFIG_FILE_PATH": str(config_file), TRAINING_JOB_NAME_ENV: job_name})
    upload: tuple[str, str] | None = None
    if hook_config:
        # SageMaker hands the container the job's DebugHookConfig as given, LocalPath filled in, and uploads it
        config_file.write_text(json.dumps({**hook_config, "LocalPath": str(local_path)}, indent=2))
        bucket, prefix = _split_s3(str(hook_config["S3OutputPath"]))
        upload = bucket, "/".join(p for p in (prefix, job_name, DEBUG_OUTPUT) if p) + "/"
        debug_output = f"s3://{upload[0]}/{upload[1]}"
    else:  # no DebugHookConfig: no config file, nothing uploaded; the hook writes its trial itself
        debug_output = hook_trial_uri(environment[HOOK_OUTPUT_ENV], job_name)
    return RunningTraining(aws, job_name, [sys.executable, str(script), *args], root=root, local_path=local_path,
                           env=container_env, upload=upload, debug_output=debug_output, timeout=timeout,
                           upload_interval=upload_interval, stop_grace=stop_grace)


class RunningTraining:
    """A training started by :func:`start_training`: its process, its uploads and its stop."""

    def __init__(self, aws: LocalAws, job_name: str, command: list[str], *, root: Path, local_path: Path,
                 env: dict[str, str], upload: tuple[str, str] | None, debug_output: str, timeout: float,
                 upload_interval: float, stop_grace: float) -> None:
        self.aws, self.job_name, self.local_path = aws, job_name, local_path
        self.upload = upload  # (bucket, prefix) SageMaker uploads LocalPath to; None without a DebugHookConfig
        self.debug_output = debug_output
        self.timeout, self.upload_interval, self.stop_grace = timeout, upload_interval, stop_grace
        self._s3 = client(aws, "s3")
        self._uploaded: dict[Path, tuple[int, int]] = {}
        self._upload_error: str | None = None
        self._stop_at: float | None = None
        self._lock = threading.Lock()
        self._out: IO[str] = open(root / "container-stdout.txt", "w+", encoding="utf-8")  # noqa: SIM115
        self._err: IO[str] = open(root / "container-stderr.txt", "w+", encoding="utf-8")  # noqa: SIM115
        training_jobs.set_training_job_status(aws, job_name, JOB_IN_PROGRESS)
        self._process = subprocess.Popen(command, env=env, cwd=root, stdout=self._out, stderr=self._err, text=True)
        self._started = time.monotonic()
        training_jobs.attach_container(aws, job_name, self._terminate)
        self._result: TrainingRun | None = None
        self._monitor = threading.Thread(target=self._watch, name=f"smx-container-{job_name}", daemon=True)
        self._monitor.start()

    @property
    def returncode(self) -> int | None:
        """None while the entry point runs."""
        return self._process.poll()

    def _terminate(self) -> None:
        """StopTrainingJob: SIGTERM now, SIGKILL after ``stop_grace`` seconds (the monitor's)."""
        with self._lock:
            if self._stop_at is None:
                self._stop_at = time.monotonic()
                if self._process.poll() is None:
                    self._process.send_signal(signal.SIGTERM)

    def _watch(self) -> None:
        while self._process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=self.upload_interval)
            self._upload()
            with self._lock:
                stop_at = self._stop_at
            if self._process.poll() is None and stop_at is not None and time.monotonic() - stop_at > self.stop_grace:
                self._process.kill()
            if self._process.poll() is None and time.monotonic() - self._started > self.timeout:
                self._process.kill()

    def _upload(self) -> int:
        """Upload the finished files of LocalPath that are new or changed since the last upload."""
        if self._upload_error is not None or self.upload is None:
            return 0
        bucket, prefix = self.upload
        files = [p for p in self.local_path.rglob("*") if p.is_file() and not p.name.endswith(".tmp")]
        files.sort(key=lambda p: (_UPLOAD_ORDER.get(p.relative_to(self.local_path).parts[0], 3), str(p)))
        count = 0
        for path in files:
            try:
                stat = path.stat()
            except FileNotFoundError:  # replaced under us: the next round takes the new one
                continue
            stamp = (stat.st_mtime_ns, stat.st_size)
            if self._uploaded.get(path) == stamp:
                continue
            try:
                self._s3.put_object(Bucket=bucket, Key=prefix + path.relative_to(self.local_path).as_posix(),
                                    Body=path.read_bytes())
            except ClientError as exc:
                self._upload_error = _upload_failure(exc, self.debug_output)
                return count
            self._uploaded[path] = stamp
            count += 1
        return count

    def wait(self) -> TrainingRun:
        """Wait for the entry point to end, upload the rest and the end marker, set the job's final status."""
        if self._result is not None:
            return self._result
        self._monitor.join()
        training_jobs.detach_container(self.aws, self.job_name)
        timed_out = time.monotonic() - self._started > self.timeout and self._stop_at is None
        self._upload()
        if self._upload_error is None and self.upload is not None:
            try:
                self._s3.put_object(Bucket=self.upload[0], Key=self.upload[1] + END_OF_JOB, Body=b"")
            except ClientError as exc:
                self._upload_error = _upload_failure(exc, self.debug_output)
        self._out.seek(0)
        self._err.seek(0)
        stdout, stderr = self._out.read(), self._err.read()
        self._out.close()
        self._err.close()
        code = self._process.returncode
        stopped = self._stop_at is not None
        failure: str | None = None
        if timed_out:
            failure = f"MaxRuntimeExceeded: the entry point ran longer than {self.timeout:g} s"
        elif code != 0 and not stopped:
            failure = f"AlgorithmError: the entry point exited with code {code}: {stderr.strip()[-_TAIL:]}"
        failure = failure or self._upload_error
        status = JOB_FAILED if failure else JOB_STOPPED if stopped else JOB_COMPLETED
        _finish(self.aws, self.job_name, status, failure)
        self._result = TrainingRun(job_name=self.job_name, status=status, returncode=code,
                                   debug_output=self.debug_output, uploaded=len(self._uploaded),
                                   failure_reason=failure, stdout=stdout, stderr=stderr)
        return self._result


class _RunOptions(TypedDict, total=False):
    """:func:`start_training`'s keyword options that :func:`run_training` takes too."""

    workdir: Required[str | os.PathLike[str]]
    args: Sequence[str]
    env: Mapping[str, str] | None
    timeout: float


def run_training(aws: LocalAws, job_name: str, entry_point: str | os.PathLike[str],
                 **options: Unpack[_RunOptions]) -> TrainingRun:
    """Run ``entry_point`` (a Python script) as job ``job_name``'s training and wait for it to end (see
    :func:`start_training`, whose options it takes, and which raises the same errors)."""
    return start_training(aws, job_name, entry_point, **options).wait()


def _upload_failure(exc: ClientError, where: str) -> str:
    code = exc.response.get("Error", {}).get("Code", "")
    return f"ClientError: uploading the debug output to {where} failed ({code})"


def _finish(aws: LocalAws, job_name: str, status: str, failure: str | None) -> None:
    training_jobs.set_training_job_status(aws, job_name, status)
    if failure is not None:
        training_jobs.training_job(aws, job_name).failure_reason = failure[:1024]  # SageMaker's limit
