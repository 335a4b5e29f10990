"""A plan's profile: ``debugger`` (the rules listed, as today) or ``recommended`` (the registry's recommended rules at
their defaults, plus the rules listed), and what the hook saves for it (docs/plan.md)."""

from __future__ import annotations

from typing import Any

import pytest

from smx_debug.config import DebugPlan
from smx_debug.errors import ConfigError
from smx_debug.rules.registry import profile_rules, rule_defs

BASE: dict[str, Any] = {"region": "us-west-2", "s3_output_path": "s3://my-bucket/debug"}
pytestmark = pytest.mark.filterwarnings("ignore::smx_debug.config.SmxDebugWarning")


def _plan(**fields: Any) -> DebugPlan:
    return DebugPlan.from_dict({**BASE, **fields})


def test_profile_recommended_rules_are_the_registry_entries_marked_recommended() -> None:
    marked = {d.name for d in rule_defs() if "recommended" in d.profiles}
    assert set(profile_rules("recommended")) == marked
    assert {d.name for d in rule_defs(family="smx")} - {"SmxLossPlateau"} == marked  # ours; none of Debugger's
    assert "SmxLossPlateau" not in marked  # opt-in: the loss alone cannot tell a stall from convergence
    assert profile_rules("debugger") == ()


def test_profile_recommended_expands_to_its_rules_at_their_defaults_under_the_evaluator() -> None:
    plan = _plan(profile="recommended")
    assert plan.guard == "evaluator" and plan.resolved_profile == "recommended"
    assert [r.spec.name for r in plan.rules] == list(profile_rules("recommended"))
    assert all(r.parameters == {} for r in plan.rules)
    assert {w.rule for w in plan.watch_spec().rules} == set(profile_rules("recommended"))
    configs, _ = plan.tensor_rules()
    assert {c.rule for c in configs} == set(profile_rules("recommended"))


def test_profile_recommended_hook_saves_the_collections_its_rules_need() -> None:
    plan = _plan(profile="recommended")
    names = {c.name for c in plan.collections()}
    assert {"weights", "gradients", "relu_output", "smx_saturation_inputs"} <= names
    assert {req.name for rule in plan.rules for req in plan.required_collections(rule)} <= names
    hook = plan.to_request_dict(job_name="j")["DebugHookConfig"]
    assert {c["CollectionName"] for c in hook["CollectionConfigurations"]} == names


def test_profile_recommended_listed_rule_overrides_the_profiles_and_keeps_its_place() -> None:
    plan = _plan(profile="recommended", rules=[{"name": "smx_weight_growth", "parameters": {"factor": 50}},
                                               {"name": "CPUBottleneck"}])
    growth = [r for r in plan.rules if r.spec.name == "SmxWeightGrowth"]
    assert len(growth) == 1 and growth[0].parameters == {"factor": 50}
    assert [r.spec.name for r in plan.rules[:2]] == ["SmxWeightGrowth", "CPUBottleneck"]
    assert {r.spec.name for r in plan.rules} == {*profile_rules("recommended"), "CPUBottleneck"}


def test_profile_default_evaluator_plan_without_rules_is_recommended() -> None:
    plan = _plan(guard="evaluator")
    assert plan.profile == "recommended"
    assert {r.spec.name for r in plan.rules} == set(profile_rules("recommended"))


@pytest.mark.parametrize("rule", ["ExplodingTensor", "CPUBottleneck"])
def test_profile_default_evaluator_plan_listing_rules_keeps_them_as_written(rule: str) -> None:
    plan = _plan(guard="evaluator", rules=[{"name": rule}])
    assert plan.resolved_profile == "debugger"
    assert [r.spec.name for r in plan.rules] == [rule]


@pytest.mark.parametrize("fields", [{}, {"rules": [{"name": "CPUBottleneck"}]}, {"guard": "both"},
                                    {"rules": [{"name": "ExplodingTensor"}], "profile": "debugger"}])
def test_profile_debugger_default_renders_what_it_rendered_without_a_profile(fields: dict[str, Any]) -> None:
    plan = _plan(**fields)
    assert plan.resolved_profile == "debugger"
    without = {k: v for k, v in fields.items() if k != "profile"}
    assert plan.to_request_dict(job_name="j") == _plan(**without).to_request_dict(job_name="j")


@pytest.mark.parametrize("guard", ["debugger", "both"])
def test_profile_recommended_under_debuggers_rule_jobs_raises_naming_profile(guard: str) -> None:
    with pytest.raises(ConfigError) as info:
        _plan(profile="recommended", guard=guard)
    assert info.value.field == "profile" and "evaluator" in str(info.value)


def test_profile_unknown_value_raises_naming_profile() -> None:
    with pytest.raises(ConfigError) as info:
        _plan(profile="strict")
    assert info.value.field == "profile"


def test_profile_recommended_plan_round_trips_through_its_dump() -> None:
    plan = _plan(profile="recommended", rules=[{"name": "SmxWeightGrowth", "parameters": {"factor": 50}}])
    again = DebugPlan.from_dict(plan.model_dump(exclude_none=True))
    assert again.rules == plan.rules and again.watch_spec() == plan.watch_spec()
