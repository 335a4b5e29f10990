from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from actions_fakes import (
    ACCOUNT,
    JOB,
    REGION,
    SAMPLE,
    TOPIC,
    FakeCloudWatch,
    FakeSageMaker,
    FakeSns,
    FakeStates,
    fake_runtime,
    settings,
)
from botocore.exceptions import ClientError
from lambda_support import Clock, Crash, CrashAfterClaim

from smx_debug.actions import (
    ClaimInProgressError,
    MemoryLedger,
    Trigger,
    handle_notify,
    handle_rule_metrics,
    handle_stop_training,
    respond,
    verify_job,
)
from smx_debug.contracts import RETRAIN_RUN_TAG, SOURCE_EVALUATOR, retrain_execution_name

ARN = SAMPLE["detail"]["TrainingJobArn"]


def _event(name: str = "sagemaker_state_change_issues_found.json") -> dict[str, Any]:
    from actions_fakes import EVENTS

    return json.loads((EVENTS / name).read_text())


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("InProgress", {"rule": "VanishingGradient", "outcome": "stopped", "step": 500}),
        ("Stopping", {"rule": "VanishingGradient", "skipped": "job status is Stopping"}),
        ("Completed", {"rule": "VanishingGradient", "skipped": "job status is Completed"}),
    ],
)
def test_stop_only_an_in_progress_job_and_finished_jobs_are_not_errors(status: str, expected: dict) -> None:
    sagemaker = FakeSageMaker(status=status)
    runtime = fake_runtime(sagemaker=sagemaker)
    assert handle_stop_training(_event(), runtime)["stop"] == expected
    assert handle_stop_training(_event(), runtime)["stop"]["skipped"] in (
        "job status is Stopping",
        f"job status is {status}",
    )
    assert sagemaker.stopped == ([JOB] if status == "InProgress" else [])


def test_stop_job_left_in_progress_between_describe_and_stop_is_recorded_not_raised() -> None:
    class Racing(FakeSageMaker):
        def stop_training_job(self, TrainingJobName: str) -> dict:
            self.status = "Completed"
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "Completed"}}, "StopTrainingJob")

    runtime = fake_runtime(sagemaker=Racing())
    assert handle_stop_training(_event(), runtime)["stop"]["outcome"] == "not stopped: job was Completed"
    assert runtime.ledger.get(f"{JOB}#stop")["outcome"] == "not stopped: job was Completed"


def test_unwatched_job_gets_no_metric_stop_or_message() -> None:
    # SageMaker's tags: no opt-in; the deployment watches no prefix of this job.
    sagemaker = FakeSageMaker(tags={"smx-debug:on:VanishingGradient": "stop notify"})
    cloudwatch, sns = FakeCloudWatch(), FakeSns()
    runtime = fake_runtime(settings(watch_prefixes=()), sagemaker=sagemaker, sns=sns, cloudwatch=cloudwatch)
    results = [h(_event(), runtime).get("skipped") for h in (handle_rule_metrics, handle_stop_training, handle_notify)]
    assert results == ["job not watched by this deployment"] * 3
    assert (cloudwatch.data, sns.published, sagemaker.stopped) == ([], [], [])


def test_rule_metrics_three_datapoints_once_per_rule() -> None:
    cloudwatch = FakeCloudWatch()
    runtime = fake_runtime(cloudwatch=cloudwatch)
    handle_rule_metrics(_event(), runtime)
    handle_rule_metrics(_event(), runtime)
    assert len(cloudwatch.data) == 1
    (call,) = cloudwatch.data
    assert call["Namespace"] == "SmxDebug"
    assert [(d["MetricName"], d["Value"], d["Unit"], d["Dimensions"]) for d in call["MetricData"]] == [
        ("RuleTriggered", 1.0, "Count", []),
        ("RuleTriggered", 1.0, "Count", [{"Name": "RuleName", "Value": "VanishingGradient"}]),
        (
            "RuleTriggered",
            1.0,
            "Count",
            [{"Name": "TrainingJobName", "Value": JOB}, {"Name": "RuleName", "Value": "VanishingGradient"}],
        ),
    ]
    assert runtime.ledger.get(f"{JOB}#debugger:VanishingGradient#IssuesFound#metric")["state"] == "done"


