"""docs/iam-calls.md, "Every call in the code": each function a row names may make the row's IAM actions.

tests/unit/test_aws_call_owners.py ties the rows to the calls in the code; this test ties them to the synthesized
template: for every function (or the state machine) a row says makes the call, its role has an Allow statement
whose actions match each of the row's IAM actions (resources and conditions are the delivery and reach tests'
job: test_infra_iam_reach, test_infra_delivery_paths, and the local flows of test_iam_calls_doc).
"""

from __future__ import annotations

import fnmatch
import importlib.util
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template
from helpers_infra import Synth

from smx_debug.contracts import HANDLER_TAG

UNIT = Path(__file__).resolve().parents[1] / "unit" / "test_aws_call_owners.py"


def _doc_rows() -> dict[tuple[str, str], dict[str, str]]:
    spec = importlib.util.spec_from_file_location("aws_call_owners", UNIT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.doc_rows()  # type: ignore[no-any-return]


def _roles(template: Template) -> dict[str, str]:
    """function handler name (and ``state machine``) -> its role's logical id."""
    out: dict[str, str] = {}
    for fn in template.find_resources("AWS::Lambda::Function").values():
        tags = {t["Key"]: t["Value"] for t in fn["Properties"].get("Tags", [])}
        if HANDLER_TAG in tags:
            out[tags[HANDLER_TAG]] = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    for machine in template.find_resources("AWS::StepFunctions::StateMachine").values():
        out["state machine"] = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    return out


def _allowed_actions(template: Template, role: str) -> list[str]:
    actions: list[str] = []
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Effect"] == "Allow":
                    action: Any = statement["Action"]
                    actions += [action] if isinstance(action, str) else action
    return actions


def test_iam_calls_doc_every_function_a_row_names_may_make_its_actions(synth_cached: Synth) -> None:
    template, _ = synth_cached(watch_prefixes=["exp-"])
    roles = _roles(template)
    missing = []
    for (code, call), row in _doc_rows().items():
        if row["made_by"] == "—":
            continue
        for caller in (c.strip() for c in row["made_by"].split(",")):
            assert caller in roles, f"{code} {call}: no function {caller!r} in the template ({sorted(roles)})"
            allowed = _allowed_actions(template, roles[caller])
            for action in (a.strip() for a in row["actions"].split(",")):
                if not any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in allowed):
                    missing.append(f"{code} {call}: {caller}'s role does not allow {action}")
    assert not missing, "\n".join(missing)
