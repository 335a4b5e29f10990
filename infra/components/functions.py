"""One Lambda function of the guard: its own role, log group with retention, DLQ for async failures."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from smx_debug.contracts import HANDLER_TAG  # the local AWS maps a deployed function to its code by this tag

__all__ = ["RUNTIME", "GuardFunction"]

# The newest Python runtime this aws-cdk-lib knows; cdk-nag (AwsSolutions-L1) asks for the latest.
RUNTIME = lambda_.Runtime.PYTHON_3_14


class GuardFunction(Construct):
    """A handler from ``lambdas/<name>/`` packaged from a staged asset directory (no Docker).

    Attributes:
        function: the Lambda function (``handler.handler``).
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
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        # Our own role, so no managed policy (AWSLambdaBasicExecutionRole) grants logs on every group.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"smx-debug {handler_name} handler",
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(code_dir), exclude=[".complete"]),
            role=self.role,
            environment=dict(environment),
            log_group=self.log_group,
            timeout=cdk.Duration.seconds(timeout_seconds),
            memory_size=256,
            dead_letter_queue=dead_letter_queue,
            retry_attempts=2,
            description=description,
        )
        cdk.Tags.of(self.function).add(HANDLER_TAG, handler_name)
