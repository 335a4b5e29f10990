"""Deployments that change the local AWS: end to end through the handlers, the plain synth, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_infra_deploy import create_job

from smx_debug import local
from smx_debug.errors import AwsError, DataError
from smx_debug.local import DeployedStack, LocalAws, deploy_stack

STACK = "SmxDebugGuard"


def test_deployed_stack_stops_and_reports_a_triggered_job_end_to_end(local_aws: LocalAws, synthesized: Path) -> None:
    """A watched job whose rule finds issues: metric published, job stopped, people notified."""
    deployed = deploy_stack(local_aws, synthesized / f"{STACK}.template.json", stack_name=STACK)
    job = "guarded-resnet-1"
    create_job(local_aws, deployed.output("OutputBucketName"), job, {})
    local.set_rule_statuses(local_aws, job, debug={"VanishingGradient": "IssuesFound"})
    deliveries = local.deliver_event(local_aws, local.state_change_event(local_aws, job))
    assert sorted(d.handler for d in deliveries) == ["notify", "rule_metrics", "stop_training"]
    assert [d.error for d in deliveries] == [None, None, None]
    assert local.stop_calls(local_aws, job) == 1
    metrics = local_aws.client("cloudwatch").list_metrics(Namespace="SmxDebug", MetricName="RuleTriggered")
    assert {tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics["Metrics"]} == {
        (),
        (("RuleName", "VanishingGradient"),),
        (("RuleName", "VanishingGradient"), ("TrainingJobName", job)),
    }
    ledger = local_aws.client("dynamodb").scan(TableName=deployed.output("LedgerTableName"))
    assert f"{job}#stop" in {item["pk"]["S"] for item in ledger["Items"]}
    # The rule's alarm (emulated from the template) fires and notifies its topic.
    transitions = {t.alarm_name: t for t in local.evaluate_alarms(local_aws)}
    fired = transitions[deployed.physical_ids[_alarm_for(local_aws, deployed, "VanishingGradient")]]
    assert (fired.old_state, fired.new_state) == ("OK", "ALARM")
    assert deployed.output("AlarmTopicArn") in fired.notified


def test_default_all_rules_alarm_fires_on_any_rule_trigger(local_aws: LocalAws, tmp_path: Path) -> None:
    """cdk.json's default ``alarm_rules: ["*"]``: one alarm on the dimensionless metric, any rule of any job."""
    from infra.cdk_app import build_app

    build_app({"local": True, "watch_prefixes": ["guarded-"]}, outdir=str(tmp_path), nag=False).synth()
    deployed = deploy_stack(local_aws, tmp_path / f"{STACK}.template.json", stack_name=STACK)
    (alarm,) = [a for a in local_aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
                if a.get("Namespace") == "SmxDebug" and a.get("MetricName") == "RuleTriggered"]
    assert (alarm["MetricName"], alarm["Dimensions"]) == ("RuleTriggered", [])
    job = "guarded-bert-1"
    create_job(local_aws, deployed.output("OutputBucketName"), job,
               {"smx-debug:managed": "true"})  # watched by prefix *and* by tag
    local.set_rule_statuses(local_aws, job, profiler={"LowGPUUtilization": "IssuesFound"})
    deliveries = local.deliver_event(local_aws, local.state_change_event(local_aws, job))
    assert sorted(d.handler for d in deliveries) == ["notify", "rule_metrics", "stop_training"]  # once each
    (fired,) = [t for t in local.evaluate_alarms(local_aws) if t.alarm_name == alarm["AlarmName"]]
    assert (fired.new_state, fired.notified) == ("ALARM", (deployed.output("AlarmTopicArn"),))


def _alarm_for(aws: LocalAws, deployed: DeployedStack, rule: str) -> str:
    """The logical id of the alarm on ``rule``, found through the deployed alarms' dimensions."""
    alarms = aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
    (name,) = [a["AlarmName"] for a in alarms if a["Dimensions"] == [{"Name": "RuleName", "Value": rule}]]
    (logical,) = [k for k, v in deployed.physical_ids.items() if v == name]
    return logical


def test_deploy_default_synthesizer_template_with_bootstrap_parameter(local_aws: LocalAws,
                                                                      tmp_path: Path) -> None:
    """The plain `cdk synth` output (bootstrap version parameter, cdk-assets bucket) deploys too."""
    from infra.cdk_app import build_app

    build_app({"watch_prefixes": ["guarded-"], "retraining": False}, outdir=str(tmp_path), nag=False).synth()
    deployed = deploy_stack(local_aws, tmp_path / f"{STACK}.template.json", stack_name=STACK)
    assert deployed.skipped == {}
    buckets = {b["Name"] for b in local_aws.client("s3").list_buckets()["Buckets"]}
    assert any(name.startswith("cdk-hnb659fds-assets-123456789012-") for name in buckets)


def test_deploy_not_a_template_raises_data_error(local_aws: LocalAws) -> None:
    with pytest.raises(DataError, match="Resources"):
        deploy_stack(local_aws, {"Outputs": {}}, stack_name="Nothing")


def test_deploy_same_stack_twice_raises_aws_error(local_aws: LocalAws) -> None:
    template = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}
    first = deploy_stack(local_aws, template, stack_name="Twice")
    assert list(first.physical_ids) == ["Queue"]
    with pytest.raises(AwsError, match="Twice") as caught:
        deploy_stack(local_aws, template, stack_name="Twice")
    assert caught.value.operation == "CreateStack"
