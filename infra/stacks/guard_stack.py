"""The guard stack: output bucket, topics, handlers, EventBridge rules, alarms and the retraining workflow."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.assets import stage_handler
from infra.components import (
    GuardFunction,
    LedgerTable,
    Notifications,
    OutputBucket,
    RetrainingWorkflow,
    acknowledge,
    acknowledge_wildcards,
)
from infra.config import LOG_RETENTION_DAYS, GuardConfig
from smx_debug.contracts import opt_in_iam_condition

__all__ = ["LEDGER_ACTIONS", "METRIC_NAME", "GuardStack", "StageHandler"]

METRIC_NAME = "RuleTriggered"
LEDGER_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
STATE_CHANGE = "SageMaker Training Job State Change"
TAGGING_ACTION = "sagemaker:TaggingAction"  # the API whose request carries the tags (AddTags' condition key)

StageHandler = Callable[[str], Path]


class GuardStack(cdk.Stack):
    """Everything one deployment needs to watch its training jobs.

    Attributes (besides the constructs' own): ``functions`` maps handler name -> GuardFunction,
    ``rules`` the EventBridge rules, ``alarms`` rule name -> alarm, ``workflow`` the retraining workflow
    (None when disabled).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GuardConfig,
        stage: StageHandler = stage_handler,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, description="smx-debug: SageMaker Debugger guard", **kwargs)
        self.config = config
        retention: logs.RetentionDays = getattr(logs.RetentionDays, LOG_RETENTION_DAYS[config.log_retention_days])

        self.key = kms.Key(self, "Key", enable_key_rotation=True, description="smx-debug topics and queues",
                           removal_policy=cdk.RemovalPolicy.RETAIN)
        self.storage = OutputBucket(
            self,
            "Storage",
            expiration_days=config.output_expiration_days,
            transition_to_ia_days=config.output_transition_to_ia_days,
            log_expiration_days=max(config.log_retention_days or 365, 1),
            sagemaker_role_pattern=config.sagemaker_execution_role_pattern,
        )
        self.ledger = LedgerTable(self, "Ledger")
        self.notifications = Notifications(
            self, "Notifications", key=self.key, emails=config.notification_emails,
            phone_numbers=config.notification_sms,
        )
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        acknowledge(self.dead_letters, "AwsSolutions-SQS3", "This queue is the dead-letter queue.")
        # EventBridge (failed events) and SNS (the alarm subscription's redrive) deliver to the encrypted DLQ only
        # if they may use the key. Neither sends aws:SourceArn/SourceAccount with its KMS calls, so these grants
        # cannot be conditioned on them; the queue policy restricts who may send (aws:SourceArn).
        for sid, service in (("EventBridgeDeadLetters", "events.amazonaws.com"),
                             ("SnsDeadLetters", "sns.amazonaws.com")):
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],  # in a key policy "*" means this key
                )
            )

        environment = self._environment()
        self.functions: dict[str, GuardFunction] = {}
        handlers = [
            ("rule_metrics", "Debugger rule triggers -> SmxDebug/RuleTriggered metrics"),
            ("stop_training", "Stops watched training jobs whose triggered rule asks for it"),
            ("notify", "Debugger rule triggers and alarms -> human-readable SNS messages"),
        ]
        if config.retraining.enabled:  # no function (and no CreateTrainingJob/PassRole) without the workflow
            handlers.append(("retrain", "Retraining workflow steps (init, train, monitor)"))
        for name, description in handlers:
            self.functions[name] = GuardFunction(
                self,
                "".join(part.title() for part in name.split("_")),
                handler_name=name,
                code_dir=stage(name),
                environment=environment,
                log_retention=retention,
                dead_letter_queue=self.dead_letters,
                description=description,
                timeout_seconds=120 if name == "retrain" else 60,
            )
        self._grant()
        self.rules = self._event_rules()
        self.alarms = self._alarms()
        self.workflow: RetrainingWorkflow | None = None
        if config.retraining.enabled:
            self.workflow = RetrainingWorkflow(
                self,
                "Retraining",
                function=self.functions["retrain"].function,
                topic=self.notifications.topic,
                wait_seconds=config.retraining.wait_seconds,
                timeout_seconds=config.retraining.max_runtime_seconds,
                log_retention=retention,
            )
            acknowledge_wildcards(
                self.workflow.state_machine.role,
                resources=[f"{self.functions['retrain'].function.function_arn}:*"],
                reason="Step Functions invokes the retrain function's versions and aliases (ARN:*), that function only.",
            )
            acknowledge_wildcards(
                self.workflow.state_machine.role,
                resources=["*"],
                reason="CloudWatch Logs delivery and X-Ray actions do not support resource-level permissions.",
            )
            acknowledge_wildcards(
                self.workflow.state_machine.role,
                actions=["kms:GenerateDataKey*"],
                reason="Publishing the failure message to our KMS-encrypted topic needs data keys of the stack key.",
            )
        self._outputs()

    # -- wiring ---------------------------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        config = self.config
        defaults = list(config.default_actions)
        if config.alarm_stops_training and "stop" not in defaults:
            defaults.append("stop")
        return {
            "SMX_METRIC_NAMESPACE": config.metric_namespace,
            "SMX_WATCH_PREFIXES": ",".join(config.watch_prefixes),
            # The handlers need a tag key; with opt-in disabled none of our jobs carries this key.
            "SMX_OPT_IN_TAG": config.opt_in_tag or "smx-debug:opt-in-disabled",
            "SMX_DEFAULT_ACTIONS": " ".join(defaults),
            "SMX_LEDGER_TABLE": self.ledger.table.table_name,
            "SMX_TOPIC_ARN": self.notifications.topic.topic_arn,
        }

    def job_arns(self) -> list[str]:
        """Training-job ARN patterns for the watched prefixes (SageMaker lowercases names in ARNs)."""
        return [
            self.format_arn(service="sagemaker", resource="training-job", resource_name=f"{prefix.lower()}*")
            for prefix in self.config.watch_prefixes
        ]

    def _job_statements(self, actions: list[str], *, request_tag: bool = False,
                        conditions: Mapping[str, Mapping[str, str]] | None = None) -> list[iam.PolicyStatement]:
        """``actions`` on watched jobs: by name prefix, and by the opt-in tag (on the job or the request).

        The tag condition is :func:`contracts.opt_in_iam_condition`, the same rule as the handler and the
        EventBridge pattern; ``conditions`` are added to both statements.
        """
        extra = {op: dict(block) for op, block in (conditions or {}).items()}
        statements: list[iam.PolicyStatement] = []
        if self.config.watch_prefixes:
            statements.append(iam.PolicyStatement(actions=actions, resources=self.job_arns(),
                                                  conditions=extra or None))
        if self.config.opt_in_tag:
            tagged = opt_in_iam_condition(self.config.opt_in_tag, on="request" if request_tag else "resource")
            statements.append(
                iam.PolicyStatement(
                    actions=actions,
                    resources=[self.format_arn(service="sagemaker", resource="training-job", resource_name="*")],
                    conditions={**tagged, **extra},
                )
            )
        return statements

    def _grant(self) -> None:
        config, fns = self.config, self.functions
        read_jobs = ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"]
        for fn in fns.values():
            # Exactly what the ledger does (claim, complete, release, get): no Scan/Query/Batch*.
            self.ledger.table.grant(fn.role, *LEDGER_ACTIONS)
            # Lambda's async-failure DLQ is KMS-encrypted: sending needs the key as well as sqs:SendMessage.
            self.dead_letters.grant_send_messages(fn.role)
            for statement in self._job_statements(read_jobs):
                fn.role.add_to_principal_policy(statement)
        fns["rule_metrics"].role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": config.metric_namespace}},
            )
        )
        for name in ("stop_training", "retrain"):
            for statement in self._job_statements(["sagemaker:StopTrainingJob"]):
                if name in fns:
                    fns[name].role.add_to_principal_policy(statement)
        for name in ("notify", "retrain"):
            if name in fns:
                self.notifications.topic.grant_publish(fns[name].role)
        for name, fn in fns.items():
            self._acknowledge_function(name, fn)
        if "retrain" not in fns:
            return
        # Retraining launches the next run under the same name prefix (or carrying the opt-in tag).
        retrain = fns["retrain"].role
        for statement in self._job_statements(["sagemaker:CreateTrainingJob"], request_tag=True):
            retrain.add_to_principal_policy(statement)
        # Tags only as part of CreateTrainingJob (never on an existing job, which would enrol it to be stopped).
        for statement in self._job_statements(["sagemaker:AddTags"], request_tag=True,
                                              conditions={"StringEquals": {TAGGING_ACTION: "CreateTrainingJob"}}):
            retrain.add_to_principal_policy(statement)
        retrain.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self._account_role_pattern()],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )

    def _account_role_pattern(self) -> str:
        """The execution-role pattern limited to this account (PassRole never crosses accounts)."""
        pattern = self.config.sagemaker_execution_role_pattern
        head, _, rest = pattern.partition(":role/")
        parts = head.split(":")  # arn, partition, iam, "", account
        return f"{parts[0]}:{parts[1]}:iam::{self.account}:role/{rest}"

    def _acknowledge_function(self, name: str, fn: GuardFunction) -> None:
        acknowledge_wildcards(
            fn.role,
            resources=[
                *self.job_arns(),
                *([self.format_arn(service="sagemaker", resource="training-job", resource_name="*")]
                  if self.config.opt_in_tag else []),
            ],
            reason="Training jobs this deployment watches: its name prefixes, or (tag statement) any job whose "
            "opt-in tag is true, enforced by an aws:ResourceTag/aws:RequestTag condition.",
        )
        acknowledge_wildcards(
            fn.role,
            actions=["kms:GenerateDataKey*", "kms:ReEncrypt*"],
            reason="KMS data-key actions for the one stack key that encrypts our topics and DLQ.",
        )
        if name == "rule_metrics":
            acknowledge_wildcards(
                fn.role,
                resources=["*"],
                reason="cloudwatch:PutMetricData has no resource type; it is limited to our namespace by "
                "the cloudwatch:namespace condition.",
            )
        if name == "retrain":
            acknowledge_wildcards(
                fn.role,
                resources=[self._account_role_pattern()],
                reason="PassRole to the configured SageMaker execution roles of this account, only to SageMaker.",
            )

    def _event_rules(self) -> list[events.Rule]:
        """One rule for the watched jobs (name prefix or opt-in tag), targeting the three handlers.

        One rule, with ``$or`` when both ways of watching are on: a job that has a watched prefix *and* the tag
        is then delivered once, not once per rule.
        """
        config = self.config
        alternatives: list[Mapping[str, Any]] = []
        if config.watch_prefixes:
            alternatives.append({"TrainingJobName": [{"prefix": prefix} for prefix in config.watch_prefixes]})
        if config.opt_in_tag:
            alternatives.append({"Tags": {config.opt_in_tag: ["true"]}})
        if not alternatives:
            return []
        detail = dict(alternatives[0]) if len(alternatives) == 1 else {"$or": [dict(a) for a in alternatives]}
        rule = events.Rule(
            self,
            "WatchedJobs",
            description=f"smx-debug: {STATE_CHANGE} events of watched jobs (name prefix or opt-in tag)",
            event_pattern=events.EventPattern(source=["aws.sagemaker"], detail_type=[STATE_CHANGE], detail=detail),
        )
        for name in ("rule_metrics", "notify", "stop_training"):
            rule.add_target(
                targets.LambdaFunction(
                    self.functions[name].function,
                    dead_letter_queue=self.dead_letters,
                    retry_attempts=4,
                    max_event_age=cdk.Duration.hours(2),
                )
            )
        return [rule]

    def _alarms(self) -> dict[str, cloudwatch.Alarm]:
        """One alarm per configured rule name (``*``: the dimensionless all-rules metric), to the alarm topic."""
        config = self.config
        alarm_topic = self.notifications.alarm_topic
        # The notify handler rewrites alarm state changes for people and publishes them to the topic.
        alarm_topic.add_subscription(
            subscriptions.LambdaSubscription(self.functions["notify"].function, dead_letter_queue=self.dead_letters)
        )
        alarms: dict[str, cloudwatch.Alarm] = {}
        for rule_name in config.alarm_rules:
            all_rules = rule_name == "*"
            metric = cloudwatch.Metric(
                namespace=config.metric_namespace,
                metric_name=METRIC_NAME,
                dimensions_map=None if all_rules else {"RuleName": rule_name},
                statistic=cloudwatch.Stats.SUM,
                period=cdk.Duration.seconds(60),
            )
            label = "any rule" if all_rules else rule_name
            alarm = cloudwatch.Alarm(
                self,
                "AlarmAllRules" if all_rules else f"Alarm{_construct_safe(rule_name)}",
                alarm_description=f"smx-debug: Debugger rule {label} found issues in a watched training job",
                metric=metric,
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                datapoints_to_alarm=1,
                # No datapoint means no rule fired in that minute: OK, not INSUFFICIENT_DATA or ALARM.
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(cw_actions.SnsAction(alarm_topic))
            alarms[rule_name] = alarm
        return alarms

    def _outputs(self) -> None:
        values = {
            "OutputBucketName": self.storage.bucket.bucket_name,
            "TopicArn": self.notifications.topic.topic_arn,
            "AlarmTopicArn": self.notifications.alarm_topic.topic_arn,
            "LedgerTableName": self.ledger.table.table_name,
            "DeadLetterQueueUrl": self.dead_letters.queue_url,
        }
        if self.workflow is not None:
            values["RetrainingStateMachineArn"] = self.workflow.state_machine.state_machine_arn
        for name, value in values.items():
            cdk.CfnOutput(self, name, value=value)


def _construct_safe(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-"))
