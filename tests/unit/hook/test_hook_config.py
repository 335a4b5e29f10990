"""The hook's configuration: smdebug's SaveConfig/ReductionConfig semantics and DebugHookConfig parsing.

Reference: smdebug 1.0.34 ``smdebug/core/save_config.py``, ``reduction_config.py`` and ``json_config.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smx_debug.config import DebugPlan
from smx_debug.config.request import debug_hook_config
from smx_debug.errors import ConfigError, NotFoundError, UnknownNameError
from smx_debug.hook.json_config import (
    CONFIG_FILE_ENV,
    DEFAULT_LOCAL_PATH,
    parse_hook_config,
    read_hook_config,
    settings_from_plan,
)
from smx_debug.hook.reduction_config import ReductionConfig
from smx_debug.hook.save_config import SaveConfig, SaveConfigMode
from smx_debug.tensors.mode_keys import ModeKeys


@pytest.mark.parametrize(
    ("config", "saved"),
    [
        (SaveConfigMode(), [0, 500]),
        (SaveConfigMode(save_interval=3), [0, 3, 6, 9, 12]),
        (SaveConfigMode(save_interval=3, start_step=4), [6, 9, 12]),
        (SaveConfigMode(save_interval=2, start_step=2, end_step=6), [2, 4]),
        (SaveConfigMode(save_interval=100, save_steps=[1, 7]), [0, 1, 7]),
    ],
)
def test_save_config_mode_steps_match_smdebug(config: SaveConfigMode, saved: list[int]) -> None:
    steps = range(501) if config.save_interval == 500 else range(14)
    assert [s for s in steps if config.should_save_step(s)] == saved


def test_save_config_mode_left_none_takes_hook_default() -> None:
    own = SaveConfig(mode_save_configs={ModeKeys.TRAIN: SaveConfigMode(save_interval=7)})
    merged = own.merged(SaveConfig(save_interval=3))
    assert merged.get_save_config(ModeKeys.TRAIN).save_interval == 7
    assert merged.get_save_config(ModeKeys.EVAL).save_interval == 3


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: SaveConfigMode(save_interval=0), "save_interval"),
        (lambda: SaveConfigMode(start_step=-1), "start_step"),
        (lambda: SaveConfig(mode_save_configs={"TRAIN": SaveConfigMode()}), "mode_save_configs"),
        (lambda: SaveConfig.parse(5), "save_config"),
        (lambda: ReductionConfig(reductions=["median"]), "reductions[0]"),
        (lambda: ReductionConfig(norms=["l3"]), "norms[0]"),
    ],
)
def test_hook_config_objects_bad_value_raise_config_error_naming_field(build: object, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()  # type: ignore[operator]
    assert info.value.field == field


def test_reduction_config_string_form_parses_like_smdebug() -> None:
    config = ReductionConfig.from_string("min,max,abs_mean,l1_norm,abs_l2_norm,l2")
    assert config.reductions == ("min", "max")
    assert config.abs_reductions == ("mean",)
    assert config.norms == ("l1", "l2")
    assert config.abs_norms == ("l2",)
    assert config.file_model().to_json_dict()["reductions"] == "min,max,l1_norm,l2_norm,abs_mean,abs_l2_norm"


SMDEBUG_EXAMPLE = {  # smdebug/core/json_config.py's docstring example, as SageMaker writes it (strings)
    "S3OutputPath": "s3://bucket/prefix",
    "LocalPath": "/tmp/test_hook_from_json_config_full",
    "HookParameters": {
        "save_all": "false",
        "include_regex": "regexe1,regex2",
        "save_interval": "100",
        "save_steps": "1,2,3,4",
        "start_step": "1",
        "reductions": "min,max,mean,std,abs_variance,abs_sum,abs_l2_norm",
    },
    "CollectionConfigurations": [
        {"CollectionName": "collection_obj_name1",
         "CollectionParameters": {"include_regex": "regexe5*", "save_interval": "100", "save_steps": "1,2,3",
                                  "start_step": "1", "reductions": "min,abs_max,l1_norm,abs_l2_norm"}},
        {"CollectionName": "collection_obj_name2",
         "CollectionParameters": {"include_regex": "regexe6*", "train.save_interval": "100",
                                  "eval.save_interval": "1", "save_steps": "1,2,3", "start_step": "1"}},
    ],
}


def test_parse_hook_config_smdebug_example_per_mode_settings() -> None:
    settings = parse_hook_config(SMDEBUG_EXAMPLE)
    assert settings.out_dir == "/tmp/test_hook_from_json_config_full"
    assert settings.include_regex == ("regexe1", "regex2")
    assert settings.include_collections == ("collection_obj_name1", "collection_obj_name2")
    hook_train = settings.save_config.get_save_config(ModeKeys.TRAIN)
    assert (hook_train.save_interval, hook_train.start_step, hook_train.save_steps) == (100, 1, (1, 2, 3, 4))
    assert settings.reduction_config is not None
    assert settings.reduction_config.abs_reductions == ("variance", "sum")
    second = settings.collections[1]
    assert second.save_config.get_save_config(ModeKeys.TRAIN).save_interval == 100
    assert second.save_config.get_save_config(ModeKeys.EVAL).save_interval == 1
    assert second.save_config.get_save_config(ModeKeys.EVAL).save_steps == (1, 2, 3)
    assert second.reduction_config is None  # the hook's applies


def test_parse_hook_config_collection_inherits_hook_interval() -> None:
    settings = parse_hook_config({"HookParameters": {"save_interval": "7", "eval.save_interval": "3"},
                                  "CollectionConfigurations": [{"CollectionName": "gradients"}]})
    assert settings.out_dir == DEFAULT_LOCAL_PATH
    coll = settings.collections[0].save_config
    assert coll.get_save_config(ModeKeys.TRAIN).save_interval == 7
    assert coll.get_save_config(ModeKeys.EVAL).save_interval == 3


def test_settings_from_plan_rule_collections_and_interval() -> None:
    plan = DebugPlan(region="us-west-2", s3_output_path="s3://bucket/debug", hook={"save_interval": 20},
                     rules=[{"name": "dead_relu"}, {"name": "vanishing_gradient"}])
    settings = settings_from_plan(plan, "/tmp/run")
    by_name = {c.name: c for c in settings.collections}
    assert settings.out_dir == "/tmp/run"
    assert by_name["relu_output"].include_regex == (".*relu_output",)
    assert by_name["relu_output"].save_config.get_save_config(ModeKeys.TRAIN).save_interval == 20
    assert set(settings.include_collections or ()) == {"relu_output", "gradients"}
    assert debug_hook_config(plan) == plan.to_request_dict(job_name="j")["DebugHookConfig"]


@pytest.mark.parametrize(
    ("config", "error", "field"),
    [
        ({"HookParameters": {"save_intervall": "5"}}, ConfigError, "HookParameters.save_intervall"),
        ({"HookParameters": {"save_interval": "often"}}, ConfigError, "HookParameters.save_interval"),
        ({"HookParameters": {"save_interval": "0"}}, ConfigError, "HookParameters.save_interval"),
        ({"HookParameters": {"train.end_step": "x"}}, ConfigError, "HookParameters.train.end_step"),
        ({"HookParameters": {"save_all": "yes"}}, ConfigError, "HookParameters.save_all"),
        ({"HookParameters": {"include_workers": "some"}}, ConfigError, "HookParameters.include_workers"),
        ({"LocalPath": ""}, ConfigError, "LocalPath"),
        ({"Extra": 1}, ConfigError, "Extra"),
        ({"CollectionConfigurations": [{"CollectionName": "weights",
                                        "CollectionParameters": {"reductions": "median"}}]},
         ConfigError, "CollectionConfigurations[0].CollectionParameters.reductions"),
        ({"CollectionConfigurations": [{"CollectionName": "x", "CollectionParameters": {"include_regex": "("}}]},
         ConfigError, "CollectionConfigurations[0].CollectionParameters.include_regex"),
        ({"CollectionConfigurations": "weights"}, ConfigError, "CollectionConfigurations"),
    ],
)
def test_parse_hook_config_bad_parameter_raises_naming_field(config: dict[str, object], error: type[Exception],
                                                             field: str) -> None:
    with pytest.raises(error) as info:
        parse_hook_config(config)
    assert isinstance(info.value, ConfigError)
    assert info.value.field == field
    assert field in str(info.value)


def test_parse_hook_config_unknown_collection_raises_with_suggestion() -> None:
    with pytest.raises(UnknownNameError) as info:
        parse_hook_config({"CollectionConfigurations": [{"CollectionName": "gradeints"}]})
    assert info.value.name == "gradeints"
    assert info.value.suggestion == "gradients"
    assert "CollectionConfigurations[0].CollectionName" in str(info.value)


def test_read_hook_config_env_variable_overrides_default_path(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "out"), "HookParameters": {"save_interval": "4"}}))
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    settings = read_hook_config()
    assert settings.out_dir == str(tmp_path / "out")
    assert settings.save_config.get_save_config(ModeKeys.TRAIN).save_interval == 4


def test_read_hook_config_missing_or_broken_file_raises_naming_path(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"nope\.json"):
        read_hook_config(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ConfigError, match=r"broken\.json': line 1"):
        read_hook_config(broken)


def test_read_hook_config_nested_100000_deep_raises_config_error_naming_path(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match=r"deep\.json'.*nested too deep") as info:
        read_hook_config(deep)
    assert info.value.value == str(deep)
