"""Authorizing on the local AWS: a caller's botocore call (:func:`authorize_call`), a service's delivery
(:func:`authorize_service`: alarm -> topic, SNS -> queue, EventBridge -> Lambda and its DLQ) and a service acting
through a role (:func:`authorize_role_edge`: Step Functions' tasks), each against the policies read now
(:mod:`~smx_debug.local.iam.resources`) with the pure evaluator (:mod:`~smx_debug.local.iam.policy`), and each
decision recorded in the LocalAws's ledger.

The loopback endpoint is plain HTTP, but it stands for the HTTPS endpoint every SDK client uses against AWS
(botocore's default): ``aws:SecureTransport`` is ``true`` for those calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smx_debug.local.clients import client
from smx_debug.local.iam.calls import CALLS, Access
from smx_debug.local.iam.ledger import Caller, Record, ledger
from smx_debug.local.iam.policy import (
    CallContext,
    ContextValue,
    Decision,
    Principal,
    Request,
    UnsupportedPolicyError,
    account_of,
    arn_parts,
    decide,
)
from smx_debug.local.iam.reference import supplied_keys
from smx_debug.local.iam.resources import (
    document,
    identity_statements,
    kms_key,
    resource_policy,
    resource_tags,
)
from smx_debug.local.server import LocalAws

_TAG_FAMILIES = ("aws:ResourceTag/", "sagemaker:ResourceTag/", "iam:ResourceTag/", "s3:BucketTag/")

def _tag_context(aws: LocalAws, resource: str, declared: Sequence[str]) -> tuple[dict[str, ContextValue], list[str]]:
    families = [f for f in _TAG_FAMILIES if any(d.lower().startswith(f.lower()) for d in declared)]
    if not families:
        return {}, []
    tags = resource_tags(aws, resource)
    if tags is None:
        return {}, []
    return {f"{family}{k}": v for family in families for k, v in tags.items()}, families


def _authorize_access(caller: Caller, access: Access) -> Decision:
    aws = caller.aws
    declared = supplied_keys(access.action, access.resource)
    tags, families = ({}, []) if access.resource == "*" else _tag_context(aws, access.target or access.resource,
                                                                          declared)
    request_families = [f for f in ("aws:RequestTag/",) if any(d.startswith(f) for d in declared)]
    context = CallContext({**caller.context(), **tags, **access.context}, declared,
                          families=[*families, *request_families], absent=access.absent)
    target = access.target or access.resource
    policy = None if target == "*" else resource_policy(aws, target)
    account = account_of(target) if target != "*" else None
    return decide(Request(caller.principal, access.action, access.resource, context),
                  identity=identity_statements(aws, caller.role_arn), resource=policy,
                  resource_account=account or None)


def _authorize_kms(caller: Caller, action: str, key_arn: str, encryption: Mapping[str, str], via: str) -> Decision:
    aws = caller.aws
    declared = supplied_keys(action, key_arn)
    tags, families = _tag_context(aws, key_arn, declared)
    context: dict[str, ContextValue] = {
        **caller.context(), **tags, "kms:ViaService": f"{via}.{caller.region}.amazonaws.com",
        "kms:CallerAccount": caller.account, "kms:EncryptionContextKeys": list(encryption),
        **{f"kms:EncryptionContext:{k}": v for k, v in encryption.items()},
    }
    absent = ("kms:RequestAlias", "kms:GrantIsForAWSResource", "kms:EncryptionAlgorithm")
    call_context = CallContext(context, declared, families=[*families, "kms:EncryptionContext:"], absent=absent)
    return decide(Request(caller.principal, action, key_arn, call_context),
                  identity=identity_statements(aws, caller.role_arn), resource=resource_policy(aws, key_arn),
                  key_policy=True)


def _message(principal: Principal, action: str, resource: str, decision: Decision) -> str:
    return f"User: {principal.name} is not authorized to perform: {action} on resource: {resource} {decision.reason}"


@dataclass(frozen=True)
class Outcome:
    """The authorization of one call: allowed, or the first denial's message."""

    allowed: bool
    message: str = ""


