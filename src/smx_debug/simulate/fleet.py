"""A generated fleet: many jobs' Debugger system metrics with known idle minutes, rule triggers and stops.

For the fleet's tests and benchmark: every job is 2 nodes (by default) of an instance type from the price
table, writes Debugger's layout (``<job>/profiler-output/system/incremental/<yyyyMMddHH>/<epoch>.algo-<n>.json``,
JSON lines ``Type, Name, Dimension, Value, NodeId, Timestamp``), and idles its GPUs (utilisation under 5%)
for a known window of whole minutes; busy GPUs run at 60-95%. Jobs with an idle window get a rule trigger a
known time after it starts and, for every other one, a stop. Deterministic for a given :class:`FleetSpec`.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from smx_debug.actions.verdict_log import ACTION_EVENT, TRIGGER_EVENT
from smx_debug.contracts import (
    FLEET_TEAM_TAG,
    ISSUES_FOUND,
    JOB_COMPLETED,
    JOB_STOPPED,
    JOB_STOPPING,
    MANAGED_TAG,
    OPT_IN_VALUE,
    PROFILER_OUTPUT,
    SOURCE_EVALUATOR,
)
from smx_debug.fleet.append import Verdict

_INSTANCES = (("ml.p3.8xlarge", 4, 32), ("ml.g5.12xlarge", 4, 48), ("ml.p3.2xlarge", 1, 8))
_TEAMS = ("vision", "speech", "ranking")


class FleetSpec(BaseModel):
    """The generated fleet: ``jobs`` jobs of ``nodes`` nodes, each ``minutes`` long, starting ``stagger``
    minutes apart from ``start``; samples every ``interval_s``; ``cpus`` CPU series per node."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    jobs: int = Field(default=20, ge=1, le=10_000)
    nodes: int = Field(default=2, ge=1, le=64)
    minutes: int = Field(default=30, ge=4, le=24 * 60)
    interval_s: float = Field(default=10.0, ge=0.1, le=60.0)
    cpus: int = Field(default=2, ge=1, le=128)
    stagger: int = Field(default=7, ge=0)
    start: datetime = datetime(2026, 11, 2, 22, 50, tzinfo=UTC)
    seed: int = 0


@dataclass(frozen=True)
class FleetJob:
    """One generated job and what is known about it."""

    name: str
    instance_type: str
    gpus: int
    vcpus: int
    team: str
    start: datetime
    minutes: int
    idle: tuple[int, int] | None  # minutes [first, last) of the job in which every GPU idles
    trigger: datetime | None  # when a rule fired (LowGPUUtilization)
    stopped: datetime | None  # when the job was stopped


class FleetSimulation:
    """The jobs of a :class:`FleetSpec`, their metadata, and their profiler output written to a folder."""

    def __init__(self, spec: FleetSpec | None = None) -> None:
        self.spec = spec or FleetSpec()
        s = self.spec
        rng = np.random.default_rng(s.seed)
        jobs = []
        for i in range(s.jobs):
            instance_type, gpus, vcpus = _INSTANCES[i % len(_INSTANCES)]
            start = s.start + timedelta(minutes=i * s.stagger)
            idle = None
            trigger = stopped = None
            if i % 4 != 3:  # three jobs in four idle for a while
                first = int(rng.integers(1, max(2, s.minutes // 3)))
                idle = (first, min(s.minutes, first + 3 + int(rng.integers(0, s.minutes // 2))))
                trigger = start + timedelta(minutes=idle[0] + 2, seconds=int(rng.integers(0, 60)))
                if i % 2 == 0:
                    stopped = trigger + timedelta(seconds=int(rng.integers(5, 300)))
            jobs.append(FleetJob(f"fleet-job-{i:04d}", instance_type, gpus, vcpus, _TEAMS[i % len(_TEAMS)], start,
                                 s.minutes, idle, trigger, stopped))
        self.jobs: tuple[FleetJob, ...] = tuple(jobs)

    def describe(self, job: FleetJob) -> dict[str, object]:
        """A DescribeTrainingJob-shaped response for ``job``."""
        end = job.stopped or job.start + timedelta(minutes=job.minutes)
        return {
            "TrainingJobName": job.name,
            "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{job.name}",
            "TrainingJobStatus": JOB_STOPPED if job.stopped else JOB_COMPLETED,
            "ResourceConfig": {"InstanceType": job.instance_type, "InstanceCount": self.spec.nodes,
                               "VolumeSizeInGB": 30},
            "TrainingStartTime": job.start, "TrainingEndTime": end,
            "BillableTimeInSeconds": int((end - job.start).total_seconds()),
        }

    def tags(self, job: FleetJob) -> dict[str, str]:
        return {FLEET_TEAM_TAG: job.team, MANAGED_TAG: OPT_IN_VALUE}

    def verdicts(self) -> list[Verdict]:
        """The verdict log the fleet's evaluator would have written: a LowGPUUtilization trigger per idle job and
        a stop action for the stopped ones."""
        rows = []
        for job in self.jobs:
            common = {"job": job.name, "rule": "LowGPU", "rule_type": "LowGPUUtilization", "source": SOURCE_EVALUATOR}
            if job.trigger:
                rows.append(Verdict(**common, event=TRIGGER_EVENT, verdict=ISSUES_FOUND, time=job.trigger))
            if job.stopped:
                rows.append(Verdict(**common, event=ACTION_EVENT, action="stop", verdict=JOB_STOPPING, time=job.stopped))
        return rows

    def node_minute(self, job: FleetJob, node: int, minute: int) -> bytes:
        """One system-metrics file: the JSON lines of ``job``'s node ``node`` (0-based) in its ``minute``."""
        s = self.spec
        rng = np.random.default_rng([s.seed, zlib.crc32(job.name.encode()), node, minute])
        t0 = job.start.timestamp() + minute * 60
        ts = t0 + np.arange(0.0, 60.0, s.interval_s)
        idle = job.idle is not None and job.idle[0] <= minute < job.idle[1]
        lines: list[str] = []
        node_id = f"algo-{node + 1}"
        series: list[tuple[str, str, str, np.ndarray]] = []
        for g in range(job.gpus):
            util = rng.uniform(0.0, 5.0, ts.size) if idle else rng.uniform(60.0, 95.0, ts.size)
            series.append(("gpu", f"gpu{g}", "GPUUtilization", util))
            series.append(("gpu", f"gpu{g}", "GPUMemoryUtilization", rng.uniform(20.0, 40.0, ts.size)))
        for c in range(s.cpus):
            series.append(("cpu", f"cpu{c}", "CPUUtilization", rng.uniform(10.0, 90.0, ts.size)))
        for k, stamp in enumerate(ts):
            for typ, name, dim, values in series:
                lines.append(f'{{"Type": "{typ}", "Name": "{name}", "Dimension": "{dim}", '
                             f'"Value": {values[k]:.4f}, "NodeId": "{node_id}", "Timestamp": {stamp:.3f}}}')
        return ("\n".join(lines) + "\n").encode()

    def write_local(self, root: Path) -> int:
        """Write every job's profiler output under ``root/<job>/profiler-output``; returns the files written."""
        files = 0
        for job in self.jobs:
            for minute in range(job.minutes):
                t0 = job.start + timedelta(minutes=minute)
                folder = root / job.name / PROFILER_OUTPUT / "system" / "incremental" / t0.strftime("%Y%m%d%H")
                folder.mkdir(parents=True, exist_ok=True)
                for node in range(self.spec.nodes):
                    (folder / f"{int(t0.timestamp())}.algo-{node + 1}.json").write_bytes(
                        self.node_minute(job, node, minute))
                    files += 1
        return files
