"""The rule catalog against smdebug_rulesconfig and the SDK's image table (drift detection)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import smdebug_rulesconfig
from smdebug_rulesconfig.profiler_rules import rules as profiler_rules

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.rules import RULE_IMAGE_ACCOUNTS, get_rule, list_rules, rule_evaluator_image

RULECONFIGS = Path(smdebug_rulesconfig.__file__).parent / "debugger_rules" / "rule_config_jsons" / "ruleConfigs.json"
BUILTIN_FUNCTIONS = sorted(
    name
    for name, fn in inspect.getmembers(smdebug_rulesconfig, inspect.isfunction)
    if fn.__module__.endswith("builtin_rules")
)
PROFILER_CLASSES = sorted(
    name
    for name, cls in inspect.getmembers(profiler_rules, inspect.isclass)
    if issubclass(cls, profiler_rules.ProfilerRuleBase) and cls is not profiler_rules.ProfilerRuleBase
)


def test_catalog_debugger_rules_match_smdebug_rulesconfig_functions() -> None:
    assert len(BUILTIN_FUNCTIONS) == 21
    assert sorted(s.function for s in list_rules("debugger", family="debugger")) == BUILTIN_FUNCTIONS


def test_catalog_profiler_rules_match_smdebug_rulesconfig_classes() -> None:
    assert len(PROFILER_CLASSES) == 11
    assert sorted(s.name for s in list_rules("profiler", family="debugger")) == PROFILER_CLASSES


@pytest.mark.parametrize("function", BUILTIN_FUNCTIONS)
def test_catalog_debugger_rule_config_equals_rule_config_json(function: str) -> None:
    config = getattr(smdebug_rulesconfig, function)()
    spec = get_rule(function)
    rendered = [
        {
            "CollectionName": c.name,
            "CollectionParameters": {
                k: v
                for k, v in (
                    ("include_regex", c.include_regex),
                    ("save_interval", None if c.save_interval is None else str(c.save_interval)),
                    ("save_steps", c.save_steps),
                )
                if v is not None
            },
        }
        for c in spec.collections
    ]
    assert config["DebugRuleConfiguration"]["RuleParameters"] == {"rule_to_invoke": spec.name}
    assert config["DebugRuleConfiguration"]["RuleConfigurationName"] == spec.name
    assert config.get("CollectionConfigurations", []) == rendered
    assert json.loads(RULECONFIGS.read_text())[spec.name] == config


@pytest.mark.parametrize("name", [c for c in PROFILER_CLASSES if c != "ProfilerReport"])
def test_catalog_profiler_rule_parameters_equal_class_signature(name: str) -> None:
    signature = inspect.signature(getattr(profiler_rules, name).__init__)
    expected = {p.name: p.default for p in signature.parameters.values() if p.name != "self"}
    spec = get_rule(name)
    assert {p.name: p.default for p in spec.parameters} == expected


def test_catalog_every_rule_has_description_and_typed_parameters() -> None:
    for spec in list_rules():
        assert spec.description.endswith(".")
        for p in spec.parameters:
            assert p.default is None or p.check(p.default) is None, (spec.name, p.name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("exploding_tensor", "ExplodingTensor"), ("ExplodingTensor", "ExplodingTensor"), ("lowgpuutilization", "LowGPUUtilization")],
)
def test_get_rule_function_or_class_name_resolves(name: str, expected: str) -> None:
    assert get_rule(name).name == expected


def test_get_rule_unknown_name_suggests_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_rule("loss_not_decresing")
    assert info.value.suggestion == "loss_not_decreasing"
    assert "did you mean 'loss_not_decreasing'" in str(info.value)


def test_rule_param_unknown_name_suggests_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_rule("LowGPUUtilization").param("threshold_p96")
    assert info.value.suggestion == "threshold_p95"


def test_image_accounts_equal_sagemaker_sdk_table() -> None:
    import sagemaker

    table = Path(sagemaker.__file__).parent / "image_uri_config" / "debugger.json"
    assert json.loads(table.read_text())["versions"]["latest"]["registries"] == RULE_IMAGE_ACCOUNTS


@pytest.mark.parametrize("region", ["us-west-2", "cn-north-1", "us-gov-west-1"])
def test_rule_evaluator_image_region_equals_sdk_image_uri(region: str) -> None:
    from sagemaker import image_uris

    assert rule_evaluator_image(region) == image_uris.retrieve("debugger", region)


def test_rule_evaluator_image_unsupported_region_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="'ap-southeast-3'"):
        rule_evaluator_image("ap-southeast-3")


def _plan(rule: dict[str, object]) -> dict[str, object]:
    from smx_debug.config import DebugPlan

    p = DebugPlan.from_dict({"region": "us-west-2", "s3_output_path": "s3://bucket/debug", "rules": [rule]})
    out: dict[str, object] = p.to_request_dict(job_name="job-1")["DebugRuleConfigurations"][0]["RuleParameters"]
    return out


def test_similar_across_runs_renders_the_guides_other_trials() -> None:
    # Issue 13: the current guide names the parameter other_trials; a container reading it ignored other_trial.
    assert _plan({"name": "similar_across_runs", "parameters": {"other_trials": "job-0"}}) == {
        "other_trials": "job-0", "rule_to_invoke": "SimilarAcrossRuns"}
    assert get_rule("SimilarAcrossRuns").param("other_trials").required
    with pytest.raises(UnknownNameError) as info:
        get_rule("SimilarAcrossRuns").param("other_trial")
    assert info.value.suggestion == "other_trials"


def test_saturated_activation_renders_separate_min_max_thresholds() -> None:
    params = {"threshold_tanh_min": -5.0, "threshold_tanh_max": 5.0, "threshold_sigmoid_min": -20,
              "threshold_sigmoid_max": 15}
    assert _plan({"name": "saturated_activation", "parameters": params}) == {
        "threshold_tanh_min": "-5.0", "threshold_tanh_max": "5.0", "threshold_sigmoid_min": "-20",
        "threshold_sigmoid_max": "15", "rule_to_invoke": "SaturatedActivation"}
    defaults = {p.name: p.default for p in get_rule("SaturatedActivation").parameters}
    assert (defaults["threshold_tanh_min"], defaults["threshold_tanh_max"]) == (-9.4999, 9.4999)
    assert (defaults["threshold_sigmoid_min"], defaults["threshold_sigmoid_max"]) == (-23, 16.99999)


GUIDE = json.loads((Path(__file__).resolve().parents[2] / "data" / "rules" /
                    "debugger_builtin_rule_parameters.json").read_text())
# Where we knowingly differ from the guide's literal default (docs/rules.md says why).
GUIDE_EXCEPTIONS = {
    # "If this is not passed, the rule checks in order by default for EVAL, then TRAIN, and then GLOBAL" (same
    # row says "Default value: GLOBAL"): we keep "not passed" so the documented EVAL/TRAIN/GLOBAL order applies.
    ("LossNotDecreasing", "mode"),
}


def _guide_value(text: str | None) -> object:
    if text is None:
        return None
    text = text.strip().strip('"')
    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return float(text)
    except ValueError:
        return text


def _catalog_value(value: object) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    return float(value)  # type: ignore[arg-type]


def test_catalog_debugger_rules_are_the_guides_rules() -> None:
    assert sorted(GUIDE["rules"]) == sorted(s.name for s in list_rules("debugger", family="debugger"))


@pytest.mark.parametrize("name", sorted(GUIDE["rules"]))
def test_catalog_debugger_rule_parameters_equal_the_current_guide(name: str) -> None:
    guide: dict[str, str | None] = GUIDE["rules"][name]
    spec = get_rule(name)
    assert [p.name for p in spec.parameters] == list(guide)
    for p in spec.parameters:
        if (name, p.name) in GUIDE_EXCEPTIONS:
            continue
        expected = _guide_value(guide[p.name])
        if p.type in ("str", "regex") and isinstance(expected, float):
            expected = guide[p.name].strip('"')  # type: ignore[union-attr]  # "0" is text for a str parameter
        assert _catalog_value(p.default) == expected, (name, p.name)
