from __future__ import annotations

import copy
import json
from pathlib import Path

import boto3
import pytest
from actions_fakes import FakeSageMaker, FakeSns, fake_runtime, settings
from botocore.exceptions import ParamValidationError

from smx_debug.actions import handle_retrain
from smx_debug.actions.retrain import (
    DEFAULT_STRATEGIES,
    RETRAIN_PREFIX_MAX,
    RetrainSpecError,
    build_request,
    init_state,
    monitor_step,
    plan_next,
    validate_request,
)
from smx_debug.contracts import RETRAIN_RUN_TAG

EVENTS = Path(__file__).resolve().parents[2] / "events"
SPEC = json.loads((EVENTS / "retrain_input.json").read_text())["state"]["run_spec"]


def test_plan_next_default_strategies_follow_the_published_sequence() -> None:
    hyper = {"warmup_learning_rate": 0.1, "learning_rate": 0.1, "add_batch_norm": 0}
    steps = []
    while (planned := plan_next(hyper, [dict(s) for s in DEFAULT_STRATEGIES])) is not None and len(
        steps
    ) < 50:
        name, hyper = planned
        steps.append((name, hyper["warmup_learning_rate"], hyper["add_batch_norm"], hyper["learning_rate"]))
    warmups = [0.05, 0.025, 0.0125, 0.00625, 0.003125]
    lrs = [0.1 * 0.5**k for k in range(1, 20) if 0.1 * 0.5**k >= 1e-5]
    assert steps == (
        [("halve_warmup", w, 0, 0.1) for w in warmups]
        + [("add_batch_norm", 0.003125, 1, 0.1)]
        + [("scale_learning_rate", 0.003125, 1, lr) for lr in lrs]
    )


def test_plan_next_empty_strategy_list_ends() -> None:
    assert plan_next({"warmup_learning_rate": 1.0}, []) is None


def test_build_request_sets_name_and_hyperparameters_and_passes_botocore_validation() -> None:
    state = init_state(SPEC, clock=lambda: 1795363200.0)
    request = build_request(state)
    assert request["TrainingJobName"] == "resnet-elu-deep-1122160000-1"
    assert request["HyperParameters"] == {
        "sagemaker_program": '"train_resnet.py"',
        "depth": "110",
        "activation": '"elu"',
        "epochs": "30",
        "warmup_learning_rate": "0.1",
        "learning_rate": "0.1",
        "add_batch_norm": "0",
    }
    changed = ("TrainingJobName", "HyperParameters", "Tags")
    assert {k: v for k, v in request.items() if k not in changed} == {
        k: v for k, v in SPEC["request"].items() if k not in changed
    }
    # the plan's tags (opt-in, rule actions) and the workflow run that owns this job
    assert request["Tags"] == [*SPEC["request"]["Tags"], {"Key": RETRAIN_RUN_TAG, "Value": "resnet-elu-deep-1122160000"}]
    sagemaker = boto3.client("sagemaker", region_name="us-west-2")
    validate_request(request, sagemaker)  # raises on any shape error
    broken = {**request, "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": "one"}}
    with pytest.raises(ParamValidationError, match=r"ResourceConfig\.InstanceCount"):
        validate_request(broken, sagemaker)



def test_build_request_owns_the_run_once_and_refuses_a_request_without_room_for_the_tag() -> None:
    spec = copy.deepcopy(SPEC)
    spec["request"]["Tags"].append({"Key": RETRAIN_RUN_TAG, "Value": "an-older-run"})  # retraining a retrained run
    tags = build_request(init_state(spec, clock=lambda: 1795363200.0))["Tags"]
    assert [t["Value"] for t in tags if t["Key"] == RETRAIN_RUN_TAG] == ["resnet-elu-deep-1122160000"]
    spec["request"]["Tags"] = [{"Key": f"team-{i}", "Value": "x"} for i in range(50)]
    with pytest.raises(RetrainSpecError, match=r"run_spec\.request\.Tags: 50 tags leave no room for smx-debug:retrain-run"):
        build_request(init_state(spec, clock=lambda: 1795363200.0))


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda s: s.pop("request"), "run_spec.request"),
        (lambda s: s["hyperparameters"].update(warmup_learning_rate="fast"), "warmup_learning_rate: 'fast'"),
        (lambda s: s.update(strategies=[{"name": "pray"}]), "run_spec.strategies"),
        (lambda s: s.update(max_retraining=0), "run_spec.max_retraining: 0"),
        # A run number has at most 3 digits, so that a run's name keeps its prefix whole.
        (lambda s: s.update(max_retraining=5000), "run_spec.max_retraining: 5000 must be an integer from 1 to 100"),
        (lambda s: s.update(rules="ExplodingTensor"), "run_spec.rules"),
    ],
)
def test_init_state_bad_run_spec_names_the_field(change, needle: str) -> None:
    spec = copy.deepcopy(SPEC)
    change(spec)
    with pytest.raises(RetrainSpecError, match=needle):
        init_state(spec)


