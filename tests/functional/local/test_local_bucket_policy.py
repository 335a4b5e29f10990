"""smx_debug.local.bucket_policy: moto ignores policy conditions; only unconditional statements are evaluated."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from local_support import client

from smx_debug.local import LocalAws, bucket_policy


def test_bucket_policy_conditional_deny_is_not_applied_unconditionally(local_aws: LocalAws) -> None:
    """A TLS-only Deny must not lock everyone out of the local bucket; unconditional statements still apply."""
    bucket_policy.install()
    s3 = client(local_aws, "s3")
    s3.create_bucket(Bucket="ext-tls-only", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "TlsOnly", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:*",
             "Resource": ["arn:aws:s3:::ext-tls-only", "arn:aws:s3:::ext-tls-only/*"],
             "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            {"Sid": "NoDeletes", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "s3:DeleteObject",
             "Resource": "arn:aws:s3:::ext-tls-only/*"},
        ],
    }
    s3.put_bucket_policy(Bucket="ext-tls-only", Policy=json.dumps(policy))
    s3.put_object(Bucket="ext-tls-only", Key="k", Body=b"x")
    assert s3.get_object(Bucket="ext-tls-only", Key="k")["Body"].read() == b"x"
    assert json.loads(s3.get_bucket_policy(Bucket="ext-tls-only")["Policy"]) == policy
    with pytest.raises(ClientError) as info:  # unconditional statements still apply
        s3.delete_object(Bucket="ext-tls-only", Key="k")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
