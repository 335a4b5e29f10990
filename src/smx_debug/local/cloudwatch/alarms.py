"""CloudWatch alarm evaluation on the local AWS: moto stores alarms but never evaluates them.

:func:`evaluate_alarms` evaluates every metric alarm once, as CloudWatch would (simplified: see its docstring):
it reads the alarm's metric with GetMetricStatistics, compares it with the threshold, sets the state with
SetAlarmState and, on a change, publishes CloudWatch's notification JSON to the alarm's SNS actions (moto
delivers SNS to SQS; a Lambda subscription runs its handler through :mod:`smx_debug.local.awslambda.invoke`) when the
topic's policy and its KMS key's policy let CloudWatch publish for that alarm (:mod:`smx_debug.local.iam`).

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from smx_debug.local.clients import client
from smx_debug.local.iam.authorize import authorize_service
from smx_debug.local.patching import serve
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws
from smx_debug.local.sns import delivery as sns_delivery

_REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
}


@dataclass(frozen=True)
class AlarmTransition:
    """One alarm state change made by :func:`evaluate_alarms`, and the SNS topics it notified."""

    alarm_name: str
    old_state: str
    new_state: str
    reason: str
    notified: tuple[str, ...]


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "GreaterThanThreshold": lambda v, t: v > t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


def _alarm_message(
    aws: LocalAws, alarm: Mapping[str, Any], old: str, new: str, reason: str, when: datetime
) -> str:
    return json.dumps(
        {
            "AlarmName": alarm["AlarmName"],
            "AlarmDescription": alarm.get("AlarmDescription"),
            "AWSAccountId": LOCAL_ACCOUNT_ID,
            "NewStateValue": new,
            "NewStateReason": reason,
            "StateChangeTime": when.strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
            "Region": _REGION_NAMES.get(aws.region, aws.region),
            "AlarmArn": alarm.get("AlarmArn"),
            "OldStateValue": old,
            "OKActions": alarm.get("OKActions", []),
            "AlarmActions": alarm.get("AlarmActions", []),
            "InsufficientDataActions": alarm.get("InsufficientDataActions", []),
            "Trigger": {
                "MetricName": alarm.get("MetricName"),
                "Namespace": alarm.get("Namespace"),
                "StatisticType": "Statistic",
                "Statistic": str(alarm.get("Statistic", "")).upper(),
                "Unit": None,
                "Dimensions": [{"value": d["Value"], "name": d["Name"]} for d in alarm.get("Dimensions", [])],
                "Period": alarm.get("Period"),
                "EvaluationPeriods": alarm.get("EvaluationPeriods"),
                "ComparisonOperator": alarm.get("ComparisonOperator"),
                "Threshold": alarm.get("Threshold"),
                "TreatMissingData": alarm.get("TreatMissingData", "missing"),
            },
        }
    )


def evaluate_alarms(aws: LocalAws, now: datetime | None = None) -> list[AlarmTransition]:
    """Evaluate every metric alarm once, as CloudWatch would, and notify its SNS actions on a change.

    Simplified: the window is Period x EvaluationPeriods ending ``now``; the alarm is in ALARM if at
    least DatapointsToAlarm (default EvaluationPeriods... capped at the datapoints present, minimum 1)
    datapoints breach. Only single-metric alarms with a Statistic are evaluated.
    """
    sns_delivery.install()  # an alarm action subscribed by a Lambda runs its handler in-process
    serve(aws)
    now = now or datetime.now(UTC)
    cloudwatch, sns = client(aws, "cloudwatch"), client(aws, "sns")
    transitions: list[AlarmTransition] = []
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
        for alarm in page.get("MetricAlarms", []):
            if not alarm.get("Statistic") or alarm.get("ComparisonOperator") not in _COMPARE:
                continue
            period, periods = int(alarm["Period"]), int(alarm["EvaluationPeriods"])
            points = cloudwatch.get_metric_statistics(
                Namespace=alarm["Namespace"],
                MetricName=alarm["MetricName"],
                Dimensions=alarm.get("Dimensions", []),
                StartTime=now - timedelta(seconds=period * periods),
                EndTime=now + timedelta(seconds=1),
                Period=period,
                Statistics=[alarm["Statistic"]],
            )["Datapoints"]
            values = [float(p[alarm["Statistic"]]) for p in points]
            compare = _COMPARE[alarm["ComparisonOperator"]]
            breaching = [v for v in values if compare(v, float(alarm["Threshold"]))]
            needed = min(int(alarm.get("DatapointsToAlarm") or periods), max(len(values), 1))
            if not values:
                treat = alarm.get("TreatMissingData", "missing")
                new = {"breaching": "ALARM", "notBreaching": "OK"}.get(treat, "INSUFFICIENT_DATA")
                reason = f"no datapoints in the last {period * periods} s (TreatMissingData={treat})"
            elif len(breaching) >= needed:
                new = "ALARM"
                reason = (
                    f"Threshold Crossed: {len(breaching)} datapoint(s) {breaching[:5]} "
                    f"{alarm['ComparisonOperator']} {alarm['Threshold']}"
                )
            else:
                new = "OK"
                reason = f"Threshold not crossed: datapoints {values[:5]}"
            old = alarm.get("StateValue", "INSUFFICIENT_DATA")
            if new == old:
                continue
            cloudwatch.set_alarm_state(
                AlarmName=alarm["AlarmName"], StateValue=new, StateReason=reason[:1000]
            )
            notified: list[str] = []
            if alarm.get("ActionsEnabled", True):
                actions = {"ALARM": "AlarmActions", "OK": "OKActions"}.get(new, "InsufficientDataActions")
                message = _alarm_message(aws, alarm, old, new, reason, now)
                subject = f'{new}: "{alarm["AlarmName"]}" in {_REGION_NAMES.get(aws.region, aws.region)}'[
                    :100
                ]
                for arn in alarm.get(actions, []):
                    # CloudWatch publishes as cloudwatch.amazonaws.com for the alarm: the topic's policy and
                    # its key's policy must allow that (smx_debug.local.iam); a refused notification is lost.
                    if ":sns:" in arn and authorize_service(
                        aws, "cloudwatch.amazonaws.com", "sns:Publish", arn, source_arn=alarm["AlarmArn"],
                        edge=f"alarm {alarm['AlarmName']} -> topic").allowed:
                        sns.publish(TopicArn=arn, Subject=subject, Message=message)
                        notified.append(arn)
            transitions.append(AlarmTransition(alarm["AlarmName"], old, new, reason, tuple(notified)))
    return transitions
