"""cdk-nag acknowledgements with reasons, one finding at a time.

cdk-nag 3 acknowledges each finding separately: an IAM5 wildcard finding is named after the resource,
e.g. ``AwsSolutions-IAM5[Resource::<Fn.Arn>:*]``. We build those names from the same tokens the policy
uses, so no logical id is ever spelt out by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on ``scope`` (and its children) with a reason."""
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def acknowledge_wildcards(scope: IConstruct, *, resources: Iterable[str] = (), actions: Iterable[str] = (),
                          reason: str) -> None:
    """Acknowledge AwsSolutions-IAM5 for each scoped wildcard resource or action, all for one reason."""
    stack = cdk.Stack.of(scope)
    for resource in resources:
        acknowledge(scope, f"AwsSolutions-IAM5[Resource::{nag_name(stack.resolve(resource))}]", reason)
    for action in actions:
        acknowledge(scope, f"AwsSolutions-IAM5[Action::{action}]", reason)


def nag_name(value: Any) -> str:
    """cdk-nag's spelling of a resolved CloudFormation value: ``<Ref>``, ``<Id.Attr>``, joins flattened."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (fn, arg), = value.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Fn::Join":
            return str(arg[0]).join(nag_name(part) for part in arg[1])
    raise TypeError(f"cannot name CloudFormation value {value!r} for cdk-nag")
