"""Another team's training jobs in the local AWS's account: running beside ours the whole time, never ours.

A real account is not empty, and a guard that only ever met its own jobs has not been tested. The demo and the
evaluator's functional tests start these jobs before anything else (:func:`start_other_team`) and check at the
end that nothing touched them (:meth:`OtherTeam.touched`). The jobs are built to be tempting:

- **unwatched** by any deployment here: names under ``ml-research-`` (no watched prefix), and opt-in tags that
  are not the opt-in (none, ``false``, ``" true"`` with a space, ``yes``), one of them with a rule-action tag
  (``smx-debug:on:CPUBottleneck = stop notify``) that only a watched job's actions honour;
- **bad metrics** that would fire rules: a CPU bottleneck and a loss plateau from their first minute, published
  to CloudWatch as SageMaker publishes every job's (:mod:`smx_debug.local.sagemaker.job_metrics`);
- **damaged profiler output** in Debugger's layout, where their ``ProfilerConfig`` points: every file carries a
  lone surrogate escape, a 5,000-deep array, NaN, Infinity and 1e400, and ends with a line cut mid-write.

Touching them means: a StopTrainingJob call, a status other than InProgress, a notification naming one, a
metric with one as a dimension value in the deployment's namespace, or a ledger record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from moto.sns.models import sns_backends

from smx_debug.contracts import (
    DEFAULT_NAMESPACE,
    FLEET_TEAM_TAG,
    JOB_IN_PROGRESS,
    LEDGER_KEY_ATTRIBUTE,
    MANAGED_TAG,
    RULE_TAG_PREFIX,
)
from smx_debug.local.sagemaker import job_metrics, training_jobs
from smx_debug.local.sagemaker.execution_roles import execution_role
from smx_debug.local.sagemaker.job_metrics import Kind, Scenario, publish_minutes
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws
from smx_debug.simulate import Simulation, SimulationSpec

PREFIX = "ml-research-"
# (job suffix, tags, scenario kind): none of these tag sets opts a job in (contracts.is_opted_in)
_JOBS: tuple[tuple[str, dict[str, str], Kind], ...] = (
    ("untagged", {}, "cpu_bottleneck"),
    ("opted-out", {MANAGED_TAG: "false", f"{RULE_TAG_PREFIX}CPUBottleneck": "stop notify", FLEET_TEAM_TAG: "research"},
     "cpu_bottleneck"),
    ("spaced", {MANAGED_TAG: " true", FLEET_TEAM_TAG: "research"}, "loss_plateau"),
    ("yes", {MANAGED_TAG: "yes", FLEET_TEAM_TAG: "research"}, "loss_plateau"),
)
# Appended to every profiler file: what the reader must skip and count, never choke on.
DAMAGE = (
    b'{"Type": "cpu", "Name": "\\ud800", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
    b'"Timestamp": %d.0}\n'
    + b"[" * 5000 + b"]" * 5000 + b"\n"
    + b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": NaN, "NodeId": "algo-1", '
    b'"Timestamp": %d.5}\n'
    + b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": Infinity, "NodeId": "algo-1", '
    b'"Timestamp": %d.5}\n'
    + b'{"Type": "gpu", "Name": "gpu0", "Dimension": "GPUUtilization", "Value": 1e400, "NodeId": "algo-1", '
    b'"Timestamp": %d.5}\n'
    + b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtil'  # cut mid-write
)


@dataclass(frozen=True)
class OtherTeam:
    """The other team's running jobs and where their profiler output is."""

    jobs: tuple[str, ...]
    output_path: str  # their ProfilerConfig.S3OutputPath

    def touched(self, aws: LocalAws, *, namespace: str = DEFAULT_NAMESPACE,
                ledger_table: str | None = None) -> list[str]:
        """Everything anyone did to these jobs (empty when they were left alone)."""
        found: list[str] = []
        sagemaker = aws.client("sagemaker")
        for job in self.jobs:
            if training_jobs.stop_calls(aws, job):
                found.append(f"{job}: {training_jobs.stop_calls(aws, job)} StopTrainingJob call(s)")
            status = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
            if status != JOB_IN_PROGRESS:
                found.append(f"{job}: {status}")
        for topic in sns_backends[LOCAL_ACCOUNT_ID][aws.region].topics.values():
            for sent in topic.sent_notifications:
                named = [job for job in self.jobs if job in str(sent)]
                found.extend(f"{job}: named in a message to {topic.arn}" for job in named)
        for page in aws.client("cloudwatch").get_paginator("list_metrics").paginate(Namespace=namespace):
            for metric in page["Metrics"]:
                values = {d["Value"] for d in metric.get("Dimensions", [])}
                found.extend(f"{job}: metric {metric['MetricName']}" for job in self.jobs if job in values)
        if ledger_table:
            items = aws.client("dynamodb").scan(TableName=ledger_table).get("Items", [])
            keys = [str(i.get(LEDGER_KEY_ATTRIBUTE, {}).get("S", "")) for i in items]
            found.extend(f"{job}: ledger record {k}" for k in keys for job in self.jobs if k.startswith(job + "#"))
        return found

    def summary(self, touched: Sequence[str]) -> str:
        """One line for the demo: what ran beside it and whether it was left alone."""
        what = (f"another team's {len(self.jobs)} jobs ({PREFIX}*: not watched, bad metrics, damaged profiler "
                "output) ran beside the demo's the whole time")
        return f"{what}: untouched (0 stops, 0 messages, 0 metrics)" if not touched else \
            f"{what}: TOUCHED: {'; '.join(touched)}"


