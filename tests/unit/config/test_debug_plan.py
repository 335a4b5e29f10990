"""The debug plan: validation errors, rendering, collections, actions, warnings, loading."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator
from smdebug_rulesconfig import SMS, ActionList, Email, StopTraining

from smx_debug.config import DebugPlan, SmxDebugWarning
from smx_debug.errors import ConfigError, NotFoundError, SmxDebugError, UnknownNameError

ROOT = Path(__file__).resolve().parents[3]
PLANS = sorted((ROOT / "examples" / "plans").glob("*.yaml"))
IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
BASE: dict[str, Any] = {"region": "us-west-2", "s3_output_path": "s3://bucket/debug"}


def plan(**fields: Any) -> DebugPlan:
    return DebugPlan.from_dict({**BASE, **fields})


def test_to_request_dict_issue_example_whole_dict() -> None:
    p = plan(
        name="guard",
        hook={"save_interval": 100, "collections": [
            {"name": "gradients", "save_interval": 50},
            {"name": "relu_output", "include_regex": ".*relu_output"},
        ]},
        rules=[
            {"name": "exploding_tensor", "parameters": {"collection_names": "gradients", "only_nan": False},
             "actions": [{"stop_training": {}}, {"email": "mlteam@example.com"}, {"notify": {}}]},
            {"name": "LowGPUUtilization", "parameters": {"threshold_p95": 70}},
        ],
        profiler={"system_monitor_interval_millis": 500, "framework": {"start_step": 5, "num_steps": 2}},
    )
    assert p.to_request_dict(job_name="job-1") == {
        "DebugHookConfig": {
            "S3OutputPath": "s3://bucket/debug",
            "HookParameters": {"save_interval": "100"},
            "CollectionConfigurations": [
                {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "50"}},
                {"CollectionName": "relu_output", "CollectionParameters": {"include_regex": ".*relu_output"}},
            ],
        },
        "DebugRuleConfigurations": [{
            "RuleConfigurationName": "ExplodingTensor",
            "RuleEvaluatorImage": IMAGE,
            "RuleParameters": {
                "rule_to_invoke": "ExplodingTensor",
                "collection_names": "gradients",
                "only_nan": "False",
                "action_json": '[{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": \\"job-1\\"}, '
                '{\\"endpoint\\": \\"mlteam@example.com\\", \\"name\\": \\"email\\"}]',
            },
        }],
        "ProfilerConfig": {
            "S3OutputPath": "s3://bucket/debug",
            "DisableProfiler": False,
            "ProfilingIntervalInMilliseconds": 500,
            "ProfilingParameters": {
                "LocalPath": "/opt/ml/output/profiler",
                "RotateMaxFileSizeInBytes": "10485760",
                "RotateFileCloseIntervalInSeconds": "60",
                "FileOpenFailThreshold": "50",
                "DetailedProfilingConfig": '{"StartStep": 5, "NumSteps": 2, }',
                "DataloaderProfilingConfig": '{"StartStep": 5, "NumSteps": 2, "MetricsRegex": ".*", }',
                "PythonProfilingConfig": '{"StartStep": 5, "NumSteps": 2, "ProfilerName": "cprofile", '
                '"cProfileTimer": "total_time", }',
                "HorovodProfilingConfig": '{"StartStep": 5, "NumSteps": 2, }',
                "SMDataParallelProfilingConfig": '{"StartStep": 5, "NumSteps": 2, }',
            },
        },
        "ProfilerRuleConfigurations": [{
            "RuleConfigurationName": "LowGPUUtilization",
            "RuleEvaluatorImage": IMAGE,
            "RuleParameters": {
                "threshold_p95": "70", "threshold_p5": "10", "window": "500", "patience": "1000",
                "scan_interval_us": "60000000", "rule_to_invoke": "LowGPUUtilization",
            },
        }],
        "Tags": [
            {"Key": "smx-debug:managed", "Value": "true"},
            {"Key": "smx-debug:plan", "Value": "guard"},
            {"Key": "smx-debug:on:ExplodingTensor", "Value": "notify"},
        ],
    }


RICH_PLANS: dict[str, dict[str, Any]] = {
    "sections-tensorboard-actions": {
        "tensorboard_output_path": "s3://bucket/tb",
        "hook": {"local_path": "/opt/ml/output/tensors", "parameters": {"include_workers": "one"},
                 "collections": [{"name": "weights", "save_steps": [0, 10], "reductions": ["mean", "max"],
                                  "save_histogram": False, "parameters": {"eval.save_interval": "5"}}]},
        "rules": [
            {"name": "loss_not_decreasing", "actions": [{"stop_training": {}}, {"sms": "+15551234567"}]},
            {"name": "ProfilerReport", "parameters": {"CPUBottleneck_threshold": 40, "StepOutlier_mode": "TRAIN"}},
        ],
        "profiler": {"framework": {"python": {"profiler": "pyinstrument", "start_unix_time": 1700000000},
                                   "horovod": {}}},
    },
    "profiler-disabled": {"profiler": {"disable": True}, "rules": [{"name": "weight_update_ratio"}]},
    "empty": {},
}
REQUEST_CASES = [pytest.param(lambda p=p: DebugPlan.from_file(p), id=p.stem) for p in PLANS] + [
    pytest.param(lambda f=f: plan(**f), id=name) for name, f in RICH_PLANS.items()
]


@pytest.mark.filterwarnings("ignore::smx_debug.config.SmxDebugWarning")
@pytest.mark.parametrize("make", REQUEST_CASES)
def test_to_request_dict_plan_passes_botocore_validation(make: Any) -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    request = {
        "TrainingJobName": "job-1",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/r",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        **make().to_request_dict(job_name="job-1"),
    }
    report = ParamValidator().validate(request, model.operation_model("CreateTrainingJob").input_shape)
    assert not report.has_errors(), report.generate_report()


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"hook": {"save_interval": 0}}, "hook.save_interval", "greater than 0"),
        ({"hook": {"collections": [{"name": "losses", "save_interval": -5}]}}, "hook.collections[0].save_interval", "-5"),
        ({"rules": [{"name": "exploding_tensr"}]}, "rules[0].name", "did you mean 'exploding_tensor'"),
        ({"rules": [{"name": "LowGPUUtilization", "parameters": {"threshold_p96": 70}}]},
         "rules[0].parameters.threshold_p96", "did you mean 'threshold_p95'"),
        ({"rules": [{"name": "LowGPUUtilization", "parameters": {"threshold_p95": "70"}}]},
         "rules[0].parameters.threshold_p95", "expected float, got str"),
        ({"rules": [{"name": "LowGPUUtilization", "parameters": {"threshold_p95": 170}}]},
         "rules[0].parameters.threshold_p95", "<= 100"),
        ({"rules": [{"name": "exploding_tensor", "parameters": {"only_nan": 1}}]},
         "rules[0].parameters.only_nan", "expected bool"),
        ({"rules": [{"name": "dead_relu", "parameters": {"tensor_regex": "(relu"}}]},
         "rules[0].parameters.tensor_regex", "invalid regular expression"),
        ({"hook": {"collections": [{"name": "x", "include_regex": "[a-"}]}}, "hook.collections[0].include_regex",
         "invalid regular expression"),
        ({"s3_output_path": "my-bucket/debug"}, "s3_output_path", "not an S3 URI"),
        ({"tensorboard_output_path": "s3://B/x"}, "tensorboard_output_path", "not an S3 URI"),
        ({"rules": [{"name": "loss_not_decreasing", "actions": [{"email": "ML-Team@example.com"}]}]},
         "rules[0].actions[0]", "lower-case letters and digits"),
        ({"rules": [{"name": "loss_not_decreasing", "actions": [{"sms": "555-1234"}]}]},
         "rules[0].actions[0]", "E.164"),
        ({"rules": [{"name": "loss_not_decreasing", "actions": [{"email": "a@b.com", "sms": "+15551234"}]}]},
         "rules[0].actions[0]", "exactly one of"),
        ({"rules": [{"name": "LowGPUUtilization", "actions": [{"stop_training": {}}]}]},
         "rules[0].actions[0]", "Debugger-rule action"),
        ({"profiler": {"framework": {"start_step": 1, "duration": 10}}}, "profiler.framework", "not both"),
        ({"profiler": {"framework": {"detailed": {"num_steps": 1, "start_unix_time": 1700000000}}}},
         "profiler.framework.detailed", "not both"),
        ({"profiler": {"system_monitor_interval_millis": 0}}, "profiler.system_monitor_interval_millis", "0"),
        ({"rules": [{"name": "all_zero", "configuration_name": f"z{i}"} for i in range(21)]}, "rules",
         "at most 20"),
        ({"region": "ap-southeast-3"}, "region", "not available in region 'ap-southeast-3'"),
        ({"rules": [{"name": "overfit"}, {"name": "overfit"}]}, "rules[1].configuration_name", "set configuration_name"),
        ({"rules": [{"name": "similar_across_runs"}]}, "rules[0].parameters.other_trials", "needs parameter"),
        ({"rules": [{"name": "ProfilerReport", "parameters": {"LowGPU_threshold_p95": 70}}]},
         "rules[0].parameters.LowGPU_threshold_p95", "names no profiler rule"),
        ({"tags": {"smx-debug:managed": "x"}}, "tags", "reserved"),
        ({"hook": {"save_intervall": 5}}, "hook.save_intervall", "unknown field"),
        ({"region": None}, "region", "region"),
    ],
)
def test_from_dict_bad_input_raises_error_naming_field(fields: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(SmxDebugError) as info:
        plan(**fields)
    assert isinstance(info.value, ConfigError | UnknownNameError)
    message = str(info.value)
    assert message.startswith(f"{field}:") or f"\n  {field}:" in message, message
    assert fragment in message


def test_from_dict_unknown_rule_raises_unknown_name_error_with_suggestion() -> None:
    with pytest.raises(UnknownNameError) as info:
        plan(rules=[{"name": "vanishing_gradients"}])
    assert info.value.suggestion == "vanishing_gradient"


def test_constructor_bad_input_raises_config_error_with_field() -> None:
    with pytest.raises(ConfigError) as info:
        DebugPlan(region="us-west-2", s3_output_path="s3://bucket/x", hook={"save_interval": -1})
    assert info.value.field == "hook.save_interval"
    assert info.value.value == -1


def test_collections_rule_requirements_merged_once_smaller_interval_wins() -> None:
    p = plan(
        hook={"save_interval": 1000, "collections": [{"name": "losses", "save_interval": 800}, {"name": "custom"}]},
        rules=[{"name": "loss_not_decreasing"}, {"name": "overtraining"}, {"name": "dead_relu"},
               {"name": "vanishing_gradient"}],
    )
    with pytest.warns(SmxDebugWarning) as record:
        hook = p.to_request_dict(job_name="j")["DebugHookConfig"]
    assert [str(w.message).split(":")[0] for w in record] == ["rules[0] (LossNotDecreasing)", "rules[1] (Overtraining)"]
    assert hook["CollectionConfigurations"] == [
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "500"}},
        {"CollectionName": "custom"},
        {"CollectionName": "relu_output", "CollectionParameters": {"include_regex": ".*relu_output", "save_interval": "500"}},
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},
    ]


def test_collections_hook_interval_smaller_than_rule_default_applies() -> None:
    p = plan(hook={"save_interval": 20}, rules=[{"name": "create_xgboost_report"}, {"name": "loss_not_decreasing"}])
    assert p.to_request_dict(job_name="j")["DebugHookConfig"]["CollectionConfigurations"] == [
        {"CollectionName": "metrics", "CollectionParameters": {"save_interval": "5"}},
        {"CollectionName": "feature_importance", "CollectionParameters": {"save_interval": "5"}},
        {"CollectionName": "hyperparameters", "CollectionParameters": {"save_steps": "0"}},
        {"CollectionName": "predictions", "CollectionParameters": {"save_interval": "5"}},
        {"CollectionName": "labels", "CollectionParameters": {"save_interval": "5"}},
        {"CollectionName": "losses", "CollectionParameters": {"save_interval": "20"}},
    ]


@pytest.mark.parametrize(
    ("actions", "sdk_actions"),
    [
        ([{"stop_training": {}}], [StopTraining()]),
        ([{"stop_training": {"training_job_prefix": "my-job"}}], [StopTraining("my-job")]),
        ([{"email": "team@example.com"}, {"sms": "+15551234567"}], [Email("team@example.com"), SMS("+15551234567")]),
    ],
)
def test_action_json_equals_smdebug_rulesconfig_serialize(actions: list[Any], sdk_actions: list[Any]) -> None:
    expected = ActionList(*sdk_actions)
    expected.update_training_job_prefix_if_not_specified("job-1")
    params = plan(rules=[{"name": "overfit", "parameters": {"ratio_threshold": 0.5}, "actions": actions}]
                  ).to_request_dict(job_name="job-1")
    assert params["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"] == expected.serialize()


def test_action_json_over_256_characters_raises_config_error() -> None:
    actions = [{"email": f"user{i}@example.com"} for i in range(6)]
    with pytest.raises(ConfigError, match="at most 256"):
        plan(rules=[{"name": "overfit", "actions": actions}]).to_request_dict(job_name="j")


def test_custom_actions_rendered_as_tags() -> None:
    arn = "arn:aws:sns:us-west-2:123456789012:alerts"
    p = plan(rules=[{"name": "overfit", "parameters": {"ratio_threshold": 0.5},
                     "actions": ["stop_job", {"notify": arn}, {"retrain": None}]},
                    {"name": "StepOutlier", "actions": [{"notify": {}}]}], tags={"team": "ml"})
    assert p.to_request_dict(job_name="j")["Tags"] == [
        {"Key": "team", "Value": "ml"},
        {"Key": "smx-debug:managed", "Value": "true"},
        {"Key": "smx-debug:on:Overfit", "Value": f"stop notify={arn} retrain"},
        {"Key": "smx-debug:on:StepOutlier", "Value": "notify"},
    ]


def test_to_request_dict_stop_training_without_job_name_warns() -> None:
    p = plan(job_name_prefix="resnet", rules=[{"name": "overfit", "parameters": {"ratio_threshold": 0.5},
                                               "actions": [{"stop_training": {}}]}])
    with pytest.warns(SmxDebugWarning, match="job name is not known"):
        out = p.to_request_dict()
    assert out["DebugRuleConfigurations"][0]["RuleParameters"]["action_json"] == '[{\\"name\\": \\"stoptraining\\"}]'


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"rules": [{"name": "loss_not_decreasing"}]}, "cannot fire before step 5000"),
        ({"expected_steps": 1000, "hook": {"save_interval": 200}, "rules": [{"name": "loss_not_decreasing"}]},
         "needs 2000 steps of data"),
        ({"framework": "pytorch", "framework_version": "2.1", "profiler": {"framework": {}}}, "deprecated"),
        ({"framework": "tensorflow", "framework_version": "2.11.0", "profiler": {"framework": {}}}, "deprecated"),
        ({"profiler": {"framework": {"detailed": {"num_steps": 10}}}}, "detailed profiling over 10 steps"),
        ({"framework": "pytorch", "rules": [{"name": "tree_depth"}]}, "works with xgboost only"),
        ({"rules": [{"name": "overtraining"}]}, "cannot fire before step 2500"),
        ({"rules": [{"name": "overfit", "parameters": {"ratio_threshold": 0.5}, "actions": [{"stop_training": {}}]}]},
         "lower-cases the action"),
    ],
)
def test_validate_questionable_plan_returns_warning(fields: dict[str, Any], fragment: str) -> None:
    found = plan(**fields).validate(job_name="Job-1")
    assert len(found) == 1 and fragment in found[0], found


@pytest.mark.parametrize(
    "fields",
    [
        {"hook": {"save_interval": 10}, "rules": [{"name": "loss_not_decreasing"}]},
        {"framework": "pytorch", "framework_version": "1.13", "profiler": {"framework": {"num_steps": 2}}},
        {"framework": "xgboost", "rules": [{"name": "tree_depth"}]},
    ],
)
def test_validate_sound_plan_returns_no_warning(fields: dict[str, Any]) -> None:
    assert plan(**fields).validate(job_name="job") == []


@pytest.mark.parametrize(("name", "text", "message"), [
    ("bad.yaml", "region: us-west-2\nrules:\n  - name: [unclosed\n", r"line 4, column 1: invalid YAML"),
    ("bad.json", '{"region": "us-west-2",\n "rules": [}\n', r"line 2, column 12: invalid JSON"),
])
def test_from_file_syntax_error_names_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        DebugPlan.from_file(path)


def test_from_file_json_equals_yaml(tmp_path: Path) -> None:
    source = ROOT / "examples" / "plans" / "image_classification.yaml"
    as_json = tmp_path / "plan.json"
    as_json.write_text(json.dumps(DebugPlan.from_file(source).model_dump(exclude_none=True)))
    assert DebugPlan.from_file(as_json) == DebugPlan.from_file(source)


def test_from_file_missing_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        DebugPlan.from_file(tmp_path / "nope.yaml")


def test_with_output_path_replaces_hook_and_profiler_paths() -> None:
    p = DebugPlan.from_file(ROOT / "examples" / "plans" / "profiling_only.yaml").with_output_path("s3://other/x")
    out = p.to_request_dict(job_name="j")
    assert (out["DebugHookConfig"]["S3OutputPath"], out["ProfilerConfig"]["S3OutputPath"]) == ("s3://other/x",) * 2


def test_profiler_disabled_renders_disable_only() -> None:
    out = plan(profiler={"disable": True}).to_request_dict(job_name="j")
    assert out["ProfilerConfig"] == {"DisableProfiler": True}
    assert "ProfilerRuleConfigurations" not in out


def test_config_import_and_request_without_sagemaker_installed() -> None:
    code = (
        "import sys; sys.modules['sagemaker'] = None\n"
        "from smx_debug.config import DebugPlan\n"
        "p = DebugPlan(region='us-west-2', s3_output_path='s3://bucket/x', rules=[{'name': 'overfit'}])\n"
        "assert p.to_request_dict(job_name='j')['DebugRuleConfigurations']\n"
        "try:\n    p.to_estimator_kwargs()\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == (
        "ConfigError to_estimator_kwargs needs the SageMaker Python SDK v2: pip install 'smx-debug[sagemaker]'"
    )


def test_plan_is_frozen() -> None:
    p = plan()
    with pytest.raises(Exception, match="frozen"):
        p.region = "us-east-1"  # type: ignore[misc]


def test_to_estimator_kwargs_objects_render_our_fields() -> None:
    p = DebugPlan.from_file(ROOT / "examples" / "plans" / "xgboost.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmxDebugWarning)
        kwargs = p.to_estimator_kwargs()
    assert sorted(kwargs) == ["debugger_hook_config", "profiler_config", "rules", "tags"]
    assert [r.name for r in kwargs["rules"]] == [r.rule_configuration_name for r in p.rules]
    assert kwargs["debugger_hook_config"]._to_request_dict() == p.to_request_dict(job_name="j")["DebugHookConfig"]


def test_debug_plan_from_file_json_nested_100000_deep_raises_config_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match=r"deep\.json.*nested too deep") as info:
        DebugPlan.from_file(path)
    assert info.value.value == str(path)
