"""Configuration from CDK context: defaults synthesize, bad values fail at synth time naming key and value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers_infra import Synth, functions_by_handler

from infra.config import GuardConfig, config_from_context, retraining_state_machine_name
from smx_debug.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parents[2]


def test_config_cli_strings_parse_like_json_values() -> None:
    from_cli = config_from_context(
        {
            "watch_prefixes": "exp-, prod-",
            "opt_in_tag": "false",
            "alarm_rules": '["VanishingGradient"]',
            "log_retention_days": "90",
            "output_expiration_days": "null",
            "retraining": '{"enabled": true, "wait_seconds": "60"}',
        }
    )
    from_json = config_from_context(
        {
            "watch_prefixes": ["exp-", "prod-"],
            "opt_in_tag": False,
            "alarm_rules": ["VanishingGradient"],
            "log_retention_days": 90,
            "output_expiration_days": None,
            "retraining": {"enabled": True, "wait_seconds": 60},
        }
    )
    assert from_cli == from_json
    assert from_cli.opt_in_tag is None
    assert from_cli.retraining.wait_seconds == 60


def test_config_ignores_cdk_feature_flags() -> None:
    assert config_from_context({"@aws-cdk/core:newStyleStackSynthesis": True, "aws:cdk:x": 1}) == GuardConfig()


@pytest.mark.parametrize(
    ("context", "field", "value", "fragment"),
    [
        ({"watch_prefixes": "exp_1"}, "watch_prefixes", "exp_1", "training-job name prefix"),
        ({"watch_prefixes": ["a", "a"]}, "watch_prefixes", ["a", "a"], "twice"),
        # With retraining on, a retrained run's name must keep the prefix whole (docs/infra.md, "Retraining").
        ({"watch_prefixes": ["exp-", "p" * 49]}, "watch_prefixes", "p" * 49, "at most 48 characters"),
        ({"notification_emails": "not-an-email"}, "notification_emails", "not-an-email", "email"),
        ({"notification_sms": "5555550123"}, "notification_sms", "5555550123", "E.164"),
        ({"alarm_rules": "Bad Rule"}, "alarm_rules", "Bad Rule", "RuleConfigurationName"),
        ({"default_actions": "retrain"}, "default_actions", "retrain", "notify, stop"),
        ({"log_retention_days": 31}, "log_retention_days", 31, "retention"),
        ({"log_retention_days": "month"}, "log_retention_days", "month", "integer"),
        ({"output_transition_to_ia_days": 10}, "output_transition_to_ia_days", 10, "at least 30"),
        ({"output_expiration_days": 60, "output_transition_to_ia_days": 90}, "output_transition_to_ia_days", 90,
         "less than"),
        ({"sagemaker_execution_role_pattern": "SageMaker*"}, "sagemaker_execution_role_pattern", "SageMaker*",
         "role ARN"),
        ({"opt_in_tag": False}, "watch_prefixes", [], "no training job"),
        ({"alarm_stops_training": "yes"}, "alarm_stops_training", "yes", "boolean"),
        ({"alarm_stops_training": True, "alarm_rules": ["LossNotDecreasing"]}, "alarm_stops_training", True,
         "alarm_rules"),
        ({"metric_namespace": "AWS/SageMaker"}, "metric_namespace", "AWS/SageMaker", "custom"),
        ({"retraining": {"wait_seconds": 1}}, "retraining", {"wait_seconds": 1}, "greater than or equal"),
    ],
)
def test_config_bad_value_raises_config_error_naming_key_and_value(
    context: dict[str, Any], field: str, value: Any, fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_context(context)
    assert (caught.value.field, caught.value.value) == (field, value)
    assert field in str(caught.value)
    assert fragment in str(caught.value)


def test_config_typo_in_context_key_suggests_the_key() -> None:
    with pytest.raises(UnknownNameError) as caught:
        config_from_context({"watch_prefix": ["exp-"]})
    assert (caught.value.name, caught.value.suggestion) == ("watch_prefix", "watch_prefixes")


def test_synth_bad_context_fails_before_any_resource(synth: Synth) -> None:
    with pytest.raises(ConfigError, match="log_retention_days: 31"):
        synth(log_retention_days=31)


def test_app_script_bad_context_prints_error_and_exits_2(tmp_path: Path) -> None:
    # What `npx cdk synth -c notification_sms=12345` hands the app: context in CDK_CONTEXT_JSON.
    env = {**os.environ, "CDK_CONTEXT_JSON": '{"notification_sms": "12345"}', "CDK_OUTDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "infra" / "cdk_app.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "error: cdk context notification_sms: '12345' is not an E.164 phone number like +15555550123"
    )
    assert list(tmp_path.iterdir()) == []


def test_config_stack_name_too_long_for_the_state_machine_is_refused_naming_stack_name() -> None:
    name = "S" + "x" * 69  # 70 characters: its state machine would be named past Step Functions' 80
    with pytest.raises(ConfigError) as caught:
        config_from_context({"stack_name": name})
    assert (caught.value.field, caught.value.value) == ("stack_name", name)
    assert "stack_name" in str(caught.value) and "80" in str(caught.value) and "69" in str(caught.value)


def test_config_longest_watch_prefix_is_accepted_with_retraining_and_63_characters_without() -> None:
    assert config_from_context({"watch_prefixes": ["p" * 48]}).watch_prefixes == ("p" * 48,)
    assert config_from_context({"watch_prefixes": ["p" * 63], "retraining": False}).watch_prefixes == ("p" * 63,)


def test_config_long_stack_name_is_accepted_without_retraining() -> None:
    assert config_from_context({"stack_name": "S" + "x" * 69, "retraining": False}).stack_name == "S" + "x" * 69


def test_synth_longest_stack_name_with_retraining_synthesizes(synth: Synth) -> None:
    name = "S" + "x" * 68  # 69 characters, the longest the stack's state machine name allows
    template, stack = synth(stack_name=name)
    assert stack.state_machine_name == retraining_state_machine_name(name)
    template.has_resource_properties("AWS::StepFunctions::StateMachine", {"StateMachineName": f"{name}-retraining"})


@pytest.mark.parametrize(("value", "fragment"), [(["learning_rate"], "strategies change it"),
                                                 (["api key"], "environment variable name"),
                                                 (["TOKEN", "TOKEN"], "twice")])
def test_config_retraining_redact_keys_are_checked_naming_the_key(value: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_context({"retraining": {"redact_keys": value}})
    assert caught.value.field == "retraining.redact_keys" and fragment in str(caught.value)


def test_synth_redact_keys_reach_every_function_that_starts_retraining(synth: Synth) -> None:
    template, _ = synth(retraining={"redact_keys": "wandb_api_key,HF_TOKEN"})
    functions = template.find_resources("AWS::Lambda::Function")
    for handler in ("stop_training", "evaluator"):
        env = functions[functions_by_handler(template)[handler]]["Properties"]["Environment"]["Variables"]
        assert env["SMX_REDACT_KEYS"] == "wandb_api_key,HF_TOKEN", handler