def _monitoring(num_retraining: int, **spec_changes: object) -> dict:
    state = init_state({**copy.deepcopy(SPEC), **spec_changes}, clock=lambda: 0.0)
    state["history"].update(
        num_retraining=num_retraining, latest_job_name="run-x", jobs=[{"job_name": "run-x"}]
    )
    state["next_action"] = "monitor"
    return state


EXPLODED = [
    {
        "RuleConfigurationName": "ExplodingTensor",
        "RuleEvaluationStatus": "IssuesFound",
        "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule ExplodingTensor at step 70 "
        "resulted in the condition being met\n",
    }
]


@pytest.mark.parametrize(
    ("num_retraining", "spec_changes", "next_action", "hyper"),
    [
        (1, {}, "launch_new", {"warmup_learning_rate": 0.05, "learning_rate": 0.1, "add_batch_norm": 0}),
        (10, {}, "end", {"warmup_learning_rate": 0.1, "learning_rate": 0.1, "add_batch_norm": 0}),  # budget
        (
            1,
            {
                "strategies": [{"name": "add_batch_norm"}],
                "hyperparameters": {"warmup_learning_rate": 0.1, "learning_rate": 0.1, "add_batch_norm": 1},
            },
            "end",
            {"warmup_learning_rate": 0.1, "learning_rate": 0.1, "add_batch_norm": 1},
        ),  # nothing left
    ],
)
def test_monitor_step_exploded_run_is_stopped_and_next_run_planned_within_budget(
    num_retraining: int, spec_changes: dict, next_action: str, hyper: dict
) -> None:
    sagemaker = FakeSageMaker()
    sagemaker.add_job("run-x", {}, DebugRuleEvaluationStatuses=EXPLODED)
    runtime = fake_runtime(sagemaker=sagemaker)
    state = monitor_step(_monitoring(num_retraining, **spec_changes), runtime)
    assert (state["next_action"], state["job_status"], state["run_spec"]["hyperparameters"]) == (
        next_action,
        "Stopping",
        hyper,
    )
    assert sagemaker.stopped == ["run-x"]
    assert state["history"]["jobs"] == [
        {"job_name": "run-x", "rule": "ExplodingTensor", "step": 70, "outcome": "stopped"}
    ]


def test_build_request_from_a_real_debug_plan_retargets_the_builtin_stop_action() -> None:
    from smx_debug.config import DebugPlan

    plan = DebugPlan.from_dict(
        {
            "name": "resnet-elu",
            "region": "us-west-2",
            "s3_output_path": "s3://smx-demo/out",
            "framework": "pytorch",
            "framework_version": "1.13",
            "rules": [{"name": "exploding_tensor", "actions": [{"stop_training": {}}, {"stop_job": {}}]}],
        }
    )
    basics = {
        k: v
        for k, v in SPEC["request"].items()
        if k not in ("DebugHookConfig", "DebugRuleConfigurations", "Tags")
    }
    request_template = {**basics, **plan.to_request_dict(job_name="resnet-elu-deep")}
    state = init_state({**SPEC, "request": request_template}, clock=lambda: 1795363200.0)
    state["history"]["num_retraining"] = 2
    request = build_request(state)
    validate_request(request, boto3.client("sagemaker", region_name="us-west-2"))
    (rule,) = request["DebugRuleConfigurations"]
    assert request["TrainingJobName"] == "resnet-elu-deep-1122160000-3"
    assert "resnet-elu-deep-1122160000-3" in rule["RuleParameters"]["action_json"]
    assert {t["Key"]: t["Value"] for t in request["Tags"]}["smx-debug:on:ExplodingTensor"] == "stop"


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"wait_seconds": 10, "max_runtime_seconds": 86_400}, "run_spec.wait_seconds: polling every 10 s"),
        ({"max_polls": 10_000}, "run_spec.max_polls: 10000 polls would outrun"),
        ({"wait_seconds": "10"}, "run_spec.wait_seconds"),
    ],
)
def test_run_spec_that_could_outrun_the_step_functions_history_is_refused_naming_the_field(
    change: dict, needle: str
) -> None:
    with pytest.raises(RetrainSpecError, match=needle):
        init_state({**copy.deepcopy(SPEC), **change})


