"""Resolve ``JOB_OR_PATH`` (a local folder or file, an ``s3://`` prefix, or a training job name) to JobData."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from smx_debug.contracts import is_training_job_name
from smx_debug.data.cloudwatch import instance_metrics, training_metrics
from smx_debug.data.frames import JobData
from smx_debug.data.load import LoadReport, load_path, load_source
from smx_debug.data.sources import default_sagemaker, describe_job, open_source
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.instances import instance_row

Source = Literal["auto", "debugger", "cloudwatch"]


@dataclass(frozen=True)
class JobInfo:
    """What we know about the job besides its metrics (instance fields are None for local paths)."""

    name: str
    instance_type: str | None = None
    instance_count: int | None = None
    status: str | None = None
    source: str = ""


def _debugger_data(job_or_uri: str, sagemaker_client: Any, s3_client: Any, report: LoadReport | None) -> JobData:
    """System metrics and steps from Debugger's profiler output in S3, through this package's readers."""
    return load_source(open_source(job_or_uri, sagemaker_client=sagemaker_client, s3_client=s3_client), report)


def load_job(
    job_or_path: str,
    *,
    source: Source = "auto",
    report: LoadReport | None = None,
    sagemaker_client: Any = None,
    cloudwatch_client: Any = None,
    s3_client: Any = None,
    sagemaker_factory: Callable[[], Any] = default_sagemaker,
) -> tuple[JobData, JobInfo]:
    """Load a job's data for rule evaluation.

    Args:
        job_or_path: local path, ``s3://`` prefix of a ``profiler-output`` folder, or a training job name.
        source: for a job name, ``debugger`` (profiler output in S3), ``cloudwatch`` (instance metrics every
            job has) or ``auto`` (Debugger output when the job has it, else CloudWatch).
    """
    if source not in ("auto", "debugger", "cloudwatch"):
        raise ConfigError(f"source must be auto, debugger or cloudwatch, got {source!r}", field="source", value=source)
    path = Path(job_or_path)
    if source == "cloudwatch" and (path.exists() or job_or_path.startswith("s3://")):
        where = "an s3:// prefix" if job_or_path.startswith("s3://") else "a local path"
        raise ConfigError(f"source 'cloudwatch' (--source) reads a training job's CloudWatch metrics: give the job "
                          f"name, not {where} ({job_or_path!r}, whose profiler output is read as it is)",
                          field="source", value=source)
    if path.exists():
        return load_path(path, report), JobInfo(name=path.resolve().name, source=str(path))
    if job_or_path.startswith("s3://"):
        data = _debugger_data(job_or_path, sagemaker_client, s3_client, report)
        return data, JobInfo(name=job_or_path.rstrip("/").rsplit("/", 2)[-1], source=job_or_path)
    if not is_training_job_name(job_or_path):  # anything else given as JOB_OR_PATH is a path that does not exist
        raise NotFoundError(
            f"{job_or_path!r}: no such file or folder, and not a training job name or s3:// prefix"
        )
    sm = sagemaker_client if sagemaker_client is not None else sagemaker_factory()
    desc = describe_job(job_or_path, sm)
    res = desc.get("ResourceConfig") or {}
    info_kw: dict[str, Any] = {
        "name": job_or_path, "instance_type": res.get("InstanceType"),
        "instance_count": int(res.get("InstanceCount") or 1), "status": desc.get("TrainingJobStatus"),
    }
    has_profiler = bool((desc.get("ProfilerConfig") or {}).get("S3OutputPath"))
    if source == "debugger" or (source == "auto" and has_profiler):
        data = _debugger_data(job_or_path, sm, s3_client, report)
        if len(data.system) or source == "debugger":
            return data, JobInfo(**info_kw, source="Debugger profiler output in S3")
    # Pad the window: instance metrics start while the job is still "Starting"; the series are per job anyway.
    start = (desc.get("TrainingStartTime") or desc.get("CreationTime") or datetime.now(UTC)) - timedelta(minutes=5)
    end = (desc.get("TrainingEndTime") or datetime.now(UTC)) + timedelta(minutes=5)
    row = instance_row(info_kw["instance_type"])
    cpus, gpus = (int(row["vcpus"]), int(row["gpus"]) or None) if row else (None, None)
    system = instance_metrics(job_or_path, start, end, hosts=info_kw["instance_count"] or 1, cpus=cpus, gpus=gpus,
                              cloudwatch_client=cloudwatch_client)
    names = [m["Name"] for m in (desc.get("AlgorithmSpecification") or {}).get("MetricDefinitions", [])]
    scalars = training_metrics(job_or_path, names, start, end, cloudwatch_client=cloudwatch_client)
    return JobData(system=system, scalars=scalars), JobInfo(**info_kw, source="CloudWatch /aws/sagemaker/TrainingJobs")
