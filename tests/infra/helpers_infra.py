"""Look-ups in a synthesized template by what resources are, never by logical-id literals."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from constructs import IConstruct

from smx_debug.contracts import ACTION_HANDLERS

if TYPE_CHECKING:
    from infra.stacks import GuardStack

# synth(**context) -> (template, stack), the fixture in conftest.py
Synth = Callable[..., "tuple[Template, GuardStack]"]

HANDLERS = ACTION_HANDLERS  # the guard's own (the evaluator is separate)


def logical_id(stack: cdk.Stack, construct: IConstruct) -> str:
    """The logical id of an L2 construct's resource in ``stack``'s template."""
    resource = construct.node.default_child
    assert isinstance(resource, cdk.CfnElement)
    return stack.get_logical_id(resource)


def watch_rules(template: Template) -> dict[str, Any]:
    """The EventBridge rules on SageMaker training-job events (not schedules, not execution events)."""
    return {k: v for k, v in template.find_resources("AWS::Events::Rule").items()
            if v["Properties"].get("EventPattern", {}).get("source") == ["aws.sagemaker"]}


def functions_by_handler(template: Template) -> dict[str, str]:
    """handler name (the ``smx-debug:handler`` tag) -> the function's logical id."""
    out: dict[str, str] = {}
    for logical, resource in template.find_resources("AWS::Lambda::Function").items():
        tags = {t["Key"]: t["Value"] for t in resource["Properties"].get("Tags", [])}
        out[tags["smx-debug:handler"]] = logical
    return out


def role_statements(template: Template, role_logical: str) -> list[dict[str, Any]]:
    """Every statement of every inline policy attached to the role."""
    statements: list[dict[str, Any]] = []
    for resource in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role_logical} in resource["Properties"]["Roles"]:
            statements.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return statements


def function_statements(template: Template, handler: str) -> list[dict[str, Any]]:
    logical = functions_by_handler(template)[handler]
    role = template.find_resources("AWS::Lambda::Function")[logical]["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_statements(template, role)


def actions_of(statements: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for statement in statements:
        action = statement["Action"]
        out.update([action] if isinstance(action, str) else action)
    return out


def statements_with(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]


def only(template: Template, resource_type: str, **where: Any) -> tuple[str, dict[str, Any]]:
    """The single resource of a type (optionally whose properties contain ``where``)."""
    found: list[tuple[str, dict[str, Any]]] = [
        (logical, dict(resource))
        for logical, resource in template.find_resources(resource_type).items()
        if all(resource["Properties"].get(k) == v for k, v in where.items())
    ]
    assert len(found) == 1, f"expected one {resource_type} matching {where}, found {len(found)}"
    return found[0]


def job_arn(prefix: str) -> dict[str, Any]:
    """The template's spelling of a training-job ARN pattern in this stack's account and region."""
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":sagemaker:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":training-job/{prefix}",
            ],
        ]
    }
