"""The retrain function's steps end inside its 120 s timeout and never leave the workflow's stop claimed.

A monitor step makes up to six calls (DescribeTrainingJob, the stop's claim, StopTrainingJob, the stop's complete,
a throttled complete tried again, the progress message), each bounded by botocore's retries but their sum not: a
step Lambda kills after the stop loses the state that planned the next run (Step Functions' catch ends the loop),
and one killed holding the claim leaves the job to run unstopped (the end step finds the claim live). Every call
takes ``ANSWER`` seconds of a fake clock that drives the Lambda context; the deployed entry point
(``lambdas/actions/handler.py``'s ``retrain``) runs with a runtime of fakes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from actions_fakes import FakeSageMaker, FakeSns, fake_runtime, settings
from botocore.exceptions import ClientError
from lambda_support import Clock, Context, entry_point

from smx_debug.actions import MemoryLedger
from smx_debug.actions.ledger import DONE
from smx_debug.actions.retrain import init_state
from smx_debug.contracts import stop_key

ROOT = Path(__file__).resolve().parents[3]
SPEC = json.loads((ROOT / "tests" / "events" / "retrain_input.json").read_text())["state"]["run_spec"]
TIMEOUT = 120.0
ANSWER = 22.0  # under one call's worst case (24 s: 3 attempts x (2 s + 5 s) + backoff)
EXPLODED = [{
    "RuleConfigurationName": "ExplodingTensor", "RuleEvaluationStatus": "IssuesFound",
    "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule ExplodingTensor at step 70 resulted in the "
                     "condition being met\n",
}]


class SlowSageMaker(FakeSageMaker):
    def __init__(self, clock: Clock, describe: float = ANSWER) -> None:
        super().__init__()
        self.clock, self.describe = clock, describe
        self.add_job("run-x", {}, DebugRuleEvaluationStatuses=EXPLODED)

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.clock.now += self.describe
        return super().describe_training_job(TrainingJobName)

    def stop_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.clock.now += ANSWER
        return super().stop_training_job(TrainingJobName)


class SlowSns(FakeSns):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def publish(self, **kwargs: str) -> dict[str, str]:
        self.clock.now += ANSWER
        return super().publish(**kwargs)


class SlowLedger(MemoryLedger):
    """DynamoDB calls take ``ANSWER`` seconds; the first complete is throttled (and tried again)."""

    def __init__(self, clock: Clock, throttle: int = 1) -> None:
        super().__init__(clock, lease_seconds=TIMEOUT + 30)
        self.tick, self.throttle = clock, throttle

    def claim_or_holder(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        self.tick.now += ANSWER
        return super().claim_or_holder(pk, record)

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        self.tick.now += ANSWER
        if self.throttle:
            self.throttle -= 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "UpdateItem")
        super().complete(pk, outcome)

    def release(self, pk: str) -> None:
        self.tick.now += ANSWER
        super().release(pk)


def _monitoring() -> dict[str, Any]:
    state = init_state(copy.deepcopy(SPEC), clock=lambda: 0.0)
    state["history"].update(num_retraining=1, latest_job_name="run-x", jobs=[{"job_name": "run-x"}])
    state["next_action"] = "monitor"
    return state


def _setup(describe: float = ANSWER, throttle: int = 1) -> tuple[ModuleType, Clock, SlowSageMaker, SlowSns,
                                                                 SlowLedger]:
    clock = Clock()
    sagemaker, sns, ledger = SlowSageMaker(clock, describe), SlowSns(clock), SlowLedger(clock, throttle)
    module = entry_point("actions", "retrain_entry")
    module._runtime = fake_runtime(settings(function_timeout=TIMEOUT, lease_seconds=TIMEOUT + 30), ledger,
                                   sagemaker=sagemaker, sns=sns)
    return module, clock, sagemaker, sns, ledger


def _invoke(module: ModuleType, clock: Clock, state: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = clock.now
    answer = module.retrain({"step": "monitor", "state": state}, Context(clock, TIMEOUT))
    return clock.now - started, answer


def test_retrain_monitor_with_slow_answers_stops_plans_and_ends_inside_the_timeout() -> None:
    module, clock, sagemaker, sns, ledger = _setup()
    elapsed, state = _invoke(module, clock, _monitoring())
    assert elapsed < TIMEOUT, f"the monitor step took {elapsed:g} s of a {TIMEOUT:g} s timeout"
    assert sagemaker.stopped == ["run-x"] and ledger.items[stop_key("run-x")]["state"] == DONE
    assert state["next_action"] == "launch_new"  # the planned run survives: the step was not killed
    assert sns.published == []  # the progress message (best effort) did not fit and was skipped


def test_retrain_monitor_too_late_to_claim_the_stop_leaves_it_unclaimed_for_the_next_poll() -> None:
    module, clock, sagemaker, _, ledger = _setup(describe=100.0)  # DescribeTrainingJob answered very late
    elapsed, state = _invoke(module, clock, _monitoring())
    assert elapsed < TIMEOUT, f"the monitor step took {elapsed:g} s of a {TIMEOUT:g} s timeout"
    assert sagemaker.stopped == [] and stop_key("run-x") not in ledger.items  # nothing claimed
    assert state["next_action"] == "monitor" and state["error"]["retryable"] is True
    assert state["error"]["code"] == "OutOfTimeError"
    sagemaker.describe = ANSWER
    elapsed, state = _invoke(module, clock, state)  # the next poll stops it
    assert elapsed < TIMEOUT and sagemaker.stopped == ["run-x"] and state["next_action"] == "launch_new"


def test_retrain_end_after_a_failure_too_late_to_stop_says_the_job_still_runs_inside_the_timeout() -> None:
    module, clock, sagemaker, sns, ledger = _setup(describe=80.0, throttle=0)  # the job's status answered late
    state = {**_monitoring(), "error": {"step": "monitor", "code": "ThrottlingException", "retryable": True}}
    started = clock.now
    answer = module.retrain({"step": "end", "state": state}, Context(clock, TIMEOUT))
    assert clock.now - started < TIMEOUT, f"the end step took {clock.now - started:g} s of a {TIMEOUT:g} s timeout"
    assert sagemaker.stopped == [] and stop_key("run-x") not in ledger.items  # nothing left claimed
    (message,) = sns.published  # the final message always goes out
    assert "run-x still runs and nothing monitors it any more: stop it yourself" in message["Message"]
    assert answer["next_action"] == "end"