def test_run_spec_within_the_history_budget_is_accepted_with_a_poll_cap() -> None:
    state = init_state({**copy.deepcopy(SPEC), "wait_seconds": 300, "max_runtime_seconds": 86_400})
    assert state["run_spec"]["max_polls"] == (25_000 - 40 - 10 * 14) // 9


def test_monitor_past_the_poll_cap_ends_the_loop_and_the_end_step_stops_the_run_and_says_why() -> None:
    sagemaker, sns = FakeSageMaker(), FakeSns()
    sagemaker.add_job("run-x", {})
    runtime = fake_runtime(sagemaker=sagemaker, sns=sns)
    state = _monitoring(1, max_polls=2)
    seen = []
    for _ in range(3):
        state = handle_retrain({"step": "monitor", "state": state}, runtime)
        seen.append(state["next_action"])
    assert seen == ["monitor", "monitor", "end"]
    final = handle_retrain({"step": "end", "state": state}, runtime)
    assert final["notified"] is True
    (message,) = sns.published
    assert message["Subject"] == "smx-debug retrain: history budget used up (2 polls)"
    assert "Latest job: run-x (status Stopping)." in message["Message"]
    assert "Stopped the latest job run-x, which nothing would monitor any more (stopped)." in message["Message"]
    assert sagemaker.stopped == ["run-x"]
    handle_retrain({"step": "end", "state": state}, runtime)  # Step Functions reruns the task: no second stop
    assert sagemaker.stopped == ["run-x"]


def test_end_step_after_a_step_functions_catch_publishes_the_error_name_not_its_cause() -> None:
    sns = FakeSns()
    state = init_state(copy.deepcopy(SPEC))
    state["error"] = {"Error": "Lambda.Unknown", "Cause": "Invalid value s3cr3t for HyperParameters.wandb_api_key"}
    handle_retrain({"step": "end", "state": state}, fake_runtime(sns=sns))
    assert sns.published[0]["Subject"] == "smx-debug retrain: failed: Lambda.Unknown"
    assert "s3cr3t" not in sns.published[0]["Message"]


def test_train_and_monitor_messages_name_hyperparameters_but_hide_their_values() -> None:
    sagemaker, sns = FakeSageMaker(), FakeSns()
    spec = copy.deepcopy(SPEC)
    spec["request"]["HyperParameters"]["wandb_api_key"] = "s3cr3t-key"
    state = init_state(spec)

    class Creating(FakeSageMaker):
        def create_training_job(self, **request: object) -> dict:
            return {}

    creating = Creating()
    state = handle_retrain({"step": "train", "state": state}, fake_runtime(sagemaker=creating, sns=sns))
    creating.add_job(state["history"]["latest_job_name"], {}, DebugRuleEvaluationStatuses=EXPLODED)
    handle_retrain({"step": "monitor", "state": state}, fake_runtime(sagemaker=creating, sns=sns))
    text = "\n".join(m["Message"] for m in sns.published)
    assert "wandb_api_key=(value hidden)" in text and "s3cr3t-key" not in text
    assert "warmup_learning_rate (value hidden)" in text and "0.05" not in text
    shown = FakeSns()
    handle_retrain(
        {"step": "train", "state": init_state(copy.deepcopy(SPEC))},
        fake_runtime(settings(show_keys=frozenset({"epochs"})), sagemaker=Creating(), sns=shown),
    )
    assert "epochs=30" in shown.published[0]["Message"]
    del sagemaker


def test_init_after_a_flagged_job_plans_the_first_change_at_once() -> None:
    spec = {**copy.deepcopy(SPEC), "after_job": {"job_name": "flagged-1", "rule": "ExplodingTensor"}}
    state = init_state(spec)
    assert state["run_spec"]["hyperparameters"]["warmup_learning_rate"] == 0.05
    assert state["history"]["jobs"] == [{"job_name": "flagged-1", "rule": "ExplodingTensor", "step": None, "outcome": "flagged"}]
    assert state["next_action"] == "launch_new"


