"""Bucket policies on the local AWS: every statement evaluated, conditions included, by :mod:`smx_debug.local.iam`.

moto's S3 applies bucket-policy statements to object requests but ignores their ``Condition``, so the guard
bucket's TLS-only statement (Deny when ``aws:SecureTransport`` is false) would deny every request. After
:func:`install` the local S3 evaluates each request against the whole policy with the local IAM's evaluator,
as the caller moto cannot name: the local account's administrator (``arn:aws:iam::ACCOUNT:root``; a deployed
function's calls are authorized as its own role before they reach moto, see :mod:`smx_debug.local.iam`).
The loopback endpoint is plain HTTP but stands for the HTTPS endpoint every SDK client uses against AWS, so
``aws:SecureTransport`` is ``true``. GetBucketPolicy still returns the policy exactly as deployed.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import json
from typing import Any

from moto.iam.access_control import PermissionResult
from moto.s3.models import FakeBucket

from smx_debug.local.iam.policy import Principal, Request, evaluate
from smx_debug.local.patching import patch_once


def install() -> None:
    """Evaluate whole bucket policies, conditions included (patched once per process). Idempotent."""
    patch_once(FakeBucket, "get_permission", lambda original: _get_permission)


def _get_permission(self: Any, action: str, resource: str) -> Any:
    if self.policy is None:
        return PermissionResult.NEUTRAL
    document = json.loads(self.policy)
    statements = document.get("Statement", [])
    statements = [statements] if isinstance(statements, dict) else statements
    account = str(self.account_id)
    admin = f"arn:aws:iam::{account}:root"
    context = {"aws:SecureTransport": "true", "aws:PrincipalArn": admin, "aws:PrincipalAccount": account}
    request = Request(Principal(account, arn=admin), action, resource, context)
    decision = evaluate(statements, request, resource_policy=True)
    if decision.statement is None:
        return PermissionResult.NEUTRAL
    return PermissionResult.PERMITTED if decision.allowed else PermissionResult.DENIED
