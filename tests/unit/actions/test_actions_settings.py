from __future__ import annotations

import pytest

from smx_debug.actions import Settings
from smx_debug.errors import ConfigError
from smx_debug.tags import ActionSpec, watched_actions

TOPIC = "arn:aws:sns:us-west-2:123456789012:ml-alerts"


def test_settings_from_env_reads_every_variable() -> None:
    env = {
        "SMX_METRIC_NAMESPACE": "Team",
        "SMX_WATCH_PREFIXES": " a-, b- ,",
        "SMX_OPT_IN_TAG": "team:guard",
        "SMX_DEFAULT_ACTIONS": f"notify notify={TOPIC}",
        "SMX_LEDGER_TABLE": "ledger",
        "SMX_TOPIC_ARN": TOPIC,
        "AWS_REGION": "eu-west-1",
        "SMX_MAX_ATTEMPTS": "4",
        "SMX_FUNCTION_TIMEOUT": "120",
        "SMX_LEASE_SECONDS": "300",
        "SMX_ACCOUNT": "123456789012",
        "SMX_STATE_MACHINE_ARN": "arn:aws:states:eu-west-1:123456789012:stateMachine:r",
        "SMX_SHOW_KEYS": "learning_rate, epochs,",
        "AWS_LAMBDA_FUNCTION_NAME": "fn",
    }
    assert Settings.from_env(env) == Settings(
        namespace="Team",
        watch_prefixes=("a-", "b-"),
        opt_in_tag="team:guard",
        default_actions=(ActionSpec("notify"), ActionSpec("notify", TOPIC)),
        ledger_table="ledger",
        topic_arn=TOPIC,
        region="eu-west-1",
        account="123456789012",
        state_machine_arn="arn:aws:states:eu-west-1:123456789012:stateMachine:r",
        max_attempts=4,
        function_timeout=120,
        lease_seconds=300,
        show_keys=frozenset({"learning_rate", "epochs"}),
        actor="fn",
    )


def test_settings_from_empty_env_uses_the_documented_defaults() -> None:
    assert Settings.from_env({}) == Settings(
        namespace="SmxDebug",
        watch_prefixes=(),
        opt_in_tag="smx-debug:managed",
        default_actions=(),
        ledger_table=None,
        topic_arn=None,
        region=None,
        account=None,
        state_machine_arn=None,
        max_attempts=3,
        connect_timeout=2.0,
        read_timeout=5.0,
        function_timeout=60,
        lease_seconds=90,
        show_keys=frozenset(),
        actor="smx-debug",
    )


def test_settings_account_comes_from_the_function_arn_when_not_set() -> None:
    class Context:
        invoked_function_arn = "arn:aws:lambda:eu-west-1:210987654321:function:smx-stop"

    assert Settings.from_env({}, Context()).account == "210987654321"
    assert Settings.from_env({"SMX_ACCOUNT": "123456789012"}, Context()).account == "123456789012"


def test_default_call_budget_fits_well_inside_the_function_timeout() -> None:
    defaults = Settings()
    # 3 attempts x (2 s + 5 s) + backoffs of at most 1 s and 2 s
    assert defaults.call_budget == 24.0
    assert defaults.call_budget <= defaults.function_timeout / 2 < defaults.lease_seconds


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({"SMX_DEFAULT_ACTIONS": "stop explode"}, "SMX_DEFAULT_ACTIONS", "explode"),
        ({"SMX_MAX_ATTEMPTS": "lots"}, "SMX_MAX_ATTEMPTS", "lots"),
        ({"SMX_MAX_ATTEMPTS": "0"}, "SMX_MAX_ATTEMPTS", "0"),
        ({"SMX_MAX_ATTEMPTS": "5"}, "SMX_MAX_ATTEMPTS", 5),  # 50 s per call: outlasts half of 60 s
        ({"SMX_LEASE_SECONDS": "60"}, "SMX_LEASE_SECONDS", 60.0),  # not longer than the 60 s timeout
        ({"SMX_LEASE_SECONDS": "nan"}, "SMX_LEASE_SECONDS", "nan"),
        ({"SMX_FUNCTION_TIMEOUT": "901"}, "SMX_FUNCTION_TIMEOUT", "901"),
    ],
)
def test_settings_bad_variable_raises_config_error_naming_it(env: dict, field: str, value: str) -> None:
    with pytest.raises(ConfigError, match=field) as info:
        Settings.from_env(env)
    assert (info.value.field, info.value.value) == (field, value)


@pytest.mark.parametrize(
    ("job", "tags", "watched"),
    [
        ("a-1", {}, True),
        ("x-1", {}, False),
        ("x-1", {"smx-debug:managed": "TRUE"}, True),
        ("x-1", {"smx-debug:managed": "false"}, False),
    ],
)
def test_settings_watches_by_prefix_or_opt_in_tag(job: str, tags: dict, watched: bool) -> None:
    settings = Settings(watch_prefixes=("a-",))
    assert (watched_actions(job, tags, prefixes=settings.watch_prefixes, opt_in_tag=settings.opt_in_tag)
            is not None) is watched


def test_settings_actions_for_merges_tag_actions_and_defaults_without_repeats() -> None:
    settings = Settings(default_actions=(ActionSpec("notify"), ActionSpec("stop")))
    applying = watched_actions("a-job", {"smx-debug:on:R": "stop retrain"}, prefixes=("a-",), opt_in_tag=None,
                               defaults=settings.default_actions, rules=("R", "Other"))
    assert applying is not None
    assert applying["R"] == (
        ActionSpec("stop"),
        ActionSpec("retrain"),
        ActionSpec("notify"),
    )
    assert applying["Other"] == (ActionSpec("notify"), ActionSpec("stop"))