def test_a_rejected_request_is_reported_by_parameter_name_without_its_value() -> None:
    spec = copy.deepcopy(SPEC)
    spec["request"]["Environment"] = {"WANDB_API_KEY": 12345}  # not a string: botocore rejects it, quoting it
    state = handle_retrain({"step": "train", "state": init_state(spec)}, fake_runtime())
    assert state["error"]["code"] == "ParamValidationError"
    assert "Environment.WANDB_API_KEY" in state["error"]["message"] and "12345" not in state["error"]["message"]


def test_build_request_caps_runtime_at_the_deployments_max_runtime() -> None:
    # The Defaults state merges retraining.max_runtime_seconds under the run spec; IAM refuses anything longer
    # (sagemaker:MaxRuntimeInSeconds), so the next run is launched with at most that.
    spec = {**copy.deepcopy(SPEC), "max_runtime_seconds": 7200}
    assert build_request(init_state(spec))["StoppingCondition"]["MaxRuntimeInSeconds"] == 7200
    spec["request"]["StoppingCondition"] = {"MaxRuntimeInSeconds": 600, "MaxWaitTimeInSeconds": 1200}
    assert build_request(init_state(spec))["StoppingCondition"] == {"MaxRuntimeInSeconds": 600,
                                                                      "MaxWaitTimeInSeconds": 1200}


@pytest.mark.parametrize(("types", "allowed"), [(["ml.p3.*"], True), (["ml.p3.2xlarge", "ml.g5.*"], True),
                                                (["ml.g5.*"], False), ([], False)])
def test_train_step_launches_only_the_deployments_instance_types(types: list[str], allowed: bool) -> None:
    spec = {**copy.deepcopy(SPEC), "instance_types": types}
    sagemaker = FakeSageMaker()
    state = handle_retrain({"step": "train", "state": init_state(spec)}, fake_runtime(sagemaker=sagemaker))
    if allowed:
        assert state["error"] is None and [r["ResourceConfig"]["InstanceType"] for r in sagemaker.created] == [
            "ml.p3.2xlarge"]
        return
    assert sagemaker.created == [] and state["next_action"] == "end"
    assert state["error"]["code"] == "RetrainSpecError" and "ml.p3.2xlarge" in state["error"]["message"]
    assert "retraining.instance_types" in state["error"]["message"]


@pytest.mark.parametrize("name_length", [40, 45, RETRAIN_PREFIX_MAX, 63])
def test_build_request_for_a_long_flagged_name_keeps_its_first_48_characters_whole_up_to_the_100th_run(
    name_length: int,
) -> None:
    """The IAM policies and the event pattern are built from the watch prefixes (at most 48 characters with
    retraining on): every run's name starts with the flagged job's first 48 characters and fits SageMaker's 63."""
    flagged = ("team-vision-segmentation-resnet-elu-sweep-42-" + "x" * 63)[:name_length - 1] + "1"
    state = init_state({**copy.deepcopy(SPEC), "job_name_prefix": flagged, "max_retraining": 100},
                       clock=lambda: 1795363200.0)
    for run in (1, 9, 10, 99, 100):
        state["history"]["num_retraining"] = run - 1
        name = build_request(state)["TrainingJobName"]
        assert name == f"{flagged[:RETRAIN_PREFIX_MAX]}-1122160000-{run}" and len(name) <= 63, name


def test_build_request_keeps_a_prefix_that_ends_in_dashes() -> None:
    state = init_state({**copy.deepcopy(SPEC), "job_name_prefix": "team--"}, clock=lambda: 1795363200.0)
    assert build_request(state)["TrainingJobName"] == "team---1122160000-1"


def test_build_request_with_a_run_id_init_did_not_write_refuses_rather_than_cutting_the_prefix() -> None:
    state = init_state({**copy.deepcopy(SPEC), "job_name_prefix": "p" * RETRAIN_PREFIX_MAX}, clock=lambda: 0.0)
    state["history"]["run_id"] = "r" * 20
    with pytest.raises(RetrainSpecError, match=r"state\.history: the next run's name .* would be 71 characters"):
        build_request(state)
