"""What the handlers do when a training job's rules change: publish metrics, stop the job, notify people.

Each function takes the parsed event, the deployment :class:`Settings`, a ledger and injected boto3
clients, and returns a JSON-able summary of what it did (also logged). AWS errors that remain after
botocore's standard retries propagate, so that Lambda retries the event or sends it to the DLQ; a claim
taken in the ledger is released first so the retry can act. Imports only boto3 and the standard library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from botocore.exceptions import ClientError

from smx_debug.actions.events import ISSUES_FOUND, JobStateChange, RuleStatus
from smx_debug.actions.notify import rule_notification
from smx_debug.actions.settings import Settings
from smx_debug.tags import ActionSpec, decode_tags, tags_as_dict

__all__ = [
    "METRIC_NAME",
    "LedgerLike",
    "describe_status",
    "job_tags",
    "notify_rules",
    "publish_rule_metrics",
    "stop_job",
    "stop_key",
]

METRIC_NAME = "RuleTriggered"


class LedgerLike(Protocol):
    def claim(self, pk: str, record: Mapping[str, object]) -> bool: ...
    def complete(self, pk: str, outcome: Mapping[str, object]) -> None: ...
    def release(self, pk: str) -> None: ...
    def get(self, pk: str) -> dict[str, str] | None: ...


def stop_key(job_name: str) -> str:
    """One stop per job, whichever rule asked first."""
    return f"{job_name}#stop"


def _rule_key(job: str, rule: RuleStatus, action: str) -> str:
    return f"{job}#{rule.kind}:{rule.name}#{ISSUES_FOUND}#{action}"


def job_arn(change: JobStateChange, region: str) -> str:
    if change.job_arn:
        return change.job_arn
    account = change.account or "000000000000"
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{change.job_name.lower()}"


def job_tags(change: JobStateChange, sagemaker: Any, region: str) -> dict[str, str]:
    """Tags from the event when it carries them, else ListTags (paginated)."""
    if change.tags is not None:
        return dict(change.tags)
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=job_arn(change, region)):
        tags.update(tags_as_dict(page.get("Tags", [])))
    return tags


def describe_status(sagemaker: Any, job_name: str) -> str | None:
    """The job's current status, or None if SageMaker does not know the job."""
    try:
        return str(sagemaker.describe_training_job(TrainingJobName=job_name)["TrainingJobStatus"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ValidationException":
            return None
        raise


def _triggered_actions(
    change: JobStateChange, settings: Settings, tags: Mapping[str, str]
) -> list[tuple[RuleStatus, tuple[ActionSpec, ...]]]:
    decoded = decode_tags(tags)
    return [(rule, settings.actions_for(rule.name, decoded)) for rule in change.triggered()]


def publish_rule_metrics(
    change: JobStateChange,
    settings: Settings,
    ledger: LedgerLike,
    cloudwatch: Any,
    tags: Mapping[str, str],
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Put ``RuleTriggered`` = 1 once per newly triggered rule, with dimension sets {}, {RuleName} and
    {TrainingJobName, RuleName}."""
    if not settings.watches(change.job_name, tags):
        return {"action": "metrics", "skipped": "job not watched by this deployment"}
    published: list[str] = []
    for rule in change.triggered():
        key = _rule_key(change.job_name, rule, "metric")
        if not ledger.claim(key, {"action": "metric", "job": change.job_name, "rule": rule.name}):
            continue
        now = clock()
        datum = {"MetricName": METRIC_NAME, "Value": 1.0, "Unit": "Count", "Timestamp": now}
        try:
            cloudwatch.put_metric_data(
                Namespace=settings.namespace,
                MetricData=[
                    {**datum, "Dimensions": []},  # all rules of all jobs: the alarm_rules ["*"] alarm
                    {**datum, "Dimensions": [{"Name": "RuleName", "Value": rule.name}]},
                    {
                        **datum,
                        "Dimensions": [
                            {"Name": "TrainingJobName", "Value": change.job_name},
                            {"Name": "RuleName", "Value": rule.name},
                        ],
                    },
                ],
            )
        except Exception:
            ledger.release(key)
            raise
        ledger.complete(key, {"outcome": "published", "actor": settings.actor, "step": rule.step})
        published.append(rule.name)
    return {"action": "metrics", "job": change.job_name, "published": published}


def stop_job(
    change: JobStateChange,
    settings: Settings,
    ledger: LedgerLike,
    sagemaker: Any,
    tags: Mapping[str, str],
) -> dict[str, Any]:
    """Stop the job whose rule (configured with ``stop``) found issues, once, and only while InProgress."""
    result: dict[str, Any] = {"action": "stop", "job": change.job_name}
    if not settings.watches(change.job_name, tags):
        return {**result, "skipped": "job not watched by this deployment"}
    asking = [
        rule for rule, specs in _triggered_actions(change, settings, tags) if ActionSpec("stop") in specs
    ]
    if not asking:
        return {**result, "skipped": "no triggered rule asks for stop"}
    rule = asking[0]
    result["rule"] = rule.name
    status = describe_status(sagemaker, change.job_name)
    if status != "InProgress":
        # Already stopping, finished or unknown: nothing to do, and not an error.
        return {**result, "skipped": f"job status is {status or 'unknown'}", "job_status": status}
    key = stop_key(change.job_name)
    record = {
        "action": "stop",
        "job": change.job_name,
        "rule": rule.name,
        "rule_kind": rule.kind,
        "step": rule.step,
        "status_details": rule.details,
        "actor": settings.actor,
        "event_id": change.event_id,
        "rule_last_modified": rule.last_modified,
    }
    if not ledger.claim(key, record):
        return {**result, "skipped": "already handled (ledger)", "duplicate": True}
    try:
        sagemaker.stop_training_job(TrainingJobName=change.job_name)
        outcome = "stopped"
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationException":
            ledger.release(key)
            raise
        # The job left InProgress between describe and stop: that is fine, record what we saw.
        now_status = describe_status(sagemaker, change.job_name)
        outcome = f"not stopped: job was {now_status or 'unknown'}"
    except Exception:
        ledger.release(key)
        raise
    ledger.complete(key, {"outcome": outcome, "previous_status": status})
    return {**result, "outcome": outcome, "step": rule.step}


def _action_text(
    specs: tuple[ActionSpec, ...], stop_record: Mapping[str, str] | None, job_status: str | None
) -> str:
    parts: list[str] = []
    if stop_record and stop_record.get("state") == "done":
        parts.append(
            f"stop requested by {stop_record.get('actor', 'smx-debug')} "
            f"(rule {stop_record.get('rule', '?')}; {stop_record.get('outcome', '')})"
        )
    elif stop_record:
        parts.append(f"stop in progress by {stop_record.get('actor', 'smx-debug')}")
    elif ActionSpec("stop") in specs:
        parts.append(f"stop configured; job status is {job_status or 'unknown'}")
    if any(s.kind == "retrain" for s in specs):
        parts.append("retraining workflow requested")
    parts.append("notification sent")
    return "; ".join(parts)


def notify_rules(
    change: JobStateChange,
    settings: Settings,
    ledger: LedgerLike,
    sns: Any,
    sagemaker: Any,
    tags: Mapping[str, str],
    region: str,
) -> dict[str, Any]:
    """Publish one human-readable message per newly triggered rule configured with ``notify``."""
    result: dict[str, Any] = {"action": "notify", "job": change.job_name}
    if not settings.watches(change.job_name, tags):
        return {**result, "skipped": "job not watched by this deployment"}
    plan = decode_tags(tags).plan
    sent: list[dict[str, str]] = []
    job_status: str | None = None
    for rule, specs in _triggered_actions(change, settings, tags):
        for spec in specs:
            if spec.kind != "notify":
                continue
            topic = spec.target or settings.topic_arn
            if not topic:
                result.setdefault("warnings", []).append(
                    f"rule {rule.name}: notify without a topic (SMX_TOPIC_ARN)"
                )
                continue
            key = _rule_key(change.job_name, rule, f"notify:{topic}")
            if not ledger.claim(key, {"action": "notify", "job": change.job_name, "rule": rule.name}):
                continue
            try:
                if job_status is None:
                    job_status = describe_status(sagemaker, change.job_name)
                note = rule_notification(
                    change,
                    rule,
                    region=region,
                    action_taken=_action_text(specs, ledger.get(stop_key(change.job_name)), job_status),
                    job_status=job_status,
                    plan=plan,
                )
                message_id = note.publish(sns, topic)
            except Exception:
                ledger.release(key)
                raise
            ledger.complete(key, {"outcome": "published", "message_id": message_id, "topic": topic})
            sent.append({"rule": rule.name, "topic": topic, "message_id": message_id})
    return {**result, "sent": sent}
