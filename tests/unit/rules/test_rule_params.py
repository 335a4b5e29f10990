"""rules.params: the one owner of parameter defaults, validation and encodings."""

from __future__ import annotations

import pytest

from smx_debug.config import RuleConfig
from smx_debug.errors import ConfigError, SmxDebugError, UnknownNameError
from smx_debug.rules.catalog import get_rule
from smx_debug.rules.params import (
    PROFILER_RULES,
    SCALAR_RULES,
    TENSOR_RULES,
    check_configuration_name,
    rule_defaults,
    split_profiler_report_key,
)
from smx_debug.rules.watch_spec import WatchedRule


@pytest.mark.parametrize("name", ["-lead", "trail-", "a_b", "a b", "", "x" * 257])
def test_configuration_name_bad_refused_by_plan_and_watch_spec_alike(name):
    assert check_configuration_name(name) is not None
    with pytest.raises(SmxDebugError):
        RuleConfig(name="LowGPUUtilization", configuration_name=name)
    with pytest.raises(ConfigError) as err:
        WatchedRule(name=name, rule="LowGPUUtilization")
    assert err.value.field == "rules[].name"


@pytest.mark.parametrize("name", ["LowGPU-strict", "a", "A1-b2-C3", "x" * 256])
def test_configuration_name_good_accepted_by_plan_and_watch_spec_alike(name):
    assert check_configuration_name(name) is None
    assert RuleConfig(name="LowGPUUtilization", configuration_name=name).rule_configuration_name == name
    assert WatchedRule(name=name, rule="LowGPUUtilization").name == name


@pytest.mark.parametrize("rule", [*PROFILER_RULES, *SCALAR_RULES, *TENSOR_RULES])
def test_rule_defaults_every_evaluated_rule_equals_the_catalogs(rule):
    assert rule_defaults(rule) == {p.name: p.default for p in get_rule(rule).parameters}


def test_split_profiler_report_key_case_insensitive_returns_rule_and_param():
    spec, param = split_profiler_report_key("lowgpuutilization_Threshold_p95")  # type: ignore[misc]
    assert (spec.name, param) == ("LowGPUUtilization", "threshold_p95")


def test_split_profiler_report_key_no_rule_returns_error_with_closest():
    err = split_profiler_report_key("LowGPUUtilisation_threshold_p95")
    assert isinstance(err, UnknownNameError)
    assert err.suggestion == "LowGPUUtilization_threshold_p95"


def test_plan_evaluated_rules_checks_each_parameter_once_where_the_plan_is_read(monkeypatch):
    from smx_debug.config import DebugPlan
    from smx_debug.rules.definitions import ParamSpec

    checked: list[str] = []
    original = ParamSpec.check
    monkeypatch.setattr(ParamSpec, "check", lambda self, value: checked.append(self.name) or original(self, value))
    plan = DebugPlan.model_validate({
        "region": "us-west-2", "s3_output_path": "s3://bucket/out",
        "rules": [{"name": "ProfilerReport", "parameters": {"CPUBottleneck_threshold": 40}},
                  {"name": "LowGPUUtilization", "configuration_name": "LowGPU-strict",
                   "parameters": {"threshold_p95": 90}}],
    })
    assert sorted(checked) == ["threshold", "threshold_p95"]
    checked.clear()
    configs, skipped = plan.evaluated_rules()
    assert checked == []  # the typed values travel on, unchecked again
    by_name = {c.name: c for c in configs}
    assert by_name["CPUBottleneck"].parameters["threshold"] == 40
    assert by_name["LowGPU-strict"].parameters["threshold_p95"] == 90
    assert skipped == []
