"""The hook of a job without a DebugHookConfig: settings the plan rendered into the job's Environment (issue 31 item 2)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import botocore.session
import pytest

import smx_debug.hook as smd
from smx_debug.config import DebugPlan
from smx_debug.config.plan import MAX_RULES_PER_KIND
from smx_debug.config.request import debug_hook_config
from smx_debug.config.sdk_v3 import hook_environment
from smx_debug.contracts import (
    ENVIRONMENT_ENTRIES_MAX,
    ENVIRONMENT_VALUE_MAX,
    HOOK_CONFIG_ENV,
    HOOK_OUTPUT_ENV,
    TRAINING_JOB_NAME_ENV,
    hook_config_environment,
)
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.hook.json_config import read_hook_config, settings_from_environment, settings_from_plan
from smx_debug.rules.watch_spec import TENSOR_WATCH_RULES

OUTPUT = "s3://guard-bucket/debugger"


def _plan(rules: list[str], **hook: object) -> DebugPlan:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return DebugPlan(region="us-west-2", s3_output_path=OUTPUT, guard="evaluator", hook=hook,
                         rules=[{"name": r} for r in rules])


@pytest.fixture
def plan() -> DebugPlan:
    return _plan(["ExplodingTensor", "DeadRelu"], save_interval=5,
                 collections=[{"name": "gradients"}, {"name": "losses"}])


def test_hook_environment_tensor_rules_render_output_and_settings(plan: DebugPlan) -> None:
    env = hook_environment(plan)
    assert env[HOOK_OUTPUT_ENV] == OUTPUT
    # what the job's DebugHookConfig would carry, but its place (the trial's is SMX_DEBUG_OUTPUT/<job>/debug-output)
    config = debug_hook_config(plan)
    assert json.loads(env[HOOK_CONFIG_ENV]) == {"HookParameters": config["HookParameters"],
                                                "CollectionConfigurations": config["CollectionConfigurations"]}
    assert [c["CollectionName"] for c in config["CollectionConfigurations"]] == ["gradients", "losses",
                                                                                 "relu_output"]
    assert env[HOOK_OUTPUT_ENV] == config["S3OutputPath"]


def test_hook_environment_no_tensor_rule_renders_nothing() -> None:
    assert hook_environment(_plan(["LossNotDecreasing"])) == {}


def test_read_hook_config_no_file_takes_the_settings_the_plan_rendered(plan: DebugPlan, tmp_path: Path) -> None:
    environ = {**hook_environment(plan), TRAINING_JOB_NAME_ENV: "smx-v3-job",
               "SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / "none.json")}
    settings = read_hook_config(environ=environ)
    # the same hook a DebugHookConfig would give, writing to where Debugger would have uploaded
    assert settings == settings_from_plan(plan, f"{OUTPUT}/smx-v3-job/debug-output/")


def test_read_hook_config_file_wins_over_environment(plan: DebugPlan, tmp_path: Path) -> None:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "t"), "CollectionConfigurations": []}))
    environ = {**hook_environment(plan), TRAINING_JOB_NAME_ENV: "j", "SMDEBUG_CONFIG_FILE_PATH": str(path)}
    assert read_hook_config(environ=environ).out_dir == str(tmp_path / "t")
    # an explicit path is that file only, never the environment
    with pytest.raises(NotFoundError, match=r"gone\.json"):
        read_hook_config(tmp_path / "gone.json", environ=environ)


def test_read_hook_config_neither_raises_naming_file_and_variable(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as info:
        read_hook_config(environ={"SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / "none.json")})
    assert "none.json" in str(info.value) and HOOK_OUTPUT_ENV in str(info.value)


def test_get_hook_create_if_not_exists_without_debug_hook_config_builds_the_plans_hook(
        plan: DebugPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smd.del_hook()
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "none.json"))
    monkeypatch.setenv(TRAINING_JOB_NAME_ENV, "smx-v3-job")
    for key, value in hook_environment(plan).items():
        monkeypatch.setenv(key, value)
    hook = smd.get_hook(create_if_not_exists=True)
    try:
        assert hook is not None
        assert hook.out_dir == f"{OUTPUT}/smx-v3-job/debug-output/"
        assert {"gradients", "losses", "relu_output"} <= set(hook.include_collections)
        assert smd.get_hook() is hook
    finally:
        if hook is not None:
            hook.close()
        smd.del_hook()


@pytest.mark.parametrize(("environ", "field"), [
    ({HOOK_OUTPUT_ENV: OUTPUT}, TRAINING_JOB_NAME_ENV),
    ({HOOK_OUTPUT_ENV: "/opt/ml/output/tensors", TRAINING_JOB_NAME_ENV: "j"}, HOOK_OUTPUT_ENV),
    ({HOOK_OUTPUT_ENV: OUTPUT, TRAINING_JOB_NAME_ENV: "j", HOOK_CONFIG_ENV: "{not json"}, HOOK_CONFIG_ENV),
    ({HOOK_OUTPUT_ENV: OUTPUT, TRAINING_JOB_NAME_ENV: "j", HOOK_CONFIG_ENV: '{"LocalPath":"/x"}'}, HOOK_CONFIG_ENV),
    ({HOOK_OUTPUT_ENV: OUTPUT, TRAINING_JOB_NAME_ENV: "j", HOOK_CONFIG_ENV: '{"HookParameters":{"save_intervall":"5"}}'},
     "HookParameters.save_intervall"),
])
def test_settings_from_environment_bad_value_raises_config_error_naming_variable(
        environ: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_environment(environ)
    assert info.value.field == field


def test_hook_environment_every_tensor_rule_splits_values_within_sagemakers_limit_and_reads_back(
        tmp_path: Path) -> None:
    # every tensor rule, as many as a plan may hold: the hook's JSON is longer than one Environment value
    plan = _plan(sorted(TENSOR_WATCH_RULES)[:MAX_RULES_PER_KIND])
    env = hook_environment(plan)
    assert all(len(value) <= ENVIRONMENT_VALUE_MAX for value in env.values()), {k: len(v) for k, v in env.items()}
    assert len("".join(v for k, v in env.items() if k != HOOK_OUTPUT_ENV)) > ENVIRONMENT_VALUE_MAX
    assert len(env) <= ENVIRONMENT_ENTRIES_MAX
    environ = {**env, TRAINING_JOB_NAME_ENV: "j", "SMDEBUG_CONFIG_FILE_PATH": str(tmp_path / "none.json")}
    # the same settings a DebugHookConfig would give
    assert read_hook_config(environ=environ) == settings_from_plan(plan, f"{OUTPUT}/j/debug-output/")


def test_settings_from_environment_missing_part_raises_config_error_naming_it() -> None:
    env = hook_environment(_plan(sorted(TENSOR_WATCH_RULES)[:MAX_RULES_PER_KIND]))
    parts = sorted(k for k in env if k not in (HOOK_OUTPUT_ENV, HOOK_CONFIG_ENV))
    assert parts, "the plan's hook settings fit one value: nothing to split"
    damaged = {k: v for k, v in env.items() if k != parts[0]}
    with pytest.raises(ConfigError) as info:
        settings_from_environment({**damaged, TRAINING_JOB_NAME_ENV: "j"})
    assert info.value.field == parts[0] and parts[0] in str(info.value)


def test_environment_value_max_is_botocores_training_environment_value_limit() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    environment = model.operation_model("CreateTrainingJob").input_shape.members["Environment"]
    assert environment.value.metadata["max"] == ENVIRONMENT_VALUE_MAX  # type: ignore[attr-defined]
    assert environment.metadata["max"] == ENVIRONMENT_ENTRIES_MAX
    assert environment.key.metadata["pattern"] == "[a-zA-Z_][a-zA-Z0-9_]*"  # type: ignore[attr-defined]
    for name in (HOOK_OUTPUT_ENV, *hook_config_environment("x" * 11 * ENVIRONMENT_VALUE_MAX)):
        assert re.fullmatch(environment.key.metadata["pattern"], name) and name.upper() == name  # type: ignore[attr-defined]
