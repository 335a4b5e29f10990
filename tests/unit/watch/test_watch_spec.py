"""The watch spec (which rules the evaluator applies to a job) and the evaluator's settings."""

from __future__ import annotations

import json

import pytest

from smx_debug.contracts import EVALUATOR_SPEC_PREFIX, MANAGED_TAG
from smx_debug.errors import ConfigError
from smx_debug.rules.watch_spec import EVALUATOR_RULES
from smx_debug.tags import watched_actions
from smx_debug.watch import EvaluatorSettings, WatchedRule, WatchSpec

TWO = WatchSpec(rules=(
    WatchedRule(name="CPU-strict", rule="CPUBottleneck", parameters={"threshold": 20}),
    WatchedRule(name="CPU-lax", rule="CPUBottleneck", parameters={"threshold": 90}),
))


def test_spec_json_round_trip_keeps_order_names_and_parameters() -> None:
    assert WatchSpec.from_json(TWO.to_json()) == TWO
    assert json.loads(TWO.to_json())["rules"][0] == {"name": "CPU-strict", "rule": "CPUBottleneck",
                                                      "parameters": {"threshold": 20}}


def test_spec_key_is_content_addressed_under_the_prefix_and_fits_a_tag() -> None:
    same = WatchSpec.from_json(TWO.to_json())
    assert TWO.key == same.key
    assert TWO.key.startswith(EVALUATOR_SPEC_PREFIX) and TWO.key.endswith(".json")
    assert len(TWO.key) <= 256
    assert WatchSpec(rules=TWO.rules[:1]).key != TWO.key


def test_spec_bare_list_takes_the_rule_name_as_configuration_name() -> None:
    spec = WatchSpec.from_json('[{"rule": "LossNotDecreasing", "parameters": {"num_steps": 4}}]')
    assert spec.rules == (WatchedRule(name="LossNotDecreasing", rule="LossNotDecreasing",
                                      parameters={"num_steps": 4}),)


@pytest.mark.parametrize(("text", "field"), [
    ("not json", "(spec)"),
    ('{"version": 2, "rules": []}', "(spec)"),
    ('[{"rule": "StepOutlier"}]', "rules[].rule"),
    ('[{"rule": "TreeDepth"}]', "rules[].rule"),
    ('[{"rule": "CPUBottleneck", "name": "has space"}]', "rules[].name"),
    ('[{"rule": "CPUBottleneck", "parameters": {"threshold": [1]}}]', "rules[CPUBottleneck].parameters.threshold"),
    ('[{"rule": "CPUBottleneck", "color": "red"}]', "rules[0]"),
    ('[{"rule": "CPUBottleneck"}, {"rule": "CPUBottleneck"}]', "rules"),
    ("[" * 100_000 + "]" * 100_000, "(spec)"),  # nested too deep: not JSON, not a RecursionError
])
def test_spec_bad_input_raises_config_error_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        WatchSpec.from_json(text, source="cdk.json evaluator.default_rules")
    assert info.value.field == field
    assert "cdk.json evaluator.default_rules" in str(info.value)


def test_spec_rule_the_evaluator_cannot_judge_names_the_ones_it_can() -> None:
    with pytest.raises(ConfigError, match="cannot be evaluated without Debugger; the evaluator evaluates CPUBottleneck"):
        WatchedRule(name="x", rule="StepOutlier")
    assert "LossNotDecreasing" in EVALUATOR_RULES and "VanishingGradient" in EVALUATOR_RULES


def test_spec_tensor_rule_reads_tensors_with_the_plans_parameters_only() -> None:
    rule = WatchedRule(name="Grad", rule="VanishingGradient", parameters={"threshold": 1e-5})
    assert rule.reads_tensors and rule.resolved() == {"threshold": 1e-5}
    minute = WatchedRule(name="Loss", rule="LossNotDecreasing")
    assert not minute.reads_tensors and minute.resolved() == {"num_steps": 2, "diff_percent": 0.1}


def test_spec_merged_with_defaults_skips_names_already_used() -> None:
    defaults = WatchSpec.from_json('[{"rule": "CPUBottleneck"}, {"rule": "LossNotDecreasing"}]')
    own = WatchSpec(rules=(WatchedRule(name="CPUBottleneck", rule="CPUBottleneck", parameters={"threshold": 30}),))
    merged = own.merged_with(defaults, skip=frozenset({"LossNotDecreasing"}))
    assert [(r.name, dict(r.parameters)) for r in merged.rules] == [("CPUBottleneck", {"threshold": 30})]


