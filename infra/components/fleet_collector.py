"""Who writes the fleet dataset in the stack, with what grants: the fleet collector, the evaluator, the handlers.

- **The fleet collector** (:class:`FleetCollector`, ``lambdas/fleet_collector``, every
  ``fleet.collector_rate_minutes``): every job's metadata (one SageMaker ``Search`` over running jobs, one over jobs
  changed since its last run), the CloudWatch host minutes of the jobs the evaluator does not append itself, and
  the verdict log (Debugger's triggers from rule statuses; the inbox's lines compacted, then deleted). Its own
  role: ``sagemaker:Search`` and ``cloudwatch:GetMetricData`` (read only; neither has a resource type), read and
  write under ``smx-debug/fleet/`` (the tables and its state), read and delete under ``smx-debug/fleet-inbox/``,
  list those two prefixes; nothing else (no job describe, tag or stop; no other prefix; no DynamoDB). Its runs
  never overlap: a 5-minute timeout and a 1-minute maximum event age, no retries, a period of at least 10 minutes.
- **The evaluator** (:func:`grant_system_minutes`): read and write ``smx-debug/fleet/system_minutes/`` only, the
  minutes of the jobs it watches.
- **The action core** in the three event handlers and the evaluator (:func:`grant_verdict_log`): put under
  ``smx-debug/fleet-inbox/verdicts/`` only (boto3 only; the collector compacts).

The bucket is SSE-S3 encrypted: none of these needs a KMS grant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
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

from infra.components.evaluator import EVALUATOR_MEMORY_MB, RUNTIME
from infra.components.functions import errors_alarm, handler_function, role_and_logs
from infra.components.nag import acknowledge_wildcards
from infra.evaluator_asset import LAMBDA_TARGET, build_layer, stage_evaluator_code
from smx_debug.contracts import FLEET_INBOX_PREFIX, FLEET_PREFIX, SYSTEM_MINUTES_TABLE, Env

COLLECTOR_TIMEOUT_SECONDS = 300
COLLECTOR_MAX_EVENT_AGE_SECONDS = 60  # Lambda's minimum: a throttled run is dropped, the next one catches up
VERDICT_INBOX = f"{FLEET_INBOX_PREFIX}verdicts/"


def grant_verdict_log(role: iam.IRole, bucket: s3.IBucket) -> None:
    """The action core's verdict log: PutObject under the inbox's ``verdicts/`` prefix, nothing else."""
    objects = bucket.arn_for_objects(f"{VERDICT_INBOX}*")
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[objects]))
    acknowledge_wildcards(role, resources=[objects], reason="Write only: the verdict log's inbox "
                          f"({VERDICT_INBOX}<hour>/<job>/<digest>.jsonl), which the fleet collector compacts.")


def grant_system_minutes(role: iam.IRole, bucket: s3.IBucket) -> None:
    """The evaluator's appends: read, write and list ``system_minutes`` of the fleet dataset, nothing else."""
    prefix = f"{FLEET_PREFIX}{SYSTEM_MINUTES_TABLE}/"
    objects = bucket.arn_for_objects(f"{prefix}*")
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"], resources=[objects]))
    role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
                                                     conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}}))
    acknowledge_wildcards(role, resources=[objects], reason="The fleet dataset's system_minutes table "
                          f"({prefix}hour=<yyyyMMddHH>/<job>.parquet): the evaluator appends its watched jobs' minutes.")


