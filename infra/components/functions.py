"""One Lambda function of the guard: its own role, log group with retention, DLQ for async failures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from smx_debug.contracts import (  # the local AWS maps a function to its code by the tag
    HANDLER_TAG,
    handler_entry,
)

# The newest Python runtime this aws-cdk-lib knows; cdk-nag (AwsSolutions-L1) asks for the latest.
RUNTIME = lambda_.Runtime.PYTHON_3_14


class GuardFunction(Construct):
    """A handler (:func:`smx_debug.contracts.handler_entry`) packaged from a staged asset directory (no Docker).

    Attributes:
        function: the Lambda function (Handler ``handler.<name>``).
        role: its execution role; grants are added by the stack.
        log_group: its log group, with the configured retention.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler_name: str,
        code_dir: Path,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        dead_letter_queue: sqs.IQueue,
        description: str,
        timeout_seconds: int = 60,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group, self.role = role_and_logs(self, description=f"smx-debug {handler_name} handler",
                                                  log_retention=log_retention)
        self.function = handler_function(
            self,
            handler_name=handler_name,
            code_dir=code_dir,
            role=self.role,
            log_group=self.log_group,
            environment=environment,
            timeout_seconds=timeout_seconds,
            memory_size=256,
            dead_letter_queue=dead_letter_queue,
            retry_attempts=2,
            description=description,
        )


def role_and_logs(scope: Construct, *, description: str, log_retention: logs.RetentionDays) -> tuple[
    logs.LogGroup, iam.Role
]:
    """A function's log group (``Logs``, with retention) and execution role (``Role``) in ``scope``.

    Our own role, so no managed policy (AWSLambdaBasicExecutionRole) grants logs on every group: the role may
    write to this log group only.
    """
    log_group = logs.LogGroup(scope, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
    role = iam.Role(scope, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description)
    log_group.grant_write(role)
    return log_group, role


def handler_function(
    scope: Construct,
    *,
    handler_name: str,
    code_dir: Path,
    role: iam.IRole,
    log_group: logs.ILogGroup,
    environment: Mapping[str, str],
    timeout_seconds: int,
    memory_size: int,
    dead_letter_queue: sqs.IQueue,
    retry_attempts: int,
    description: str,
    runtime: lambda_.Runtime = RUNTIME,
    layers: Sequence[lambda_.ILayerVersion] | None = None,
    max_event_age: cdk.Duration | None = None,
) -> lambda_.Function:
    """``Function`` in ``scope``: handler ``handler_name``'s entry (:func:`~smx_debug.contracts.handler_entry`) from
    a staged code directory on arm64, tagged with
    :data:`~smx_debug.contracts.HANDLER_TAG` = ``handler_name`` (the local AWS runs its code by this tag)."""
    function = lambda_.Function(
        scope,
        "Function",
        runtime=runtime,
        architecture=lambda_.Architecture.ARM_64,
        handler=handler_entry(handler_name)[1],
        code=lambda_.Code.from_asset(str(code_dir), exclude=[".complete"]),
        layers=list(layers) if layers is not None else None,
        role=role,
        environment=dict(environment),
        log_group=log_group,
        timeout=cdk.Duration.seconds(timeout_seconds),
        memory_size=memory_size,
        dead_letter_queue=dead_letter_queue,
        retry_attempts=retry_attempts,
        max_event_age=max_event_age,
        description=description,
    )
    cdk.Tags.of(function).add(HANDLER_TAG, handler_name)
    return function


def errors_alarm(scope: Construct, function: lambda_.IFunction, *, description: str,
                 topic: sns.ITopic) -> cloudwatch.Alarm:
    """``Errors`` in ``scope``: any error of ``function`` within 5 minutes notifies ``topic``."""
    alarm = cloudwatch.Alarm(
        scope,
        "Errors",
        alarm_description=description,
        metric=function.metric_errors(period=cdk.Duration.minutes(5), statistic=cloudwatch.Stats.SUM),
        threshold=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    alarm.add_alarm_action(cw_actions.SnsAction(topic))
    return alarm
