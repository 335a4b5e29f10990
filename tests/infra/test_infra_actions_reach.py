"""The calls the action handlers make before and while acting are authorised on every job they may act on
(computed from the synthesized policies): DescribeTrainingJob + ListTags on every role that verifies a job,
and, for the retrain function, CreateTrainingJob with the next run's tags (the flagged job's, plus
contracts.RETRAIN_RUN_TAG) and iam:PassRole of the flagged job's execution role to SageMaker only."""

from __future__ import annotations

from typing import Any

import pytest
from helpers_infra import Synth
from infra_delivery import ACCOUNT, REGION, Template, allowed

from smx_debug.contracts import HANDLER_TAG, MANAGED_TAG, RETRAIN_RUN_TAG, RULE_TAG_PREFIX

CONTEXT = {"watch_prefixes": ["exp-"], "opt_in_tag": MANAGED_TAG}
VERIFIERS = ("rule_metrics", "stop_training", "notify", "retrain", "evaluator")  # verify_job before acting
WATCHED = {"exp-run-1": {}, "team-run-1": {MANAGED_TAG: "true"}}
UNWATCHED = {"team-run-2": {MANAGED_TAG: "false"}, "team-run-3": {}}


def _arn(name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"


def _resource_tags(tags: dict[str, str]) -> dict[str, Any]:
    return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}


@pytest.fixture(scope="module")
def roles(synth_cached: Synth) -> dict[str, list[dict[str, Any]]]:
    synthesized, _ = synth_cached(**CONTEXT)
    t = Template(synthesized.to_json())
    out = {}
    for _, props in t.of_type("AWS::Lambda::Function"):
        handler = {tag["Key"]: tag["Value"] for tag in props.get("Tags", [])}.get(HANDLER_TAG)
        if handler:
            out[handler] = t.role_policy(str(t.logical_of(props["Role"])))
    return out


@pytest.mark.parametrize("handler", VERIFIERS)
def test_every_verifying_role_may_describe_and_list_tags_of_watched_jobs_only(
    roles: dict[str, list[dict[str, Any]]], handler: str
) -> None:
    statements = roles[handler]
    for action in ("sagemaker:DescribeTrainingJob", "sagemaker:ListTags"):
        for name, tags in WATCHED.items():
            assert allowed(statements, action, _arn(name), _resource_tags(tags)), (action, name)
        for name, tags in UNWATCHED.items():
            assert not allowed(statements, action, _arn(name), _resource_tags(tags)), (action, name)


@pytest.mark.parametrize(("name", "tags"), list(WATCHED.items()))
def test_retrain_may_create_the_next_run_with_the_flagged_jobs_tags_and_the_workflow_tag(
    roles: dict[str, list[dict[str, Any]]], name: str, tags: dict[str, str]
) -> None:
    request_tags = {**tags, f"{RULE_TAG_PREFIX}ExplodingTensor": "stop notify retrain", RETRAIN_RUN_TAG: f"{name}-1123"}
    context: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in request_tags.items()}
    context["aws:TagKeys"] = list(request_tags)
    arn = _arn(f"{name}-1123-1")
    # the flagged job's instance type, its runtime capped at retraining.max_runtime_seconds (retrain.build_request)
    launch = {"sagemaker:InstanceTypes": ["ml.p3.2xlarge"], "sagemaker:MaxRuntimeInSeconds": "86400"}
    assert allowed(roles["retrain"], "sagemaker:CreateTrainingJob", arn, {**context, **launch})
    assert allowed(roles["retrain"], "sagemaker:AddTags", arn,
                   {**context, "sagemaker:TaggingAction": "CreateTrainingJob"})


def test_retrain_may_pass_the_flagged_jobs_execution_role_to_sagemaker_only(
    roles: dict[str, list[dict[str, Any]]]
) -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/AmazonSageMaker-ExecutionRole-2026"
    to_sagemaker = {"iam:PassedToService": "sagemaker.amazonaws.com"}
    assert allowed(roles["retrain"], "iam:PassRole", role, to_sagemaker)
    assert not allowed(roles["retrain"], "iam:PassRole", role, {"iam:PassedToService": "ec2.amazonaws.com"})
    assert not allowed(roles["retrain"], "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/Admin", to_sagemaker)
    for handler in ("rule_metrics", "stop_training", "notify", "evaluator"):
        assert not allowed(roles[handler], "iam:PassRole", role, to_sagemaker), handler