def test_notify_alarm_record_is_published_once_even_if_sns_delivers_twice() -> None:
    sns = FakeSns()
    runtime = fake_runtime(sns=sns)
    event = _event("sns_cloudwatch_alarm.json")
    first, second = handle_notify(event, runtime), handle_notify(event, runtime)
    assert first["alarms"] == [{"alarm": "smx-debug-ExplodingTensor-triggered", "state": "ALARM", "message_id": "m-1"}]
    assert second["alarms"] == []
    assert [(p["TopicArn"], p["Subject"]) for p in sns.published] == [
        (TOPIC, "smx-debug: alarm smx-debug-ExplodingTensor-triggered is ALARM")
    ]


def test_handler_aws_failure_propagates_and_releases_the_claim() -> None:
    class Broken(FakeSns):
        def publish(self, **kwargs: str) -> dict:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "boom"}}, "Publish")

    runtime = fake_runtime(sns=Broken())
    with pytest.raises(ClientError, match="boom"):
        handle_notify(_event(), runtime)
    assert runtime.ledger.items == {}


# --- forged events: the event only says where to look ---------------------------------------------------


def _forge_tags(e: dict) -> None:
    e["detail"]["Tags"] = {"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": "stop notify"}


def _forge_arn(e: dict) -> None:
    e["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/victim-job"


def _forge_account(e: dict) -> None:
    e["account"] = "999999999999"


def _forge_region(e: dict) -> None:
    e["region"] = "eu-west-1"


def _forge_arn_account(e: dict) -> None:
    e["detail"]["TrainingJobArn"] = ARN.replace(ACCOUNT, "999999999999")


def _forge_rule_status(e: dict) -> None:
    e["detail"]["DebugRuleEvaluationStatuses"][1]["RuleEvaluationStatus"] = "IssuesFound"


# SageMaker's view for each case: the real job's tags do not opt it in / its rules have not fired.
FORGED = {
    "event tags opt in a job whose real tags do not": (_forge_tags, {"tags": {"team": "a"}}, ("other-",)),
    "ARN names another job than the name": (_forge_arn, {}, ("smdebugger-",)),
    "foreign account": (_forge_account, {}, ("smdebugger-",)),
    "foreign region": (_forge_region, {}, ("smdebugger-",)),
    "ARN in a foreign account": (_forge_arn_account, {}, ("smdebugger-",)),
    "rule status SageMaker does not show": (
        _forge_rule_status,
        {"rules": [{"RuleConfigurationName": "LossNotDecreasing", "RuleEvaluationStatus": "InProgress"}],
         "tags": {"smx-debug:managed": "true", "smx-debug:on:LossNotDecreasing": "stop notify"}},
        ("smdebugger-",),
    ),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_forged_event_takes_no_action(case: str) -> None:
    forge, view, prefixes = FORGED[case]
    event = copy.deepcopy(_event())
    forge(event)
    sagemaker, sns, cloudwatch = FakeSageMaker(**view), FakeSns(), FakeCloudWatch()
    if case == "rule status SageMaker does not show":
        # Only LossNotDecreasing asks for actions, and SageMaker shows it InProgress.
        event["detail"]["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] = "NoIssuesFound"
    runtime = fake_runtime(settings(watch_prefixes=prefixes), sagemaker=sagemaker, sns=sns, cloudwatch=cloudwatch)
    results = [h(event, runtime) for h in (handle_rule_metrics, handle_stop_training, handle_notify)]
    assert (sagemaker.stopped, sns.published, cloudwatch.data) == ([], [], []), results
    assert all(r.get("refused") or r.get("skipped") for r in results), results
    assert "StopTrainingJob" not in sagemaker.calls


def test_event_for_a_job_sagemaker_does_not_know_is_refused() -> None:
    event = _event()
    event["detail"]["TrainingJobName"] = "smdebugger-ghost"
    del event["detail"]["TrainingJobArn"]
    sagemaker = FakeSageMaker()
    result = handle_stop_training(event, fake_runtime(sagemaker=sagemaker))
    assert result["refused"] is True and "does not exist" in result["reason"]
    assert sagemaker.stopped == []


def test_unknown_deployment_account_refuses_to_act() -> None:
    sagemaker = FakeSageMaker()
    result = handle_stop_training(_event(), fake_runtime(settings(account=None), sagemaker=sagemaker))
    assert result["refused"] is True and "SMX_ACCOUNT" in result["reason"]
    assert sagemaker.stopped == []


@pytest.mark.parametrize("name", ["smdebugger-\ud800-job", "smdebugger job", "-leading", "x" * 64, "ü-job"])
def test_junk_job_name_is_rejected_as_malformed_not_crashing(name: str) -> None:
    event = _event()
    event["detail"]["TrainingJobName"] = name
    for handler in (handle_rule_metrics, handle_stop_training, handle_notify):
        result = handler(event, fake_runtime())
        assert result["rejected"] is True and "TrainingJobName" in result["reason"]
        json.dumps(result)  # loggable: no lone surrogate left in it


def test_core_bug_inside_a_handler_fails_the_invocation() -> None:
    """A bug (here: a KeyError deep in a client) must not be turned into a "rejected" event."""

    class Buggy(FakeSageMaker):
        def stop_training_job(self, TrainingJobName: str) -> dict:
            return {}["bug"]

    runtime = fake_runtime(sagemaker=Buggy())
    with pytest.raises(KeyError):
        handle_stop_training(_event(), runtime)
    assert runtime.ledger.get(f"{JOB}#stop") is None  # released: the retry can act


# --- notify: one failing topic does not abort the others ---------------------------------------------


def test_foreign_topic_refusing_us_does_not_abort_the_other_notifications() -> None:
    foreign = "arn:aws:sns:us-east-2:999999999999:theirs"
    sagemaker = FakeSageMaker(
        tags={"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": f"notify={foreign} notify"}
    )
    sns = FakeSns(refuse=(foreign,))
    runtime = fake_runtime(sagemaker=sagemaker, sns=sns)
    with pytest.raises(ClientError, match="AuthorizationError"):
        handle_notify(_event(), runtime)
    assert [p["TopicArn"] for p in sns.published] == [TOPIC]
    # The retry sends nothing twice and fails again on the foreign topic only (then the DLQ holds it).
    with pytest.raises(ClientError, match="AuthorizationError"):
        handle_notify(_event(), runtime)
    assert [p["TopicArn"] for p in sns.published] == [TOPIC]


# --- retrain: the state machine is started once per job ----------------------------------------------


def test_retrain_token_starts_the_state_machine_once_with_a_job_derived_name() -> None:
    sagemaker = FakeSageMaker(tags={"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": "retrain notify"})
    states, sns = FakeStates(), FakeSns()
    runtime = fake_runtime(sagemaker=sagemaker, stepfunctions=states, sns=sns)
    first = handle_stop_training(_event(), runtime)
    again = handle_stop_training(_event(), runtime)
    handle_notify(_event(), runtime)
    name = retrain_execution_name(JOB)
    assert first["retrain"] == {"rule": "VanishingGradient", "outcome": "started", "execution_name": name}
    assert again["retrain"]["duplicate"] is True
    assert list(states.started) == [name]
    spec = json.loads(states.started[name]["input"])["run_spec"]
    assert spec["after_job"]["job_name"] == JOB and spec["rules"] == ["VanishingGradient"]
    assert spec["request"]["RoleArn"] == SAMPLE["detail"]["RoleArn"]
    assert sagemaker.stopped == []  # retrain alone does not stop; "stop retrain" does both
    assert "retraining workflow started" in sns.published[0]["Message"]


def test_a_run_of_a_retraining_workflow_starts_no_second_workflow_and_its_message_says_who_owns_it() -> None:
    tags = {"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": "stop retrain notify",
            RETRAIN_RUN_TAG: "resnet-1122160000"}
    sagemaker, states, sns = FakeSageMaker(tags=tags), FakeStates(), FakeSns()
    runtime = fake_runtime(settings(state_machine_arn=None), sagemaker=sagemaker, stepfunctions=states, sns=sns)
    result = handle_stop_training(_event(), runtime)  # no ConfigError: nothing to start
    handle_notify(_event(), runtime)
    assert result["retrain"] == {
        "rule": "VanishingGradient",
        "skipped": "run of retraining workflow resnet-1122160000, whose monitor stops it and plans the next run",
    }
    assert states.started == {} and sagemaker.stopped == [JOB]  # the rule's stop still applies
    assert "retraining: run of retraining workflow resnet-1122160000" in sns.published[0]["Message"]


def test_retrain_without_state_machine_fails_loudly_naming_the_variable() -> None:
    sagemaker = FakeSageMaker(tags={"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": "retrain"})
    runtime = fake_runtime(settings(state_machine_arn=None), sagemaker=sagemaker)
    with pytest.raises(ValueError, match="SMX_STATE_MACHINE_ARN"):
        handle_stop_training(_event(), runtime)


# --- crash between claim and action: the lease ------------------------------------------------------


class CrashingMemoryLedger(CrashAfterClaim, MemoryLedger):
    """The in-memory ledger whose first claim dies before the action."""


@pytest.mark.parametrize(("token", "key", "done"), [("stop", f"{JOB}#stop", "stopped"), ("retrain", f"{JOB}#retrain", "started")])
def test_crash_after_claim_blocks_until_the_lease_expires_then_acts_once(token: str, key: str, done: str) -> None:
    clock = Clock(1_000_000.0)
    ledger = CrashingMemoryLedger(clock, lease_seconds=90)
    sagemaker = FakeSageMaker(tags={"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": token})
    states = FakeStates()
    runtime = fake_runtime(ledger=ledger, sagemaker=sagemaker, stepfunctions=states)

    with pytest.raises(Crash):
        handle_stop_training(_event(), runtime)
    claimed = dict(ledger.get(key) or {})
    assert claimed["state"] == "claimed"

    clock.now += 60  # Lambda's first retry, inside the lease: no action, no second claim, and it fails
    with pytest.raises(ClaimInProgressError):
        handle_stop_training(_event(), runtime)
    assert ledger.get(key) == claimed
    assert (sagemaker.stopped, states.started) == ([], {})

    clock.now += 120  # the second retry, after the lease ran out: taken over, acted on once
    result = handle_stop_training(_event(), runtime)
    assert result[token]["outcome"] == done
    clock.now += 1000
    assert handle_stop_training(_event(), runtime)[token].get("duplicate") in (True, None)
    assert len(sagemaker.stopped) + len(states.started) == 1
    record = ledger.get(key) or {}
    assert record["state"] == "done" and float(record["expires_at"]) > clock.now + 80 * 86_400


# --- the core entry point for the evaluator (issue 14) ----------------------------------------------


def test_respond_for_the_evaluator_acts_through_the_same_ledger_keys_and_shows_the_source() -> None:
    sagemaker, sns = FakeSageMaker(), FakeSns()
    runtime = fake_runtime(sagemaker=sagemaker, sns=sns)
    job = verify_job(sagemaker, job_name=JOB, deployment_account=ACCOUNT, deployment_region=REGION)
    trigger = Trigger(rule="VanishingGradient", kind="debugger", step=700, source=SOURCE_EVALUATOR)
    result = respond(job, [trigger], settings=runtime.settings, ledger=runtime.ledger, clients=runtime.clients)
    assert result["stop"]["outcome"] == "stopped"
    assert sns.published[0]["Message"].startswith("smx-debug evaluator: rule VanishingGradient found issues")
    # Debugger's event for the same rule afterwards: nothing twice.
    later = handle_stop_training(_event(), runtime)
    assert later["stop"]["skipped"] == "job status is Stopping"
    handle_notify(_event(), runtime)
    assert (len(sns.published), sagemaker.stopped) == (1, [JOB])


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [("kind", {"kind": "debug"}), ("source", {"source": "me"}), ("rule", {"rule": ""}), ("step", {"step": -1})],
)
def test_trigger_bad_value_names_the_field(field: str, kwargs: dict) -> None:
    with pytest.raises(ValueError, match=f"Trigger.{field}"):
        Trigger(**{"rule": "R", "kind": "debugger", **kwargs})


def test_alarm_with_a_lone_surrogate_name_is_rejected_not_crashing() -> None:
    event = _event("sns_cloudwatch_alarm.json")
    message = json.loads(event["Records"][0]["Sns"]["Message"])
    message["AlarmName"] = "smx-\ud800-alarm"
    event["Records"][0]["Sns"]["Message"] = json.dumps(message)  # JSON escapes it as \\ud800
    result = handle_notify(event, fake_runtime())
    assert result["rejected"] is True and "AlarmName" in result["reason"]
    json.dumps(result)


# --- the retraining execution timed out or was aborted: its end step never ran -----------------------


def test_retraining_execution_timed_out_is_notified_once() -> None:
    sns = FakeSns()
    runtime = fake_runtime(sns=sns)
    event = _event("sfn_execution_timed_out.json")
    first, again = handle_notify(event, runtime), handle_notify(event, runtime)
    assert (first["sent"], again["sent"]) == (True, False)
    (message,) = sns.published
    assert message["Subject"] == "smx-debug retrain: execution smx-retrain-job-1-0123456789 TIMED_OUT"
    assert "https://us-east-2.console.aws.amazon.com/states/home" in message["Message"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"status": "FAILED"}, "skipped"),  # the state machine's catch ran the end step, which notified
        ({"status": "SUCCEEDED"}, "skipped"),
        ({"account": "999999999999"}, "refused"),
        ({"stateMachineArn": "arn:aws:states:us-east-2:123456789012:stateMachine:theirs"}, "refused"),
        ({"executionArn": "arn:aws:states:us-east-2:123456789012:execution:x:\ud800"}, "rejected"),
    ],
)
def test_retraining_execution_other_endings_are_not_notified_here(change: dict, expected: str) -> None:
    event = _event("sfn_execution_timed_out.json")
    for key, value in change.items():
        (event if key == "account" else event["detail"])[key] = value
    sns = FakeSns()
    result = handle_notify(event, fake_runtime(sns=sns))
    assert result.get(expected), result
    assert sns.published == []


