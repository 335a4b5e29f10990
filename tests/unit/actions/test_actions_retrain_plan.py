from __future__ import annotations

import copy
import json
from pathlib import Path

import boto3
import pytest
from actions_fakes import FakeSageMaker, fake_runtime
from botocore.exceptions import ParamValidationError

from smx_debug.actions import DEFAULT_STRATEGIES, init_state, monitor_step, plan_next
from smx_debug.actions.retrain import RetrainSpecError, build_request, validate_request

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
    assert {k: v for k, v in request.items() if k not in ("TrainingJobName", "HyperParameters")} == {
        k: v for k, v in SPEC["request"].items() if k not in ("TrainingJobName", "HyperParameters")
    }
    sagemaker = boto3.client("sagemaker", region_name="us-west-2")
    validate_request(request, sagemaker)  # raises on any shape error
    broken = {**request, "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": "one"}}
    with pytest.raises(ParamValidationError, match=r"ResourceConfig\.InstanceCount"):
        validate_request(broken, sagemaker)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda s: s.pop("request"), "run_spec.request"),
        (lambda s: s["hyperparameters"].update(warmup_learning_rate="fast"), "warmup_learning_rate: 'fast'"),
        (lambda s: s.update(strategies=[{"name": "pray"}]), "run_spec.strategies"),
        (lambda s: s.update(max_retraining=0), "run_spec.max_retraining: 0"),
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
    sagemaker = FakeSageMaker(rules=EXPLODED)
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
