"""What the actions act on: a job as SageMaker describes it, and the rules that found issues in it.

An event only says where to look. Before acting, :func:`verify_job` asks SageMaker (DescribeTrainingJob,
ListTags on the job's own ARN) and refuses, with :class:`EventRefusedError`, when:

- the event's account or region is not the deployment's (``SMX_ACCOUNT`` or the function's ARN; ``AWS_REGION``);
- the event's ARN and name name different jobs, or the job's real ARN is in another account or region;
- SageMaker does not know the job.

The event's own ``Tags`` and rule statuses are never used: the tags come from ListTags and the rules from
DescribeTrainingJob (:func:`debugger_triggers` keeps those SageMaker shows as IssuesFound).
Imports only botocore and the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.actions.events import RuleStatus, parse_job_arn, rule_statuses_from_description
from smx_debug.contracts import ISSUES_FOUND, RULE_KINDS, SOURCE_DEBUGGER, TRIGGER_SOURCES, RuleKind
from smx_debug.errors import ConfigError, SmxDebugError
from smx_debug.tags import tags_as_dict

_MAX_RULE_NAME = 256


class EventRefusedError(SmxDebugError, PermissionError):
    """Raised when an event names a job this deployment must not act on (wrong account or region, a name
    and an ARN that disagree, a job SageMaker does not know); the event is dropped, not retried."""


@dataclass(frozen=True)
class VerifiedJob:
    """A training job as SageMaker describes it now, in this deployment's account and region."""

    name: str
    arn: str
    account: str
    region: str
    partition: str
    status: str
    tags: Mapping[str, str]
    rules: tuple[RuleStatus, ...] = ()
    description: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Trigger:
    """One rule configuration that found issues, as the actions see it, whoever evaluated it.

    Args:
        rule: the rule configuration name (the key of the job's ``smx-debug:on:<rule>`` tag).
        kind: ``debugger`` or ``profiler`` (:data:`smx_debug.contracts.RULE_KINDS`).
        step: the step at which the condition was met, if known.
        source: who evaluated the rule, shown in messages (:data:`smx_debug.contracts.TRIGGER_SOURCES`).
        details: the evaluation's status details (shown in messages).
        evaluation_job_arn: Debugger's rule processing job, for the rule-log link.
        time: when the rule found issues (epoch seconds; Debugger's ``LastModifiedTime``), for the verdict log.
        rule_type: the rule class of the configuration (``CPUBottleneck``), for the verdict log.
    """

    rule: str
    kind: RuleKind
    step: int | None = None
    source: str = SOURCE_DEBUGGER
    details: str | None = None
    evaluation_job_arn: str | None = None
    time: float | None = None
    rule_type: str | None = None

    def __post_init__(self) -> None:
        if (
            not isinstance(self.rule, str)
            or not 0 < len(self.rule) <= _MAX_RULE_NAME
            or not _clean(self.rule)
        ):
            raise ConfigError(
                f"Trigger.rule: {str(self.rule)[:80]!a} is not a rule configuration name",
                field="rule",
                value=self.rule,
            )
        if self.kind not in RULE_KINDS:
            raise ConfigError(
                f"Trigger.kind: {self.kind!r} is not one of {RULE_KINDS}", field="kind", value=self.kind
            )
        if self.source not in TRIGGER_SOURCES:
            raise ConfigError(
                f"Trigger.source: {self.source!r} is not one of {TRIGGER_SOURCES}",
                field="source",
                value=self.source,
            )
        if self.step is not None and (
            isinstance(self.step, bool) or not isinstance(self.step, int) or self.step < 0
        ):
            raise ConfigError(
                f"Trigger.step: {self.step!r} is not a step number", field="step", value=self.step
            )

    @classmethod
    def from_status(cls, status: RuleStatus) -> Trigger:
        """The trigger for one IssuesFound rule evaluation status that DescribeTrainingJob reported."""
        return cls(
            rule=status.name,
            kind=status.kind,
            step=status.step,
            source=SOURCE_DEBUGGER,
            details=status.details,
            evaluation_job_arn=status.evaluation_job_arn,
            time=status.last_modified,
        )