def authorize_call(caller: Caller, service: str, operation: str, params: Mapping[str, Any]) -> Outcome:
    """Authorize one botocore call by ``caller`` (every IAM action it needs, and the KMS uses of an
    encrypted target), record each decision, and say whether it may proceed.

    Raises:
        UnsupportedPolicyError: the call is not in :data:`CALLS`, or a policy needs what cannot be evaluated.
    """
    book = ledger(caller.aws)
    call = book.new_call()
    mapper = CALLS.get((service, operation))
    if mapper is None:
        book.record(Record(caller.handler, f"{service}:{operation}", "", "", False, None, "",
                       "not in the local IAM's table of calls", call, caller.user))
        raise UnsupportedPolicyError(f"{service} {operation} by {caller.who} is not in the local IAM's table of "
                                     "calls (smx_debug.local.iam.calls): add it with its resources")
    label = f"{service}:{operation}"
    for access in mapper(params, caller.region, caller.account):
        decision = _authorize_access(caller, access)
        message = "" if decision.allowed else _message(caller.principal, access.action, access.resource, decision)
        book.record(Record(caller.handler, label, access.action, access.resource, decision.allowed, decision.statement,
                       decision.policy, message, call, caller.user))
        if not decision.allowed:
            return Outcome(False, message)
        found = kms_key(caller.aws, access.target or access.resource) if access.kms else None
        if found is None:
            continue
        key_arn, encryption = found
        for action in access.kms:
            decision = _authorize_kms(caller, action, key_arn, encryption, via=service)
            message = "" if decision.allowed else _message(caller.principal, action, key_arn, decision)
            book.record(Record(caller.handler, label, action, key_arn, decision.allowed, decision.statement,
                           decision.policy, message, call, caller.user))
            if not decision.allowed:
                return Outcome(False, message)
    return Outcome(True)


# Which KMS calls a delivering service makes with the source keys in the request (EventBridge's and SNS's
# carry no aws:Source* keys: AWS documents that a key grant conditioned on them for EventBridge drops events).
# CloudWatch's neither, as far as AWS documents: its key statement for alarms publishing to an encrypted topic has
# no condition (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services),
# so a grant that requires them is refused here, never assumed to work.
SOURCE_KEYS_TO_KMS = {"cloudwatch.amazonaws.com": False, "events.amazonaws.com": False, "sns.amazonaws.com": False}
_SERVICE_KMS = {"sns:Publish": ("kms:GenerateDataKey", "kms:Decrypt"),
                "sqs:SendMessage": ("kms:GenerateDataKey", "kms:Decrypt"),
                "sqs:ReceiveMessage": ("kms:Decrypt",)}  # Lambda's pollers, as the function's role


def authorize_service(aws: LocalAws, service: str, action: str, target: str, *, source_arn: str,
                      edge: str = "") -> Outcome:
    """A service principal (``cloudwatch.amazonaws.com``...) acting for ``source_arn`` delivers ``action`` to
    ``target``: the target's resource policy must allow it and, for an encrypted target, the key policy."""
    account = arn_parts(source_arn)[2] or arn_parts(target)[2]
    principal = Principal(account, service=service)
    context: dict[str, ContextValue] = {"aws:SourceArn": source_arn, "aws:SourceAccount": account,
                                        "aws:SourceOwner": account,  # the legacy key SNS's default policy tests
                                        "aws:SecureTransport": "true", "aws:PrincipalIsAWSService": "true",
                                        "aws:PrincipalServiceName": service}
    label = edge or f"{service} -> {action}"
    book = ledger(aws)
    call = book.new_call()
    decision = decide(Request(principal, action, target, context), resource=resource_policy(aws, target) or [])
    message = "" if decision.allowed else _message(principal, action, target, decision)
    book.record(Record(service, label, action, target, decision.allowed, decision.statement, decision.policy, message, call))
    if not decision.allowed:
        return Outcome(False, message)
    found = kms_key(aws, target) if action in _SERVICE_KMS else None
    if found is not None:
        key_arn, encryption = found
        kms_context: dict[str, ContextValue] = {
            **{f"kms:EncryptionContext:{k}": v for k, v in encryption.items()},
            "kms:CallerAccount": account, "aws:SecureTransport": "true"}
        if SOURCE_KEYS_TO_KMS.get(service, True):
            kms_context.update({"aws:SourceArn": source_arn, "aws:SourceAccount": account})
        for kms_action in _SERVICE_KMS[action]:
            decision = decide(Request(principal, kms_action, key_arn, kms_context),
                              resource=resource_policy(aws, key_arn), key_policy=True)
            message = "" if decision.allowed else _message(principal, kms_action, key_arn, decision)
            book.record(Record(service, label, kms_action, key_arn, decision.allowed, decision.statement,
                           decision.policy, message, call))
            if not decision.allowed:
                return Outcome(False, message)
    return Outcome(True)


