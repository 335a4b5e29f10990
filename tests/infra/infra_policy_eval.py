"""A small IAM evaluator over a synthesized template: resolve intrinsics to concrete ARNs, then decide requests.

Independent of CDK and of the stack code: it reads only the template JSON. It implements the parts of AWS's
policy evaluation the stack uses: explicit Deny beats Allow, Allow needed; Principal/Action/Resource with
``*``/``?`` wildcards; the condition operators below, with ``...IfExists`` and a missing key failing the test.
An operator the evaluator does not know fails loudly (so a new policy cannot be waved through).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "111122223333"
FOREIGN_ACCOUNT = "999988887777"
REGION = "us-west-2"

Statement = dict[str, Any]


def _listify(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


@dataclass
class Resolver:
    """Ref / Fn::GetAtt / Fn::Join / Fn::Select / Fn::Split with a fixed account, region and partition."""

    resources: Mapping[str, Any]
    partition: str = "aws"
    account: str = ACCOUNT
    region: str = REGION

    def _arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        return (f"arn:{self.partition}:{service}:{self.region if region else ''}:"
                f"{self.account if account else ''}:{resource}")

    def _name(self, logical: str) -> str:
        """The physical name a resource is given in the template, else its logical id."""
        props = self.resources[logical].get("Properties", {})
        for key in ("StateMachineName", "FunctionName", "TopicName", "QueueName", "TableName"):
            if isinstance(props.get(key), str):
                return str(props[key])
        return logical

    def ref(self, name: str) -> str:
        pseudo = {"AWS::Partition": self.partition, "AWS::AccountId": self.account, "AWS::Region": self.region,
                  "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "SmxDebugGuard"}
        if name in pseudo:
            return pseudo[name]
        kind = self.resources[name]["Type"]
        refs = {
            "AWS::SNS::Topic": lambda: self._arn("sns", name),
            "AWS::SQS::Queue": lambda: f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self._name(name)}",
            "AWS::S3::Bucket": lambda: name.lower(),
            "AWS::StepFunctions::StateMachine": lambda: self._arn("states", f"stateMachine:{self._name(name)}"),
            "AWS::KMS::Key": lambda: f"key-{name}",
        }
        return refs[kind]() if kind in refs else name

    def get_att(self, name: str, attr: str) -> str:
        kind = self.resources[name]["Type"]
        arns = {
            "AWS::SNS::Topic": lambda: self._arn("sns", name),
            "AWS::SQS::Queue": lambda: self._arn("sqs", self._name(name)),
            "AWS::Lambda::Function": lambda: self._arn("lambda", f"function:{name}"),
            "AWS::S3::Bucket": lambda: self._arn("s3", name.lower(), region=False, account=False),
            "AWS::DynamoDB::Table": lambda: self._arn("dynamodb", f"table/{name}"),
            "AWS::KMS::Key": lambda: self._arn("kms", f"key/key-{name}"),
            "AWS::Events::Rule": lambda: self._arn("events", f"rule/{name}"),
            "AWS::CloudWatch::Alarm": lambda: self._arn("cloudwatch", f"alarm:{name}"),
            "AWS::IAM::Role": lambda: self._arn("iam", f"role/{name}", region=False),
            "AWS::Logs::LogGroup": lambda: self._arn("logs", f"log-group:{name}:*"),
            "AWS::StepFunctions::StateMachine": lambda: self._arn("states", f"stateMachine:{self._name(name)}"),
        }
        if attr == "Arn":
            return arns[kind]()
        if (kind, attr) == ("AWS::SNS::Topic", "TopicArn"):
            return arns[kind]()
        if (kind, attr) == ("AWS::SQS::Queue", "QueueName"):
            return self._name(name)
        if (kind, attr) == ("AWS::SQS::Queue", "QueueUrl"):
            return self.ref(name)
        if (kind, attr) == ("AWS::SNS::Topic", "TopicName"):
            return name
        raise KeyError(f"no attribute {attr} of {kind} in the resolver")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            return self.ref(value["Ref"])
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            name, attr = (target.split(".", 1) if isinstance(target, str) else target)
            return self.get_att(name, attr)
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(str(self(p)) for p in parts)
        if set(value) == {"Fn::Select"}:
            index, items = value["Fn::Select"]
            return self(items)[int(index)]
        if set(value) == {"Fn::Split"}:
            sep, text = value["Fn::Split"]
            return str(self(text)).split(sep)
        return {k: self(v) for k, v in value.items()}


# -------------------------------------------------------------------------------------------- matching
def _wild(pattern: str, value: str, *, case: bool = True) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


_NUMERIC = {"NumericEquals": lambda h, w: h == w, "NumericLessThan": lambda h, w: h < w,
            "NumericLessThanEquals": lambda h, w: h <= w, "NumericGreaterThan": lambda h, w: h > w,
            "NumericGreaterThanEquals": lambda h, w: h >= w}


def _str_op(op: str, want: str, have: str) -> bool:
    if op in _NUMERIC:
        return bool(_NUMERIC[op](float(have), float(want)))
    if op == "StringEquals" or op == "ArnEquals":
        return want == have if op == "StringEquals" else _wild(want, have)
    if op == "StringEqualsIgnoreCase":
        return want.lower() == have.lower()
    if op in ("StringLike", "ArnLike"):
        return _wild(want, have)
    if op == "Bool":
        return want.lower() == have.lower()
    raise AssertionError(f"condition operator {op} is not known to the test evaluator")


_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals",
            "ArnNotLike": "ArnLike", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase"}


def _matches(op: str, wants: list[str], have: str) -> bool:
    """One context value against a key's listed values (OR), a negated operator negating the whole."""
    if op in _NEGATED:
        return not any(_str_op(_NEGATED[op], w, have) for w in wants)
    return any(_str_op(op, w, have) for w in wants)


def conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Mapping[str, Any]) -> bool:
    """Every operator block holds (AND); within a key, any of the listed values (OR). A multivalued key takes
    ``ForAllValues:`` (every value matches; true when the key is missing or empty) or ``ForAnyValue:`` (some value
    matches; false when missing); without either, a single-valued key."""
    lowered = {k.lower(): v for k, v in context.items()}
    for raw_op, block in conditions.items():
        qualifier, _, op = raw_op.rpartition(":")
        op, if_exists = (op[:-8], True) if op.endswith("IfExists") else (op, False)
        for key, wanted in block.items():
            have = lowered.get(key.lower())
            if op == "Null":
                if (str(wanted).lower() == "true") != (have is None):
                    return False
                continue
            wants = [str(w) for w in _listify(wanted)]
            if qualifier == "ForAllValues":
                if not all(_matches(op, wants, str(h)) for h in _listify(have or [])):
                    return False
                continue
            if qualifier == "ForAnyValue":
                if not any(_matches(op, wants, str(h)) for h in _listify(have or [])):
                    return False
                continue
            if qualifier:
                raise AssertionError(f"condition qualifier {qualifier} is not known to the test evaluator")
            if have is None:
                if if_exists:
                    continue
                return False
            results = [_matches(op, wants, str(h)) for h in _listify(have)]
            if not (all(results) if op in _NEGATED else any(results)):
                return False
    return True


@dataclass(frozen=True)
class Request:
    """One API call as IAM sees it."""

    action: str
    resource: str
    principal_service: str | None = None  # a service principal (resource policies)
    principal_arn: str | None = None  # an IAM principal (resource policies)
    context: Mapping[str, Any] = field(default_factory=dict)


def _principal_matches(statement: Statement, request: Request, *, account_grants: bool = True) -> bool:
    """``account_grants=False``: an Allow naming the account (``123456789012``, ``...:root``) does not match the
    account's roles. That is AWS's rule for a resource policy: naming the account delegates to the principal's own
    identity policy, it grants the role nothing by itself (a key policy's root statement is the same delegation,
    which ``account_grants=True`` models as "via IAM")."""
    principal = statement.get("Principal")
    if principal is None:  # identity policy
        return True
    if principal == "*" or principal == {"AWS": "*"}:
        return True
    services = _listify(principal.get("Service", []))
    if request.principal_service and request.principal_service in services:
        return True
    arns = _listify(principal.get("AWS", []))
    if request.principal_arn:
        account = request.principal_arn.split(":")[4]
        for arn in arns:
            if arn == request.principal_arn:
                return True
            names_account = arn in (account, f"arn:aws:iam::{account}:root") or (
                isinstance(arn, str) and arn.endswith(f":iam::{account}:root"))
            if names_account and (account_grants or statement.get("Effect") == "Deny"):
                return True
    return False


def statement_applies(statement: Statement, request: Request, *, resource_is_star: bool = False,
                      account_grants: bool = True) -> bool:
    if not _principal_matches(statement, request, account_grants=account_grants):
        return False
    if "Action" in statement:
        if not any(_wild(a, request.action, case=False) for a in _listify(statement["Action"])):
            return False
    elif any(_wild(a, request.action, case=False) for a in _listify(statement["NotAction"])):
        return False
    resources = _listify(statement.get("Resource", "*"))
    if not resource_is_star and not any(_wild(str(r), request.resource) for r in resources):
        return False
    return conditions_hold(statement.get("Condition", {}), request.context)


def decide(statements: Sequence[Statement], request: Request, *, key_policy: bool = False,
           account_grants: bool = True) -> bool:
    """True when some Allow applies and no Deny does. In a key policy ``Resource: "*"`` means the key.
    ``account_grants=False``: whether the resource policy grants the request by itself (see _principal_matches)."""
    applies = [s for s in statements if statement_applies(s, request, account_grants=account_grants) or (
        key_policy and s.get("Resource") == "*"
        and statement_applies(s, request, resource_is_star=True, account_grants=account_grants))]
    if any(s["Effect"] == "Deny" for s in applies):
        return False
    return any(s["Effect"] == "Allow" for s in applies)
