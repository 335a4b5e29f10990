"""smx_debug.local.s3.bucket_policy: every bucket-policy statement is evaluated, conditions included, by the local IAM."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from local_support import client

from smx_debug.local import LocalAws
from smx_debug.local.s3 import bucket_policy
from smx_debug.local.server import LOCAL_ACCOUNT_ID


def _bucket(local_aws: LocalAws, name: str, statements: list[dict[str, object]]) -> object:
    bucket_policy.install()
    s3 = client(local_aws, "s3")
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket=name, Key="k", Body=b"x")
    s3.put_bucket_policy(Bucket=name, Policy=json.dumps({"Version": "2012-10-17", "Statement": statements}))
    return s3


def test_bucket_policy_tls_only_deny_does_not_apply_to_the_loopback_endpoint(local_aws: LocalAws) -> None:
    """The plain-HTTP loopback stands for the HTTPS endpoint every SDK uses: aws:SecureTransport is true."""
    tls_only = {"Sid": "TlsOnly", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*",
                "Resource": ["arn:aws:s3:::ext-tls-only", "arn:aws:s3:::ext-tls-only/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    s3 = _bucket(local_aws, "ext-tls-only", [tls_only])
    assert s3.get_object(Bucket="ext-tls-only", Key="k")["Body"].read() == b"x"  # type: ignore[attr-defined]
    assert json.loads(s3.get_bucket_policy(Bucket="ext-tls-only")["Policy"])["Statement"] == [tls_only]  # type: ignore[attr-defined]


@pytest.mark.parametrize("statement", [
    {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::ext-deny/*"},
    {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::ext-deny/*",
     "Condition": {"StringEquals": {"aws:PrincipalAccount": LOCAL_ACCOUNT_ID}}},
    {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::ext-deny/*",
     "Condition": {"StringNotLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/Admin"}}},
], ids=["unconditional", "condition-holds", "negated-condition-holds"])
def test_bucket_policy_deny_whose_condition_holds_is_applied(local_aws: LocalAws, statement: dict[str, object]) -> None:
    """A conditional Deny applies like any other when its condition holds for the caller (the local account's
    administrator here); moto ignored conditions, and the local AWS used to drop conditional statements."""
    s3 = _bucket(local_aws, "ext-deny", [statement])
    with pytest.raises(ClientError) as info:
        s3.delete_object(Bucket="ext-deny", Key="k")  # type: ignore[attr-defined]
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403  # moto answers 403 with no body
