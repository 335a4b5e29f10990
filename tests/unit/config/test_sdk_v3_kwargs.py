"""SDK v3 in the project's venv, which has v2: what can be checked without v3 itself.

The v3 objects are checked in v3's own side environment (tests/functional/plan/test_sdk_v3.py); here a fake stands
in for an installed v3 (``sagemaker.debugger`` gone, ``sagemaker.core.resources`` present), as v3 has them.
"""

from __future__ import annotations

import json
import sys
import types
import warnings
from pathlib import Path

import pytest

from smx_debug import ConfigError, DebugPlan, SmxDebugWarning
from smx_debug.config.request import debug_hook_config
from smx_debug.contracts import ENVIRONMENT_ENTRIES_MAX, HOOK_CONFIG_ENV, HOOK_OUTPUT_ENV

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def sdk_v3(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SageMaker Python SDK v3 as an import sees it: no ``sagemaker.debugger``, a ``sagemaker.core``."""
    monkeypatch.setitem(sys.modules, "sagemaker.debugger", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "sagemaker.core.debugger", None)
    core = types.ModuleType("sagemaker.core")
    monkeypatch.setitem(sys.modules, "sagemaker.core", core)
    monkeypatch.setitem(sys.modules, "sagemaker.core.resources", types.ModuleType("sagemaker.core.resources"))


def _plan(**changes: object) -> DebugPlan:
    return DebugPlan(region="us-west-2", s3_output_path="s3://bucket/debug", **changes)  # type: ignore[arg-type]


def test_estimator_kwargs_under_sdk_v3_raises_naming_the_v3_methods(sdk_v3: None) -> None:
    with pytest.raises(ConfigError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        _plan(rules=[{"name": "exploding_tensor"}]).to_estimator_kwargs()
    message = str(info.value)
    assert "SDK v3" in message
    assert "to_model_trainer_kwargs" in message
    assert "to_training_job_kwargs" in message
    assert info.value.field == "sagemaker"


class _Shape(types.SimpleNamespace):
    """A stand-in for a ``sagemaker.core`` shape: its keyword arguments, compared by value."""


class _ResourceTag(_Shape):
    """``sagemaker.core.resources.Tag`` (``TrainingJob.create`` rejects the shapes' ``Tag``)."""


@pytest.fixture
def fake_core(sdk_v3: None, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    shapes = types.ModuleType("sagemaker.core.shapes")
    for name in ("Tag", "DebugHookConfig", "CollectionConfiguration", "DebugRuleConfiguration", "ProfilerConfig",
                 "ProfilerRuleConfiguration", "TensorBoardOutputConfig"):
        setattr(shapes, name, type(name, (_Shape,), {}))
    resources = sys.modules["sagemaker.core.resources"]
    monkeypatch.setattr(resources, "Tag", _ResourceTag, raising=False)
    monkeypatch.setitem(sys.modules, "sagemaker.core.shapes", shapes)
    return shapes


def _evaluator_plan(**changes: object) -> DebugPlan:
    return _plan(guard="evaluator", name="guard", rules=[{"name": "LossNotDecreasing", "actions": [{"stop_job": {}}]}],
                 **changes)


def _pairs(tags: list[object]) -> list[tuple[str, str]]:
    return [(t.key, t.value) for t in tags]  # type: ignore[attr-defined]


def test_model_trainer_kwargs_without_sdk_v3_says_install_the_extra() -> None:
    with pytest.raises(ConfigError, match=r"smx-debug\[sagemaker-v3\]"):
        _evaluator_plan().to_model_trainer_kwargs()


def test_training_job_kwargs_without_sdk_v3_says_install_the_extra() -> None:
    with pytest.raises(ConfigError, match=r"smx-debug\[sagemaker-v3\]"):
        _evaluator_plan().to_training_job_kwargs()


@pytest.mark.parametrize("guard", ["debugger", "both"])
def test_model_trainer_kwargs_guard_with_debugger_raises_naming_guard(fake_core: types.ModuleType, guard: str) -> None:
    with pytest.raises(ConfigError, match="to_training_job_kwargs") as info:
        _plan(guard=guard, rules=[{"name": "LossNotDecreasing"}]).to_model_trainer_kwargs()
    assert (info.value.field, info.value.value) == ("guard", guard)


def test_model_trainer_kwargs_tensorboard_path_raises_naming_the_trainer_method(fake_core: types.ModuleType) -> None:
    with pytest.raises(ConfigError, match="with_tensorboard_output_config") as info:
        _evaluator_plan(tensorboard_output_path="s3://bucket/tb").to_model_trainer_kwargs()
    assert info.value.field == "tensorboard_output_path"


def test_model_trainer_kwargs_tags_are_shapes_tags_of_the_plan_joined_with_yours(fake_core: types.ModuleType) -> None:
    plan = _evaluator_plan()
    kwargs = plan.to_model_trainer_kwargs(tags={"team": "a"}, training_image="img", role="arn:role")
    assert all(type(t) is fake_core.Tag for t in kwargs["tags"])
    expected = [(t["Key"], t["Value"]) for t in plan.tags_list()] + [("team", "a")]
    assert _pairs(kwargs["tags"]) == expected
    assert (kwargs["training_image"], kwargs["role"]) == ("img", "arn:role")
    assert "environment" not in kwargs  # nothing to join: omitted, ModelTrainer's default stays
    # the same tags as dicts (either spelling) or as v3's Tag objects
    for tags in ([{"Key": "team", "Value": "a"}], [{"key": "team", "value": "a"}], [fake_core.Tag(key="team", value="a")]):
        assert _pairs(plan.to_model_trainer_kwargs(tags=tags)["tags"]) == expected


def test_model_trainer_kwargs_tag_with_two_values_raises_naming_it(fake_core: types.ModuleType) -> None:
    with pytest.raises(ConfigError, match="smx-debug:plan") as info:
        _evaluator_plan().to_model_trainer_kwargs(tags={"smx-debug:plan": "other"})
    assert info.value.field == "tags.smx-debug:plan"


def test_model_trainer_kwargs_empty_tag_value_raises_naming_it(fake_core: types.ModuleType) -> None:
    with pytest.raises(ConfigError, match="empty value") as info:
        _evaluator_plan().to_model_trainer_kwargs(tags={"team": ""})
    assert info.value.field == "tags.team"


def test_model_trainer_kwargs_your_environment_is_kept(fake_core: types.ModuleType) -> None:
    kwargs = _evaluator_plan().to_model_trainer_kwargs(environment={"EPOCHS": "3"})
    assert kwargs["environment"] == {"EPOCHS": "3"}
    with pytest.raises(ConfigError, match="environment") as info:
        _evaluator_plan().to_model_trainer_kwargs(environment=[("EPOCHS", "3")])
    assert info.value.field == "environment"


def test_model_trainer_kwargs_tensor_rules_give_the_hook_its_settings_joined_with_yours(
        fake_core: types.ModuleType) -> None:
    plan = _plan(guard="evaluator", rules=[{"name": "exploding_tensor"}])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmxDebugWarning)  # the hook has its settings: nothing to warn about
        env = plan.to_model_trainer_kwargs(environment={"MY_VAR": "1"})["environment"]
    assert env["MY_VAR"] == "1"
    assert env[HOOK_OUTPUT_ENV] == "s3://bucket/debug"
    settings = json.loads(env[HOOK_CONFIG_ENV])
    assert settings == {k: v for k, v in debug_hook_config(plan).items()
                        if k in ("HookParameters", "CollectionConfigurations")}


def test_training_job_kwargs_are_the_request_fields_as_shapes(fake_core: types.ModuleType) -> None:
    plan = DebugPlan.from_file(ROOT / "examples" / "plans" / "exploding_gradient_guard.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        kwargs = plan.to_training_job_kwargs(training_job_name="job-1", tags={"team": "a"})
        request = plan.to_request_dict(job_name="job-1")
    hook = request["DebugHookConfig"]
    assert kwargs["debug_hook_config"] == fake_core.DebugHookConfig(
        s3_output_path=hook["S3OutputPath"], hook_parameters=hook["HookParameters"],
        collection_configurations=[
            fake_core.CollectionConfiguration(collection_name=c["CollectionName"],
                                              collection_parameters=c["CollectionParameters"])
            for c in hook["CollectionConfigurations"]])
    assert [vars(r) for r in kwargs["debug_rule_configurations"]] == [
        {"rule_configuration_name": r["RuleConfigurationName"], "rule_evaluator_image": r["RuleEvaluatorImage"],
         "rule_parameters": r["RuleParameters"]} for r in request["DebugRuleConfigurations"]]
    assert all(type(t) is _ResourceTag for t in kwargs["tags"])
    assert _pairs(kwargs["tags"]) == [(t["Key"], t["Value"]) for t in request["Tags"]] + [("team", "a")]
    assert kwargs["training_job_name"] == "job-1"


def test_training_job_kwargs_job_name_is_the_stop_training_target(fake_core: types.ModuleType) -> None:
    plan = _plan(rules=[{"name": "exploding_tensor", "actions": [{"stop_training": {}}]}])
    rule = plan.to_training_job_kwargs(training_job_name="job-1")["debug_rule_configurations"][0]
    assert rule.rule_parameters["action_json"] == plan.to_request_dict(job_name="job-1")[
        "DebugRuleConfigurations"][0]["RuleParameters"]["action_json"]
    assert r'\"training_job_prefix\": \"job-1\"' in rule.rule_parameters["action_json"]


def test_training_job_kwargs_a_different_debug_field_of_yours_raises(fake_core: types.ModuleType) -> None:
    plan = _plan(rules=[{"name": "exploding_tensor"}])
    same = plan.to_training_job_kwargs()["debug_hook_config"]
    assert plan.to_training_job_kwargs(debug_hook_config=same)["debug_hook_config"] == same
    with pytest.raises(ConfigError, match="debug_hook_config") as info:
        plan.to_training_job_kwargs(debug_hook_config=fake_core.DebugHookConfig(s3_output_path="s3://other/x"))
    assert info.value.field == "debug_hook_config"


def test_model_trainer_kwargs_more_variables_than_sagemaker_allows_raises_naming_environment(
        fake_core: types.ModuleType) -> None:
    plan = _plan(guard="evaluator", rules=[{"name": "exploding_tensor"}])
    hooks = len(plan.to_model_trainer_kwargs()["environment"])
    yours = {f"MY_VAR_{i}": "1" for i in range(ENVIRONMENT_ENTRIES_MAX - hooks)}
    assert len(plan.to_model_trainer_kwargs(environment=yours)["environment"]) == ENVIRONMENT_ENTRIES_MAX
    with pytest.raises(ConfigError) as info:
        plan.to_model_trainer_kwargs(environment={**yours, "ONE_MORE": "1"})
    assert info.value.field == "environment" and str(ENVIRONMENT_ENTRIES_MAX) in str(info.value)


def test_model_trainer_kwargs_your_variable_named_as_a_hook_settings_part_raises(fake_core: types.ModuleType) -> None:
    plan = _plan(guard="evaluator", rules=[{"name": "exploding_tensor"}])
    assert f"{HOOK_CONFIG_ENV}_1" not in plan.to_model_trainer_kwargs()["environment"]  # one part: it fits
    with pytest.raises(ConfigError) as info:  # joined to the plan's, it would change the hook's settings
        plan.to_model_trainer_kwargs(environment={f"{HOOK_CONFIG_ENV}_1": "x"})
    assert info.value.field == f"environment.{HOOK_CONFIG_ENV}_1"
