from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from smx_debug.actions import MalformedEventError
from smx_debug.actions.events import parse_alarm_message, parse_state_change, parse_time
from smx_debug.contracts import details_step as parse_step

EVENTS = Path(__file__).resolve().parents[2] / "events"


def _event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def test_parse_state_change_issues_found_event_gives_rules_step_and_times_not_tags() -> None:
    change = parse_state_change(_event("sagemaker_state_change_issues_found.json"))
    job = "smdebugger-demo-mnist-tensorflow-1575184517"
    assert asdict(change) == {
        "job_name": job,
        "job_arn": f"arn:aws:sagemaker:us-east-2:123456789012:training-job/{job}",
        "status": "InProgress",
        "secondary_status": "Training",
        "last_modified": 1575185055.495,
        "rules": (
            {
                "name": "VanishingGradient",
                "status": "IssuesFound",
                "kind": "debugger",
                "details": "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 "
                "resulted in the condition being met\n",
                "step": 500,
                "evaluation_job_arn": "arn:aws:sagemaker:us-east-2:123456789012:processing-job/"
                "smdebugger-demo-mnist-tens-vanishinggradient-e23301a8",
                "last_modified": 1575185055.495,
            },
            {
                "name": "LossNotDecreasing",
                "status": "InProgress",
                "kind": "debugger",
                "details": None,
                "step": None,
                "evaluation_job_arn": "arn:aws:sagemaker:us-east-2:123456789012:processing-job/"
                "smdebugger-demo-mnist-tens-lossnotdecreasing-27ee2da1",
                "last_modified": 1575185055.495,
            },
        ),
        "region": "us-east-2",
        "account": "123456789012",
        "event_id": "0c5a8e3e-7c1b-4a2e-9d63-1f0e2b7a9c41",
    }
    assert [r.name for r in change.triggered()] == ["VanishingGradient"]
    assert change.rules[0].processing_job_name == "smdebugger-demo-mnist-tens-vanishinggradient-e23301a8"


@pytest.mark.parametrize(
    ("name", "triggered", "profiler"),
    [
        ("sagemaker_state_change_in_progress.json", [], ["ProfilerReport"]),
        ("sagemaker_state_change_completed.json", [], []),
    ],
)
def test_parse_state_change_without_issues_has_no_triggered_rules(
    name: str, triggered: list, profiler: list
) -> None:
    change = parse_state_change(_event(name))
    assert [r.name for r in change.triggered()] == triggered
    assert [r.name for r in change.rules if r.kind == "profiler"] == profiler


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1575185055495", 1575185055.495),
        (1575185055495, 1575185055.495),
        (1575185055, 1575185055.0),
        ("2021-10-13T03:49:20.337Z", 1634096960.337),
        (datetime(2019, 12, 1, 7, 20, 55, tzinfo=UTC), 1575184855.0),
        (datetime(2019, 12, 1, 7, 20, 55), 1575184855.0),
        ("", None),
        ("yesterday", None),
        (None, None),
        (True, None),
        (-5, None),
        ("nan", None),
        ("x" * 10_000, None),
    ],
)
def test_parse_time_accepts_epoch_ms_seconds_iso_and_datetime(value: object, expected: float | None) -> None:
    assert parse_time(value) == expected


@pytest.mark.parametrize(
    ("details", "step"),
    [
        (
            "RuleEvaluationConditionMet: Evaluation of the rule StalledTrainingRule at step 101 resulted in the "
            "condition being met\n",
            101,
        ),
        (
            "RuleEvaluationConditionMet: Evaluation of the rule LossNotDecreasing at step 3000 resulted in the "
            "condition being met\n",
            3000,
        ),
        ("InternalServerError: rule crashed", None),
        (None, None),
        (42, None),
    ],
)
def test_parse_step_reads_the_step_from_status_details(details: object, step: int | None) -> None:
    assert parse_step(details) == step


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda e: e.pop("detail"), "event.detail: expected an object"),
        (lambda e: e.update(source="aws.ec2"), "is not 'aws.sagemaker'"),
        (lambda e: e["detail"].pop("TrainingJobName"), "detail.TrainingJobName"),
        (lambda e: e["detail"].update(TrainingJobName="x" * 300), "detail.TrainingJobName"),
        (lambda e: e["detail"].update(DebugRuleEvaluationStatuses="IssuesFound"), "expected a list"),
        (lambda e: e["detail"].update(TrainingJobName="job-\ud800"), "not a SageMaker training job name"),
        (lambda e: e["detail"].update(TrainingJobName="job name"), "not a SageMaker training job name"),
        (lambda e: e["detail"].update(TrainingJobArn="arn:aws:s3:::bucket"), "detail.TrainingJobArn"),
        (lambda e: e["detail"].update(TrainingJobArn=7), "detail.TrainingJobArn"),
    ],
)
def test_parse_state_change_unusable_event_raises_malformed(mutate, needle: str) -> None:
    event = _event("sagemaker_state_change_issues_found.json")
    mutate(event)
    with pytest.raises(MalformedEventError, match=needle):
        parse_state_change(event)


def test_parse_state_change_bad_rule_entries_are_skipped_not_fatal() -> None:
    event = _event("sagemaker_state_change_issues_found.json")
    statuses = event["detail"]["DebugRuleEvaluationStatuses"]
    statuses += [None, 7, {"RuleConfigurationName": 5, "RuleEvaluationStatus": "IssuesFound"}, {}]
    statuses += [{"RuleConfigurationName": "R\ud800", "RuleEvaluationStatus": "IssuesFound"}]
    assert [r.name for r in parse_state_change(event).rules] == ["VanishingGradient", "LossNotDecreasing"]


def test_parse_alarm_message_reads_the_cloudwatch_notification() -> None:
    record = _event("sns_cloudwatch_alarm.json")["Records"][0]
    alarm = parse_alarm_message(record["Sns"]["Message"])
    assert asdict(alarm) == {
        "alarm_name": "smx-debug-ExplodingTensor-triggered",
        "new_state": "ALARM",
        "old_state": "OK",
        "reason": "Threshold Crossed: 1 datapoint [1.0 (22/11/26 14:05:00)] was greater than or equal to the "
        "threshold (1.0).",
        "region": "US West (Oregon)",
        "alarm_arn": "arn:aws:cloudwatch:us-west-2:123456789012:alarm:smx-debug-ExplodingTensor-triggered",
        "dimensions": {"RuleName": "ExplodingTensor"},
        "metric_name": "RuleTriggered",
        "namespace": "SmxDebug",
        "change_time": "2026-11-22T14:06:12.355+0000",
    }


@pytest.mark.parametrize("message", ["[" * 100_000 + "]" * 100_000, '{"a":' * 40_000 + "1" + "}" * 40_000])
def test_parse_alarm_message_nested_100000_deep_raises_malformed(message: str) -> None:
    with pytest.raises(MalformedEventError, match=r"Sns\.Message: not JSON"):
        parse_alarm_message(message)
