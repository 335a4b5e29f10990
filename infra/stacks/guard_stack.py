"""The guard stack: output bucket, topics, handlers, EventBridge rules, alarms and the retraining workflow.

Every name shared with the Lambda runtime (environment variables, metric, tags, the opt-in rule and its
EventBridge and IAM forms) comes from :mod:`smx_debug.contracts`; nothing here keeps a copy.
"""

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
    acknowledge_wildcards,
)
from infra.components.evaluator import EVALUATOR_TIMEOUT_SECONDS, Evaluator
from infra.components.evaluator_fanout import EvaluatorFanout
from infra.components.fleet import FleetAnalytics
from infra.components.fleet_collector import (
    COLLECTOR_TIMEOUT_SECONDS,
    FleetCollector,
    grant_system_minutes,
    grant_verdict_log,
)
from infra.config import (
    LOG_RETENTION_DAYS,
    GuardConfig,
    dead_letter_queue_name,
    retraining_state_machine_name,
)
from smx_debug.contracts import (
    DEFAULT_FUNCTION_TIMEOUT_SECONDS,
    DETAIL_TYPE,
    EVENT_SOURCE,
    EXECUTION_DETAIL_TYPE,
    EXECUTION_EVENT_SOURCE,
    METRIC_NAME,
    UNREPORTED_EXECUTION_STATUSES,
    Env,
    opt_in_iam_condition,
    watch_pattern,
)

LEDGER_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
# What writing to a KMS-encrypted topic or queue needs (not Encrypt/ReEncrypt*, not GenerateDataKeyWithoutPlaintext
# or GenerateDataKeyPair*: SNS and SQS call GenerateDataKey).
DATA_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
TAGGING_ACTION = "sagemaker:TaggingAction"  # the API whose request carries the tags (AddTags' condition key)
# Function timeouts (s). The runtime sizes its AWS retries to fit half the timeout and checks that its ledger
# lease (SMX_LEASE_SECONDS) outlasts the timeout (SMX_FUNCTION_TIMEOUT); both are set from these.
TIMEOUTS = {"rule_metrics": DEFAULT_FUNCTION_TIMEOUT_SECONDS, "stop_training": DEFAULT_FUNCTION_TIMEOUT_SECONDS,
            "notify": DEFAULT_FUNCTION_TIMEOUT_SECONDS, "retrain": 120,
            "evaluator": EVALUATOR_TIMEOUT_SECONDS, "fleet_collector": COLLECTOR_TIMEOUT_SECONDS}
LEASE_MARGIN_SECONDS = 30
KEY_PENDING_DAYS = 7  # after `cdk destroy`, the key is deleted this many days later (cancellable until then)
# The handlers whose rule actions may say `retrain`: they start the retraining state machine.
RETRAIN_STARTERS = ("stop_training",)
# The handlers that call the action core, which logs its verdicts to the fleet inbox (the evaluator does too).
VERDICT_LOGGERS = ("rule_metrics", "stop_training", "notify")

StageHandler = Callable[[str], Path]


