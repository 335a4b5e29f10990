"""smx_debug.local.cloudwatch.alarms: a metric alarm is evaluated once, its state set and its SNS actions notified."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from local_support import client

from smx_debug.local import LocalAws
from smx_debug.local.cloudwatch import alarms
from smx_debug.local.sns import delivery


def test_evaluate_alarms_sets_the_state_and_publishes_cloudwatchs_notification(local_aws: LocalAws) -> None:
    cloudwatch, sns, sqs = (client(local_aws, s) for s in ("cloudwatch", "sns", "sqs"))
    topic = sns.create_topic(Name="alarms")["TopicArn"]
    queue = delivery.subscribe_queue(local_aws, topic, "alarm-inbox")
    dims = [{"Name": "Rule", "Value": "LossNotDecreasing"}]
    cloudwatch.put_metric_alarm(
        AlarmName="rule-fired", Namespace="SmxDebug", MetricName="RuleIssues", Dimensions=dims,
        Statistic="Maximum", Period=60, EvaluationPeriods=1, Threshold=1.0,
        ComparisonOperator="GreaterThanOrEqualToThreshold", AlarmActions=[topic],
    )
    now = datetime.now(UTC)
    cloudwatch.put_metric_data(Namespace="SmxDebug", MetricData=[
        {"MetricName": "RuleIssues", "Dimensions": dims, "Value": 1.0, "Timestamp": now - timedelta(seconds=10)}])

    before = cloudwatch.describe_alarms(AlarmNames=["rule-fired"])["MetricAlarms"][0]["StateValue"]  # moto: OK

    transitions = alarms.evaluate_alarms(local_aws, now)
    assert [(t.alarm_name, t.old_state, t.new_state, t.notified) for t in transitions] == [
        ("rule-fired", before, "ALARM", (topic,))]
    assert cloudwatch.describe_alarms(AlarmNames=["rule-fired"])["MetricAlarms"][0]["StateValue"] == "ALARM"
    body = json.loads(sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"])
    message = json.loads(body["Message"])
    assert (message["NewStateValue"], message["OldStateValue"], message["Region"]) == (
        "ALARM", before, "US West (Oregon)")
    assert message["Trigger"]["Dimensions"] == [{"value": "LossNotDecreasing", "name": "Rule"}]
    assert alarms.evaluate_alarms(local_aws, now) == []  # no change, no second notification
