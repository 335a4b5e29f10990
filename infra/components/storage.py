"""The Debugger/profiler output bucket (with its access-log bucket) and the actions ledger table."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from smx_debug.contracts import LEDGER_KEY_ATTRIBUTE, LEDGER_TTL_ATTRIBUTE

# What a SageMaker execution role needs on the output bucket: Debugger/profiler writes, reads for reports.
_SAGEMAKER_OUTPUT_ACTIONS = (
    "s3:PutObject",
    "s3:GetObject",
    "s3:AbortMultipartUpload",
    "s3:ListBucket",
    "s3:GetBucketLocation",
)


class OutputBucket(Construct):
    """Encrypted, TLS-only, versioned, private bucket with a lifecycle and server access logs.

    Attributes:
        bucket: the output bucket.
        log_bucket: the bucket that receives its server access logs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        expiration_days: int | None,
        transition_to_ia_days: int | None,
        log_expiration_days: int,
        sagemaker_role_pattern: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_bucket = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,  # S3 server access logging supports SSE-S3 targets only
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-access-logs",
                    expiration=cdk.Duration.days(log_expiration_days),
                    noncurrent_version_expiration=cdk.Duration.days(1),
                )
            ],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

        rules: list[s3.LifecycleRule] = [
            s3.LifecycleRule(id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=cdk.Duration.days(7))
        ]
        if expiration_days is not None or transition_to_ia_days is not None:
            rules.append(
                s3.LifecycleRule(
                    id="debugger-output-retention",
                    expiration=cdk.Duration.days(expiration_days) if expiration_days is not None else None,
                    noncurrent_version_expiration=cdk.Duration.days(30),
                    transitions=[
                        s3.Transition(
                            storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                            transition_after=cdk.Duration.days(transition_to_ia_days),
                        )
                    ]
                    if transition_to_ia_days is not None
                    else None,
                )
            )
        self.bucket = s3.Bucket(
            self,
            "Output",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            versioned=True,
            server_access_logs_bucket=self.log_bucket,
            server_access_logs_prefix="output/",
            lifecycle_rules=rules,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # The grant itself, not a delegation: naming the account as principal would only delegate to each role's
        # own policy (and AmazonSageMakerFullAccess covers buckets named *sagemaker* only). Any principal, limited
        # to this account's roles matching the pattern; a fixed aws:PrincipalAccount keeps the policy non-public
        # for S3 Block Public Access.
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="SageMakerExecutionRolesWrite",
                principals=[iam.AnyPrincipal()],
                actions=list(_SAGEMAKER_OUTPUT_ACTIONS),
                resources=[self.bucket.bucket_arn, self.bucket.arn_for_objects("*")],
                conditions={
                    "StringLike": {"aws:PrincipalArn": sagemaker_role_pattern},
                    "StringEquals": {"aws:PrincipalAccount": cdk.Stack.of(self).account},
                },
            )
        )


class LedgerTable(Construct):
    """The DynamoDB table that makes each action exactly-once (partition key ``pk``, string; TTL enabled).

    Attributes:
        table: the table.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = keyed_table(self, "Table", removal_policy=cdk.RemovalPolicy.RETAIN,
                                 encryption=dynamodb.TableEncryption.AWS_MANAGED)


def keyed_table(
    scope: Construct,
    construct_id: str,
    *,
    removal_policy: cdk.RemovalPolicy,
    encryption: dynamodb.TableEncryption | None = None,
) -> dynamodb.Table:
    """An on-demand table of items keyed by :data:`~smx_debug.contracts.LEDGER_KEY_ATTRIBUTE` (string), with
    point-in-time recovery and DynamoDB TTL on :data:`~smx_debug.contracts.LEDGER_TTL_ATTRIBUTE`: items carry
    an expiry (epoch seconds) and DynamoDB deletes them after it. The ledger and the evaluator's cursors."""
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name=LEDGER_KEY_ATTRIBUTE, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=encryption,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute=LEDGER_TTL_ATTRIBUTE,
        removal_policy=removal_policy,
    )
