"""What smx_debug.local.extensions adds to moto: StopTrainingJob, job/rule statuses, the state-change event."""

from __future__ import annotations

import pytest
from actions_support import Stack, client, create_job
from botocore.exceptions import ClientError

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local import extensions as ext


def test_stop_training_job_goes_stopping_then_stopped_and_counts_calls(stack: Stack) -> None:
    aws, sagemaker = stack.aws, client(stack.aws, "sagemaker")
    create_job(aws, "ext-stop", {})
    sagemaker.stop_training_job(TrainingJobName="ext-stop")
    seen = [
        sagemaker.describe_training_job(TrainingJobName="ext-stop")["TrainingJobStatus"] for _ in range(3)
    ]
    assert seen == ["Stopping", "Stopped", "Stopped"]
    with pytest.raises(ClientError) as info:
        sagemaker.stop_training_job(TrainingJobName="ext-stop")
    assert info.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "The request was rejected because the training job is in status Stopped.",
    }
    assert ext.stop_calls(aws, "ext-stop") == 2
    transitions = sagemaker.describe_training_job(TrainingJobName="ext-stop")["SecondaryStatusTransitions"]
    assert [t["Status"] for t in transitions] == ["Starting", "Training", "Stopping", "Stopped"]


def test_tick_moves_stopping_jobs_to_stopped(stack: Stack) -> None:
    aws = stack.aws
    create_job(aws, "ext-tick", {})
    client(aws, "sagemaker").stop_training_job(TrainingJobName="ext-tick")
    assert ext.tick(aws) == ["ext-tick"]
    assert (
        client(aws, "sagemaker").describe_training_job(TrainingJobName="ext-tick")["TrainingJobStatus"]
        == "Stopped"
    )


def test_stop_unknown_job_is_a_validation_error(stack: Stack) -> None:
    with pytest.raises(ClientError, match="Requested resource not found"):
        client(stack.aws, "sagemaker").stop_training_job(TrainingJobName="ext-nope")
    with pytest.raises(NotFoundError, match="'ext-nope'"):
        ext.stop_calls(stack.aws, "ext-nope")


def test_set_rule_statuses_shows_in_describe_and_in_the_state_change_event(stack: Stack) -> None:
    aws = stack.aws
    create_job(aws, "ext-rules", {"smx-debug:managed": "true"})
    ext.set_rule_statuses(
        aws,
        "ext-rules",
        debug=[ext.rule_status("LossNotDecreasing", "IssuesFound", step=3000)],
        profiler={"ProfilerReport": "InProgress"},
    )
    event = ext.state_change_event(aws, "ext-rules")
    assert {k: event[k] for k in ("source", "detail-type", "account", "region")} == {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "account": "123456789012",
        "region": "us-west-2",
    }
    detail = event["detail"]
    debug = detail["DebugRuleEvaluationStatuses"][0]
    assert isinstance(debug.pop("LastModifiedTime"), int)
    assert debug == {
        "RuleConfigurationName": "LossNotDecreasing",
        "RuleEvaluationJobArn": ext._rule_job_arn(aws, "ext-rules", "LossNotDecreasing"),
        "RuleEvaluationStatus": "IssuesFound",
        "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule LossNotDecreasing at step 3000 "
        "resulted in the condition being met\n",
    }
    assert [p["RuleEvaluationStatus"] for p in detail["ProfilerRuleEvaluationStatuses"]] == ["InProgress"]
    assert (detail["TrainingJobStatus"], detail["SecondaryStatus"], detail["Tags"]) == (
        "InProgress",
        "Training",
        {"smx-debug:managed": "true"},
    )


def test_set_training_job_status_rejects_unknown_status(stack: Stack) -> None:
    create_job(stack.aws, "ext-bad", {})
    with pytest.raises(ConfigError, match="'Exploded'"):
        ext.set_training_job_status(stack.aws, "ext-bad", "Exploded")


def test_create_training_job_profiler_fields_are_kept_and_described(stack: Stack) -> None:
    """moto drops ProfilerConfig/ProfilerRuleConfigurations; the extension keeps them as SageMaker does."""
    aws, sagemaker = stack.aws, client(stack.aws, "sagemaker")
    profiler = {"S3OutputPath": "s3://smx-out/debugger", "ProfilingIntervalInMilliseconds": 500}
    rules = [
        {
            "RuleConfigurationName": "CPUBottleneck",
            "RuleEvaluatorImage": "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest",
            "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "threshold": "50"},
        }
    ]
    sagemaker.create_training_job(
        TrainingJobName="ext-profiler",
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/smx-training",
        OutputDataConfig={"S3OutputPath": "s3://smx-out/output"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        ProfilerConfig=profiler,
        ProfilerRuleConfigurations=rules,
    )
    desc = sagemaker.describe_training_job(TrainingJobName="ext-profiler")
    assert desc["ProfilerConfig"] == profiler
    assert desc["ProfilerRuleConfigurations"] == rules
    assert desc["ProfilingStatus"] == "Enabled"
    create_job(aws, "ext-no-profiler", {})
    assert "ProfilerConfig" not in sagemaker.describe_training_job(TrainingJobName="ext-no-profiler")


def test_bucket_policy_conditional_deny_is_not_applied_unconditionally(stack: Stack) -> None:
    """moto ignores policy conditions; a TLS-only Deny must not lock everyone out of the local bucket."""
    import json

    s3 = client(stack.aws, "s3")
    s3.create_bucket(Bucket="ext-tls-only", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "TlsOnly", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*",
             "Resource": ["arn:aws:s3:::ext-tls-only", "arn:aws:s3:::ext-tls-only/*"],
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            {"Sid": "NoDeletes", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:DeleteObject",
             "Resource": "arn:aws:s3:::ext-tls-only/*"},
        ],
    }
    s3.put_bucket_policy(Bucket="ext-tls-only", Policy=json.dumps(policy))
    s3.put_object(Bucket="ext-tls-only", Key="k", Body=b"x")
    assert s3.get_object(Bucket="ext-tls-only", Key="k")["Body"].read() == b"x"
    assert json.loads(s3.get_bucket_policy(Bucket="ext-tls-only")["Policy"]) == policy
    with pytest.raises(ClientError) as info:  # unconditional statements still apply
        s3.delete_object(Bucket="ext-tls-only", Key="k")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
