"""The scheduled evaluator in the stack: schedule, function, layer, cursor table, least privilege, failure alarm."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from helpers_infra import Synth

from smx_debug.contracts import EVALUATOR_SPEC_PREFIX, JOB_ERRORS_METRIC


def _evaluator(template: Template) -> tuple[str, dict[str, Any]]:
    for logical, fn in template.find_resources("AWS::Lambda::Function").items():
        tags = {t["Key"]: t["Value"] for t in fn["Properties"].get("Tags", [])}
        if tags.get("smx-debug:handler") == "evaluator":
            return logical, fn["Properties"]
    raise AssertionError("no evaluator function")


def _statements(template: Template, role_ref: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if role_ref in policy["Properties"]["Roles"]:
            out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return out


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def test_evaluator_scheduled_every_rate_minutes_with_its_settings(synth: Synth) -> None:
    template, stack = synth(watch_prefixes=["exp-"], evaluator={
        "rate_minutes": 2, "window_minutes": 15, "default_rules": [{"rule": "CPUBottleneck", "parameters": {"threshold": 40}}],
    })
    logical, props = _evaluator(template)
    assert (props["Runtime"], props["Architectures"], props["Timeout"], props["MemorySize"]) == (
        "python3.14", ["arm64"], 60, 1024)
    assert len(props["Layers"]) == 1
    env = props["Environment"]["Variables"]
    assert json.loads(env["SMX_DEFAULT_RULES"]) == [
        {"name": "CPUBottleneck", "rule": "CPUBottleneck", "parameters": {"threshold": 40}}]
    assert env["SMX_WINDOW_MINUTES"] == "15" and env["SMX_WATCH_PREFIXES"] == "exp-"
    assert env["SMX_CURSOR_TABLE"] == {"Ref": stack.get_logical_id(stack.evaluator.cursors.node.default_child)}
    assert "SMX_LEDGER_TABLE" in env and "SMX_TOPIC_ARN" in env and "SMX_STATE_MACHINE_ARN" in env
    template.has_resource_properties("AWS::Events::Rule", {
        "ScheduleExpression": "rate(2 minutes)",
        "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [logical, "Arn"]},
                                       "RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 120}})],
    })
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "FunctionName": {"Ref": logical}, "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 120})
    template.has_resource_properties("AWS::DynamoDB::Table", {
        "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    })


@pytest.mark.parametrize("context", [{}, {"evaluator": {"rate_minutes": 5}}, {"retraining": True}])
def test_evaluator_no_function_reserves_concurrency(synth: Synth, context: dict[str, Any]) -> None:
    """A new account's quota is 10 with 10 kept unreserved: any reservation fails `cdk deploy` there (defect 5).
    Overlapping evaluator runs are made safe by the evaluator itself, not by reserved concurrency."""
    template, _ = synth(watch_prefixes=["exp-"], **context)
    functions = template.find_resources("AWS::Lambda::Function")
    assert functions and all("ReservedConcurrentExecutions" not in f["Properties"] for f in functions.values())


@pytest.mark.parametrize(("rate", "age"), [(1, 60), (5, 300)])
def test_evaluator_scheduled_run_is_dropped_once_the_next_run_is_due(synth: Synth, rate: int, age: int) -> None:
    """Lambda retries a throttled asynchronous event until its maximum event age (6 hours by default), and
    EventBridge retries a throttled delivery: both stop at one rate period, when the next run starts anyway."""
    template, _ = synth(watch_prefixes=["exp-"], evaluator={"rate_minutes": rate})
    logical, _ = _evaluator(template)
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "FunctionName": {"Ref": logical}, "MaximumEventAgeInSeconds": age, "MaximumRetryAttempts": 0})
    template.has_resource_properties("AWS::Events::Rule", {"Targets": [Match.object_like({
        "Arn": {"Fn::GetAtt": [logical, "Arn"]},
        "RetryPolicy": {"MaximumEventAgeInSeconds": age, "MaximumRetryAttempts": 0}})]})


def test_evaluator_least_privilege(synth: Synth) -> None:
    template, stack = synth(watch_prefixes=["exp-"])
    _, props = _evaluator(template)
    statements = _statements(template, {"Ref": props["Role"]["Fn::GetAtt"][0]})
    actions = set().union(*(_actions(s) for s in statements))
    assert {"sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData", "sagemaker:DescribeTrainingJob",
            "sagemaker:ListTags", "sagemaker:StopTrainingJob", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem",
            "s3:GetObject", "cloudwatch:PutMetricData", "sns:Publish"} <= actions
    assert not {"sagemaker:CreateTrainingJob", "sagemaker:AddTags", "iam:PassRole", "s3:DeleteObject",
                "dynamodb:Scan", "dynamodb:Query"} & actions
    # it writes only its watched jobs' fleet minutes and the verdict log's inbox
    writes = [json.dumps(s["Resource"]) for s in statements if "s3:PutObject" in _actions(s)]
    assert writes and all(("smx-debug/fleet/system_minutes/*" in w) != ("smx-debug/fleet-inbox/verdicts/*" in w)
                          for w in writes), writes
    unscoped = set().union(*(_actions(s) for s in statements if s["Resource"] == "*"))
    assert unscoped == {"sagemaker:ListTrainingJobs", "sagemaker:Search", "cloudwatch:GetMetricData",
                        "cloudwatch:PutMetricData"}
    cursors = stack.get_logical_id(stack.evaluator.cursors.node.default_child)
    batch = [s for s in statements if _actions(s) & {"dynamodb:BatchWriteItem", "dynamodb:BatchGetItem"}]
    assert batch and all(cursors in json.dumps(s["Resource"]) and "Ledger" not in json.dumps(s["Resource"])
                         for s in batch)
    reads = [s for s in statements if _actions(s) & {"s3:GetObject", "s3:ListBucket"}]
    bucket = stack.get_logical_id(stack.storage.bucket.node.default_child)
    assert reads and all(bucket in json.dumps(s["Resource"]) for s in reads)  # the stack's bucket only
    assert EVALUATOR_SPEC_PREFIX.startswith("smx-debug/")
    stops = [s for s in statements if "sagemaker:StopTrainingJob" in _actions(s)]
    assert {json.dumps(s.get("Condition", {})) for s in stops} == {
        "{}", json.dumps({"StringEqualsIgnoreCase": {"aws:ResourceTag/smx-debug:managed": "true"}})}


def test_evaluator_errors_alarm_notifies_people(synth: Synth) -> None:
    template, _ = synth()
    logical, _ = _evaluator(template)
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "Errors", "Namespace": "AWS/Lambda",
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": logical}}],
        "Threshold": 1, "AlarmActions": [Match.any_value()],
    })


def test_evaluator_may_search_running_jobs_for_the_opt_in_tag_and_hold_its_run_lease(synth: Synth) -> None:
    template, stack = synth(watch_prefixes=["exp-"])
    _, props = _evaluator(template)
    statements = _statements(template, {"Ref": props["Role"]["Fn::GetAtt"][0]})
    # Search has no resource type (Service Authorization Reference): its statement is on "*", read only
    assert any("sagemaker:Search" in _actions(s) and s["Resource"] == "*" for s in statements)
    cursors = stack.get_logical_id(stack.evaluator.cursors.node.default_child)
    lease = [s for s in statements if _actions(s) & {"dynamodb:PutItem", "dynamodb:DeleteItem"}
             and cursors in json.dumps(s["Resource"])]
    assert lease and {"dynamodb:PutItem", "dynamodb:DeleteItem"} <= set().union(*(_actions(s) for s in lease))


def test_evaluator_job_errors_alarm_notifies_people(synth: Synth) -> None:
    template, _ = synth(metric_namespace="TeamA/Guard")
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": JOB_ERRORS_METRIC, "Namespace": "TeamA/Guard", "Statistic": "Sum",
        "Threshold": 1, "EvaluationPeriods": 3, "DatapointsToAlarm": 3, "TreatMissingData": "notBreaching",
        "AlarmActions": [Match.any_value()], "Dimensions": Match.absent(),
    })


def test_evaluator_off_by_context_key(synth: Synth) -> None:
    template, stack = synth(evaluator="false")
    assert stack.evaluator is None
    for fn in template.find_resources("AWS::Lambda::Function").values():
        assert {"Key": "smx-debug:handler", "Value": "evaluator"} not in fn["Properties"].get("Tags", [])
    schedules = template.find_resources("AWS::Events::Rule", {"Properties": {"ScheduleExpression": Match.any_value()}})
    assert [r["Properties"]["Description"] for r in schedules.values()] == [
        "smx-debug: run the fleet collector every 60 minutes"]  # the fleet collector's only
    assert template.find_resources("AWS::Lambda::EventSourceMapping") == {}


def test_evaluator_local_deploy_has_no_dependency_layer(synth: Synth) -> None:
    template, _ = synth(local="true")
    _, props = _evaluator(template)
    assert "Layers" not in props


def test_evaluator_bad_default_rules_name_the_field(synth: Synth) -> None:
    import pytest

    from smx_debug.errors import ConfigError

    with pytest.raises(ConfigError, match=r"evaluator\.default_rules"):
        synth(evaluator={"default_rules": [{"rule": "StepOutlier"}]})  # needs Debugger's step timings
    with pytest.raises(ConfigError, match="evaluator"):
        synth(evaluator={"rate_minutes": 0})


def test_evaluator_bucket_reads_are_exactly_the_prefixes_docs_infra_names(synth_cached: Synth) -> None:
    """docs/infra.md ("Permissions") says where the evaluator may read the stack's bucket; the template decides."""
    import re
    from pathlib import Path

    template, _ = synth_cached(watch_prefixes=["exp-"])
    _, props = _evaluator(template)
    statements = _statements(template, {"Ref": props["Role"]["Fn::GetAtt"][0]})
    listings = [s for s in statements if "s3:ListBucket" in _actions(s)]
    granted = {p.removesuffix("*") for s in listings for p in s["Condition"]["StringLike"]["s3:prefix"]}
    gets = json.dumps([s["Resource"] for s in statements if "s3:GetObject" in _actions(s)])
    assert all(f"/{p}*" in gets for p in granted), gets  # GetObject on the same prefixes
    doc = " ".join((Path(__file__).resolve().parents[2] / "docs" / "infra.md").read_text().split())
    sentence = re.search(r"the evaluator reads the stack's bucket only under (.*?)\. ", doc)
    assert sentence, "docs/infra.md no longer says where the evaluator reads"
    assert set(re.findall(r"`([^`]+)`", sentence.group(1).split("never")[0])) == granted, sentence.group(1)
    assert "tensor" not in sentence.group(1).split("never")[-1], sentence.group(1)
