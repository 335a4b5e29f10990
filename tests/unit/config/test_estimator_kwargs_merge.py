"""`to_estimator_kwargs(**yours)`: your tags and rules join the plan's; a real conflict is a ConfigError.

Before: `Estimator(tags=[...], **plan.to_estimator_kwargs())` raised `TypeError: got multiple values for keyword
argument 'tags'`, and there was no way to pass both.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from smx_debug import ConfigError, DebugPlan, SmxDebugWarning

ROOT = Path(__file__).resolve().parents[3]


def _plan() -> DebugPlan:
    return DebugPlan.from_file(ROOT / "examples" / "plans" / "xgboost.yaml")


def _kwargs(**user: Any) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        return _plan().to_estimator_kwargs(**user)


def test_estimator_kwargs_user_tags_join_plan_tags() -> None:
    plain = _kwargs()
    merged = _kwargs(tags=[{"Key": "team", "Value": "a"}])
    assert merged["tags"] == [*plain["tags"], {"Key": "team", "Value": "a"}]
    assert _kwargs(tags={"team": "a"})["tags"] == merged["tags"]


def test_estimator_kwargs_same_tag_same_value_is_kept_once() -> None:
    plan_tags = _kwargs()["tags"]
    assert _kwargs(tags=[plan_tags[0]])["tags"] == plan_tags


def test_estimator_kwargs_tag_with_two_values_is_a_conflict() -> None:
    key = _kwargs()["tags"][0]["Key"]
    with pytest.raises(ConfigError) as exc:
        _kwargs(tags=[{"Key": key, "Value": "something-else"}])
    assert exc.value.field == f"tags.{key}" and "something-else" in str(exc.value)


def test_estimator_kwargs_bad_tags_name_the_field() -> None:
    with pytest.raises(ConfigError) as exc:
        _kwargs(tags=["team=a"])
    assert exc.value.field == "tags"


def test_estimator_kwargs_other_kwargs_pass_through() -> None:
    out = _kwargs(image_uri="img", role="arn:aws:iam::123456789012:role/SageMakerRole", instance_count=2)
    assert (out["image_uri"], out["instance_count"]) == ("img", 2)
    assert "debugger_hook_config" in out and "profiler_config" in out


def test_estimator_kwargs_user_rules_join_and_duplicates_conflict() -> None:
    from sagemaker.debugger import ProfilerRule, rule_configs

    plan_rules = _kwargs()["rules"]
    extra = ProfilerRule.sagemaker(rule_configs.LowGPUUtilization(), name="MyLowGPU")
    assert [r.name for r in _kwargs(rules=[extra])["rules"]] == [*(r.name for r in plan_rules), "MyLowGPU"]
    with pytest.raises(ConfigError, match=plan_rules[0].name) as exc:
        _kwargs(rules=[ProfilerRule.sagemaker(rule_configs.LowGPUUtilization(), name=plan_rules[0].name)])
    assert exc.value.field == "rules"


def test_estimator_kwargs_different_profiler_config_is_a_conflict() -> None:
    from sagemaker.debugger import ProfilerConfig

    with pytest.raises(ConfigError) as exc:
        _kwargs(profiler_config=ProfilerConfig(s3_output_path="s3://elsewhere/p", system_monitor_interval_millis=100))
    assert exc.value.field == "profiler_config"
    same = _kwargs()["profiler_config"]
    assert _kwargs(profiler_config=same)["profiler_config"] is same
