"""SageMaker's CloudWatch metrics for simulated training jobs on the local AWS.

A real training job gets, with or without Debugger, one datapoint a minute per host in
``/aws/sagemaker/TrainingJobs`` (dimension ``Host`` = ``<job>/algo-<n>``): CPUUtilization and GPUUtilization
and GPUMemoryUtilization summed over the host's vCPUs / GPUs (100% each), MemoryUtilization and
DiskUtilization in 0..100; and one datapoint per logged value of each MetricDefinition (dimension
``TrainingJobName``). moto has no training to publish them, so :func:`publish_minutes` writes them as SageMaker
would, from a :class:`Scenario`: a healthy job, a CPU bottleneck (GPUs idle while the CPUs are saturated) or a
loss that stops decreasing, from minute ``onset`` on. Values are deterministic for a seed.

Two job facts the evaluator reads are wrong in moto and set right here (:func:`install`, through moto's public
``FakeTrainingJob``): moto replaces a job's ``MetricDefinitions`` with its own ``test:dcg`` (kept as requested
here), and its ``TrainingStartTime`` is the creation instant (:func:`set_start_time` moves it, so a simulated
job can start at a chosen minute).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
from moto.sagemaker.models import FakeTrainingJob, sagemaker_backends

from smx_debug.contracts import JOB_ENDED_STATUSES
from smx_debug.errors import ConfigError
from smx_debug.local.cloudwatch.metric_data import put_datapoints
from smx_debug.local.patching import patch_once
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

NAMESPACE = "/aws/sagemaker/TrainingJobs"
Kind = Literal["healthy", "cpu_bottleneck", "loss_plateau"]


def install() -> None:
    """Keep each training job's MetricDefinitions as requested (moto replaces them). Idempotent."""
    def wrap(original: Callable[..., None]) -> Callable[..., None]:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            spec = kwargs.get("algorithm_specification")
            requested = dict(spec) if isinstance(spec, dict) else None
            original(self, *args, **kwargs)
            if requested is not None:
                self.algorithm_specification = requested

        return init

    patch_once(FakeTrainingJob, "__init__", wrap)


def _fake_job(aws: LocalAws, job: str, doing: str) -> Any:
    """moto's job ``job``, read from its backend (a Describe would advance the job's emulated lifecycle)."""
    fake = sagemaker_backends[LOCAL_ACCOUNT_ID][aws.region].training_jobs.get(job)
    if fake is None:
        raise ConfigError(f"{doing}: no training job {job!r} in the local AWS", field="job", value=job)
    return fake


def set_start_time(aws: LocalAws, job: str, when: datetime) -> None:
    """Set a job's CreationTime and TrainingStartTime, as if SageMaker had started it at ``when``."""
    fake = _fake_job(aws, job, "set_start_time")
    fake.creation_time = fake.training_start_time = when


def set_end_time(aws: LocalAws, job: str, when: datetime) -> None:
    """Set an ended job's TrainingEndTime and LastModifiedTime, as if it had ended at ``when`` (the local AWS
    stamps a status change with the wall clock; a simulated job runs on its own clock)."""
    fake = _fake_job(aws, job, "set_end_time")
    if fake.training_job_status not in JOB_ENDED_STATUSES:
        raise ConfigError(f"set_end_time: training job {job!r} is {fake.training_job_status}, not ended",
                          field="job", value=job)
    fake.training_end_time = fake.last_modified_time = when


@dataclass(frozen=True)
class Scenario:
    """What a simulated job's metrics look like, minute by minute.

    Attributes:
        kind: ``healthy``; ``cpu_bottleneck`` (from ``onset``: GPUs ~3% busy, CPUs ~97%); ``loss_plateau`` (from
            ``onset``: the loss stays where it was, with noise well under 0.1%).
        onset: the first bad minute (minutes since the job started); ignored for ``healthy``.
        vcpus, gpus: per host, for the sums CloudWatch reports.
        loss_metrics: the job's MetricDefinitions names that carry the loss (``train:loss``, ``validation:loss``).
    """

    kind: Kind = "healthy"
    onset: int = 0
    vcpus: int = 8
    gpus: int = 1
    loss_metrics: tuple[str, ...] = ("train:loss", "validation:loss")
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("healthy", "cpu_bottleneck", "loss_plateau"):
            raise ConfigError(f"Scenario.kind: {self.kind!r} is not a scenario", field="kind", value=self.kind)

    def instance(self, minutes: np.ndarray, host: int) -> dict[str, np.ndarray]:
        """Per-minute instance metrics of one host (CloudWatch's sums)."""
        rng = np.random.default_rng(self.seed * 1000 + host)
        bad = (minutes >= self.onset) if self.kind == "cpu_bottleneck" else np.zeros(len(minutes), dtype=bool)
        cpu = np.where(bad, 97.0, 55.0) + rng.normal(0, 1.5, len(minutes))
        gpu = np.where(bad, 3.0, 85.0) + rng.normal(0, 1.0, len(minutes))
        out = {
            "CPUUtilization": np.clip(cpu, 0, 100) * self.vcpus,
            "MemoryUtilization": np.clip(40 + rng.normal(0, 1, len(minutes)), 0, 100),
            "DiskUtilization": np.clip(20 + 0.01 * minutes, 0, 100),
        }
        if self.gpus:
            out["GPUUtilization"] = np.clip(gpu, 0, 100) * self.gpus
            out["GPUMemoryUtilization"] = np.clip(60 + rng.normal(0, 0.5, len(minutes)), 0, 100) * self.gpus
        return out

    def losses(self, minutes: np.ndarray) -> dict[str, np.ndarray]:
        """Per-minute values of each loss metric: decreasing ~2% a minute, flat from ``onset`` in a plateau."""
        rng = np.random.default_rng(self.seed)
        t = minutes.astype(np.float64)
        if self.kind == "loss_plateau":
            t = np.minimum(t, float(self.onset))
        base = 2.0 * np.exp(-0.02 * t)
        out = {}
        for i, name in enumerate(self.loss_metrics):
            scale = 1.0 if i == 0 else 1.05
            out[name] = base * scale * (1 + rng.normal(0, 1e-5, len(minutes)))
        return out


def publish_minutes(
    aws: LocalAws,
    job: str,
    *,
    start: datetime,
    first: int,
    last: int,
    scenario: Scenario,
    hosts: int = 1,
    training_metrics: bool = True,
) -> int:
    """Publish minutes ``first..last`` (since ``start``, inclusive) of ``job``'s metrics; returns datapoints written.

    Raises:
        ConfigError: an empty range or no hosts.
    """
    if last < first or hosts < 1:
        raise ConfigError(f"publish_minutes: minutes {first}..{last} on {hosts} hosts", field="last", value=last)
    minutes = np.arange(first, last + 1)
    stamps = [start + timedelta(minutes=int(m), seconds=30) for m in minutes]
    written = 0
    for h in range(1, hosts + 1):
        for metric, values in scenario.instance(minutes, h).items():
            written += put_datapoints(
                aws, NAMESPACE, metric, {"Host": f"{job}/algo-{h}"}, stamps, values.tolist(), unit="Percent"
            )
    if training_metrics:
        for metric, values in scenario.losses(minutes).items():
            written += put_datapoints(aws, NAMESPACE, metric, {"TrainingJobName": job}, stamps, values.tolist())
    return written