def test_respond_unknown_action_name_is_refused_naming_it() -> None:
    sagemaker = FakeSageMaker()
    runtime = fake_runtime(sagemaker=sagemaker)
    job = verify_job(sagemaker, job_name=JOB, deployment_account=ACCOUNT, deployment_region=REGION)
    with pytest.raises(ValueError, match="'explode'"):
        respond(job, [], settings=runtime.settings, ledger=runtime.ledger, clients=runtime.clients, actions=("explode",))


def test_respond_decides_which_actions_apply_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watched decision (the job's tags and the deployment's defaults) is made once, by respond, and the
    verdict log reuses it (issue 32: it was made again per single action)."""
    import sys

    from smx_debug import tags

    calls: list[str] = []
    original = tags.watched_actions

    def counted(job: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(job)
        return original(job, *args, **kwargs)

    for module in (sys.modules["smx_debug.actions.respond"], sys.modules["smx_debug.actions.verdict_log"]):
        monkeypatch.setattr(module, "watched_actions", counted, raising=False)
    sagemaker = FakeSageMaker(tags={"smx-debug:managed": "true", "smx-debug:on:VanishingGradient": "stop retrain"})

    class S3:
        def put_object(self, **_: Any) -> dict[str, Any]:
            return {}

    runtime = fake_runtime(settings(fleet_bucket="guard-bucket"), sagemaker=sagemaker, states=FakeStates(), s3=S3())
    job = verify_job(sagemaker, job_name=JOB, deployment_account=ACCOUNT, deployment_region=REGION)
    result = respond(job, [Trigger(rule="VanishingGradient", kind="debugger", step=5)], settings=runtime.settings,
                     ledger=runtime.ledger, clients=runtime.clients, actions=("stop", "retrain"))
    assert result["stop"]["outcome"] == "stopped" and result["verdict_log"]["rows"] >= 2
    assert calls == [JOB]
