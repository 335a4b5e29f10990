"""IAM's policy language, pure: statements, principals, conditions and wildcards evaluated as AWS documents them.

No moto, no boto: a :class:`Request` (who, action, resource, context) against policy documents already read gives a
:class:`Decision` (:func:`evaluate` for one policy, :func:`decide` for identity + resource or key policies).
:class:`CallContext` is a request context that knows which keys AWS would supply and refuses loudly to treat a
key it was not given as absent.

Why our own evaluator: no maintained Python package evaluates requests against identity, resource and key
policies with conditions (principalmapper, the closest, was last released in 2022 and no longer imports on
Python 3.10+; moto's ignores conditions; policyuniverse and parliament parse and lint).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from smx_debug.errors import SmxDebugError

Statement = Mapping[str, Any]
ContextValue = str | Sequence[str]


class UnsupportedPolicyError(SmxDebugError, ValueError):
    """Raised when a policy uses an operator, key, variable or element the local IAM cannot evaluate."""


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


def account_of(arn: str) -> str | None:
    """The account of an ARN (None for ``*`` or a malformed one)."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 5 and parts[0] == "arn" else None


def arn_parts(arn: str) -> tuple[str, str, str, str]:
    """(service, region, account, resource) of an ARN."""
    parts = arn.split(":", 5)
    return parts[2], parts[3], parts[4], parts[5]


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

