"""Bucket-policy conditions on the local AWS: only unconditional statements are evaluated.

moto's S3 applies bucket-policy statements but ignores their ``Condition``, so the guard bucket's TLS-only
statement (Deny when ``aws:SecureTransport`` is false) would deny every request. After :func:`install` the
local S3 evaluates a bucket's unconditional statements only (through moto's ``FakeBucket.get_permission`` and
its IAM policy evaluator); GetBucketPolicy still returns the policy exactly as deployed.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import json
import threading
from typing import Any

__all__ = ["install"]

_lock = threading.Lock()
_installed = False


def install() -> None:
    """Evaluate only the unconditional statements of bucket policies (patched once per process). Idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        from moto.s3.models import FakeBucket

        def get_permission(self: Any, action: str, resource: str) -> Any:
            from moto.iam.access_control import IAMPolicy, PermissionResult

            if self.policy is None:
                return PermissionResult.NEUTRAL
            document = json.loads(self.policy)
            statements = document.get("Statement", [])
            statements = [statements] if isinstance(statements, dict) else statements
            document["Statement"] = [st for st in statements if "Condition" not in st]
            return IAMPolicy(json.dumps(document)).is_action_permitted(action, resource)

        setattr(FakeBucket, "get_permission", get_permission)  # noqa: B010 (moto ignores Condition)
        _installed = True
