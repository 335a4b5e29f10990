"""The grants issue 20 (defect 14) tightened, exercised with the deployed stack and the local IAM enforcing them.

tests/infra/test_infra_least_privilege.py evaluates the synthesized policies on requests it writes itself; here
the deployed evaluator's own calls go through smx_debug.local.iam: it reads a job's Debugger profiler output in
the stack's bucket (GetObject on ``*/profiler-output/*``, ListBucket with an ``s3:prefix`` condition) with 0
denials, and the key's encryption-context grant lets EventBridge dead-letter to the stack's queue and no other.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers_infra_deploy import create_job
from profiler_support import put_profiler_output, set_profiler_config

from smx_debug import local
from smx_debug.contracts import PROFILER_OUTPUT
from smx_debug.local import DeployedStack, LocalAws, iam
from smx_debug.local.cloudwatch import metric_data
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.simulate import Simulation, SimulationSpec


def test_deployed_evaluator_reads_profiler_output_in_the_stack_bucket_without_denial(
    local_aws: LocalAws, deployed: DeployedStack
) -> None:
    bucket = deployed.output("OutputBucketName")
    metric_data.install()
    job_metrics.install()
    job = "guarded-profiled-1"
    create_job(local_aws, bucket, job, {})
    # the local SageMaker drops ProfilerConfig on create; the local AWS keeps it for this job
    set_profiler_config(local_aws, job, bucket, ProfilingIntervalInMilliseconds=500)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=12)
    job_metrics.set_start_time(local_aws, job, start)
    job_metrics.publish_minutes(local_aws, job, start=start, first=0, last=12, scenario=Scenario(), hosts=1)
    sim = Simulation(SimulationSpec(scenario="cpu_bottleneck", onset_s=120, job_start=start, duration_s=13 * 60,
                                    nodes=1, cpus=4, gpus=0, interval_ms=500, seed=3, initialization_s=0))
    put_profiler_output(local_aws, bucket, job, sim, sim.minutes()[:13])

    (run,) = local.deliver_schedule(local_aws, handlers=["evaluator"])

    assert run.error is None, run.error
    reads = [r for r in iam.ledger(local_aws).records() if r.caller == "evaluator" and r.action in ("s3:ListBucket", "s3:GetObject")]
    assert iam.ledger(local_aws).denials(reads) == []
    assert {r.action for r in reads} == {"s3:ListBucket", "s3:GetObject"}
    objects = [r.resource for r in reads if r.action == "s3:GetObject"]
    assert objects and all(f"/debugger/{job}/{PROFILER_OUTPUT}/system/" in o for o in objects), objects


@pytest.mark.iam_denials
def test_key_lets_eventbridge_dead_letter_to_the_stack_queue_only(local_aws: LocalAws, deployed: DeployedStack) -> None:
    sqs, events = local_aws.client("sqs"), local_aws.client("events")
    dlq = sqs.get_queue_attributes(QueueUrl=deployed.output("DeadLetterQueueUrl"),
                                   AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = next(r["Arn"] for r in events.list_rules()["Rules"] if "WatchedJobs" in r["Name"])
    assert iam.authorize_service(local_aws, "events.amazonaws.com", "sqs:SendMessage", dlq, source_arn=rule).allowed
    # another queue under the same key, whose own policy admits the rule: the key's encryption context refuses
    other = sqs.create_queue(QueueName="another-queue", Attributes={"KmsMasterKeyId": deployed.output("KeyArn")})
    other_arn = sqs.get_queue_attributes(QueueUrl=other["QueueUrl"], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.set_queue_attributes(QueueUrl=other["QueueUrl"], Attributes={"Policy": (
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, '
        f'"Action": "sqs:SendMessage", "Resource": "{other_arn}", "Condition": {{"ArnEquals": {{"aws:SourceArn": '
        f'"{rule}"}}}}}}]}}')})
    iam.ledger(local_aws).reset()
    outcome = iam.authorize_service(local_aws, "events.amazonaws.com", "sqs:SendMessage", other_arn, source_arn=rule)
    assert not outcome.allowed
    assert [(r.action, r.allowed) for r in iam.ledger(local_aws).records()] == [("sqs:SendMessage", True), ("kms:GenerateDataKey", False)]
    assert "kms:GenerateDataKey" in outcome.message
