from __future__ import annotations

import json
from pathlib import Path

import pytest
from actions_fakes import ACCOUNT, REGION, FakeSageMaker

from smx_debug.actions import Trigger, VerifiedJob, verify_job
from smx_debug.actions.events import parse_alarm_message
from smx_debug.actions.notify import (
    MAX_MESSAGE_BYTES,
    alarm_notification,
    rule_notification,
    safe_subject,
    shown_values,
)
from smx_debug.actions.verify import debugger_triggers
from smx_debug.contracts import SOURCE_EVALUATOR, console_job_url, rule_logs_url

EVENTS = Path(__file__).resolve().parents[2] / "events"
JOB = "smdebugger-demo-mnist-tensorflow-1575184517"
RULE_JOB = "smdebugger-demo-mnist-tens-vanishinggradient-e23301a8"


def _job(status: str = "Stopping") -> VerifiedJob:
    return verify_job(FakeSageMaker(status=status), job_name=JOB, deployment_account=ACCOUNT, deployment_region=REGION)


def test_rule_notification_names_source_job_rule_details_step_action_and_links() -> None:
    job = _job()
    note = rule_notification(job, debugger_triggers(job)[0], action_taken="stop requested", plan="mnist-guard")
    assert note.subject == f"smx-debug: VanishingGradient found issues in {JOB}"
    assert note.message.splitlines() == [
        f"SageMaker Debugger: rule VanishingGradient found issues in training job {JOB}.",
        "",
        f"Training job:    {JOB}",
        "Rule:            VanishingGradient (debugger rule, evaluated by SageMaker Debugger)",
        "Status details:  RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 "
        "resulted in the condition being met",
        "Step:            500",
        "Job status:      Stopping",
        "Action taken:    stop requested",
        "Debug plan:      mnist-guard",
        "",
        f"Training job in the console: {console_job_url('us-east-2', JOB)}",
        f"Rule job logs (/aws/sagemaker/ProcessingJobs): {rule_logs_url('us-east-2', RULE_JOB)}",
    ]


def test_rule_notification_from_the_evaluator_says_so_and_has_no_rule_job_line() -> None:
    trigger = Trigger(rule="LowGPUUtilization-80", kind="profiler", step=12, source=SOURCE_EVALUATOR)
    lines = rule_notification(_job(), trigger, action_taken="notification sent").message.splitlines()
    assert lines[0] == f"smx-debug evaluator: rule LowGPUUtilization-80 found issues in training job {JOB}."
    assert lines[3] == "Rule:            LowGPUUtilization-80 (profiler rule, evaluated by smx-debug evaluator)"
    assert not any("Rule job logs" in line for line in lines)


def test_rule_notification_links_use_the_china_console_in_cn_regions() -> None:
    job = VerifiedJob(
        name="j", arn="arn:aws-cn:sagemaker:cn-north-1:123456789012:training-job/j", account="123456789012",
        region="cn-north-1", partition="aws-cn", status="InProgress", tags={},
    )
    trigger = Trigger(
        rule="R", kind="debugger",
        evaluation_job_arn="arn:aws-cn:sagemaker:cn-north-1:123456789012:processing-job/j-r-0123abcd",
    )
    message = rule_notification(job, trigger, action_taken="x").message
    assert "https://cn-north-1.console.amazonaws.cn/sagemaker/" in message
    assert "https://cn-north-1.console.amazonaws.cn/cloudwatch/" in message
    assert "amazon.com" not in message


def test_shown_values_hide_every_value_unless_the_key_is_listed() -> None:
    hyper = {"wandb_api_key": "s3cr3t", "learning_rate": "0.1", "epochs": "3"}
    assert shown_values(hyper, frozenset()) == (
        "epochs=(value hidden), learning_rate=(value hidden), wandb_api_key=(value hidden)"
    )
    assert shown_values(hyper, {"learning_rate"}) == (
        "epochs=(value hidden), learning_rate=0.1, wandb_api_key=(value hidden)"
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
    job = _job()
    trigger = Trigger(rule="R" * 256, kind="debugger", details="d" * 500_000)
    note = rule_notification(job, trigger, action_taken="x" * 400_000)
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
