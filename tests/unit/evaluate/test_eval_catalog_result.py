"""Parameters (catalog defaults, overrides, validation), the result JSON shape and the registry."""

from __future__ import annotations

import json

import numpy as np
import pytest

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.evaluate import JobData, RuleResult, evaluate
from smx_debug.evaluate.registry import REGISTRY
from smx_debug.rules import get_rule
from smx_debug.rules.params import PROFILER_RULES, SCALAR_RULES, parse_assignment, resolve_params


@pytest.mark.parametrize("rule", PROFILER_RULES)
def test_resolve_params_defaults_are_the_catalogs(rule):
    assert resolve_params(rule) == {p.name: p.default for p in get_rule(rule).parameters}


def test_registry_covers_every_profiler_and_scalar_rule():
    assert set(REGISTRY) == set(PROFILER_RULES) | set(SCALAR_RULES)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CPUBottleneck.threshold=20", ("CPUBottleneck", "threshold", 20)),
        ("LowGPUUtilization.threshold_p95=62.5", ("LowGPUUtilization", "threshold_p95", 62.5)),
        ("StepOutlier.mode=TRAIN", ("StepOutlier", "mode", "TRAIN")),
        ("StalledTrainingRule.stop_training_on_fire=true", ("StalledTrainingRule", "stop_training_on_fire", True)),
    ],
)
def test_parse_assignment_valid_returns_typed_value(text, expected):
    assert parse_assignment(text) == expected


@pytest.mark.parametrize("text", ["CPUBottleneck=20", "threshold=3", ".x=1", "CPUBottleneck.threshold"])
def test_parse_assignment_malformed_raises_config_error_naming_value(text):
    with pytest.raises(ConfigError, match=r"Rule\.param=value") as info:
        parse_assignment(text)
    assert info.value.value == text


def test_resolve_params_unknown_rule_suggests_closest():
    with pytest.raises(UnknownNameError) as info:
        resolve_params("CPUBotleneck")
    assert info.value.suggestion == "CPUBottleneck"


def test_resolve_params_unknown_parameter_suggests_closest():
    with pytest.raises(UnknownNameError) as info:
        resolve_params("LowGPUUtilization", {"treshold_p95": 50})
    assert info.value.suggestion == "threshold_p95"


@pytest.mark.parametrize(
    ("rule", "param", "value"),
    [("CPUBottleneck", "threshold", 150), ("LowGPUUtilization", "window", 0), ("StepOutlier", "n_outliers", "many")],
)
def test_resolve_params_out_of_range_raises_naming_field_and_value(rule, param, value):
    with pytest.raises(ConfigError) as info:
        resolve_params(rule, {param: value})
    assert (info.value.field, info.value.value) == (f"{rule}.{param}", value)
    assert repr(value) in str(info.value)


def test_resolve_params_whole_float_for_int_parameter_becomes_int():
    assert resolve_params("LowGPUUtilization", {"window": 100.0})["window"] == 100


def test_rule_result_to_debugger_json_converts_numpy_and_keys():
    r = RuleResult(rule="X", rule_triggered=1, violations=2, datapoints=3, rule_parameters="a:1",
                   details={"b": {1.5: {"v": np.float64(2.5), "n": np.int64(4), "nan": float("nan"), "l": np.arange(2)}}})
    out = r.to_debugger_json()
    assert out == {"RuleTriggered": 1, "Violations": 2,
                   "Details": {"b": {"1.5": {"v": 2.5, "n": 4, "nan": None, "l": [0, 1]}}},
                   "Datapoints": 3, "RuleParameters": "a:1"}
    assert list(json.loads(r.dumps())) == ["RuleTriggered", "Violations", "Details", "Datapoints", "RuleParameters"]


def test_evaluate_empty_data_every_rule_reports_zero():
    results = evaluate(JobData())
    assert list(results) == [*PROFILER_RULES, *SCALAR_RULES]
    assert {(r.rule_triggered, r.violations, r.datapoints) for r in results.values()} == {(0, 0, 0)}


def test_evaluate_bad_override_fails_before_any_rule_runs():
    with pytest.raises(ConfigError):
        evaluate(JobData(), ["LowGPUUtilization"], {"CPUBottleneck": {"threshold": -1}})
