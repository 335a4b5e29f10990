from __future__ import annotations

import json
from pathlib import Path

import pytest

from smx_debug.actions import alarm_notification, parse_alarm_message, parse_state_change, rule_notification
from smx_debug.actions.notify import MAX_MESSAGE_BYTES, console_job_url, rule_logs_url, safe_subject

EVENTS = Path(__file__).resolve().parents[2] / "events"
JOB = "smdebugger-demo-mnist-tensorflow-1575184517"
RULE_JOB = "smdebugger-demo-mnist-tens-vanishinggradient-e23301a8"


def test_rule_notification_names_job_rule_details_step_action_and_links() -> None:
    change = parse_state_change(json.loads((EVENTS / "sagemaker_state_change_issues_found.json").read_text()))
    note = rule_notification(
        change,
        change.rules[0],
        region="us-east-2",
        action_taken="stop requested",
        job_status="Stopping",
        plan="mnist-guard",
    )
    assert note.subject == f"smx-debug: VanishingGradient found issues in {JOB}"
    assert note.message.splitlines() == [
        f"SageMaker Debugger rule VanishingGradient found issues in training job {JOB}.",
        "",
        f"Training job:    {JOB}",
        "Rule:            VanishingGradient (debug rule)",
        "Rule status:     IssuesFound",
        "Status details:  RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 "
        "resulted in the condition being met",
        "Step:            500",
        "Job status:      Stopping",
        "Action taken:    stop requested",
        "Debug plan:      mnist-guard",
        "",
        f"Training job in the console: {console_job_url('us-east-2', JOB)}",
        f"Rule job logs (/aws/sagemaker/ProcessingJobs, stream prefix {RULE_JOB}): "
        f"{rule_logs_url('us-east-2', RULE_JOB)}",
    ]


def test_console_links_follow_the_console_url_formats() -> None:
    assert console_job_url("us-east-2", JOB) == (
        f"https://us-east-2.console.aws.amazon.com/sagemaker/home?region=us-east-2#/jobs/{JOB}"
    )
    assert rule_logs_url("us-east-2", RULE_JOB) == (
        "https://us-east-2.console.aws.amazon.com/cloudwatch/home?region=us-east-2#logsV2:log-groups/log-group/"
        f"$252Faws$252Fsagemaker$252FProcessingJobs$3FlogStreamNameFilter$3D{RULE_JOB}"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("smx-debug: R found issues", "smx-debug: R found issues"),
        ("line one\nline two\r\tend", "line one line two end"),
        ("régle à problème ✓", "r gle probl me"),
        ("", "smx-debug notification"),
        ("x" * 150, "x" * 97 + "..."),
    ],
)
def test_safe_subject_is_ascii_single_line_and_at_most_100_chars(text: str, expected: str) -> None:
    assert safe_subject(text) == expected


def test_rule_notification_huge_details_stay_within_sns_limits() -> None:
    event = json.loads((EVENTS / "sagemaker_state_change_issues_found.json").read_text())
    event["detail"]["TrainingJobName"] = "j" * 256
    change = parse_state_change(event)
    rule = change.rules[0]
    note = rule_notification(change, rule, region="us-east-2", action_taken="x" * 400_000)
    assert len(note.message.encode()) <= MAX_MESSAGE_BYTES
    assert len(note.subject) == 100 and note.subject.isascii()


def test_alarm_notification_from_the_sns_record() -> None:
    record = json.loads((EVENTS / "sns_cloudwatch_alarm.json").read_text())["Records"][0]
    note = alarm_notification(parse_alarm_message(record["Sns"]["Message"]), region="us-west-2")
    assert note.subject == "smx-debug: alarm smx-debug-ExplodingTensor-triggered is ALARM"
    assert note.message.splitlines() == [
        "CloudWatch alarm smx-debug-ExplodingTensor-triggered changed from OK to ALARM.",
        "",
        "Reason:          Threshold Crossed: 1 datapoint [1.0 (22/11/26 14:05:00)] was greater than or equal to "
        "the threshold (1.0).",
        "Metric:          SmxDebug / RuleTriggered",
        "Dimension:       RuleName = ExplodingTensor",
        "Region:          us-west-2",
        "Changed at:      2026-11-22T14:06:12.355+0000",
        "",
        "Alarm in the console: https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2"
        "#alarmsV2:alarm/smx-debug-ExplodingTensor-triggered",
    ]
