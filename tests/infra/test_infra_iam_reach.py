"""Which training jobs each role can stop, tag or create, computed from the synthesized policies, equals the
permissions table of docs/infra.md (parsed from the doc, so the doc and the stack cannot drift apart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers_infra import Synth
from infra_delivery import ACCOUNT, REGION, Template, allowed

from smx_debug.contracts import MANAGED_TAG, RULE_TAG_PREFIX

DOC = Path(__file__).resolve().parents[2] / "docs" / "infra.md"
# The configuration the doc's table describes (its first line says so).
CONTEXT = {"watch_prefixes": ["exp-"], "opt_in_tag": MANAGED_TAG}
# column of the doc's table -> (job name, the job's tags)
SCENARIOS: dict[str, tuple[str, dict[str, str]]] = {
    "prefix `exp-`": ("exp-Run-1", {}),
    "tag `true`": ("team-run-1", {MANAGED_TAG: "true"}),
    "tag `True`": ("team-run-2", {MANAGED_TAG: "True"}),
    "tag `TRUE`": ("team-run-3", {MANAGED_TAG: "TRUE"}),
    "tag `false`": ("team-run-4", {MANAGED_TAG: "false"}),
    "unwatched": ("team-run-5", {}),
}
CAPABILITIES = ("stop", "tag", "create")


def _job_arn(name: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name.lower()}"  # SageMaker lowercases ARNs


def _tag_context(prefix: str, tags: dict[str, str]) -> dict[str, Any]:
    context: dict[str, Any] = {f"{prefix}/{k}": v for k, v in tags.items()}
    if prefix == "aws:RequestTag":
        context["aws:TagKeys"] = list(tags)
    return context


def can(statements: list[dict[str, Any]], capability: str, name: str, tags: dict[str, str]) -> bool:
    arn = _job_arn(name)
    if capability == "stop":
        return allowed(statements, "sagemaker:StopTrainingJob", arn, _tag_context("aws:ResourceTag", tags))
    if capability == "tag":  # enrol an existing job: add the opt-in tag to it
        context = {**_tag_context("aws:ResourceTag", tags), **_tag_context("aws:RequestTag", {MANAGED_TAG: "true"})}
        return allowed(statements, "sagemaker:AddTags", arn, context)
    # create: CreateTrainingJob with the scenario's tags plus a rule-action tag (so AddTags is authorised too), on
    # an instance type and for a runtime the deployment allows (test_infra_least_privilege checks the limits)
    request_tags = {**tags, f"{RULE_TAG_PREFIX}LossNotDecreasing": "stop"}
    context = _tag_context("aws:RequestTag", request_tags)
    launch = {"sagemaker:InstanceTypes": ["ml.g5.2xlarge"], "sagemaker:MaxRuntimeInSeconds": "3600"}
    return allowed(statements, "sagemaker:CreateTrainingJob", arn, {**context, **launch}) and allowed(
        statements, "sagemaker:AddTags", arn, {**context, "sagemaker:TaggingAction": "CreateTrainingJob"})


def computed_table(t: Template) -> dict[tuple[str, str], dict[str, str]]:
    roles: dict[str, str] = {}
    for _, props in t.of_type("AWS::Lambda::Function"):
        handler = {tag["Key"]: tag["Value"] for tag in props["Tags"]}["smx-debug:handler"]
        roles[handler] = str(t.logical_of(props["Role"]))
    for _, props in t.of_type("AWS::StepFunctions::StateMachine"):
        roles["state machine"] = str(t.logical_of(props["RoleArn"]))
    table = {}
    for role_name, role in roles.items():
        statements = t.role_policy(role)
        for capability in CAPABILITIES:
            table[(role_name, capability)] = {
                column: "yes" if can(statements, capability, name, tags) else "no"
                for column, (name, tags) in SCENARIOS.items()
            }
    return table


def documented_table() -> dict[tuple[str, str], dict[str, str]]:
    """The table under docs/infra.md's "## Permissions" heading."""
    text = DOC.read_text()
    section = text.split("\n## Permissions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[:2] == ["role", "may"], header
    table = {}
    for line in rows[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        table[(cells[0].strip("`"), cells[1])] = dict(zip(header[2:], cells[2:], strict=True))
    return table


@pytest.fixture(scope="module")
def template(synth_cached: Synth) -> Template:
    synthesized, _ = synth_cached(**CONTEXT)
    return Template(synthesized.to_json())


def test_doc_table_covers_every_role_capability_and_scenario(template: Template) -> None:
    documented = documented_table()
    assert set(documented) == set(computed_table(template))
    for row in documented.values():
        assert list(row) == list(SCENARIOS)
        assert set(row.values()) <= {"yes", "no"}
    assert "describes `watch_prefixes: [\"exp-\"]`" in DOC.read_text()


def test_iam_reach_equals_the_documented_permissions(template: Template) -> None:
    computed, documented = computed_table(template), documented_table()
    differences = {key: (computed[key], documented[key]) for key in documented if computed.get(key) != documented[key]}
    assert differences == {}


def test_reach_evaluator_is_live(template: Template) -> None:
    """The evaluator distinguishes: a Deny-free wildcard Allow reaches everything, an empty policy nothing."""
    everything = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]
    assert all(can(everything, c, n, t) for c in CAPABILITIES for n, t in SCENARIOS.values())
    assert not any(can([], c, n, t) for c in CAPABILITIES for n, t in SCENARIOS.values())