class FleetCollector(Construct):
    """The fleet collector's function, role, schedule and errors alarm.

    Attributes:
        function, role, log_group: the Lambda function and what it runs with.
        schedule: the EventBridge rule invoking it every ``rate_minutes``.
        errors_alarm: alarm on the function's errors, to ``alarm_topic``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        environment: Mapping[str, str],
        rate_minutes: int,
        layers: Sequence[lambda_.ILayerVersion] | None,
        key: kms.IKey,
        dead_letter_queue: sqs.IQueue,
        alarm_topic: sns.ITopic,
        log_retention: logs.RetentionDays,
        with_layer: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        if rate_minutes * 60 <= COLLECTOR_TIMEOUT_SECONDS + COLLECTOR_MAX_EVENT_AGE_SECONDS:  # config checks first
            raise ValueError(f"collector rate {rate_minutes} min would let runs overlap")
        self.log_group, self.role = role_and_logs(self, description="smx-debug fleet collector",
                                                  log_retention=log_retention)
        if layers is None and with_layer:  # the evaluator is off: the collector brings the layer itself
            layers = [lambda_.LayerVersion(
                self, "Dependencies", code=lambda_.Code.from_asset(str(build_layer(LAMBDA_TARGET))),
                compatible_runtimes=[RUNTIME], compatible_architectures=[lambda_.Architecture.ARM_64],
                description="numpy, pandas, pyarrow, pydantic for the smx-debug fleet collector (PyPI wheels)")]
        self.function = handler_function(
            self,
            handler_name="fleet_collector",
            code_dir=stage_evaluator_code(handler="fleet_collector"),
            runtime=RUNTIME,
            layers=list(layers or []),
            role=self.role,
            log_group=self.log_group,
            environment={**environment, Env.FLEET_BUCKET: bucket.bucket_name},
            timeout_seconds=COLLECTOR_TIMEOUT_SECONDS,
            memory_size=EVALUATOR_MEMORY_MB,
            dead_letter_queue=dead_letter_queue,
            retry_attempts=0,  # the next run is the retry: it reads from the state the last run saved
            max_event_age=cdk.Duration.seconds(COLLECTOR_MAX_EVENT_AGE_SECONDS),
            description="smx-debug fleet collector: every job's metadata, unwatched jobs' minutes, the verdict log",
        )
        self.schedule = events.Rule(
            self, "Schedule", description=f"smx-debug: run the fleet collector every {rate_minutes} minutes",
            schedule=events.Schedule.rate(cdk.Duration.minutes(rate_minutes)))
        self.schedule.add_target(targets.LambdaFunction(
            self.function, retry_attempts=0, max_event_age=cdk.Duration.seconds(COLLECTOR_MAX_EVENT_AGE_SECONDS),
            dead_letter_queue=dead_letter_queue))
        self._grant(bucket, key, dead_letter_queue)
        self.errors_alarm = errors_alarm(
            self, self.function, topic=alarm_topic,
            description="smx-debug: the fleet collector failed (the next run reads from its saved state)")

    def _grant(self, bucket: s3.IBucket, key: kms.IKey, dead_letter_queue: sqs.IQueue) -> None:
        role = self.role
        dataset, inbox = bucket.arn_for_objects(f"{FLEET_PREFIX}*"), bucket.arn_for_objects(f"{FLEET_INBOX_PREFIX}*")
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sagemaker:Search", "cloudwatch:GetMetricData"],
                                                         resources=["*"]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject"],
                                                         resources=[dataset]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject", "s3:DeleteObject"],
                                                         resources=[inbox]))
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{FLEET_PREFIX}*", f"{FLEET_INBOX_PREFIX}*"]}}))
        # Lambda's asynchronous-failure DLQ is KMS-encrypted: sending a failed event needs data keys too.
        role.add_to_principal_policy(iam.PolicyStatement(actions=["sqs:SendMessage"],
                                                         resources=[dead_letter_queue.queue_arn]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                                         resources=[key.key_arn]))
        acknowledge_wildcards(role, resources=["*"], reason="sagemaker:Search (read only: every job's description "
                              "and tags, the collector's purpose) and cloudwatch:GetMetricData have no resource type.")
        acknowledge_wildcards(role, resources=[dataset, inbox], reason="The fleet dataset (smx-debug/fleet/: its "
                              "tables and the collector's state) and the verdict log's inbox (smx-debug/fleet-inbox/, "
                              "read and deleted once compacted) in the stack's bucket; no other prefix.")