class GuardStack(cdk.Stack):
    """Everything one deployment needs to watch its training jobs.

    Attributes (besides the constructs' own): ``functions`` maps handler name -> GuardFunction,
    ``rules`` the EventBridge rules, ``alarms`` rule name -> alarm, ``health_alarms`` the operational alarms
    (DLQ, function errors, retraining executions), ``workflow`` the retraining workflow (None when disabled).
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

        # The key encrypts only what the stack deletes with it (topics, the DLQ): nothing retained depends on it,
        # so `cdk destroy` schedules its deletion instead of orphaning one key per deploy/destroy cycle.
        self.key = kms.Key(self, "Key", enable_key_rotation=True, description="smx-debug topics and queues",
                           removal_policy=cdk.RemovalPolicy.DESTROY, pending_window=cdk.Duration.days(KEY_PENDING_DAYS))
        self.storage = OutputBucket(
            self,
            "Storage",
            expiration_days=config.output_expiration_days,
            transition_to_ia_days=config.output_transition_to_ia_days,
            log_expiration_days=max(config.log_retention_days or 365, 1),
            sagemaker_role_pattern=self._role_pattern(),
        )
        self.ledger = LedgerTable(self, "Ledger")
        self.notifications = Notifications(
            self, "Notifications", key=self.key, emails=config.notification_emails,
            phone_numbers=config.notification_sms,
        )
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            queue_name=dead_letter_queue_name(config.stack_name),  # named, so the key policy below can name it
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        # EventBridge (failed events) and SNS (the alarm subscription's redrive) deliver to the encrypted DLQ only
        # if they may use the key. Neither sends aws:SourceArn/SourceAccount with its KMS calls, so these grants are
        # limited by the encryption context SQS puts on every data key (the queue's ARN): this DLQ only. The queue
        # policy restricts who may send (aws:SourceArn).
        for sid, service in (("EventBridgeDeadLetters", "events.amazonaws.com"),
                             ("SnsDeadLetters", "sns.amazonaws.com")):
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    principals=[iam.ServicePrincipal(service)],
                    actions=list(DATA_KEY_ACTIONS),
                    resources=["*"],  # in a key policy "*" means this key
                    conditions={"StringEquals": {"kms:EncryptionContext:aws:sqs:arn": self.format_arn(
                        service="sqs", resource=dead_letter_queue_name(config.stack_name))}},
                )
            )

        # A fixed name, so functions can be told the ARN without a reference cycle (the workflow invokes retrain).
        self.state_machine_name = retraining_state_machine_name(config.stack_name)
        self.state_machine_arn = self.format_arn(
            service="states", resource="stateMachine", resource_name=self.state_machine_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.functions: dict[str, GuardFunction] = {}
        handlers = [
            ("rule_metrics", f"Debugger rule triggers -> {config.metric_namespace}/{METRIC_NAME} metrics"),
            ("stop_training", "Stops watched training jobs whose triggered rule asks for it; starts retraining"),
            ("notify", "Debugger rule triggers and alarms -> human-readable SNS messages"),
        ]
        if config.retraining.enabled:  # no function (and no CreateTrainingJob/PassRole) without the workflow
            handlers.append(("retrain", "Retraining workflow steps (init, train, monitor, end)"))
        for name, description in handlers:
            self.functions[name] = GuardFunction(
                self,
                "".join(part.title() for part in name.split("_")),
                handler_name=name,
                code_dir=stage(name),
                environment=self._environment(name),
                log_retention=retention,
                dead_letter_queue=self.dead_letters,
                description=description,
                timeout_seconds=TIMEOUTS[name],
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
                key=self.key,
                state_machine_name=self.state_machine_name,
                settings=config.retraining,
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
        if self.workflow is not None:
            self.rules.append(self._retraining_ended_rule())
        self.health_alarms = self._health_alarms()
        self.evaluator: Evaluator | None = None
        self.evaluator_fanout: EvaluatorFanout | None = None
        if config.evaluator.enabled:  # smx-debug's own rule evaluation, for jobs with or without Debugger
            self.evaluator = Evaluator(
                self, "Evaluator", rate_minutes=config.evaluator.rate_minutes,
                window_minutes=config.evaluator.window_minutes, default_rules=config.evaluator.default_rules,
                environment=self._environment("evaluator"), bucket=self.storage.bucket, ledger=self.ledger.table,
                ledger_actions=LEDGER_ACTIONS, topic=self.notifications.topic, key=self.key,
                metric_namespace=config.metric_namespace,
                job_statements=self._job_statements(
                    ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:StopTrainingJob"]),
                dead_letter_queue=self.dead_letters, alarm_topic=self.notifications.topic,
                log_retention=retention, with_layer=not config.local,
                state_machine_arn=self.state_machine_arn if config.retraining.enabled else None,
            )
            # Above jobs_per_invocation watched jobs, shards through SQS, at most max_concurrency at once.
            self.evaluator_fanout = EvaluatorFanout(
                self, "EvaluatorFanout", function=self.evaluator.function, role=self.evaluator.role, key=self.key,
                dead_letter_queue=self.dead_letters, alarm_topic=self.notifications.topic,
                jobs_per_invocation=config.evaluator.jobs_per_invocation,
                max_concurrency=config.evaluator.max_concurrency, rate_minutes=config.evaluator.rate_minutes,
                timeout_seconds=EVALUATOR_TIMEOUT_SECONDS,
            )
            if config.fleet.enabled:
                grant_system_minutes(self.evaluator.role, self.storage.bucket)
                grant_verdict_log(self.evaluator.role, self.storage.bucket)
        self.fleet: FleetAnalytics | None = None
        self.fleet_collector: FleetCollector | None = None
        if config.fleet.enabled:  # the fleet dataset in the output bucket and Athena over it (docs/fleet.md)
            self.fleet = FleetAnalytics(self, "Fleet", bucket=self.storage.bucket, stack_name=config.stack_name,
                                        bytes_scanned_cutoff=config.fleet.bytes_scanned_cutoff_per_query)
            self.fleet_collector = FleetCollector(
                self, "FleetCollector", bucket=self.storage.bucket, rate_minutes=config.fleet.collector_rate_minutes,
                environment={
                    Env.WATCH_PREFIXES: ",".join(config.watch_prefixes),
                    Env.OPT_IN_TAG: config.opt_in_tag or "smx-debug:opt-in-disabled",
                    Env.EVALUATOR_APPENDS: "true" if self.evaluator is not None else "false",
                },
                layers=self.evaluator.layers if self.evaluator is not None else None, key=self.key,
                dead_letter_queue=self.dead_letters, alarm_topic=self.notifications.topic, log_retention=retention,
                with_layer=not config.local,
            )
        self._outputs()

    # -- wiring ---------------------------------------------------------------------------------------

    def _environment(self, name: str) -> dict[str, str]:
        config = self.config
        defaults = list(config.default_actions)
        if config.alarm_stops_training and "stop" not in defaults:
            defaults.append("stop")
        env = {
            Env.NAMESPACE: config.metric_namespace,
            Env.WATCH_PREFIXES: ",".join(config.watch_prefixes),
            # The handlers need a tag key; with opt-in disabled none of our jobs carries this key.
            Env.OPT_IN_TAG: config.opt_in_tag or "smx-debug:opt-in-disabled",
            Env.DEFAULT_ACTIONS: " ".join(defaults),
            Env.LEDGER_TABLE: self.ledger.table.table_name,
            Env.TOPIC_ARN: self.notifications.topic.topic_arn,
            Env.ACCOUNT: self.account,
            Env.FUNCTION_TIMEOUT: str(TIMEOUTS[name]),
            Env.LEASE_SECONDS: str(TIMEOUTS[name] + LEASE_MARGIN_SECONDS),
            Env.SHOW_KEYS: ",".join(config.show_keys),
            Env.REDACT_KEYS: ",".join(config.retraining.redact_keys),  # the starters' execution input
        }
        # The starters start executions; notify checks the ARN of the execution events it reports.
        if name in (*RETRAIN_STARTERS, "notify") and config.retraining.enabled:
            env[Env.STATE_MACHINE_ARN] = self.state_machine_arn
        if name in (*VERDICT_LOGGERS, "evaluator") and config.fleet.enabled:  # the verdict log, the minutes
            env[Env.FLEET_BUCKET] = self.storage.bucket.bucket_name
        return env

    def _training_jobs(self, name: str) -> str:
        return self.format_arn(service="sagemaker", resource="training-job", resource_name=name)

    def job_arns(self) -> list[str]:
        """Training-job ARN patterns for the watched prefixes (SageMaker lowercases names in ARNs)."""
        return [self._training_jobs(f"{prefix.lower()}*") for prefix in self.config.watch_prefixes]

    def _job_statements(self, actions: list[str], *, request_tag: bool = False,
                        conditions: Mapping[str, Mapping[str, Any]] | None = None) -> list[iam.PolicyStatement]:
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
                iam.PolicyStatement(actions=actions, resources=[self._training_jobs("*")],
                                    conditions={**tagged, **extra})
            )
        return statements

    def _grant_key_use(self, role: iam.IRole) -> None:
        role.add_to_principal_policy(iam.PolicyStatement(actions=list(DATA_KEY_ACTIONS),
                                                         resources=[self.key.key_arn]))

    def _grant(self) -> None:
        config, fns = self.config, self.functions
        read_jobs = ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"]
        for fn in fns.values():
            # Exactly what the ledger does (claim, complete, release, get): no Scan/Query/Batch*.
            self.ledger.table.grant(fn.role, *LEDGER_ACTIONS)
            # Lambda's async-failure DLQ is KMS-encrypted: sending needs data keys as well as sqs:SendMessage.
            fn.role.add_to_principal_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                                                resources=[self.dead_letters.queue_arn]))
            self._grant_key_use(fn.role)
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
                fns[name].role.add_to_principal_policy(
                    iam.PolicyStatement(actions=["sns:Publish"], resources=[self.notifications.topic.topic_arn])
                )
        if config.retraining.enabled:
            for name in RETRAIN_STARTERS:
                fns[name].role.add_to_principal_policy(
                    iam.PolicyStatement(actions=["states:StartExecution"], resources=[self.state_machine_arn])
                )
        if config.fleet.enabled:
            for name in VERDICT_LOGGERS:
                grant_verdict_log(fns[name].role, self.storage.bucket)
        for name, fn in fns.items():
            self._acknowledge_function(name, fn)
        if "retrain" not in fns:
            return
        # Retraining launches the next run under the same name prefix (or carrying the opt-in tag).
        retrain = fns["retrain"].role
        limits = config.retraining
        launch_limits: dict[str, dict[str, Any]] = {  # the configured instance types (every group) and runtime
            "ForAllValues:StringLike": {"sagemaker:InstanceTypes": list(limits.instance_types)},
            "Null": {"sagemaker:InstanceTypes": "false"},
            "NumericLessThanEquals": {"sagemaker:MaxRuntimeInSeconds": str(limits.max_runtime_seconds)},
        }
        for statement in self._job_statements(["sagemaker:CreateTrainingJob"], request_tag=True,
                                              conditions=launch_limits):
            retrain.add_to_principal_policy(statement)
        # Tags only as part of CreateTrainingJob (never on an existing job, which would enrol it to be stopped).
        for statement in self._job_statements(["sagemaker:AddTags"], request_tag=True,
                                              conditions={"StringEquals": {TAGGING_ACTION: "CreateTrainingJob"}}):
            retrain.add_to_principal_policy(statement)
        retrain.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self._role_pattern()],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )

    def _role_pattern(self) -> str:
        """The execution-role pattern in this stack's partition and account (PassRole never crosses accounts)."""
        pattern = self.config.sagemaker_execution_role_pattern
        _, _, path = pattern.partition(":role/")
        return self.format_arn(service="iam", region="", resource="role", resource_name=path)

    def _acknowledge_function(self, name: str, fn: GuardFunction) -> None:
        acknowledge_wildcards(
            fn.role,
            resources=[*self.job_arns(), *([self._training_jobs("*")] if self.config.opt_in_tag else [])],
            reason="Training jobs this deployment watches: its name prefixes, or (tag statement) any job whose "
            "opt-in tag is true, enforced by an aws:ResourceTag/aws:RequestTag condition.",
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
                resources=[self._role_pattern()],
                reason="PassRole to the configured SageMaker execution roles of this account, only to SageMaker.",
            )

    def _event_rules(self) -> list[events.Rule]:
        """One rule for the watched jobs (name prefix or opt-in tag), targeting the three handlers.

        The pattern is :func:`contracts.watch_pattern`: one rule, with ``$or`` when both ways of watching are
        on, so a job that has a watched prefix *and* the tag is delivered once; the tag value matches ignoring
        case, as the handler and IAM do.
        """
        detail = watch_pattern(self.config.watch_prefixes, self.config.opt_in_tag)
        if detail is None:
            return []
        rule = events.Rule(
            self,
            "WatchedJobs",
            description=f"smx-debug: {DETAIL_TYPE} events of watched jobs (name prefix or opt-in tag)",
            event_pattern=events.EventPattern(source=[EVENT_SOURCE], detail_type=[DETAIL_TYPE], detail=detail),
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

    def _retraining_ended_rule(self) -> events.Rule:
        """Executions that end where no step can report (timed out, aborted) -> the notify handler."""
        rule = events.Rule(
            self,
            "RetrainingEnded",
            description="smx-debug: retraining executions that timed out or were aborted",
            event_pattern=events.EventPattern(
                source=[EXECUTION_EVENT_SOURCE],
                detail_type=[EXECUTION_DETAIL_TYPE],
                detail={"status": list(UNREPORTED_EXECUTION_STATUSES), "stateMachineArn": [self.state_machine_arn]},
            ),
        )
        rule.add_target(targets.LambdaFunction(self.functions["notify"].function, dead_letter_queue=self.dead_letters,
                                               retry_attempts=4, max_event_age=cdk.Duration.hours(2)))
        return rule

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

    def _health_alarms(self) -> dict[str, cloudwatch.Alarm]:
        """The guard's own health, straight to the people's topic (not through the notify function, which may
        be what is failing): a message in the DLQ, any function error, a failed or timed-out retraining."""
        people = cw_actions.SnsAction(self.notifications.topic)
        metrics: dict[str, tuple[str, cloudwatch.IMetric]] = {
            "DeadLetters": ("an event or alarm could not be delivered and is in the dead-letter queue",
                            self.dead_letters.metric_approximate_number_of_messages_visible(
                                period=cdk.Duration.minutes(5), statistic=cloudwatch.Stats.MAXIMUM)),
        }
        for name, fn in self.functions.items():
            metrics[f"{_construct_safe(name)}Errors"] = (
                f"the {name} function failed (it is retried; then the event goes to the dead-letter queue)",
                fn.function.metric_errors(period=cdk.Duration.minutes(5), statistic=cloudwatch.Stats.SUM),
            )
        if self.workflow is not None:
            machine = self.workflow.state_machine
            metrics["RetrainingFailed"] = ("a retraining execution failed, timed out or was aborted",
                                           cloudwatch.MathExpression(
                                               expression="failed + timedout + aborted",
                                               using_metrics={
                                                   "failed": machine.metric_failed(statistic="Sum"),
                                                   "timedout": machine.metric_timed_out(statistic="Sum"),
                                                   "aborted": machine.metric_aborted(statistic="Sum"),
                                               },
                                               period=cdk.Duration.minutes(5)))
        alarms: dict[str, cloudwatch.Alarm] = {}
        for name, (what, metric) in metrics.items():
            alarm = cloudwatch.Alarm(
                self,
                f"Health{name}",
                alarm_description=f"smx-debug health: {what}",
                metric=metric,
                threshold=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(people)
            alarms[name] = alarm
        return alarms

    def _outputs(self) -> None:
        values = {
            "OutputBucketName": self.storage.bucket.bucket_name,
            "TopicArn": self.notifications.topic.topic_arn,
            "AlarmTopicArn": self.notifications.alarm_topic.topic_arn,
            "LedgerTableName": self.ledger.table.table_name,
            "DeadLetterQueueUrl": self.dead_letters.queue_url,
            "KeyArn": self.key.key_arn,
        }
        if self.workflow is not None:
            values["RetrainingStateMachineArn"] = self.workflow.state_machine.state_machine_arn
        if self.fleet is not None:
            values.update({"FleetRoot": self.fleet.root, "FleetDatabase": self.fleet.database_name,
                           "FleetWorkGroup": self.fleet.workgroup_name,
                           "FleetAnalystPolicyArn": self.fleet.analyst_policy.managed_policy_arn})
        for name, value in values.items():
            cdk.CfnOutput(self, name, value=value)


def _construct_safe(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("_", "-").split("-"))
