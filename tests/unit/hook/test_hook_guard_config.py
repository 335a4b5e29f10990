"""The in-process guard's configuration: ``Hook(guard=...)``, a plan's ``in_process_guard`` rendered into the hook's
settings (``HookParameters.in_process_guard`` and ``in_process_guard_rules``), and the rules the guard evaluates
(the plan's tensor rule configurations, with their parameters, or the recommended profile at its defaults). The
guard at work on real runs: tests/functional/hook/test_hook_guard.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from smx_debug.config import DebugPlan
from smx_debug.config.request import debug_hook_config
from smx_debug.errors import ConfigError
from smx_debug.hook import Hook
from smx_debug.hook.json_config import parse_hook_config
from smx_debug.rules.registry import profile_rules

BASE: dict[str, Any] = {"region": "us-west-2", "s3_output_path": "s3://bucket/debug", "profile": "recommended"}


def _configs(hook: Hook) -> dict[str, tuple[str, dict[str, Any]]]:
    assert hook._guard is not None
    return {c.name: (c.rule, dict(c.parameters)) for c in hook._guard.evaluator.configs}


@pytest.mark.parametrize("value", ["halt", "STOP", "", True, 1])
def test_hook_guard_bad_value_is_refused_naming_the_field(tmp_path: Path, value: object) -> None:
    with pytest.raises(ConfigError, match="guard must be one of warn, stop") as info:
        Hook(out_dir=tmp_path / "run", guard=value)  # type: ignore[arg-type]
    assert info.value.field == "guard" and info.value.value == value


def test_hook_guard_rules_without_a_guard_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set guard='warn' or 'stop'") as info:
        Hook(out_dir=tmp_path / "run", guard_rules=["SmxWeightGrowth"])
    assert info.value.field == "guard_rules"


def test_hook_guard_without_rules_evaluates_the_recommended_profile_at_its_defaults(tmp_path: Path) -> None:
    hook = Hook(out_dir=tmp_path / "run", guard="warn")
    assert set(_configs(hook)) == set(profile_rules("recommended"))
    assert Hook(out_dir=tmp_path / "off")._guard is None  # off by default


def test_hook_guard_rule_that_does_not_read_tensors_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not read tensors") as info:
        Hook(out_dir=tmp_path / "run", guard="stop", guard_rules=["LowGPUUtilization"])
    assert info.value.value == "LowGPUUtilization"


@pytest.mark.parametrize("extra", [{"in_process_guard": "halt"}, {"in_process_guard": True}])
def test_plan_in_process_guard_bad_value_names_the_field(extra: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="in_process_guard") as info:
        DebugPlan.from_dict({**BASE, **extra})
    assert info.value.field == "in_process_guard"


@pytest.mark.parametrize("plan", [
    {"region": "us-west-2", "s3_output_path": "s3://bucket/debug", "rules": [{"name": "exploding_tensor"}]},
    {"region": "us-west-2", "s3_output_path": "s3://bucket/debug", "guard": "evaluator", "profile": "debugger",
     "rules": [{"name": "exploding_tensor"}]},
])
def test_plan_in_process_guard_without_the_recommended_profile_is_refused(plan: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="set profile to 'recommended'") as info:
        DebugPlan.from_dict({**plan, "in_process_guard": "stop"})
    assert info.value.field == "in_process_guard"


def test_plan_without_in_process_guard_renders_no_guard_parameter() -> None:
    params = debug_hook_config(DebugPlan.from_dict(BASE))["HookParameters"]
    assert not {"in_process_guard", "in_process_guard_rules"} & set(params)


def test_plan_in_process_guard_at_the_profile_defaults_renders_the_mode_only() -> None:
    params = debug_hook_config(DebugPlan.from_dict({**BASE, "in_process_guard": "warn"}))["HookParameters"]
    assert params["in_process_guard"] == "warn" and "in_process_guard_rules" not in params


def test_plan_in_process_guard_reaches_the_hook_with_the_plan_rules_and_parameters(tmp_path: Path) -> None:
    plan = DebugPlan.from_dict({**BASE, "in_process_guard": "stop", "rules": [
        {"name": "SmxWeightGrowth", "parameters": {"factor": 20}},
        {"name": "SmxWeightGrowth", "configuration_name": "GrowthLoose", "parameters": {"factor": 50}},
        {"name": "ExplodingTensor"},
    ]})
    configs, _ = plan.tensor_rules()
    expected = {c.name: (c.rule, dict(c.parameters)) for c in configs}
    assert expected["SmxWeightGrowth"][1]["factor"] == 20 and "GrowthLoose" in expected
    # the plan's hook (Hook.from_plan) and the job's DebugHookConfig file (create_from_json_file)
    from_plan = Hook.from_plan(plan, tmp_path / "a")
    config = {**debug_hook_config(plan), "LocalPath": str(tmp_path / "b")}
    (tmp_path / "hook.json").write_text(json.dumps(config), encoding="utf-8")
    from_file = Hook.create_from_json_file(tmp_path / "hook.json")
    for hook in (from_plan, from_file):
        assert hook.guard == "stop"
        assert _configs(hook) == expected


@pytest.mark.parametrize(("params", "field", "fragment"), [
    ({"in_process_guard": "halt"}, "HookParameters.in_process_guard", "must be one of warn, stop"),
    ({"in_process_guard_rules": "[]"}, "HookParameters.in_process_guard_rules", "in_process_guard is not set"),
    ({"in_process_guard": "stop", "in_process_guard_rules": "[["}, "HookParameters.in_process_guard_rules",
     "invalid JSON"),
    ({"in_process_guard": "stop", "in_process_guard_rules": '[["A","SmxWeightGrowth"]]'},
     "HookParameters.in_process_guard_rules", "JSON list of"),
    ({"in_process_guard": "stop", "in_process_guard_rules": '[["A","NoSuchRule",{}]]'},
     "HookParameters.in_process_guard_rules", "NoSuchRule"),
    ({"in_process_guard": "stop", "in_process_guard_rules": '[["A","SmxWeightGrowth",{"factor":"x"}]]'},
     "HookParameters.in_process_guard_rules", "factor"),
])
def test_hook_parameters_bad_guard_is_refused_naming_the_field(params: dict[str, str], field: str,
                                                                fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as info:
        parse_hook_config({"HookParameters": params}, source="hook.json")
    assert info.value.field == field
    assert str(info.value).startswith("hook.json: ")


def test_plan_in_process_guard_rules_longer_than_a_hook_parameter_continue_in_numbered_keys(tmp_path: Path) -> None:
    rules = [{"name": "SmxWeightGrowth", "configuration_name": f"Growth-{i}-{'x' * 40}", "parameters": {"factor": i}}
             for i in range(2, 12)]
    plan = DebugPlan.from_dict({**BASE, "in_process_guard": "stop", "rules": rules})
    params = debug_hook_config(plan)["HookParameters"]
    parts = [k for k in params if k.startswith("in_process_guard_rules")]
    assert len(parts) > 1 and all(len(params[k]) <= 256 for k in parts)  # SageMaker's ConfigValue limit
    configs, _ = plan.tensor_rules()
    hook = Hook.from_plan(plan, tmp_path / "run")
    assert _configs(hook) == {c.name: (c.rule, dict(c.parameters)) for c in configs}
    # a part missing before a later one is refused, naming it
    del params["in_process_guard_rules_1"]
    with pytest.raises(ConfigError, match="in_process_guard_rules_1 is not set") as info:
        parse_hook_config({"HookParameters": params}, source="hook.json")
    assert info.value.field == "HookParameters.in_process_guard_rules_1"


def test_plan_in_process_guard_rules_beyond_eight_hook_parameters_are_refused() -> None:
    rules = [{"name": "SmxWeightGrowth", "configuration_name": f"Growth-{i}-{'x' * 200}", "parameters": {"factor": i}}
             for i in range(2, 14)]
    with pytest.raises(ConfigError, match="more than 8 values of 256") as info:
        DebugPlan.from_dict({**BASE, "in_process_guard": "stop", "rules": rules})
    assert info.value.field == "in_process_guard"
