"""`make demo`'s second job: guarded by the stack's scheduled evaluator, with no Debugger configuration at all.

The job is created with plain boto3 (no rules, no hook, profiler disabled). Its debug plan says
``guard: evaluator``: the plan's watch spec is stored in the stack's bucket and the job's tags name it and carry
the rule's actions (stop, notify). The simulator writes what SageMaker publishes for every job into the local
CloudWatch: per-host instance metrics and the training metrics of its MetricDefinitions, one datapoint a minute,
with a CPU bottleneck from a known onset. Every job minute the scheduled evaluator runs in process, with the
deployed function's own environment, exactly as the Lambda does (``smx_debug.watch.run_once``); when its rule
fires, the action core stops the job once and notifies. Its AWS clients are the deployed function's (its role's
key, every call authorized by ``smx_debug.local.iam``). Run alone: ``python examples/demo_evaluator.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from smx_debug import local  # noqa: E402
from smx_debug.config import DebugPlan  # noqa: E402
from smx_debug.contracts import FLEET_TEAM_TAG, HANDLER_TAG  # noqa: E402
from smx_debug.local import LocalAws  # noqa: E402

__all__ = ["EvaluatorJobResult", "guard_second_job"]

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
INSTANCE_TYPE = "ml.p3.8xlarge"  # 4 GPUs, 32 vCPUs
Say = Callable[..., None]


class EvaluatorJobResult:
    """What happened to the second job: when its rule fired and when it was stopped (job minutes)."""

    def __init__(self, job: str, onset_min: float) -> None:
        self.job = job
        self.onset_min = onset_min
        self.stopped_min: float | None = None
        self.stop_calls = 0
        self.runs = 0

    @property
    def onset_to_stop_min(self) -> float | None:
        return None if self.stopped_min is None else self.stopped_min - self.onset_min

    def verdict(self, say: Say, label: str) -> int:
        """Say whether the job (called ``label``) was stopped and how long after its onset: 0 if it was, else 1."""
        if self.onset_to_stop_min is None:
            say("result", f"{label} was NOT stopped")
            return 1
        say("result", f"{label}: onset to stop {self.onset_to_stop_min:.1f} job minutes; "
            f"StopTrainingJob calls: {self.stop_calls}")
        return 0


def _function_environment(aws: LocalAws) -> dict[str, str]:
    lam = aws.client("lambda")
    for page in lam.get_paginator("list_functions").paginate():
        for fn in page["Functions"]:
            if lam.list_tags(Resource=fn["FunctionArn"])["Tags"].get(HANDLER_TAG) == "evaluator":
                env: dict[str, str] = fn["Environment"]["Variables"]
                # what the Lambda runtime adds to the function's own variables
                return {**env, "AWS_LAMBDA_FUNCTION_NAME": fn["FunctionName"], "AWS_REGION": aws.region}
    raise LookupError("the deployed stack has no evaluator function (cdk.json: evaluator.enabled)")


def guard_second_job(
    aws: LocalAws,
    bucket: str,
    *,
    job: str,
    minutes: int,
    onset_min: int,
    speed: float,
    say: Say,
    inbox: Callable[[], list[str]] | None = None,
    show: Callable[[str], None] | None = None,
) -> EvaluatorJobResult:
    """Launch ``job`` without Debugger, simulate its CloudWatch metrics, run the evaluator every job minute."""
    from smx_debug.local.cloudwatch import metric_data
    from smx_debug.local.sagemaker import job_metrics
    from smx_debug.local.sagemaker.job_metrics import Scenario, publish_minutes
    from smx_debug.watch import run_once
    from smx_debug.watch.handler import EvaluatorRuntime

    metric_data.install()
    job_metrics.install()
    s3, sagemaker = aws.client("s3"), aws.client("sagemaker")
    plan = DebugPlan(
        name="evaluator-guard", region=aws.region, s3_output_path=f"s3://{bucket}/debugger", guard="evaluator",
        rules=[{"name": "CPUBottleneck", "actions": ["stop_job", "notify"]}],
    )
    key = plan.watch_spec().store(bucket, s3_client=s3)
    request = plan.to_request_dict(job_name=job)
    request["Tags"] = [*request.get("Tags", []), {"Key": FLEET_TEAM_TAG, "Value": "vision"}]  # the fleet's team
    sagemaker.create_training_job(
        TrainingJobName=job,
        AlgorithmSpecification={
            "TrainingImage": IMAGE, "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
                                  {"Name": "validation:loss", "Regex": "val_loss=([0-9.]+)"}],
        },
        RoleArn=local.execution_role(aws),
        OutputDataConfig={"S3OutputPath": f"s3://{bucket}/model"},
        ResourceConfig={"InstanceType": INSTANCE_TYPE, "InstanceCount": 2, "VolumeSizeInGB": 50},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        **request,
    )
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes + 2)
    local.set_training_job_status(aws, job, "InProgress")
    job_metrics.set_start_time(aws, job, start)
    description = sagemaker.describe_training_job(TrainingJobName=job)
    say("launch", f"boto3 CreateTrainingJob {job} ({INSTANCE_TYPE} x2): no DebugRuleConfigurations, no "
        f"DebugHookConfig, ProfilerConfig {description.get('ProfilerConfig')}; watch spec s3://{bucket}/{key}")

    environment = _function_environment(aws)
    function = environment["AWS_LAMBDA_FUNCTION_NAME"]
    with local.iam.as_function(aws, function):  # its clients are the function's role (created lazily: see below)
        runtime = EvaluatorRuntime.from_env(environment)
    scenario = Scenario(kind="cpu_bottleneck", onset=onset_min, vcpus=32, gpus=4, seed=11)
    result = EvaluatorJobResult(job, float(onset_min))
    say("simulate", f"instance metrics of 2 hosts and the training losses, 1 datapoint a minute, CPU bottleneck from "
        f"job minute {onset_min}; the evaluator runs every job minute (rate 1 minute)")
    for minute in range(1, minutes + 1):
        wall = time.monotonic()
        # Minute `minute - 1` has just ended; CloudWatch shows it after about a minute (the evaluator waits
        # `settle_seconds` = 60 before reading a minute).
        publish_minutes(aws, job, start=start, first=minute - 1, last=minute - 1, scenario=scenario, hosts=2)
        now = start.timestamp() + minute * 60 + 5
        with local.iam.as_function(aws, function):
            report = run_once(runtime.settings, runtime.clients, runtime.responder, now=now)
        result.runs += 1
        outcome = report.outcomes.get(job)
        fired = [t.rule for t in outcome.triggers] if outcome is not None else []
        status = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
        say(f"t+{minute:4.1f} min", f"evaluator: {report.watched} watched job(s), {report.metrics_requested} metrics "
            f"requested in {report.get_metric_data_calls} GetMetricData call(s); {job}: "
            f"{outcome.status if outcome else 'not running'}{'; fired ' + ', '.join(fired) if fired else ''}; "
            f"job {status}")
        if fired and outcome is not None and outcome.response is not None:
            say("action", _summary(outcome.response))
        if inbox is not None and show is not None:
            for body in inbox():
                show(body)
        if status in ("Stopping", "Stopped"):
            result.stopped_min = minute + 5 / 60
            break
        time.sleep(max(0.0, 60.0 / speed - (time.monotonic() - wall)))
    local.tick(aws)
    if result.stopped_min is not None:  # it ended on the simulated clock, not the wall clock's
        job_metrics.set_end_time(aws, job, start + timedelta(minutes=result.stopped_min))
    result.stop_calls = local.stop_calls(aws, job)
    return result


def _summary(response: Any) -> str:
    if not isinstance(response, dict):
        return f"action core: {response}"
    if "refused" in response or "skipped" in response:
        return f"action core: {response.get('refused') or response.get('skipped')}"
    stop = response.get("stop", {})
    notify = response.get("notify", {})
    sent = notify.get("sent", []) if isinstance(notify, dict) else []
    return (f"action core: stop -> {stop.get('outcome') or stop.get('skipped') or stop}; "
            f"{len(sent)} message(s) sent; same ledger, metric and messages as a Debugger rule event")


def main() -> int:
    """Deploy the stack on a fresh local AWS and guard one job with the evaluator alone."""
    import tempfile

    from examples.demo import DEPLOY_CONTEXT, STACK, say
    from infra.cdk_app import build_app
    from smx_debug.local import deploy_stack

    with tempfile.TemporaryDirectory() as tmp, LocalAws() as aws, aws.environment():
        local.install(aws)
        outdir = Path(tmp) / "cdk.out"
        build_app(dict(DEPLOY_CONTEXT), outdir=str(outdir)).synth()
        deployed = deploy_stack(aws, outdir / f"{STACK}.template.json", stack_name=STACK)
        result = guard_second_job(aws, deployed.output("OutputBucketName"), job="smx-demo-noprofiler-1",
                                  minutes=20, onset_min=4, speed=600.0, say=say)
    return result.verdict(say, result.job)


if __name__ == "__main__":
    raise SystemExit(main())