def _clean(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return text.isprintable()


def debugger_triggers(job: VerifiedJob) -> tuple[Trigger, ...]:
    """The rules whose evaluation DescribeTrainingJob reports as IssuesFound."""
    return tuple(Trigger.from_status(r) for r in job.rules if r.status == ISSUES_FOUND)


def verify_job(
    sagemaker: Any,
    *,
    job_name: str,
    deployment_account: str | None,
    deployment_region: str | None,
    job_arn: str | None = None,
    event_account: str | None = None,
    event_region: str | None = None,
    description: Mapping[str, Any] | None = None,
) -> VerifiedJob:
    """Describe ``job_name`` and read its tags, after checking that the event names a job of this deployment.

    ``description``: the job's DescribeTrainingJob answer when the caller read it moments ago in the same
    invocation (the evaluator, for a job it met for the first time): checked the same way, not read again.

    Raises:
        EventRefusedError: see the module docstring; nothing may be done for this event.
    """
    if not deployment_account or not deployment_region:
        raise EventRefusedError(
            "the deployment's account and region are unknown (SMX_ACCOUNT or the function ARN; AWS_REGION): "
            "refusing to act on any job"
        )
    if event_account is not None and event_account != deployment_account:
        raise EventRefusedError(
            f"event account {event_account!r} is not this deployment's ({deployment_account})"
        )
    if event_region is not None and event_region != deployment_region:
        raise EventRefusedError(
            f"event region {event_region!r} is not this deployment's ({deployment_region})"
        )
    if job_arn is not None:
        _check_arn(job_arn, job_name, deployment_account, deployment_region, "event")
    if description is None:
        description = _describe(sagemaker, job_name, deployment_region)
    real_name, real_arn = description.get("TrainingJobName"), description.get("TrainingJobArn")
    if real_name != job_name or not isinstance(real_arn, str):
        raise EventRefusedError(f"SageMaker describes {real_name!r}, not {job_name!r}")
    arn = _check_arn(real_arn, job_name, deployment_account, deployment_region, "SageMaker")
    if job_arn is not None and job_arn != real_arn:
        raise EventRefusedError(f"event ARN {job_arn!r} is not the job's ARN {real_arn!r}")
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=real_arn):
        tags.update(tags_as_dict(page.get("Tags", [])))
    return VerifiedJob(
        name=job_name,
        arn=real_arn,
        account=arn.account,
        region=arn.region,
        partition=arn.partition,
        status=str(description.get("TrainingJobStatus")),
        tags=tags,
        rules=rule_statuses_from_description(description),
        description={k: v for k, v in description.items() if k != "ResponseMetadata"},
    )


def _describe(sagemaker: Any, job_name: str, region: str) -> Mapping[str, Any]:
    try:
        answer: Mapping[str, Any] = sagemaker.describe_training_job(TrainingJobName=job_name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("ValidationException", "ResourceNotFound"):
            raise EventRefusedError(f"training job {job_name!r} does not exist in {region}") from None
        raise
    return answer


def _check_arn(arn: str, job_name: str, account: str, region: str, whose: str) -> Any:
    parsed = parse_job_arn(arn)
    if parsed is None:
        raise EventRefusedError(f"{whose} ARN {arn[:200]!a} is not a training job ARN")
    if parsed.name != job_name.lower():
        raise EventRefusedError(f"{whose} ARN {arn!r} names job {parsed.name!r}, not {job_name!r}")
    if parsed.account != account or parsed.region != region:
        raise EventRefusedError(
            f"{whose} ARN {arn!r} is in {parsed.account}/{parsed.region}, not this deployment's {account}/{region}"
        )
    return parsed