def service_may_assume(trust: Any, service: str, role_arn: str,
                       context: Mapping[str, ContextValue] | None = None) -> Decision:
    """Whether the service principal ``service`` (``sagemaker.amazonaws.com``...) may ``sts:AssumeRole`` the role
    ``role_arn`` under its trust policy ``trust`` (the document as IAM returns it), with ``context`` the keys the
    service supplies: the role's trust policy is its resource policy, and a service has no identity policies."""
    principal = Principal(arn_parts(role_arn)[2], service=service)
    return decide(Request(principal, "sts:AssumeRole", role_arn, dict(context or {})), resource=document(trust))


def authorize_role_edge(aws: LocalAws, service: str, role_arn: str, action: str, target: str, *,
                        source_arn: str, edge: str = "") -> Outcome:
    """A service acting through a role (Step Functions' tasks, Lambda's DLQ): the role must trust the service
    and its policies (with the target's resource policy) allow ``action`` on ``target``."""
    account = arn_parts(role_arn)[2]
    role_name = role_arn.rsplit("/", 1)[-1]
    trust = client(aws, "iam").get_role(RoleName=role_name)["Role"]["AssumeRolePolicyDocument"]
    label = edge or f"{service} as {role_name} -> {action}"
    book = ledger(aws)
    call = book.new_call()
    assume = service_may_assume(trust, service, role_arn, {"aws:SourceArn": source_arn, "aws:SourceAccount": account})
    if not assume.allowed:
        message = f"{service} cannot assume role {role_arn}: {assume.reason}"
        book.record(Record(service, label, "sts:AssumeRole", role_arn, False, None, "trust", message, call))
        return Outcome(False, message)
    principal = Principal(account, arn=role_arn,
                          session=f"arn:aws:sts::{account}:assumed-role/{role_name}/{service.split('.')[0]}")
    context: dict[str, ContextValue] = {"aws:PrincipalArn": role_arn, "aws:PrincipalAccount": account,
                                        "aws:SecureTransport": "true", "aws:ViaAWSService": "false"}
    identity = identity_statements(aws, role_arn, cached=False)
    decision = decide(Request(principal, action, target, context), identity=identity,
                      resource=resource_policy(aws, target), resource_account=arn_parts(target)[2] or None)
    message = "" if decision.allowed else _message(principal, action, target, decision)
    book.record(Record(service, label, action, target, decision.allowed, decision.statement, decision.policy, message, call))
    found = kms_key(aws, target) if decision.allowed and action in _SERVICE_KMS else None
    if found is not None:  # the target's service uses its key for the role: the key policy and the role decide
        key_arn, encryption = found
        kms_context: dict[str, ContextValue] = {
            **context, "kms:CallerAccount": account, "kms:ViaService": f"{arn_parts(target)[0]}.{aws.region}.amazonaws.com",
            **{f"kms:EncryptionContext:{k}": v for k, v in encryption.items()}}
        for kms_action in _SERVICE_KMS[action]:
            decision = decide(Request(principal, kms_action, key_arn, kms_context), identity=identity,
                              resource=resource_policy(aws, key_arn), key_policy=True)
            message = "" if decision.allowed else _message(principal, kms_action, key_arn, decision)
            book.record(Record(service, label, kms_action, key_arn, decision.allowed, decision.statement,
                           decision.policy, message, call))
            if not decision.allowed:
                break
    return Outcome(decision.allowed, message)

