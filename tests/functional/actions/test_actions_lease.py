"""Exactly-once survives a crash: the ledger claim is a lease in DynamoDB (the local AWS), with a fake clock.

An invocation claims ``<job>#stop`` (or ``<job>#retrain``) and dies before acting (Lambda timeout, out of
memory): nothing releases the claim. A redelivery inside the lease does nothing and fails (so the platform
redelivers again later); one after the lease takes the claim over and acts, once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from actions_support import LAMBDAS, Stack, client, create_job
from lambda_support import Clock, Crash, CrashAfterClaim

from smx_debug import local
from smx_debug.actions import ClaimInProgressError, Ledger, handle_stop_training
from smx_debug.contracts import retrain_execution_name

RULE = "ExplodingTensor"
LEASE = 90.0


class CrashingLedger(CrashAfterClaim, Ledger):
    """The DynamoDB ledger whose first claim dies before the action."""


def _executions(stack: Stack, machine: str) -> list[str]:
    listing = client(stack.aws, "stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    return [e["name"] for e in listing]


@pytest.mark.parametrize("token", ["stop", "retrain"])
def test_crash_between_claim_and_action_then_redelivery_before_and_after_the_lease(stack: Stack, token: str) -> None:
    aws, clock = stack.aws, Clock(2_000_000_000.0)
    job = f"guard-crash-{token}"
    machine = stack.state_machine() if token == "retrain" else None
    create_job(aws, job, {"smx-debug:managed": "true", f"smx-debug:on:{RULE}": token}, rules=(RULE,))
    local.set_rule_statuses(aws, job, debug=[local.rule_status(RULE, "IssuesFound", step=30)])
    event = local.state_change_event(aws, job)
    ddb = client(aws, "dynamodb")
    crashing = CrashingLedger(ddb, stack.table, clock, lease_seconds=LEASE)

    with pytest.raises(Crash):
        handle_stop_training(event, stack.runtime(crashing, state_machine_arn=machine))
    key = {"pk": {"S": f"{job}#{token}"}}
    claimed = ddb.get_item(TableName=stack.table, Key=key, ConsistentRead=True)["Item"]
    assert claimed["state"] == {"S": "claimed"}

    clock.now += 60  # Lambda's first retry: the lease is live
    with pytest.raises(ClaimInProgressError):
        handle_stop_training(event, stack.runtime(crashing, state_machine_arn=machine))
    assert ddb.get_item(TableName=stack.table, Key=key, ConsistentRead=True)["Item"] == claimed  # no second claim
    assert local.stop_calls(aws, job) == 0
    assert machine is None or _executions(stack, machine) == []

    clock.now += 120  # the second retry: the lease ran out, the claim is taken over
    result = handle_stop_training(event, stack.runtime(crashing, state_machine_arn=machine))
    assert result[token]["outcome"] == ("stopped" if token == "stop" else "started")
    again = handle_stop_training(event, stack.runtime(crashing, state_machine_arn=machine))
    assert again[token].get("duplicate") is True or again[token].get("skipped") == "job status is Stopping"
    assert local.stop_calls(aws, job) == (1 if token == "stop" else 0)
    if machine is not None:
        assert _executions(stack, machine) == [retrain_execution_name(job)]
    done = ddb.get_item(TableName=stack.table, Key=key, ConsistentRead=True)["Item"]
    assert done["state"] == {"S": "done"}
    assert float(done["expires_at"]["N"]) > clock.now + 80 * 86_400  # the TTL the stack enables


def test_retrain_rule_starts_one_execution_with_the_jobs_own_request_and_duplicates_start_nothing(
    stack: Stack,
) -> None:
    aws = stack.aws
    job = "guard-retrain-e2e"
    machine = stack.state_machine()
    create_job(aws, job, {"smx-debug:managed": "true", f"smx-debug:on:{RULE}": "retrain"}, rules=(RULE,))
    local.set_rule_statuses(aws, job, debug=[local.rule_status(RULE, "IssuesFound", step=64)])
    event = local.state_change_event(aws, job)
    runtime = stack.runtime(Ledger(client(aws, "dynamodb"), stack.table), state_machine_arn=machine)
    results = [handle_stop_training(event, runtime)["retrain"] for _ in range(3)]
    assert [r.get("outcome") or r.get("skipped") for r in results] == ["started"] + ["already handled (ledger)"] * 2
    (name,) = _executions(stack, machine)
    assert name == retrain_execution_name(job)
    sfn = client(aws, "stepfunctions")
    execution = sfn.list_executions(stateMachineArn=machine)["executions"][0]["executionArn"]
    spec = json.loads(sfn.describe_execution(executionArn=execution)["input"])["run_spec"]
    assert spec["after_job"] == {"job_name": job, "rule": RULE, "step": 64, "source": "SageMaker Debugger"}
    assert spec["request"]["RoleArn"] == local.execution_role(aws)  # the job's own role
    assert local.stop_calls(aws, job) == 0


def _step(stack: Stack, step: str, state: dict[str, Any]) -> dict[str, Any]:
    (delivery,) = local.deliver_event(
        stack.aws, {"step": step, "state": state}, {"retrain": stack.env()}, lambdas_dir=LAMBDAS
    )
    assert delivery.error is None, delivery.error
    result: dict[str, Any] = delivery.result
    assert result.get("error") is None, result
    return result


def test_retrain_action_end_to_end_launches_the_next_run_and_notifies_at_the_end(stack: Stack) -> None:
    """The state machine's steps driven by hand on the execution's real input (moto cannot run Lambda tasks)."""
    aws = stack.aws
    job = "guard-retrain-loop"
    machine = stack.state_machine()
    local.create_training_job(
        aws, job, {"smx-debug:managed": "true", f"smx-debug:on:{RULE}": "stop retrain"},
        HyperParameters={"warmup_learning_rate": "0.1", "learning_rate": "0.1", "wandb_api_key": "s3cr3t"},
    )
    local.set_training_job_status(aws, job, "InProgress")
    local.set_rule_statuses(aws, job, debug=[local.rule_status(RULE, "IssuesFound", step=80)])
    event = local.state_change_event(aws, job)
    runtime = stack.runtime(Ledger(client(aws, "dynamodb"), stack.table), state_machine_arn=machine)
    assert handle_stop_training(event, runtime)["retrain"]["outcome"] == "started"
    assert handle_stop_training(event, runtime)["retrain"]["duplicate"] is True  # nothing more started
    assert local.stop_calls(aws, job) == 1
    sfn = client(aws, "stepfunctions")
    (execution,) = sfn.list_executions(stateMachineArn=machine)["executions"]
    spec = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])["run_spec"]

    state = _step(stack, "init", {"run_spec": spec})
    state = _step(stack, "train", state)
    launched = state["history"]["latest_job_name"]
    described = client(aws, "sagemaker").describe_training_job(TrainingJobName=launched)
    assert described["HyperParameters"]["warmup_learning_rate"] == "0.05"  # halved: the flagged run exploded
    assert described["HyperParameters"]["wandb_api_key"] == "s3cr3t"  # kept for the job, never shown
    local.set_training_job_status(aws, launched, "InProgress")
    local.set_rule_statuses(aws, launched, debug={RULE: "InProgress"})
    state = _step(stack, "monitor", state)
    local.set_training_job_status(aws, launched, "Completed")
    local.set_rule_statuses(aws, launched, debug={RULE: "NoIssuesFound"})
    state = _step(stack, "monitor", state)
    assert state["next_action"] == "end"
    state = _step(stack, "end", state)

    messages = stack.messages()
    assert messages[-1]["Subject"] == "smx-debug retrain: run finished: Completed, no rule found issues"
    assert f"- {job}: rule {RULE} at step 80; flagged" in messages[-1]["Message"]
    assert not any("s3cr3t" in m["Message"] for m in messages)