def _profiler_output(aws: LocalAws, bucket: str, key_prefix: str, job: str, start: datetime, minutes: int) -> None:
    sim = Simulation(SimulationSpec(scenario="cpu_bottleneck", onset_s=0, job_start=start, duration_s=minutes * 60.0,
                                    nodes=1, cpus=4, gpus=1, interval_ms=5000, seed=13, initialization_s=0))
    s3 = aws.client("s3")
    for minute in sim.minutes():
        for key, body, _ in sim.files_for_minute(minute, framework=False):
            stamp = minute + 30
            s3.put_object(Bucket=bucket, Key=f"{key_prefix}/{job}/profiler-output/{key}",
                          Body=body + DAMAGE.replace(b"%d", str(stamp).encode()))


def start_other_team(
    aws: LocalAws, *, bucket: str, start: datetime, minutes: int, profiler_minutes: int = 3, count: int = 4,
    role: str = "research-training",
) -> OtherTeam:
    """Create the other team's ``count`` jobs (InProgress since ``start``; the 4 kinds above in turn, numbered
    when there are more than 4) run as the team's own SageMaker execution role ``role`` (a name outside the
    guard's execution-role pattern), ``minutes`` of their bad CloudWatch metrics and ``profiler_minutes`` of
    damaged profiler output in ``bucket``. Installs what it needs of the local AWS."""
    training_jobs.install()
    job_metrics.install()
    sagemaker = aws.client("sagemaker")
    role_arn = execution_role(aws, role)
    output = f"s3://{bucket}/other-team"
    names = []
    for i in range(count):
        name, tags, kind = _JOBS[i % len(_JOBS)]
        job = f"{PREFIX}{name}" if count <= len(_JOBS) else f"{PREFIX}{name}-{i // len(_JOBS):03d}"
        sagemaker.create_training_job(
            TrainingJobName=job,
            AlgorithmSpecification={
                "TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311",
                "TrainingInputMode": "File",
                "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
                                      {"Name": "validation:loss", "Regex": "val_loss=([0-9.]+)"}],
            },
            RoleArn=role_arn,
            OutputDataConfig={"S3OutputPath": f"s3://{bucket}/other-team-model"},
            ResourceConfig={"InstanceType": "ml.g4dn.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            StoppingCondition={"MaxRuntimeInSeconds": 86400},
            ProfilerConfig={"S3OutputPath": output, "ProfilingIntervalInMilliseconds": 500},
            Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
        )
        training_jobs.set_training_job_status(aws, job, JOB_IN_PROGRESS)
        job_metrics.set_start_time(aws, job, start)
        scenario = Scenario(kind=kind, onset=0, vcpus=8, gpus=1, seed=100 + i)
        publish_minutes(aws, job, start=start, first=0, last=max(minutes, 1), scenario=scenario)
        _profiler_output(aws, bucket, "other-team", job, start, min(profiler_minutes, minutes) or 1)
        names.append(job)
    return OtherTeam(jobs=tuple(names), output_path=output)
