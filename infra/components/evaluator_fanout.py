"""The evaluator's fan-out: an SQS queue of shards feeding the evaluator with bounded concurrency.

Above ``evaluator.jobs_per_invocation`` watched jobs, the scheduled run sends them in shards to this queue
(``smx_debug.watch.handler``); a Lambda event source mapping (batch size 1, ``ReportBatchItemFailures``) invokes
the same function once per shard, at most ``evaluator.max_concurrency`` at once: the mapping's
``ScalingConfig.MaximumConcurrency``, which reserves nothing (a new account refuses any reserved concurrency).

The queue is encrypted with the stack's key and refuses plain HTTP; its visibility timeout is six times the
function's timeout (AWS's advice for Lambda's pollers, and Lambda refuses a mapping whose queue's timeout is
below the function's); a shard that fails three times goes to the stack's dead-letter queue (its alarm tells
people); messages live an hour (a shard older than the schedule's period is dropped by the function anyway:
the next run has sent its jobs again). An alarm tells the alarm topic when shards wait longer than the
schedule's period: the evaluator does not keep up (raise ``max_concurrency`` or the account's Lambda quota).

Least privilege: the function's role may send to this queue (the run) and receive, delete and read the
attributes of its messages (the mapping polls with the function's role: exactly the three actions of AWS's
``AWSLambdaSQSQueueExecutionRole``), not ChangeMessageVisibility or purge.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from smx_debug.contracts import Env

POLLER_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
MAX_RECEIVE_COUNT = 3


class EvaluatorFanout(Construct):
    """The shard queue, its event source mapping to ``function`` and the backlog alarm.

    Attributes:
        queue: the shard queue.
        mapping: the event source mapping (batch size 1, maximum concurrency, partial batch failures).
        backlog_alarm: shards waiting longer than the schedule's period, to ``alarm_topic``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.Function,
        role: iam.IRole,
        key: kms.IKey,
        dead_letter_queue: sqs.IQueue,
        alarm_topic: sns.ITopic,
        jobs_per_invocation: int,
        max_concurrency: int,
        rate_minutes: int,
        timeout_seconds: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self, "Shards",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            visibility_timeout=cdk.Duration.seconds(6 * timeout_seconds),
            retention_period=cdk.Duration.hours(1),
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=MAX_RECEIVE_COUNT),
        )
        self.mapping = lambda_.EventSourceMapping(
            self, "Mapping",
            target=function,
            event_source_arn=self.queue.queue_arn,
            batch_size=1,
            max_concurrency=max_concurrency,
            report_batch_item_failures=True,
        )
        role.add_to_principal_policy(iam.PolicyStatement(actions=[*POLLER_ACTIONS, "sqs:SendMessage"],
                                                         resources=[self.queue.queue_arn]))
        self.mapping.node.add_dependency(role)  # the mapping is checked against the role's policy when created
        function.add_environment(Env.SHARD_QUEUE_URL, self.queue.queue_url)
        function.add_environment(Env.JOBS_PER_INVOCATION, str(jobs_per_invocation))
        function.add_environment(Env.RATE_MINUTES, str(rate_minutes))
        self.backlog_alarm = cloudwatch.Alarm(
            self, "Backlog",
            alarm_description="smx-debug: evaluator shards wait longer than the schedule's period: the evaluator does "
            "not keep up with the watched jobs (raise evaluator.max_concurrency or the account's Lambda quota)",
            metric=self.queue.metric_approximate_age_of_oldest_message(period=cdk.Duration.minutes(5),
                                                                       statistic=cloudwatch.Stats.MAXIMUM),
            threshold=rate_minutes * 60,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.backlog_alarm.add_alarm_action(cw_actions.SnsAction(alarm_topic))
