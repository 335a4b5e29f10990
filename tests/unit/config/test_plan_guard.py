"""A plan's guard: Debugger's rule jobs, the stack's scheduled evaluator, or both (docs/evaluator.md)."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from smx_debug.config import DebugPlan
from smx_debug.contracts import EVALUATOR_SPEC_PREFIX, EVALUATOR_TAG
from smx_debug.errors import ConfigError
from smx_debug.watch import WatchSpec

BASE: dict[str, Any] = {"region": "us-west-2", "s3_output_path": "s3://my-bucket/debug"}
TWO_CPU = [
    {"name": "CPUBottleneck", "configuration_name": "CPU-strict", "parameters": {"threshold": 20},
     "actions": ["stop_job"]},
    {"name": "CPUBottleneck", "configuration_name": "CPU-lax", "parameters": {"threshold": 90}},
    {"name": "loss_not_decreasing"},
]


def _plan(**fields: Any) -> DebugPlan:
    return DebugPlan(**{**BASE, **fields})


@pytest.mark.filterwarnings("ignore::smx_debug.config.SmxDebugWarning")
def test_guard_default_is_debugger_with_no_evaluator_tag() -> None:
    plan = _plan(rules=TWO_CPU)
    assert plan.guard == "debugger"
    assert plan.watch_spec() == WatchSpec()
    assert EVALUATOR_TAG not in {t["Key"] for t in plan.tags_list()}
    request = plan.to_request_dict(job_name="j")
    assert [r["RuleConfigurationName"] for r in request["ProfilerRuleConfigurations"]] == ["CPU-strict", "CPU-lax"]


def test_guard_evaluator_renders_no_debugger_rules_hook_or_profiler() -> None:
    plan = _plan(rules=TWO_CPU, guard="evaluator")
    request = plan.to_request_dict(job_name="j")
    assert set(request) == {"ProfilerConfig", "Tags"}
    assert request["ProfilerConfig"] == {"DisableProfiler": True}
    tags = {t["Key"]: t["Value"] for t in request["Tags"]}
    spec = plan.watch_spec()
    assert tags[EVALUATOR_TAG] == spec.key and spec.key.startswith(EVALUATOR_SPEC_PREFIX)
    assert tags["smx-debug:on:CPU-strict"] == "stop"
    assert [(r.name, r.rule, dict(r.parameters)) for r in spec.rules] == [
        ("CPU-strict", "CPUBottleneck", {"threshold": 20}), ("CPU-lax", "CPUBottleneck", {"threshold": 90}),
        ("LossNotDecreasing", "LossNotDecreasing", {}),
    ]
    _assert_valid_create_training_job(request)


def _assert_valid_create_training_job(request: dict[str, Any]) -> None:
    """The plan's fields in a whole CreateTrainingJob request, checked against botocore's service model."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    full = {
        "TrainingJobName": "j", "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/r", "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, **request,
    }
    report = ParamValidator().validate(full, model.operation_model("CreateTrainingJob").input_shape)
    assert not report.has_errors(), report.generate_report()


def test_guard_evaluator_with_tensor_rules_renders_the_hook_and_no_debugger_rules() -> None:
    plan = _plan(guard="evaluator", hook={"save_interval": 5},
                 rules=[{"name": "ExplodingTensor", "actions": ["stop_job"]}, {"name": "VanishingGradient"},
                        {"name": "LossNotDecreasing"}])
    request = plan.to_request_dict(job_name="j")
    assert set(request) == {"DebugHookConfig", "ProfilerConfig", "Tags"}
    assert request["ProfilerConfig"] == {"DisableProfiler": True}
    hook = request["DebugHookConfig"]
    assert hook["HookParameters"] == {"save_interval": "5"}
    assert [c["CollectionName"] for c in hook["CollectionConfigurations"]] == ["gradients"]  # not LossNotDecreasing's
    assert [(r.name, r.rule) for r in plan.watch_spec().rules] == [
        ("ExplodingTensor", "ExplodingTensor"), ("VanishingGradient", "VanishingGradient"),
        ("LossNotDecreasing", "LossNotDecreasing")]
    _assert_valid_create_training_job(request)


def test_guard_evaluator_with_tensor_rules_estimator_kwargs_keep_the_hook() -> None:
    kwargs = _plan(guard="evaluator", rules=[{"name": "ExplodingTensor"}]).to_estimator_kwargs()
    assert kwargs["debugger_hook_config"] is not False and kwargs["rules"] == []
    assert kwargs["disable_profiler"] is True


@pytest.mark.parametrize(("rule", "fragment"), [
    ("TreeDepth", "XGBoost hook"), ("SimilarAcrossRuns", "compares this trial with another job's"),
])
def test_guard_evaluator_rule_it_cannot_evaluate_names_the_field_and_why(rule: str, fragment: str) -> None:
    params = {"other_trials": "job-0"} if rule == "SimilarAcrossRuns" else {}
    with pytest.raises(ConfigError) as info:
        _plan(guard="evaluator", rules=[{"name": rule, "parameters": params}])
    assert info.value.field == "rules[0].name"
    assert fragment in str(info.value)


def test_guard_evaluator_estimator_kwargs_turn_debugger_off() -> None:
    kwargs = _plan(rules=TWO_CPU, guard="evaluator").to_estimator_kwargs()
    assert kwargs["debugger_hook_config"] is False
    assert kwargs["rules"] == [] and kwargs["disable_profiler"] is True
    assert EVALUATOR_TAG in {t["Key"] for t in kwargs["tags"]}


@pytest.mark.filterwarnings("ignore::smx_debug.config.SmxDebugWarning")
def test_guard_both_keeps_debugger_rules_and_the_evaluator_takes_those_it_can() -> None:
    plan = _plan(rules=[*TWO_CPU, {"name": "exploding_tensor"}], guard="both")
    request = plan.to_request_dict(job_name="j")
    assert [r["RuleConfigurationName"] for r in request["DebugRuleConfigurations"]] == [
        "LossNotDecreasing", "ExplodingTensor"]
    assert "DebugHookConfig" in request and request["ProfilerConfig"]["DisableProfiler"] is False
    assert [r.name for r in plan.watch_spec().rules] == ["CPU-strict", "CPU-lax", "LossNotDecreasing",
                                                         "ExplodingTensor"]


@pytest.mark.parametrize(("rules", "field", "fragment"), [
    ([{"name": "StepOutlier"}], "rules[0].name", "rule StepOutlier needs Debugger"),
    ([{"name": "loss_not_decreasing", "actions": [{"stop_training": "job-"}]}], "rules[0].actions[0]",
     "stop_training runs in Debugger's rule container"),
])
def test_guard_evaluator_bad_rules_name_the_field(rules: list[Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        _plan(rules=rules, guard="evaluator")
    assert info.value.field == field
    assert fragment in str(info.value)


def test_guard_unknown_value_names_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        _plan(guard="sometimes")
    assert info.value.field == "guard"


def test_watch_spec_store_puts_it_at_its_key() -> None:
    class FakeS3:
        def __init__(self) -> None:
            self.puts: list[dict[str, Any]] = []

        def put_object(self, **kwargs: Any) -> None:
            self.puts.append(kwargs)

    spec = _plan(rules=TWO_CPU, guard="evaluator").watch_spec()
    s3 = FakeS3()
    assert spec.store("guard-bucket", s3_client=s3) == spec.key
    assert s3.puts[0]["Bucket"] == "guard-bucket" and s3.puts[0]["Key"] == spec.key
    assert WatchSpec.from_json(s3.puts[0]["Body"]) == spec
    assert json.loads(s3.puts[0]["Body"])["version"] == 1
