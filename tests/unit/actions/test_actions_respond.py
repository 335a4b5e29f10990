from __future__ import annotations

import json
from pathlib import Path

import pytest
from actions_fakes import FakeCloudWatch, FakeSageMaker, FakeSns, fake_runtime
from botocore.exceptions import ClientError

from smx_debug.actions import Settings, handle_notify, handle_rule_metrics, handle_stop_training

EVENTS = Path(__file__).resolve().parents[2] / "events"
JOB = "smdebugger-demo-mnist-tensorflow-1575184517"


def _event(name: str = "sagemaker_state_change_issues_found.json") -> dict:
    return json.loads((EVENTS / name).read_text())


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            "InProgress",
            {"action": "stop", "job": JOB, "rule": "VanishingGradient", "outcome": "stopped", "step": 500},
        ),
        (
            "Stopping",
            {
                "action": "stop",
                "job": JOB,
                "rule": "VanishingGradient",
                "skipped": "job status is Stopping",
                "job_status": "Stopping",
            },
        ),
        (
            "Completed",
            {
                "action": "stop",
                "job": JOB,
                "rule": "VanishingGradient",
                "skipped": "job status is Completed",
                "job_status": "Completed",
            },
        ),
    ],
)
def test_stop_only_an_in_progress_job_and_finished_jobs_are_not_errors(status: str, expected: dict) -> None:
    sagemaker = FakeSageMaker(status=status)
    runtime = fake_runtime(sagemaker=sagemaker)
    assert handle_stop_training(_event(), runtime) == expected
    assert handle_stop_training(_event(), runtime)["skipped"] in (
        "job status is Stopping",
        f"job status is {status}",
    )
    assert sagemaker.stopped == ([JOB] if status == "InProgress" else [])


def test_stop_job_left_in_progress_between_describe_and_stop_is_recorded_not_raised() -> None:
    class Racing(FakeSageMaker):
        def stop_training_job(self, TrainingJobName: str) -> dict:
            self.status = "Completed"
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "Completed"}}, "StopTrainingJob"
            )

    runtime = fake_runtime(sagemaker=Racing())
    assert handle_stop_training(_event(), runtime)["outcome"] == "not stopped: job was Completed"
    assert runtime.ledger.get(f"{JOB}#stop")["outcome"] == "not stopped: job was Completed"


def test_unwatched_job_gets_no_metric_stop_or_message() -> None:
    event = _event()
    event["detail"]["Tags"] = {
        "smx-debug:on:VanishingGradient": "stop notify"
    }  # no opt-in, prefix not watched
    cloudwatch, sns, sagemaker = FakeCloudWatch(), FakeSns(), FakeSageMaker()
    runtime = fake_runtime(
        Settings(region="us-east-2", topic_arn="arn:aws:sns:us-east-2:123456789012:t"),
        sagemaker=sagemaker,
        sns=sns,
        cloudwatch=cloudwatch,
    )
    results = [
        h(event, runtime).get("skipped") for h in (handle_rule_metrics, handle_stop_training, handle_notify)
    ]
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


def test_notify_alarm_record_is_published_once_even_if_sns_delivers_twice() -> None:
    sns = FakeSns()
    runtime = fake_runtime(sns=sns)
    event = _event("sns_cloudwatch_alarm.json")
    first, second = handle_notify(event, runtime), handle_notify(event, runtime)
    assert first["alarms"] == [
        {"alarm": "smx-debug-ExplodingTensor-triggered", "state": "ALARM", "message_id": "m-1"}
    ]
    assert second["alarms"] == []
    assert [(p["TopicArn"], p["Subject"]) for p in sns.published] == [
        (
            "arn:aws:sns:us-west-2:123456789012:t",
            "smx-debug: alarm smx-debug-ExplodingTensor-triggered is ALARM",
        )
    ]


def test_handler_aws_failure_propagates_and_releases_the_claim() -> None:
    class Broken(FakeSns):
        def publish(self, **kwargs: str) -> dict:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "boom"}}, "Publish")

    runtime = fake_runtime(sns=Broken())
    with pytest.raises(ClientError, match="boom"):
        handle_notify(_event(), runtime)
    assert runtime.ledger.items == {}
