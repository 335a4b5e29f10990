"""Every condition operator the synthesized stack uses can be evaluated by the local IAM (smx_debug.local.iam);
a new operator, set qualifier or policy variable must be taught to it first, never waved through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers_infra import Synth

from smx_debug.local.iam.policy import UnsupportedPolicyError, condition_holds

CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "full": {"watch_prefixes": ["exp-", "prod-"], "notification_emails": ["ml@example.com"],
             "notification_sms": ["+15555550123"], "retraining": True, "default_actions": ["notify", "stop"]},
    "minimal": {"opt_in_tag": False, "watch_prefixes": "exp-", "retraining": False, "evaluator": False},
}


def _conditions(value: Any) -> Iterator[tuple[str, str, Any]]:
    if isinstance(value, dict):
        if "Effect" in value and isinstance(value.get("Condition"), dict):
            for operator, block in value["Condition"].items():
                for key, wanted in block.items():
                    yield operator, key, wanted
        for item in value.values():
            yield from _conditions(item)
    elif isinstance(value, list):
        for item in value:
            yield from _conditions(item)


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_iam_every_condition_operator_of_the_stack_is_evaluable(synth_cached: Synth, name: str) -> None:
    template, _ = synth_cached(**CONFIGURATIONS[name])
    found = list(_conditions(template.to_json()["Resources"]))
    assert found, "the stack has conditions"
    for operator, key, wanted in found:
        for context in ({}, {key: "x"}):
            try:
                condition_holds(operator, key, wanted if not isinstance(wanted, dict) else "x", context)
            except UnsupportedPolicyError as exc:
                if "policy variable" in str(exc) or "not known" in str(exc):
                    pytest.fail(f"{name}: {operator} {key}: {exc}")
                if not isinstance(wanted, dict):  # an intrinsic (Ref/GetAtt) value is resolved at deploy time
                    raise


def test_iam_unknown_operator_is_refused_not_waved_through() -> None:
    with pytest.raises(UnsupportedPolicyError):
        condition_holds("DateLessThan", "aws:CurrentTime", "2030-01-01T00:00:00Z", {})
