"""Human-readable notifications: rule triggers and CloudWatch alarm state changes.

Pure formatting plus one SNS publish. SNS limits: subject at most 100 printable ASCII characters with
no line breaks; message at most 256 KB. Console and rule-log links come from :mod:`smx_debug.contracts`
(every partition). Messages name hyperparameters and environment variables but never show their values,
except the keys a deployment lists as safe (``SMX_SHOW_KEYS``): see :func:`shown_values`.
Imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from smx_debug.actions.events import AlarmChange, ExecutionChange
from smx_debug.actions.verify import Trigger, VerifiedJob
from smx_debug.contracts import (
    RULE_LOG_GROUP,
    SOURCE_EVALUATOR,
    console_domain,
    console_job_url,
    partition_of_region,
    rule_logs_url_from_arn,
)

MAX_SUBJECT = 100
MAX_MESSAGE_BYTES = 256 * 1024
HIDDEN = "(value hidden)"
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


def shown_values(values: Mapping[str, object], show_keys: Collection[str]) -> str:
    """``key=value`` for the keys a deployment lists as safe to show, ``key=(value hidden)`` for the rest.

    Example:
        >>> shown_values({"learning_rate": 0.1, "wandb_api_key": "s3cr3t"}, {"learning_rate"})
        'learning_rate=0.1, wandb_api_key=(value hidden)'
    """
    return (
        ", ".join(f"{key}={values[key] if key in show_keys else HIDDEN}" for key in sorted(values, key=str))
        or "(none)"
    )


def _cap(message: str) -> str:
    data = message.encode("utf-8", "replace")
    if len(data) <= MAX_MESSAGE_BYTES:
        return data.decode("utf-8")
    return data[: MAX_MESSAGE_BYTES - 64].decode("utf-8", "ignore") + "\n... (truncated to fit SNS)"


def rule_notification(
    job: VerifiedJob,
    trigger: Trigger,
    *,
    action_taken: str,
    plan: str | None = None,
) -> Notification:
    """The message people get when a rule finds issues: who found it, job, rule, details, step, action, links."""
    step = str(trigger.step) if trigger.step is not None else "unknown"
    details = (trigger.details or "(none)").strip()[:4000]
    lines = [
        f"{trigger.source}: rule {trigger.rule} found issues in training job {job.name}.",
        "",
        f"Training job:    {job.name}",
        f"Rule:            {trigger.rule} ({trigger.kind} rule, evaluated by {trigger.source})",
        f"Status details:  {details}",
        f"Step:            {step}",
        f"Job status:      {job.status}",
        f"Action taken:    {action_taken}",
    ]
    if plan:
        lines.append(f"Debug plan:      {plan}")
    lines += ["", f"Training job in the console: {console_job_url(job.region, job.name)}"]
    logs = rule_logs_url_from_arn(trigger.evaluation_job_arn)
    if logs:
        lines.append(f"Rule job logs ({RULE_LOG_GROUP}): {logs}")
    elif trigger.source != SOURCE_EVALUATOR:
        lines.append(f"Rule job logs: {RULE_LOG_GROUP} (SageMaker did not name the rule job)")
    subject = safe_subject(f"smx-debug: {trigger.rule} found issues in {job.name}")
    return Notification(subject=subject, message=_cap("\n".join(lines) + "\n"))


def alarm_notification(alarm: AlarmChange, *, region: str) -> Notification:
    """The message for a CloudWatch alarm state change (e.g. an alarm on the RuleTriggered metric)."""
    where = alarm.region if alarm.region and " " not in alarm.region else region
    domain = console_domain(partition_of_region(region))
    alarm_url = (
        f"https://{region}.{domain}/cloudwatch/home?region={region}#alarmsV2:alarm/"
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


def execution_notification(change: ExecutionChange, *, region: str) -> Notification:
    """The message for a retraining execution that ended outside its own end step (timed out, aborted)."""
    domain = console_domain(partition_of_region(region))
    url = f"https://{region}.{domain}/states/home?region={region}#/v2/executions/details/{quote(change.execution_arn, safe='')}"
    lines = [
        f"The smx-debug retraining workflow {change.name} ended: {change.status}.",
        "",
        "It ended outside its own end step, so no final step ran: the training job it was watching may still",
        "be running (its rules' own actions still guard it). Check the execution's last job and stop it if needed.",
        "",
        f"Execution in the console: {url}",
    ]
    subject = safe_subject(f"smx-debug retrain: execution {change.name} {change.status}")
    return Notification(subject=subject, message=_cap("\n".join(lines) + "\n"))
