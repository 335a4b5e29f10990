"""Human-readable notifications: rule triggers and CloudWatch alarm state changes.

Pure formatting plus one SNS publish. SNS limits: subject at most 100 printable ASCII characters with
no line breaks; message at most 256 KB. Imports only the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from smx_debug.actions.events import AlarmChange, JobStateChange, RuleStatus

__all__ = [
    "MAX_MESSAGE_BYTES",
    "MAX_SUBJECT",
    "Notification",
    "alarm_notification",
    "console_job_url",
    "rule_logs_url",
    "rule_notification",
    "safe_subject",
]

MAX_SUBJECT = 100
MAX_MESSAGE_BYTES = 256 * 1024
RULE_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"
_NOT_SUBJECT = re.compile(r"[^\x20-\x7e]+")


@dataclass(frozen=True)
class Notification:
    subject: str
    message: str

    def publish(self, sns: Any, topic_arn: str) -> str:
        """Publish to ``topic_arn``; returns the MessageId."""
        response = sns.publish(TopicArn=topic_arn, Subject=self.subject, Message=self.message)
        return str(response.get("MessageId", ""))


def safe_subject(text: str) -> str:
    """Printable ASCII, one line, at most 100 characters (SNS rejects anything else)."""
    flat = " ".join(_NOT_SUBJECT.sub(" ", text).split()) or "smx-debug notification"
    return flat if len(flat) <= MAX_SUBJECT else flat[: MAX_SUBJECT - 3] + "..."


def _cap(message: str) -> str:
    data = message.encode("utf-8")
    if len(data) <= MAX_MESSAGE_BYTES:
        return message
    return data[: MAX_MESSAGE_BYTES - 64].decode("utf-8", "ignore") + "\n... (truncated to fit SNS)"


def console_job_url(region: str, job_name: str) -> str:
    """The training job's page in the SageMaker console."""
    return f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{quote(job_name)}"


def _cw_fragment(text: str) -> str:
    # The CloudWatch console double-encodes fragment parts: '/' -> %2F -> $252F.
    return quote(quote(text, safe=""), safe="").replace("%", "$")


def rule_logs_url(region: str, processing_job_name: str) -> str:
    """The rule evaluation job's logs: group /aws/sagemaker/ProcessingJobs, stream prefix = job name."""
    return (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
        f"{_cw_fragment(RULE_LOG_GROUP)}$3FlogStreamNameFilter$3D{_cw_fragment(processing_job_name)}"
    )


def rule_notification(
    change: JobStateChange,
    rule: RuleStatus,
    *,
    region: str,
    action_taken: str,
    job_status: str | None = None,
    plan: str | None = None,
) -> Notification:
    """The message people get when a rule finds issues: job, rule, details, step, action, links."""
    step = str(rule.step) if rule.step is not None else "unknown"
    details = (rule.details or "(none)").strip()[:4000]
    lines = [
        f"SageMaker Debugger rule {rule.name} found issues in training job {change.job_name}.",
        "",
        f"Training job:    {change.job_name}",
        f"Rule:            {rule.name} ({rule.kind} rule)",
        f"Rule status:     {rule.status}",
        f"Status details:  {details}",
        f"Step:            {step}",
        f"Job status:      {job_status or change.status or 'unknown'}",
        f"Action taken:    {action_taken}",
    ]
    if plan:
        lines.append(f"Debug plan:      {plan}")
    lines += ["", f"Training job in the console: {console_job_url(region, change.job_name)}"]
    if rule.processing_job_name:
        lines.append(
            f"Rule job logs ({RULE_LOG_GROUP}, stream prefix {rule.processing_job_name}): "
            f"{rule_logs_url(region, rule.processing_job_name)}"
        )
    else:
        lines.append(f"Rule job logs: {RULE_LOG_GROUP} (the rule job ARN was not in the event)")
    subject = safe_subject(f"smx-debug: {rule.name} found issues in {change.job_name}")
    return Notification(subject=subject, message=_cap("\n".join(lines) + "\n"))


def alarm_notification(alarm: AlarmChange, *, region: str) -> Notification:
    """The message for a CloudWatch alarm state change (e.g. an alarm on the RuleTriggered metric)."""
    where = alarm.region if alarm.region and " " not in alarm.region else region
    alarm_url = (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#alarmsV2:alarm/"
        f"{quote(alarm.alarm_name, safe='')}"
    )
    lines = [
        f"CloudWatch alarm {alarm.alarm_name} changed from {alarm.old_state or 'unknown'} to {alarm.new_state}.",
        "",
        f"Reason:          {(alarm.reason or '(none)')[:2000]}",
        f"Metric:          {alarm.namespace or '?'} / {alarm.metric_name or '?'}",
    ]
    for key, value in sorted(alarm.dimensions.items()):
        lines.append(f"Dimension:       {key} = {value}")
    lines += [f"Region:          {where}", f"Changed at:      {alarm.change_time or 'unknown'}", ""]
    lines.append(f"Alarm in the console: {alarm_url}")
    job = alarm.dimensions.get("TrainingJobName")
    if job:
        lines.append(f"Training job in the console: {console_job_url(region, job)}")
    subject = safe_subject(f"smx-debug: alarm {alarm.alarm_name} is {alarm.new_state}")
    return Notification(subject=subject, message=_cap("\n".join(lines) + "\n"))
