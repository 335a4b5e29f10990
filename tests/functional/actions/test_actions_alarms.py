"""CloudWatch alarm on the rule metric -> SNS -> notify handler -> human-readable message (and raw JSON to SQS)."""

from __future__ import annotations

import json

from actions_support import Stack, client, create_job, deploy_function

from smx_debug import local


def test_alarm_on_rule_metric_fires_and_notify_turns_it_into_a_message(stack: Stack) -> None:
    aws = stack.aws
    sns, sqs, cw = client(aws, "sns"), client(aws, "sqs"), client(aws, "cloudwatch")
    alarm_topic = sns.create_topic(Name="smx-alarms")["TopicArn"]
    raw_queue = local.subscribe_queue(aws, alarm_topic, "smx-alarm-raw")
    fn = deploy_function(stack, "smx-notify", "notify", stack.env(),
                         invoked_by=("sns.amazonaws.com", alarm_topic))
    sns.subscribe(TopicArn=alarm_topic, Protocol="lambda", Endpoint=fn)
    cw.put_metric_alarm(
        AlarmName="smx-debug-ExplodingTensor-triggered",
        Namespace="SmxDebug",
        MetricName="RuleTriggered",
        Dimensions=[{"Name": "RuleName", "Value": "ExplodingTensor"}],
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1.0,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData="notBreaching",
        AlarmActions=[alarm_topic],
    )
    local.evaluate_alarms(aws)  # no datapoints, notBreaching: OK (moto creates alarms in OK already)
    assert cw.describe_alarms()["MetricAlarms"][0]["StateValue"] == "OK"

    create_job(aws, "guard-alarm-1", {"smx-debug:managed": "true"}, rules=("ExplodingTensor",))
    local.set_rule_statuses(
        aws, "guard-alarm-1", debug=[local.rule_status("ExplodingTensor", "IssuesFound", step=9)]
    )
    local.deliver_event(aws, local.state_change_event(aws, "guard-alarm-1"), {"rule_metrics": stack.env()})
    transitions = local.evaluate_alarms(aws)
    assert [(t.alarm_name, t.old_state, t.new_state, t.notified) for t in transitions] == [
        ("smx-debug-ExplodingTensor-triggered", "OK", "ALARM", (alarm_topic,))
    ]
    assert local.evaluate_alarms(aws) == []  # no change, no second notification

    state = cw.describe_alarms(AlarmNames=["smx-debug-ExplodingTensor-triggered"])["MetricAlarms"][0][
        "StateValue"
    ]
    assert state == "ALARM"
    raw = [
        json.loads(json.loads(m["Body"])["Message"])
        for m in sqs.receive_message(QueueUrl=raw_queue, MaxNumberOfMessages=10)["Messages"]
    ]
    assert [
        (r["AlarmName"], r["OldStateValue"], r["NewStateValue"], r["Trigger"]["Dimensions"]) for r in raw
    ] == [
        (
            "smx-debug-ExplodingTensor-triggered",
            "OK",
            "ALARM",
            [{"value": "ExplodingTensor", "name": "RuleName"}],
        )
    ]
    deliveries = local.sns_lambda_deliveries(stack.aws)
    assert [(d.function, d.error) for d in deliveries] == [("smx-notify", None)]
    (message,) = stack.messages()
    assert message["Subject"] == "smx-debug: alarm smx-debug-ExplodingTensor-triggered is ALARM"
    assert (
        "CloudWatch alarm smx-debug-ExplodingTensor-triggered changed from OK to ALARM." in message["Message"]
    )
    assert "Dimension:       RuleName = ExplodingTensor" in message["Message"]
