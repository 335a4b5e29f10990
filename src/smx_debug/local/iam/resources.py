"""What the local IAM reads from the local AWS at call time: a role's identity policies, a target's resource
policy, its tags and the KMS key that encrypts it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import moto.sagemaker.models as sagemaker_models
from botocore.exceptions import ClientError

from smx_debug.local.clients import client
from smx_debug.local.iam.ledger import ledger
from smx_debug.local.iam.policy import Statement, arn_parts
from smx_debug.local.server import LocalAws


def document(value: Any) -> list[Statement]:
    """The statements of a policy document as an API returns it (a mapping, JSON, or URL-encoded JSON)."""
    if isinstance(value, str):
        text = value if value.lstrip().startswith("{") else unquote(value)
        value = json.loads(text)
    statements = value.get("Statement", [])
    return [dict(s) for s in ([statements] if isinstance(statements, Mapping) else statements)]


def identity_statements(aws: LocalAws, role_arn: str, *, cached: bool = True) -> list[Statement]:
    """Every statement of the role's inline and attached managed policies, from the local IAM (a function's
    role is re-read at each invocation, :func:`function_environment`; ``cached=False`` reads it now)."""
    found = ledger(aws).identity(role_arn) if cached else None
    if found is not None:
        return found
    iam = client(aws, "iam")
    name = role_arn.rsplit("/", 1)[-1]
    statements: list[Statement] = []
    for page in iam.get_paginator("list_role_policies").paginate(RoleName=name):
        for policy in page["PolicyNames"]:
            statements += document(iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"])
    for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name):
        for attached in page["AttachedPolicies"]:
            version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
            found = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)
            statements += document(found["PolicyVersion"]["Document"])
    ledger(aws).remember_identity(role_arn, statements)
    return statements


def _queue_url(aws: LocalAws, arn: str) -> str:
    _, _, account, name = arn_parts(arn)
    return str(client(aws, "sqs").get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"])


def resource_policy(aws: LocalAws, arn: str) -> list[Statement] | None:
    """The resource-based policy of the target (bucket, topic, queue, function, key), read now;
    None for a resource type without one. A resource without a policy has an empty one."""
    service, _, _, rest = arn_parts(arn)
    try:
        if service == "s3":
            return document(client(aws, "s3").get_bucket_policy(Bucket=rest.split("/", 1)[0])["Policy"])
        if service == "sns":
            attrs = client(aws, "sns").get_topic_attributes(TopicArn=arn)["Attributes"]
            return document(attrs["Policy"]) if attrs.get("Policy") else []
        if service == "sqs":
            attrs = client(aws, "sqs").get_queue_attributes(QueueUrl=_queue_url(aws, arn),
                                                           AttributeNames=["Policy"]).get("Attributes", {})
            return document(attrs["Policy"]) if attrs.get("Policy") else []
        if service == "lambda":
            statements = document(client(aws, "lambda").get_policy(FunctionName=arn)["Policy"])
            return [{k: v for k, v in s.items() if k != "FunctionName"} for s in statements]  # moto adds it
        if service == "kms":
            return document(client(aws, "kms").get_key_policy(KeyId=arn, PolicyName="default")["Policy"])
    except ClientError:
        return []  # no policy, or no such resource (then AWS still answers AccessDenied to a denied caller)
    return None


def _job_exists(arn: str) -> bool:
    _, region, account, rest = arn_parts(arn)
    return rest.split("/", 1)[1] in sagemaker_models.sagemaker_backends[account][region].training_jobs


def resource_tags(aws: LocalAws, arn: str) -> dict[str, str] | None:
    """The target's tags, read now ({} when it does not exist yet); None when this module cannot read
    that resource type's tags (a policy testing them then fails loudly)."""
    service, _, _, rest = arn_parts(arn)
    try:
        if service == "sagemaker":
            # moto's ListTags answers 500 for a job that does not exist; asked of the backend, as a Describe
            # would advance the job's emulated lifecycle
            if rest.startswith("training-job/") and not _job_exists(arn):
                return {}
            out: dict[str, str] = {}
            for page in client(aws, "sagemaker").get_paginator("list_tags").paginate(ResourceArn=arn):
                out.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
            return out
        if service == "sns":
            tags = client(aws, "sns").list_tags_for_resource(ResourceArn=arn).get("Tags", [])
            return {t["Key"]: t["Value"] for t in tags}
        if service == "sqs":
            return dict(client(aws, "sqs").list_queue_tags(QueueUrl=_queue_url(aws, arn)).get("Tags", {}))
        if service == "dynamodb":
            tags = client(aws, "dynamodb").list_tags_of_resource(ResourceArn=arn).get("Tags", [])
            return {t["Key"]: t["Value"] for t in tags}
        if service == "lambda":
            return dict(client(aws, "lambda").list_tags(Resource=arn).get("Tags", {}))
        if service == "kms":
            tags = client(aws, "kms").list_resource_tags(KeyId=arn).get("Tags", [])
            return {t["TagKey"]: t["TagValue"] for t in tags}
        if service == "states":
            tags = client(aws, "stepfunctions").list_tags_for_resource(resourceArn=arn).get("tags", [])
            return {t["key"]: t["value"] for t in tags}
        if service == "iam" and rest.startswith("role/"):
            tags = client(aws, "iam").list_role_tags(RoleName=rest.rsplit("/", 1)[-1]).get("Tags", [])
            return {t["Key"]: t["Value"] for t in tags}
        if service == "s3":
            tagging = client(aws, "s3").get_bucket_tagging(Bucket=rest.split("/", 1)[0])
            return {t["Key"]: t["Value"] for t in tagging.get("TagSet", [])}
    except ClientError:
        return {}  # not there (yet): a resource without tags
    return None


def kms_key(aws: LocalAws, target: str) -> tuple[str, dict[str, str]] | None:
    """The customer managed key that encrypts ``target`` (topic, queue, bucket) and the encryption context
    the service uses with it; None when it is not encrypted with one."""
    service, _, _, rest = arn_parts(target)
    key_id: str | None = None
    context: dict[str, str] = {}
    try:
        if service == "sns":
            key_id = client(aws, "sns").get_topic_attributes(TopicArn=target)["Attributes"].get("KmsMasterKeyId")
            context = {"aws:sns:topicArn": target}
        elif service == "sqs":
            attrs = client(aws, "sqs").get_queue_attributes(QueueUrl=_queue_url(aws, target),
                                                           AttributeNames=["KmsMasterKeyId"]).get("Attributes", {})
            key_id = attrs.get("KmsMasterKeyId")
            context = {"aws:sqs:arn": target}
        elif service == "s3":
            bucket = rest.split("/", 1)[0]
            rules = client(aws, "s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
            for rule in rules.get("Rules", []):
                default = rule.get("ApplyServerSideEncryptionByDefault", {})
                if default.get("SSEAlgorithm") == "aws:kms" and default.get("KMSMasterKeyID"):
                    key_id = default["KMSMasterKeyID"]
                    context = {"aws:s3:arn": f"arn:aws:s3:::{bucket}" if rule.get("BucketKeyEnabled") else target}
    except ClientError:
        return None
    if not key_id or key_id.startswith("alias/aws/"):
        return None  # no key, or an AWS managed key (its policy allows the account's callers through the service)
    metadata = client(aws, "kms").describe_key(KeyId=key_id)["KeyMetadata"]
    if metadata.get("KeyManager") == "AWS":
        return None
    return str(metadata["Arn"]), context