def test_rule_resolved_parameters_are_minute_defaults_updated_by_the_plan() -> None:
    rule = WatchedRule(name="c", rule="CPUBottleneck", parameters={"threshold": 20})
    assert rule.resolved() == {"threshold": 20, "gpu_threshold": 10, "cpu_threshold": 90, "patience": 2}


@pytest.mark.parametrize("num_steps", [1, 2, 3, 4, 7])
def test_loss_not_decreasing_window_puts_the_newest_minute_on_a_check(num_steps: int) -> None:
    window = WatchedRule(name="l", rule="LossNotDecreasing", parameters={"num_steps": num_steps}).window_minutes
    assert (window - 1) % num_steps == 0
    assert window >= 10


def test_settings_from_env_reads_the_contract_names() -> None:
    env = {
        "SMX_CURSOR_TABLE": "t", "SMX_SPEC_BUCKET": "b", "SMX_WATCH_PREFIXES": "a-, b-",
        "SMX_DEFAULT_RULES": '[{"rule": "CPUBottleneck"}]', "SMX_WINDOW_MINUTES": "15", "AWS_REGION": "us-west-2",
    }
    settings = EvaluatorSettings.from_env(env)
    assert settings.cursor_table == "t" and settings.spec_bucket == "b"
    assert settings.watch_prefixes == ("a-", "b-")
    assert settings.opt_in_tag == MANAGED_TAG
    assert [r.name for r in settings.default_rules.rules] == ["CPUBottleneck"]
    assert settings.window_minutes == 15
    def watches(job: str, tags: dict[str, str]) -> bool:
        return watched_actions(job, tags, prefixes=settings.watch_prefixes, opt_in_tag=settings.opt_in_tag) is not None

    assert watches("a-job", {}) and watches("x", {MANAGED_TAG: "TRUE"})
    assert not watches("x", {MANAGED_TAG: " true"})


@pytest.mark.parametrize(("env", "field"), [
    ({}, "SMX_CURSOR_TABLE"),
    ({"SMX_CURSOR_TABLE": "t", "SMX_WINDOW_MINUTES": "two"}, "SMX_WINDOW_MINUTES"),
    ({"SMX_CURSOR_TABLE": "t", "SMX_WINDOW_MINUTES": "1000"}, "SMX_WINDOW_MINUTES"),
    ({"SMX_CURSOR_TABLE": "t", "SMX_DEFAULT_RULES": "[{}]"}, "rules[0]"),
])
def test_settings_bad_environment_fails_with_the_variable_named(env: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        EvaluatorSettings.from_env(env)
    assert info.value.field == field


def test_watch_spec_import_needs_no_boto3_or_pandas() -> None:
    """A plan renders its watch spec without loading the evaluation or the AWS SDK."""
    import subprocess
    import sys

    code = ("import smx_debug.rules.watch_spec, smx_debug.watch; from smx_debug._lazy import imported; "
            "print(sorted(m for m in ('boto3', 'botocore', 'pandas', 'numpy') if imported(m)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cost_per_job_hour_is_getmetricdata_per_metric_plus_lambda_share() -> None:
    from smx_debug.pricing import cost_per_job_hour, evaluator_cost

    four = cost_per_job_hour(hosts=4, training_metrics=2)
    assert four.runs == 60 and four.metrics_requested == 60 * 22
    assert abs(four.get_metric_data_usd - 60 * 22 / 1000 * 0.01) < 1e-12
    same = evaluator_cost(runs=60, metrics_per_run=22, duration_s_per_run=0.1, memory_mb=1024, architecture="arm64")
    assert four.lambda_compute_usd == same.lambda_compute_usd
    assert round(four.total_usd, 4) == 0.0133 and round(cost_per_job_hour().total_usd, 4) == 0.0043
    assert cost_per_job_hour(rate_minutes=2).get_metric_data_usd == pytest.approx(cost_per_job_hour().get_metric_data_usd / 2)
    assert cost_per_job_hour(jobs_per_run=200).lambda_requests_usd == pytest.approx(
        cost_per_job_hour().lambda_requests_usd / 200)


@pytest.mark.parametrize("field", ["hosts", "rate_minutes", "jobs_per_run"])
def test_cost_per_job_hour_bad_counts_name_the_argument(field: str) -> None:
    from smx_debug.pricing import cost_per_job_hour

    with pytest.raises(ConfigError) as info:
        cost_per_job_hour(**{field: 0})
    assert info.value.field == field
