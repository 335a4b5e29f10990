"""A run the retraining workflow launched belongs to that workflow: when its rule fires, the running
execution's monitor stops it and plans the next run; the ``retrain`` action starts no second execution.

The flagged job's tags travel to the next run (so the opt-in tag keeps it watched and its rule's stop and
notify still apply), including ``smx-debug:on:<rule>=... retrain``. Before the fix the new run's trigger
started a second execution (new job name -> new execution name) next to the one already monitoring it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from actions_support import Stack, client, create_job

from smx_debug.actions import Ledger, Runtime, handle_retrain, handle_stop_training
from smx_debug.contracts import MANAGED_TAG, RULE_TAG_PREFIX, retrain_execution_name, stop_key
from smx_debug.local import (
    rule_status,
    set_rule_statuses,
    set_training_job_status,
    state_change_event,
    stop_calls,
)
from smx_debug.tags import ActionSpec, tags_as_dict

RULE = "ExplodingTensor"


def _runtime(stack: Stack, machine: str, default_actions: tuple[str, ...] = ()) -> Runtime:
    return stack.runtime(
        Ledger(client(stack.aws, "dynamodb"), stack.table, lease_seconds=90),
        watch_prefixes=(),  # watched by the opt-in tag only: the next run must carry it
        default_actions=tuple(ActionSpec(a) for a in default_actions),
        state_machine_arn=machine,
    )


def _fire(stack: Stack, job: str) -> dict[str, Any]:
    set_rule_statuses(stack.aws, job, debug=[rule_status(RULE, "IssuesFound", step=400)])
    return state_change_event(stack.aws, job)


def _step(runtime: Runtime, step: str, state: dict[str, Any]) -> dict[str, Any]:
    out = handle_retrain({"step": step, "state": state}, runtime)
    assert out.get("error") is None, out
    return out


@pytest.mark.parametrize(
    ("rule_tokens", "default_actions"),
    [("stop notify retrain", ()), ("stop notify", ("retrain",))],
    ids=["retrain-in-rule-tag", "retrain-as-deployment-default"],
)
def test_a_run_the_workflow_launched_is_owned_by_that_execution(
    stack: Stack, rule_tokens: str, default_actions: tuple[str, ...]
) -> None:
    machine = stack.state_machine()
    runtime = _runtime(stack, machine, default_actions)
    sfn, sagemaker = client(stack.aws, "stepfunctions"), client(stack.aws, "sagemaker")
    flagged = "resnet-explodes"
    create_job(stack.aws, flagged, {MANAGED_TAG: "true", RULE_TAG_PREFIX + RULE: rule_tokens, "team": "vision"})
    started = handle_stop_training(_fire(stack, flagged), runtime)
    assert started["retrain"]["outcome"] == "started", started
    (execution,) = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert execution["name"] == retrain_execution_name(flagged)

    # The execution's steps, as the state machine runs them (the Defaults Pass merges the deployment's settings).
    run_spec = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])["run_spec"]
    state = _step(runtime, "init", {"run_spec": {"wait_seconds": 10, "max_runtime_seconds": 3600, **run_spec}})
    state = _step(runtime, "train", state)
    new_run = state["history"]["latest_job_name"]
    set_training_job_status(stack.aws, new_run, "InProgress")  # SageMaker's part: the run trains
    tags = tags_as_dict(sagemaker.list_tags(ResourceArn=sagemaker.describe_training_job(
        TrainingJobName=new_run)["TrainingJobArn"])["Tags"])
    assert tags[MANAGED_TAG] == "true" and tags["team"] == "vision"  # still watched by the opt-in tag
    assert set(tags[RULE_TAG_PREFIX + RULE].split()) >= {"stop", "notify"}  # the rule's own actions still apply

    # The new run's rule fires: EventBridge delivers its state change to stop_training.
    again = handle_stop_training(_fire(stack, new_run), runtime)
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]] == [execution["name"]]
    assert "started" not in json.dumps(again.get("retrain")), again
    assert again["stop"]["outcome"] == "stopped", again  # stop still applies, once (ledger <job>#stop)

    # The running execution's monitor handles it: records the run and decides what comes next (here: the
    # flagged job had no hyperparameters to change, so after add_batch_norm no strategy is left -> end).
    state = _step(runtime, "monitor", state)
    last = state["history"]["jobs"][-1]
    assert (last["job_name"], last["rule"], last["outcome"]) == (new_run, RULE, "job had already left InProgress")
    assert state["next_action"] == "end" and f"found issues in {new_run}" in state["end_reason"], state
    assert runtime.ledger.get(stop_key(new_run)) is not None and stop_calls(stack.aws, new_run) == 1
    assert len(sfn.list_executions(stateMachineArn=machine)["executions"]) == 1
