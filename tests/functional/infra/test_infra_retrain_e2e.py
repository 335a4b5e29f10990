"""End to end on the local AWS: a rule whose action is `retrain` starts ONE execution of the deployed state
machine (moto runs it; its Lambda tasks run the deployed retrain handler in-process), which launches the next
training job and ends with a notification; the same event delivered again starts nothing more."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from helpers_infra_deploy import create_job

from smx_debug import local
from smx_debug.contracts import RULE_TAG_PREFIX, retrain_execution_name
from smx_debug.local import LocalAws, deploy_stack, sfn_lambda

STACK = "SmxDebugGuard"
RULE = "ExplodingTensor"
CONTEXT = {"watch_prefixes": ["guarded-"], "default_actions": ["notify"], "local": True, "evaluator": False,
           "retraining": {"wait_seconds": 10, "max_runtime_seconds": 3600}}


def _create_job(aws: LocalAws, bucket: str, job: str) -> None:
    create_job(aws, bucket, job, {f"{RULE_TAG_PREFIX}{RULE}": "retrain"})
    local.set_rule_statuses(aws, job, debug=[local.rule_status(RULE, "IssuesFound", step=400)])


def _inbox(aws: LocalAws, topic: str) -> str:
    return local.subscribe_queue(aws, topic, "people-inbox")


def _subjects(aws: LocalAws, queue: str) -> list[str]:
    out = []
    while True:
        got = aws.client("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return out
        out += [json.loads(m["Body"]).get("Subject") or "" for m in got]


def _wait_for(aws: LocalAws, arn: str, timeout: float = 120) -> dict[str, Any]:
    sfn = aws.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while True:
        execution = sfn.describe_execution(executionArn=arn)
        if execution["status"] != "RUNNING" or time.monotonic() > deadline:
            return dict(execution)
        time.sleep(0.5)


def test_retrain_rule_starts_one_execution_that_launches_the_next_job_and_notifies_at_the_end(
    local_aws: LocalAws, tmp_path: Path
) -> None:
    from infra.cdk_app import build_app

    build_app(CONTEXT, outdir=str(tmp_path), nag=False).synth()
    deployed = deploy_stack(local_aws, tmp_path / f"{STACK}.template.json", stack_name=STACK)
    sfn_lambda.install(local_aws)
    machine = deployed.output("RetrainingStateMachineArn")
    inbox = _inbox(local_aws, deployed.output("TopicArn"))
    job = "guarded-resnet-1"
    _create_job(local_aws, deployed.output("OutputBucketName"), job)

    event = local.state_change_event(local_aws, job)
    deliveries = local.deliver_event(local_aws, event)
    assert {d.handler: d.error for d in deliveries} == {"rule_metrics": None, "notify": None, "stop_training": None}
    sfn = local_aws.client("stepfunctions")
    (execution,) = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert execution["name"] == retrain_execution_name(job)

    # The execution launches the next run; SageMaker's part: it trains cleanly this time.
    deadline = time.monotonic() + 60
    launched: list[str] = []
    while not launched and time.monotonic() < deadline:
        launched = [j["TrainingJobName"] for j in local_aws.client("sagemaker").list_training_jobs()[
            "TrainingJobSummaries"] if j["TrainingJobName"] != job]
        time.sleep(0.5)
    assert len(launched) == 1 and launched[0].startswith(job), launched
    hyper = local_aws.client("sagemaker").describe_training_job(TrainingJobName=launched[0])["HyperParameters"]
    assert float(hyper["warmup_learning_rate"]) == 0.05  # the first strategy halved it
    local.set_training_job_status(local_aws, launched[0], "Completed")
    local.set_rule_statuses(local_aws, launched[0], debug={RULE: "NoIssuesFound"})

    done = _wait_for(local_aws, execution["executionArn"])
    assert done["status"] == "SUCCEEDED", done
    steps = [json.loads(json.dumps(d.result, default=str)) for d in sfn_lambda.invocations()]
    assert [d.error for d in sfn_lambda.invocations()] == [None] * len(steps)
    assert steps[-1].get("notified") is True  # the end step published the final message
    subjects = _subjects(local_aws, inbox)
    # The rule's own notification, then the retraining's: launched, and the end (run finished, no issues).
    assert any(s.startswith("smx-debug retrain") and "finished" in s for s in subjects), subjects

    # The same event again (EventBridge delivers at least once): nothing more starts.
    again = local.deliver_event(local_aws, event)
    assert [d.error for d in again] == [None, None, None]
    assert len(sfn.list_executions(stateMachineArn=machine)["executions"]) == 1
    assert len(local_aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 2
