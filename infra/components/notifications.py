"""SNS topics: one for people (email/SMS), one that CloudWatch alarms publish to. Both KMS-encrypted, TLS-only."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


class Notifications(Construct):
    """The notification topic (subscribed by the configured emails and phone numbers) and the alarm topic.

    Attributes:
        topic: human-readable notifications; the notify handler publishes here.
        alarm_topic: CloudWatch alarm actions; the notify handler subscribes and rewrites them for people.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        emails: Sequence[str],
        phone_numbers: Sequence[str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", display_name="smx-debug", master_key=key, enforce_ssl=True)
        self.alarm_topic = sns.Topic(
            self, "AlarmTopic", display_name="smx-debug alarms", master_key=key, enforce_ssl=True
        )
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        for number in phone_numbers:
            self.topic.add_subscription(subscriptions.SmsSubscription(number))
        # enforce_ssl gives each topic a policy (a TLS-only Deny), which replaces SNS's default policy:
        # CloudWatch may then publish only if a statement allows it, and only for this account's alarms.
        stack = cdk.Stack.of(self)
        from_our_alarms = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                                          arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)},
        }
        # The alarm topic receives the rule alarms; the people's topic the guard's health alarms.
        for topic in (self.alarm_topic, self.topic):
            topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="CloudWatchAlarmsPublish",
                    principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                    actions=["sns:Publish"],
                    resources=[topic.topic_arn],
                    conditions=from_our_alarms,
                )
            )
        # ...and, the topic being KMS-encrypted, only if it may use the key. AWS's documented statement for an alarm
        # publishing to an encrypted topic has no condition (docs/infra.md, "The key"): no AWS page says CloudWatch
        # passes aws:SourceAccount/aws:SourceArn to KMS, and a grant requiring them would drop every alarm silently.
        # Which alarms may publish is decided by the topic policies above.
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],  # the calls it makes (not GenerateDataKey*)
                resources=["*"],  # in a key policy "*" means this key
            )
        )
