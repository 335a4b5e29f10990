"""The output bucket's policy grants the SageMaker execution roles by itself.

Naming the account as principal delegates to each role's own identity policy, and AmazonSageMakerFullAccess
allows S3 only on buckets named ``*sagemaker*``: a role with just that policy could not write Debugger's output
to ``smxdebugguard-storageoutput...`` (issue 20). The statement names ``*`` limited by ``aws:PrincipalArn`` (the
configured pattern) and ``aws:PrincipalAccount`` (this account), so it grants those roles and no one else.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers_infra import Synth
from infra_delivery import ACCOUNT, FOREIGN_ACCOUNT, Template, role_principal

from smx_debug.local import iam
from smx_debug.local.iam import Request


@pytest.fixture(scope="module", params=[{}, {"sagemaker_execution_role_pattern": "arn:aws:iam::*:role/ml-training-*"}],
                ids=["default-pattern", "custom-pattern"])
def bucket(request: pytest.FixtureRequest, synth_cached: Synth) -> tuple[Template, str, dict[str, Any]]:
    synthesized, stack = synth_cached(**request.param)
    t = Template(synthesized.to_json())
    logical = stack.get_logical_id(stack.storage.bucket.node.default_child)
    return t, logical, request.param


# What the role's own identity policy allows in the bucket: nothing (AmazonSageMakerFullAccess covers buckets named
# *sagemaker* only), or, for a role of another account, everything (its account's admin cannot open our bucket).
NOTHING: list[dict[str, Any]] = []
EVERYTHING: list[dict[str, Any]] = [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]


def _request(t: Template, bucket: str, action: str, role_arn: str, account: str, *, tls: bool = True) -> Request:
    resource = t.arn(bucket) if action == "s3:ListBucket" else f"{t.arn(bucket)}/debugger/job-1/profiler-output/x"
    return Request(role_principal(role_arn), action, resource,
                   {"aws:PrincipalArn": role_arn, "aws:PrincipalAccount": account,
                    "aws:SecureTransport": "true" if tls else "false"})


@pytest.mark.parametrize("action", ["s3:PutObject", "s3:GetObject", "s3:ListBucket", "s3:AbortMultipartUpload"])
def test_bucket_policy_grants_matching_execution_role_by_itself(
    bucket: tuple[Template, str, dict[str, Any]], action: str
) -> None:
    t, logical, context = bucket
    name = "ml-training-resnet" if context else "AmazonSageMaker-ExecutionRole-20261122T1000"
    role = f"arn:aws:iam::{ACCOUNT}:role/{name}"
    decision = iam.decide(_request(t, logical, action, role, ACCOUNT), identity=NOTHING,
                          resource=t.resource_policy(logical), resource_account=ACCOUNT)
    assert decision.allowed and decision.policy == "resource-based", decision


@pytest.mark.parametrize("who", ["other-name", "foreign-account", "no-tls"])
def test_bucket_policy_refuses_other_roles_other_accounts_and_plain_http(
    bucket: tuple[Template, str, dict[str, Any]], who: str
) -> None:
    t, logical, context = bucket
    name = "ml-training-resnet" if context else "AmazonSageMaker-ExecutionRole-1"
    account = FOREIGN_ACCOUNT if who == "foreign-account" else ACCOUNT
    role = f"arn:aws:iam::{account}:role/{'DataScientist' if who == 'other-name' else name}"
    request = _request(t, logical, "s3:PutObject", role, account, tls=who != "no-tls")
    identity = NOTHING if who == "other-name" else EVERYTHING  # plain HTTP: the explicit deny beats any allow
    assert not iam.decide(request, identity=identity, resource=t.resource_policy(logical),
                          resource_account=ACCOUNT).allowed
