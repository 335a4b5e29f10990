"""End to end on the local AWS: a rule whose action is `retrain` starts ONE execution of the deployed state
machine (moto runs it; its Lambda tasks run the deployed retrain handler in-process), which launches the next
training job and ends with a notification; the same event delivered again starts nothing more."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from helpers_infra_deploy import create_job

from smx_debug import local
from smx_debug.contracts import RULE_TAG_PREFIX, retrain_execution_name
from smx_debug.local import LocalAws, deploy_stack
from smx_debug.local.stepfunctions import tasks as sfn_lambda

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
    steps = [json.loads(json.dumps(d.result, default=str)) for d in sfn_lambda.invocations(local_aws)]
    assert [d.error for d in sfn_lambda.invocations(local_aws)] == [None] * len(steps)
    assert steps[-1].get("notified") is True  # the end step published the final message
    subjects = _subjects(local_aws, inbox)
    # The rule's own notification, then the retraining's: launched, and the end (run finished, no issues).
    assert any(s.startswith("smx-debug retrain") and "finished" in s for s in subjects), subjects

    # The same event again (EventBridge delivers at least once): nothing more starts.
    again = local.deliver_event(local_aws, event)
    assert [d.error for d in again] == [None, None, None]
    assert len(sfn.list_executions(stateMachineArn=machine)["executions"]) == 1
    assert len(local_aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 2


# Watch prefixes at the limit: 45 characters (room for the run suffix) and 63 (SageMaker's whole name: none).
PREFIX_45 = "team-vision-segmentation-resnet-elu-sweep-42-"
PREFIX_63 = "team-vision-segmentation-resnet-elu-sweep-42-very-long-prefix-x"


def test_retrain_with_a_45_character_watch_prefix_launches_the_next_run_under_that_prefix(
    local_aws: LocalAws, tmp_path: Path
) -> None:
    """IAM is enforced: the retrain role may create and tag only jobs under the watched prefix (or opted in by tag,
    which this job is not), and EventBridge delivers only that prefix's events; the next run must keep it whole."""
    from infra.cdk_app import build_app

    assert len(PREFIX_45) == 45
    context = {**CONTEXT, "watch_prefixes": [PREFIX_45]}
    build_app(context, outdir=str(tmp_path), nag=False).synth()
    deployed = deploy_stack(local_aws, tmp_path / f"{STACK}.template.json", stack_name=STACK)
    sfn_lambda.install(local_aws)
    job = f"{PREFIX_45}run-0001-a"  # 55 characters
    _create_job(local_aws, deployed.output("OutputBucketName"), job)
    local.deliver_event(local_aws, local.state_change_event(local_aws, job))
    sfn = local_aws.client("stepfunctions")
    (execution,) = sfn.list_executions(stateMachineArn=deployed.output("RetrainingStateMachineArn"))["executions"]

    launched: list[str] = []
    deadline = time.monotonic() + 60
    while not launched and time.monotonic() < deadline:
        launched = [j["TrainingJobName"] for j in local_aws.client("sagemaker").list_training_jobs()[
            "TrainingJobSummaries"] if j["TrainingJobName"] != job]
        if sfn.describe_execution(executionArn=execution["executionArn"])["status"] != "RUNNING":
            break
        time.sleep(0.5)
    errors = [d.result.get("error") for d in sfn_lambda.invocations(local_aws) if isinstance(d.result, dict)]
    assert len(launched) == 1, errors
    (name,) = launched
    assert name.startswith(PREFIX_45) and len(name) <= 63, name
    # The run is watched by its name: its state-change events reach the guard's handlers.
    local.set_rule_statuses(local_aws, name, debug={RULE: "NoIssuesFound"})
    local.set_training_job_status(local_aws, name, "Completed")
    delivered = local.deliver_event(local_aws, local.state_change_event(local_aws, name))
    assert delivered and [d.error for d in delivered] == [None] * len(delivered)
    assert _wait_for(local_aws, execution["executionArn"])["status"] == "SUCCEEDED"


def test_retrain_config_with_a_63_character_watch_prefix_is_refused_naming_the_prefix_and_the_maximum(
    tmp_path: Path,
) -> None:
    """A 63-character prefix leaves no room for a run suffix: no retrained run could be named under it."""
    from infra.cdk_app import build_app
    from smx_debug.actions.retrain import RETRAIN_PREFIX_MAX
    from smx_debug.errors import ConfigError

    assert len(PREFIX_63) == 63
    with pytest.raises(ConfigError) as caught:
        build_app({**CONTEXT, "watch_prefixes": ["guarded-", PREFIX_63]}, outdir=str(tmp_path), nag=False)
    message = str(caught.value)
    assert caught.value.field == "watch_prefixes" and caught.value.value == PREFIX_63
    assert PREFIX_63 in message and f"at most {RETRAIN_PREFIX_MAX} characters" in message
    assert "retraining: false" in message
    # Without retraining the same prefix deploys: no run is ever named after it.
    build_app({**CONTEXT, "watch_prefixes": [PREFIX_63], "retraining": False}, outdir=str(tmp_path), nag=False)
