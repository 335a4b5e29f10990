"""The retraining workflow driven step by step on the local AWS with a scripted sequence of rule outcomes.

Reproduces the published Debugger + Step Functions run (a very deep ResNet with ELU that explodes):
five runs explode and halve the warmup rate, the sixth explodes and batch normalisation is added,
the seventh completes.
"""

from __future__ import annotations

import json
from pathlib import Path

from actions_support import LAMBDAS, Stack, client

from smx_debug import local

EVENTS = Path(__file__).resolve().parents[2] / "events"
RULE = "ExplodingTensor"


def _retrain(stack: Stack, step: str, state: dict) -> dict:
    (delivery,) = local.deliver_event(
        stack.aws, {"step": step, "state": state}, {"retrain": stack.env()}, lambdas_dir=LAMBDAS
    )
    assert delivery.error is None
    assert delivery.result.get("error") is None, delivery.result
    return delivery.result


def test_retrain_workflow_reproduces_the_published_exploding_resnet_run(stack: Stack) -> None:
    aws = stack.aws
    event = json.loads((EVENTS / "retrain_input.json").read_text())
    role_arn = event["state"]["run_spec"]["request"]["RoleArn"]
    assert local.execution_role(aws, role_arn.rsplit("/", 1)[1]) == role_arn  # the run's role, for SageMaker to assume
    state = _retrain(stack, "init", event["state"])
    outcomes = ["explodes"] * 6 + ["completes"]
    for run, outcome in enumerate(outcomes, start=1):
        state = _retrain(stack, "train", state)
        job = state["history"]["latest_job_name"]
        assert (state["next_action"], state["history"]["num_retraining"]) == ("monitor", run)
        # moto creates jobs Completed; SageMaker starts them InProgress with the rules evaluating.
        local.set_training_job_status(aws, job, "InProgress")
        local.set_rule_statuses(aws, job, debug={RULE: "InProgress"})
        state = _retrain(stack, "monitor", state)
        assert state["next_action"] == "monitor"
        if outcome == "explodes":
            local.set_rule_statuses(aws, job, debug=[local.rule_status(RULE, "IssuesFound", step=200 * run)])
        else:
            local.set_training_job_status(aws, job, "Completed")
            local.set_rule_statuses(aws, job, debug={RULE: "NoIssuesFound"})
        state = _retrain(stack, "monitor", state)

    history, hyper = state["history"], state["run_spec"]["hyperparameters"]
    assert {
        k: history[k]
        for k in (
            "num_retraining",
            "num_warmup_adjustments",
            "num_batch_layer_adjustments",
            "num_learning_rate_adjustments",
        )
    } == {
        "num_retraining": 7,
        "num_warmup_adjustments": 5,
        "num_batch_layer_adjustments": 1,
        "num_learning_rate_adjustments": 0,
    }
    assert hyper == {"warmup_learning_rate": 0.003125, "learning_rate": 0.1, "add_batch_norm": 1}
    assert (state["job_status"], state["next_action"]) == ("Completed", "end")
    state = _retrain(stack, "end", state)  # the loop's last state: always a message
    assert state["notified"] is True

    # What SageMaker was asked to run, job by job, and which runs were stopped.
    sagemaker = client(aws, "sagemaker")
    jobs = [j["job_name"] for j in history["jobs"]]
    launched = [sagemaker.describe_training_job(TrainingJobName=j)["HyperParameters"] for j in jobs]
    assert [(h["warmup_learning_rate"], h["add_batch_norm"], h["depth"]) for h in launched] == [
        ("0.1", "0", "110"),
        ("0.05", "0", "110"),
        ("0.025", "0", "110"),
        ("0.0125", "0", "110"),
        ("0.00625", "0", "110"),
        ("0.003125", "0", "110"),
        ("0.003125", "1", "110"),
    ]
    assert [local.stop_calls(aws, j) for j in jobs] == [1, 1, 1, 1, 1, 1, 0]
    subjects = [m["Subject"] for m in stack.messages()]
    assert subjects.count("smx-debug retrain: ExplodingTensor fired, applying halve_warmup") == 5
    assert subjects.count("smx-debug retrain: ExplodingTensor fired, applying add_batch_norm") == 1
    assert subjects[-1] == "smx-debug retrain: run finished: Completed, no rule found issues"
    assert len(subjects) == 7 + 6 + 1


def test_retrain_monitor_error_produces_a_state_the_next_step_can_handle(stack: Stack) -> None:
    event = json.loads((EVENTS / "retrain_input.json").read_text())
    state = _retrain(stack, "init", event["state"])
    state["next_action"] = "monitor"
    state["history"]["latest_job_name"] = "resnet-elu-deep-missing-1"
    (delivery,) = local.deliver_event(
        stack.aws, {"step": "monitor", "state": state}, {"retrain": stack.env()}, lambdas_dir=LAMBDAS
    )
    result = delivery.result
    # The job is gone: retrying cannot help, so the workflow ends with the reason in the state.
    assert (delivery.error, result["next_action"], result["history"]["num_errors"]) == (None, "end", 1)
    assert {k: result["error"][k] for k in ("step", "code", "retryable")} == {
        "step": "monitor",
        "code": "ValidationException",
        "retryable": False,
    }


def test_retrain_train_role_sagemaker_cannot_assume_ends_the_workflow_with_the_reason(stack: Stack) -> None:
    """The next run's CreateTrainingJob passes the job's own role; SageMaker refuses a role it cannot assume (here:
    deleted since), and the workflow ends with SageMaker's reason instead of retrying what cannot succeed."""
    event = json.loads((EVENTS / "retrain_input.json").read_text())
    role_arn = event["state"]["run_spec"]["request"]["RoleArn"]
    local.execution_role(stack.aws, role_arn.rsplit("/", 1)[1])
    state = _retrain(stack, "init", event["state"])
    client(stack.aws, "iam").delete_role(RoleName=role_arn.rsplit("/", 1)[1])
    (delivery,) = local.deliver_event(
        stack.aws, {"step": "train", "state": state}, {"retrain": stack.env()}, lambdas_dir=LAMBDAS
    )
    result = delivery.result
    assert (delivery.error, result["next_action"], result["history"]["num_retraining"]) == (None, "end", 0)
    assert {k: result["error"][k] for k in ("step", "code", "retryable")} == {
        "step": "train", "code": "ValidationException", "retryable": False}
    assert f"Could not assume role {role_arn}." in result["error"]["message"]
    assert client(stack.aws, "sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
