"""The scheduled evaluator: a Lambda run every ``rate_minutes`` that evaluates watched jobs' rules itself.

It finds the running jobs this deployment watches, reads their new CloudWatch minutes, evaluates their rules
and acts through the same action core as the Debugger-event handlers. Least privilege: list running jobs
(``sagemaker:ListTrainingJobs`` has no resource type) and search them for the opt-in tag (``sagemaker:Search``,
read only, no resource type), describe / list tags / stop only watched jobs (the stack's statements: name
prefix or opt-in tag), read metrics (``cloudwatch:GetMetricData`` has no resource type), its own cursor table
(batch read/write, and put/delete of its run lease), read the watch specs under one prefix of the
stack's bucket (and the profiler output and tensors jobs write there), the ledger's four item actions, put the rule metric in our namespace only, publish to our topic.
Failures: the schedule invokes asynchronously without retries (the next run is a minute away and resumes from
the saved cursors), and an invocation not started within one rate period (throttled) is dropped rather than
retried for Lambda's default 6 hours; a failed invocation goes to the stack's dead-letter queue and an alarm on
the function's errors notifies people. No reserved concurrency: a new account's quota (10 executions, 10 kept
unreserved) refuses any, which would fail ``cdk deploy``; overlapping runs are made safe by the run lease. A job's
own failure never fails the invocation: it is put as ``EvaluatorJobErrors`` and an alarm notifies people when job
errors persist for 15 minutes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.functions import errors_alarm, handler_function, role_and_logs
from infra.components.nag import acknowledge_wildcards
from infra.components.storage import keyed_table
from infra.evaluator_asset import LAMBDA_TARGET, build_layer, stage_evaluator_code
from smx_debug.contracts import DEBUG_OUTPUT, EVALUATOR_SPEC_PREFIX, JOB_ERRORS_METRIC, PROFILER_OUTPUT, Env

EVALUATOR_TIMEOUT_SECONDS = 60  # a run must end before the next one starts (benchmark: 200 jobs x 4 hosts)
EVALUATOR_MEMORY_MB = 1024  # pandas + pyarrow; more memory is also more CPU for the evaluation
RUNTIME = lambda_.Runtime.PYTHON_3_14  # the layer's wheels are built for this Python on arm64 (LAMBDA_TARGET)


class Evaluator(Construct):
    """The evaluator function, its schedule, its cursor table and its failure alarm.

    Attributes:
        function, role, log_group: the Lambda function and what it runs with.
        layers: its dependency layer (none for a local deploy).
        cursors: the DynamoDB table of per-job cursors (TTL on ``expires_at``).
        schedule: the EventBridge rule invoking it every ``rate_minutes``.
        errors_alarm: alarm on the function's errors, to ``alarm_topic``.
        job_errors_alarm: alarm on job errors that persist (``EvaluatorJobErrors``), to ``alarm_topic``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        rate_minutes: int,
        window_minutes: int,
        default_rules: Sequence[Mapping[str, object]],
        environment: Mapping[str, str],
        bucket: s3.IBucket,
        ledger: dynamodb.ITable,
        ledger_actions: Sequence[str],
        topic: sns.ITopic,
        key: kms.IKey,
        metric_namespace: str,
        job_statements: Sequence[iam.PolicyStatement],
        dead_letter_queue: sqs.IQueue,
        alarm_topic: sns.ITopic,
        log_retention: logs.RetentionDays,
        state_machine_arn: str | None = None,
        with_layer: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        # cursors are a cache: a new table starts over
        self.cursors = keyed_table(self, "Cursors", removal_policy=cdk.RemovalPolicy.DESTROY)
        self.log_group, self.role = role_and_logs(self, description="smx-debug scheduled evaluator",
                                                  log_retention=log_retention)
        layers: list[lambda_.ILayerVersion] = []
        if with_layer:
            layers.append(lambda_.LayerVersion(
                self, "Dependencies",
                code=lambda_.Code.from_asset(str(build_layer(LAMBDA_TARGET))),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[lambda_.Architecture.ARM_64],
                description="numpy, pandas, pyarrow, pydantic for the smx-debug evaluator (PyPI manylinux wheels)",
            ))
        self.layers = layers  # the fleet collector runs on the same layer
        env = {
            **environment,
            Env.CURSOR_TABLE: self.cursors.table_name,
            Env.SPEC_BUCKET: bucket.bucket_name,
            Env.DEFAULT_RULES: json.dumps(list(default_rules), separators=(",", ":")),
            Env.WINDOW_MINUTES: str(window_minutes),
            Env.FUNCTION_TIMEOUT: str(EVALUATOR_TIMEOUT_SECONDS),
        }
        if state_machine_arn:  # a rule whose actions say `retrain` starts the retraining workflow
            env[Env.STATE_MACHINE_ARN] = state_machine_arn
        # No reserved concurrency: a new account (quota 10, 10 kept unreserved) refuses any reservation, so
        # overlapping runs are the evaluator's own business. A run not started by the time the next one is due
        # is dropped (Lambda's and EventBridge's maximum event age), not retried for hours.
        next_run = cdk.Duration.minutes(rate_minutes)
        self.function = handler_function(
            self,
            handler_name="evaluator",
            code_dir=stage_evaluator_code(),
            runtime=RUNTIME,
            layers=layers,
            role=self.role,
            log_group=self.log_group,
            environment=env,
            timeout_seconds=EVALUATOR_TIMEOUT_SECONDS,
            memory_size=EVALUATOR_MEMORY_MB,
            dead_letter_queue=dead_letter_queue,
            retry_attempts=0,  # the next scheduled run is the retry, from the saved cursors
            # Lambda retries a throttled async event for up to 6 hours by default: drop it when the next run is due
            max_event_age=next_run,
            description="smx-debug scheduled evaluator: evaluates watched jobs' rules on CloudWatch data",
        )
        self.schedule = events.Rule(
            self,
            "Schedule",
            description=f"smx-debug: run the evaluator every {rate_minutes} minute(s)",
            schedule=events.Schedule.rate(cdk.Duration.minutes(rate_minutes)),
        )
        self.schedule.add_target(targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=next_run,
                                                        dead_letter_queue=dead_letter_queue))
        self._grant(bucket=bucket, ledger=ledger, ledger_actions=ledger_actions, topic=topic, key=key,
                    namespace=metric_namespace, job_statements=job_statements, dead_letter_queue=dead_letter_queue)
        if state_machine_arn:
            self.role.add_to_principal_policy(iam.PolicyStatement(actions=["states:StartExecution"],
                                                                  resources=[state_machine_arn]))
        self.errors_alarm = errors_alarm(
            self, self.function, topic=alarm_topic,
            description="smx-debug: the scheduled evaluator failed (the next run retries from its cursors)")
        # A job the evaluator fails on (denied, throttled, bad data or spec) is retried every run: alarm when
        # job errors persist for three 5-minute periods, not on one transient error.
        self.job_errors_alarm = cloudwatch.Alarm(
            self,
            "JobErrors",
            alarm_description="smx-debug: the scheduled evaluator has failed on some watched job for 15 minutes "
            "(dimension Reason of EvaluatorJobErrors says why; the run's log line names the jobs)",
            metric=cloudwatch.Metric(namespace=metric_namespace, metric_name=JOB_ERRORS_METRIC,
                                     period=cdk.Duration.minutes(5), statistic=cloudwatch.Stats.SUM),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.job_errors_alarm.add_alarm_action(cw_actions.SnsAction(alarm_topic))

    def _grant(
        self,
        *,
        bucket: s3.IBucket,
        ledger: dynamodb.ITable,
        ledger_actions: Sequence[str],
        topic: sns.ITopic,
        key: kms.IKey,
        namespace: str,
        job_statements: Sequence[iam.PolicyStatement],
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        role = self.role
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["sagemaker:ListTrainingJobs", "sagemaker:Search", "cloudwatch:GetMetricData"], resources=["*"]))
        for statement in job_statements:
            role.add_to_principal_policy(statement)
        # batch reads and writes of the cursors; PutItem/DeleteItem for the run lease (smx_debug.watch.lease)
        self.cursors.grant(role, "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:PutItem",
                           "dynamodb:DeleteItem")
        ledger.grant(role, *ledger_actions)
        # The watch specs, and the profiler output and tensors jobs write to the stack's bucket (read with the
        # readers, which list what they read): those prefixes, not models or anything else. Output written to other
        # buckets needs a grant of its own.
        readable = (f"{EVALUATOR_SPEC_PREFIX}*", f"*/{PROFILER_OUTPUT}/*", f"*/{DEBUG_OUTPUT}/*")
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[bucket.arn_for_objects(pattern) for pattern in readable]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": list(readable)}}))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"], resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": namespace}}))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sns:Publish"], resources=[topic.topic_arn]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                                         resources=[dead_letter_queue.queue_arn]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                                         resources=[key.key_arn]))
        acknowledge_wildcards(
            role, resources=["*"],
            reason="sagemaker:ListTrainingJobs, sagemaker:Search (read only: the opt-in tag of running jobs), "
            "cloudwatch:GetMetricData and cloudwatch:PutMetricData have no resource type; PutMetricData is limited "
            "to our namespace by the cloudwatch:namespace condition.",
        )
        acknowledge_wildcards(
            role, resources=[r for s in job_statements for r in s.resources],
            reason="Training jobs this deployment watches: its name prefixes, or any job whose opt-in tag is true "
            "(aws:ResourceTag condition).",
        )
        acknowledge_wildcards(
            role, resources=[bucket.arn_for_objects(pattern) for pattern in readable],
            reason="Read only: the watch specs (smx-debug/watch-specs/), the jobs' Debugger profiler output "
            "(<output path>/<job>/profiler-output/) and their hooks' tensors (<output path>/<job>/debug-output/, "
            "for the tensor rules) in the stack's bucket; not models.",
        )
