"""What a plan renders for the tensor rules: the collections their regexes need, reductions a hook can compute,
warnings for defaults that name another framework's tensors (tensor rules guarded by the evaluator alone:
test_plan_guard.py)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from smx_debug.config import DebugPlan
from smx_debug.errors import ConfigError

BASE: dict[str, Any] = {"region": "us-west-2", "s3_output_path": "s3://my-bucket/debug"}


def _plan(**fields: Any) -> DebugPlan:
    return DebugPlan(**{**BASE, **fields})


def _collections(plan: DebugPlan) -> dict[str, dict[str, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hook = plan.to_request_dict(job_name="j")["DebugHookConfig"]
    return {c["CollectionName"]: c.get("CollectionParameters", {}) for c in hook["CollectionConfigurations"]}


def test_plan_reduction_median_raises_config_error_naming_field_and_value() -> None:
    with pytest.raises(ConfigError) as info:
        _plan(hook={"collections": [{"name": "weights", "reductions": ["mean", "median"]}]})
    assert info.value.field == "hook.collections[0].reductions[1]"
    assert "median" in str(info.value)


def test_plan_reductions_a_hook_computes_are_accepted_and_rendered() -> None:
    plan = _plan(hook={"collections": [{"name": "weights", "reductions": ["mean", "abs_max", "l2", "abs_l1"]}]})
    assert _collections(plan)["weights"]["reductions"] == "mean,abs_max,l2,abs_l1"


def test_plan_saturated_activation_renders_a_collection_for_its_default_regex() -> None:
    colls = _collections(_plan(rules=[{"name": "SaturatedActivation"}]))
    assert colls == {"saturated_activation_tensor_regex": {"include_regex": ".*tanh_input|.*sigmoid_input",
                                                           "save_interval": "500"}}


def test_plan_regex_parameter_set_by_the_plan_renders_a_collection_for_it() -> None:
    colls = _collections(_plan(rules=[{"name": "TensorVariance", "parameters": {"tensor_regex": "fc1_output",
                                                                                 "max_threshold": 10.0}}]))
    assert colls == {"tensor_variance_tensor_regex": {"include_regex": "fc1_output", "save_interval": "500"}}


def test_plan_regex_parameter_of_a_catalog_collection_follows_the_plan() -> None:
    colls = _collections(_plan(rules=[{"name": "CheckInputImages", "parameters": {"regex": ".*conv1_input_0"}},
                                      {"name": "DeadRelu"}]))
    assert colls == {"input_image": {"include_regex": ".*conv1_input_0", "save_interval": "500"},
                     "relu_output": {"include_regex": ".*relu_output", "save_interval": "500"}}


def test_plan_without_regex_parameters_renders_only_the_catalog_collections() -> None:
    assert set(_collections(_plan(rules=[{"name": "VanishingGradient"}, {"name": "TensorVariance"}]))) == {
        "gradients"}


@pytest.mark.parametrize(("rule", "param", "regex"), [
    ("CheckInputImages", "regex", ".*hybridsequential0_input_0"),
    ("NLPSequenceRatio", "tensor_regex", ".*embedding0_input_0"),
])
def test_plan_mxnet_default_regex_for_a_pytorch_job_warns_naming_the_parameter(rule: str, param: str,
                                                                                regex: str) -> None:
    plan = _plan(framework="pytorch", rules=[{"name": rule}])
    found = [w for w in plan.validate(job_name="j") if rule in w]
    assert len(found) == 1
    assert f"rules[0] ({rule})" in found[0] and f"{param}" in found[0] and regex in found[0]
    assert "MXNet" in found[0]


def test_plan_mxnet_default_regex_set_by_the_plan_does_not_warn() -> None:
    plan = _plan(framework="pytorch", rules=[{"name": "CheckInputImages", "parameters": {"regex": ".*conv1_input_0"}}])
    assert not [w for w in plan.validate(job_name="j") if "MXNet" in w]
    assert not [w for w in _plan(framework="mxnet", rules=[{"name": "CheckInputImages"}]).validate(job_name="j")
                if "MXNet" in w]


def test_plan_reductions_are_exactly_what_the_hook_computes() -> None:
    from typing import get_args

    from smx_debug.config.models import Reduction
    from smx_debug.tensors import NORMS, REDUCTIONS

    plain = (*REDUCTIONS, *NORMS)
    assert get_args(Reduction) == (*plain, *(f"abs_{r}" for r in plain))


@pytest.mark.parametrize(("rule", "param"), [("Confusion", "min_diag"), ("LossNotDecreasing", "diff_percent"),
                                             ("Overfit", "ratio_threshold")])
@pytest.mark.parametrize("action", ["stop_training", "stop_job"])
def test_plan_stopping_on_a_rule_that_flags_healthy_runs_at_its_defaults_warns(rule: str, param: str,
                                                                               action: str) -> None:
    """bench/detection_bench.py: at their defaults, on single batches saved every 500 steps, these rules fired on
    most runs that were healthy by their own validation loss; stopping on them stops healthy jobs."""
    plan = _plan(framework="pytorch", rules=[{"name": rule, "actions": [action]}])
    found = [w for w in plan.validate(job_name="j") if "healthy" in w]
    assert len(found) == 1, plan.validate(job_name="j")
    assert f"rules[0] ({rule})" in found[0] and f"parameters.{param}" in found[0]
    assert "docs/rules.md" in found[0]


@pytest.mark.parametrize("rules", [
    [{"name": "Confusion", "actions": ["notify"]}],  # told, not stopped
    [{"name": "LossNotDecreasing", "actions": ["stop_job"], "parameters": {"diff_percent": 5.0}}],  # the user's bar
    [{"name": "Overfit", "actions": ["stop_job"], "parameters": {"ratio_threshold": 0.5}}],
    [{"name": "ExplodingTensor", "actions": ["stop_job"]}],  # quiet on healthy runs at its defaults
])
def test_plan_stopping_warning_only_for_defaults_that_flag_healthy_runs(rules: list[dict[str, Any]]) -> None:
    assert not [w for w in _plan(framework="pytorch", rules=rules).validate(job_name="j") if "healthy" in w]
