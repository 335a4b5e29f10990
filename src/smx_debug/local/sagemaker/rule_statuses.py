"""Rule evaluation statuses on the local AWS, and the state-change event SageMaker emits for a job.

moto has no rule evaluation: its training jobs never carry ``DebugRuleEvaluationStatuses`` or
``ProfilerRuleEvaluationStatuses``. :func:`set_rule_statuses` sets them on moto's ``FakeTrainingJob`` as
SageMaker would (rule job ARN and LastModifiedTime filled in), and DescribeTrainingJob returns them.
:func:`rule_status` builds one entry with SageMaker's wording. :func:`state_change_event` builds the
"SageMaker Training Job State Change" event EventBridge would receive now for a job (its description, in epoch
milliseconds, with its tags); :mod:`smx_debug.local.awslambda.invoke` delivers it.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from smx_debug.contracts import DETAIL_TYPE, EVENT_SOURCE, ISSUES_FOUND, condition_met_details
from smx_debug.errors import ConfigError
from smx_debug.local.clients import client
from smx_debug.local.sagemaker import training_jobs
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

_lock = threading.RLock()


def rule_status(
    name: str, status: str, *, step: int | None = None, details: str | None = None, job_arn: str | None = None
) -> dict[str, Any]:
    """One rule evaluation status as SageMaker reports it; IssuesFound with ``step`` gets the real wording."""
    entry: dict[str, Any] = {"RuleConfigurationName": name, "RuleEvaluationStatus": status}
    if job_arn:
        entry["RuleEvaluationJobArn"] = job_arn
    if details is None and status == ISSUES_FOUND and step is not None:
        details = condition_met_details(name, step)
    if details is not None:
        entry["StatusDetails"] = details
    return entry


def _rule_job_arn(aws: LocalAws, job: str, rule: str) -> str:
    # SageMaker names rule jobs <first 26 chars of the job>-<rule lower>-<8 hex>.
    digest = hashlib.sha1(f"{job}/{rule}".encode()).hexdigest()[:8]
    return f"arn:aws:sagemaker:{aws.region}:{LOCAL_ACCOUNT_ID}:processing-job/{job[:26]}-{rule.lower()[:20]}-{digest}"


def _statuses(
    aws: LocalAws, job: str, given: Mapping[str, str] | Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    entries = (
        [rule_status(k, v) for k, v in given.items()]
        if isinstance(given, Mapping)
        else [dict(e) for e in given]
    )
    now = datetime.now(UTC)
    out = []
    for entry in entries:
        name = entry.get("RuleConfigurationName")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"rule status {entry!r}: RuleConfigurationName is required", field="debug", value=entry
            )
        entry.setdefault("RuleEvaluationJobArn", _rule_job_arn(aws, job, name))
        entry.setdefault("LastModifiedTime", now)
        out.append(entry)
    return out


def set_rule_statuses(
    aws: LocalAws,
    job: str,
    debug: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None,
    profiler: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Set DebugRuleEvaluationStatuses / ProfilerRuleEvaluationStatuses (None keeps the current list).

    Entries are ``{rule: status}`` or dicts from :func:`rule_status`; the rule job ARN and
    LastModifiedTime are filled in as SageMaker would.

    Raises:
        ConfigError: an entry has no RuleConfigurationName.
        NotFoundError: no such job.
    """
    fake = training_jobs.training_job(aws, job)
    with _lock:
        if debug is not None:
            fake.debug_rule_evaluation_statuses = _statuses(aws, job, debug)
        if profiler is not None:
            fake.profiler_rule_evaluation_statuses = _statuses(aws, job, profiler)
        fake.last_modified_time = datetime.now(UTC)


def _epoch_ms(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, dict):
        return {k: _epoch_ms(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_epoch_ms(v) for v in value]
    return value


def state_change_event(aws: LocalAws, job: str, *, include_tags: bool = True) -> dict[str, Any]:
    """The EventBridge event SageMaker would emit now for ``job`` (detail = its description, epoch ms)."""
    training_jobs.install()  # the description carries the kept profiler fields and the stop lifecycle
    sagemaker = client(aws, "sagemaker")
    detail = sagemaker.describe_training_job(TrainingJobName=job)
    detail.pop("ResponseMetadata", None)
    detail = _epoch_ms(detail)
    if include_tags:
        tags: dict[str, str] = {}
        for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=detail["TrainingJobArn"]):
            tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
        detail["Tags"] = tags
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": DETAIL_TYPE,
        "source": EVENT_SOURCE,
        "account": LOCAL_ACCOUNT_ID,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": aws.region,
        "resources": [detail["TrainingJobArn"]],
        "detail": detail,
    }
