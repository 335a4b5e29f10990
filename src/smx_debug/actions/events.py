"""Parse EventBridge "SageMaker Training Job State Change" events and CloudWatch alarm messages.

The event's ``detail`` mirrors DescribeTrainingJob. Real events carry epoch-millisecond timestamps
(numbers or strings); DescribeTrainingJob output (moto, boto3, the Go SDK) carries datetimes or ISO
strings. Everything is normalised to float epoch seconds. Fields may be missing; anything we need
that is absent or of the wrong type, and any name SageMaker could not have produced (a lone surrogate, a
job name outside SageMaker's pattern), raises :class:`MalformedEventError`, which handlers log as rejected.

The event only says where to look: its ``Tags`` and rule statuses are not trusted (see
:mod:`smx_debug.actions.verify`). Imports only the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from smx_debug import _json as bounded_json
from smx_debug.contracts import (
    DETAIL_TYPE,
    EVENT_SOURCE,
    EXECUTION_DETAIL_TYPE,
    EXECUTION_EVENT_SOURCE,
    ISSUES_FOUND,
    RULE_FIELDS,
    RULE_KINDS,
    TRAINING_JOB_NAME_PATTERN,
    RuleKind,
    details_step,
)
from smx_debug.errors import DataError

_EXECUTION_ARN = re.compile(
    r"arn:aws[a-z-]*:states:[a-z0-9-]{1,32}:\d{12}:execution:[A-Za-z0-9_-]{1,80}:[A-Za-z0-9_-]{1,80}"
)
_MAX_NAME = 256  # rule configuration names are at most 256 characters; longer is junk, not data
# SageMaker's TrainingJobName pattern (CreateTrainingJob): anything else cannot name a real job.
_JOB_NAME = re.compile(TRAINING_JOB_NAME_PATTERN)
_JOB_ARN = re.compile(
    r"arn:(aws[a-z-]*):sagemaker:([a-z0-9-]{1,32}):(\d{12}):training-job/([a-z0-9](-*[a-z0-9]){0,62})"
)


class MalformedEventError(DataError):
    """Raised when an event lacks what we need; handlers log it as rejected and return normally."""


@dataclass(frozen=True)
class RuleStatus:
    """One entry of ``DebugRuleEvaluationStatuses`` or ``ProfilerRuleEvaluationStatuses``."""

    name: str
    status: str
    kind: RuleKind = "debugger"
    details: str | None = None
    step: int | None = None
    evaluation_job_arn: str | None = None
    last_modified: float | None = None

    @property
    def processing_job_name(self) -> str | None:
        """The rule evaluation (processing) job's name, which is also its CloudWatch log stream prefix."""
        if not self.evaluation_job_arn or "/" not in self.evaluation_job_arn:
            return None
        return self.evaluation_job_arn.rsplit("/", 1)[1] or None


@dataclass(frozen=True)
class JobArn:
    """The parts of a training job's ARN."""

    arn: str
    partition: str
    region: str
    account: str
    name: str  # lower case: SageMaker lower-cases the job name in its ARN


def parse_job_arn(arn: str) -> JobArn | None:
    """Split ``arn:<partition>:sagemaker:<region>:<account>:training-job/<name>``; None if it is not one."""
    match = _JOB_ARN.fullmatch(arn)
    if match is None:
        return None
    return JobArn(arn, match.group(1), match.group(2), match.group(3), match.group(4))


@dataclass(frozen=True)
class JobStateChange:
    """Where one state-change event says to look: a job (name, ARN), an account and a region."""

    job_name: str
    job_arn: str | None
    status: str | None
    secondary_status: str | None = None
    last_modified: float | None = None
    rules: tuple[RuleStatus, ...] = ()  # what the event claims; the actions read DescribeTrainingJob instead
    region: str | None = None
    account: str | None = None
    event_id: str | None = None

    def triggered(self) -> tuple[RuleStatus, ...]:
        """Rules the event claims report IssuesFound (a hint only: SageMaker's word is checked before acting)."""
        return tuple(r for r in self.rules if r.status == ISSUES_FOUND)


def parse_time(value: object) -> float | None:
    """Epoch seconds from epoch ms/s (number or digit string), an ISO-8601 string or a datetime; else None.

    A value no clock could have sent (an integer past a float's range, a date whose UTC time falls outside
    datetime's years 1-9999) is None too, like any other unusable time.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            seconds = moment.timestamp()
        except (OverflowError, ValueError):  # e.g. 9999-12-31T23:59-23:59 is past year 9999 in UTC
            return None
        return seconds if seconds >= 0 else None
    number: float | None = None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer past a float's range (10**400)
            return None
    elif isinstance(value, str) and 0 < len(value) <= 40:
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            return parse_time(moment)
    if number is None or number != number or number in (float("inf"), float("-inf")) or number < 0:
        return None
    # Anything past the year 5138 in seconds is milliseconds (EventBridge sends ms).
    return number / 1000.0 if number > 1e11 else number


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no AWS API produces one
        return False
    return True


def _opt_str(value: object, limit: int = 2048) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    text = value[:limit]
    return text if _encodable(text) else text.encode("utf-8", "replace").decode("utf-8")


def _rules(raw: object, kind: RuleKind, field_name: str) -> list[RuleStatus]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise MalformedEventError(f"detail.{field_name}: expected a list, got {type(raw).__name__}")
    out: list[RuleStatus] = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            continue  # one bad entry must not hide the others
        name = entry.get("RuleConfigurationName")
        status = entry.get("RuleEvaluationStatus")
        if not isinstance(name, str) or not isinstance(status, str) or not 0 < len(name) <= _MAX_NAME:
            continue
        if not _encodable(name) or not name.isprintable():
            continue
        details = _opt_str(entry.get("StatusDetails"))
        out.append(
            RuleStatus(
                name=name,
                status=status[:64],
                kind=kind,
                details=details,
                step=details_step(details),
                evaluation_job_arn=_opt_str(entry.get("RuleEvaluationJobArn"), 512),
                last_modified=parse_time(entry.get("LastModifiedTime")),
            )
        )
    return out


def rule_statuses_from_description(detail: Mapping[str, Any]) -> tuple[RuleStatus, ...]:
    """Rule statuses from a DescribeTrainingJob response or an event ``detail``; bad entries skipped."""
    out: list[RuleStatus] = []
    for kind in RULE_KINDS:
        status_field = RULE_FIELDS[kind][0]
        out += _rules(detail.get(status_field), kind, status_field)
    return tuple(out)


def parse_state_change(event: object) -> JobStateChange:
    """Parse a "SageMaker Training Job State Change" event; raises MalformedEventError if unusable."""
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"event: expected an object, got {type(event).__name__}")
    source, detail_type = event.get("source"), event.get("detail-type")
    if source != EVENT_SOURCE or detail_type != DETAIL_TYPE:
        raise MalformedEventError(
            f"event: source {str(source)[:64]!r} / detail-type {str(detail_type)[:64]!r} is not "
            f"{EVENT_SOURCE!r} / {DETAIL_TYPE!r}"
        )
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedEventError(f"event.detail: expected an object, got {type(detail).__name__}")
    name = detail.get("TrainingJobName")
    if not isinstance(name, str) or not _JOB_NAME.fullmatch(name):
        shown = (
            name[:80].encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
            if isinstance(name, str)
            else type(name).__name__
        )
        raise MalformedEventError(
            f"detail.TrainingJobName: {shown!r} is not a SageMaker training job name "
            "(1-63 letters, digits and hyphens)"
        )
    arn = detail.get("TrainingJobArn")
    if arn is not None and (not isinstance(arn, str) or parse_job_arn(arn) is None):
        raise MalformedEventError(f"detail.TrainingJobArn: {str(arn)[:120]!a} is not a training job ARN")
    return JobStateChange(
        job_name=name,
        job_arn=arn,
        status=_opt_str(detail.get("TrainingJobStatus"), 64),
        secondary_status=_opt_str(detail.get("SecondaryStatus"), 64),
        last_modified=parse_time(detail.get("LastModifiedTime")),
        rules=rule_statuses_from_description(detail),
        region=_opt_str(event.get("region"), 64),
        account=_opt_str(event.get("account"), 64),
        event_id=_opt_str(event.get("id"), 128),
    )


@dataclass(frozen=True)
class AlarmChange:
    """A CloudWatch alarm state change as delivered to SNS (the JSON in the SNS ``Message``)."""

    alarm_name: str
    new_state: str
    old_state: str | None
    reason: str | None
    region: str | None
    alarm_arn: str | None
    dimensions: Mapping[str, str]
    metric_name: str | None
    namespace: str | None
    change_time: str | None


def parse_alarm_message(message: object) -> AlarmChange:
    """Parse the CloudWatch alarm notification JSON (string or object); raises MalformedEventError."""
    if isinstance(message, str):
        if len(message) > 262_144:
            raise MalformedEventError("Sns.Message: longer than SNS allows (256 KB)")
        try:
            message = bounded_json.loads(message)
        except ValueError as exc:  # also nested too deep
            raise MalformedEventError(f"Sns.Message: not JSON ({exc})") from None
    if not isinstance(message, Mapping):
        raise MalformedEventError(f"Sns.Message: expected an alarm object, got {type(message).__name__}")
    name, state = message.get("AlarmName"), message.get("NewStateValue")
    if not isinstance(name, str) or not name or not isinstance(state, str) or not state:
        raise MalformedEventError("Sns.Message: AlarmName and NewStateValue are required strings")
    if not _encodable(name) or not _encodable(state):
        raise MalformedEventError(
            f"Sns.Message: AlarmName {name[:80]!a} is not text CloudWatch could have sent"
        )
    trigger = message.get("Trigger")
    trigger = trigger if isinstance(trigger, Mapping) else {}
    dims: dict[str, str] = {}
    raw_dims = trigger.get("Dimensions")
    if isinstance(raw_dims, list):
        for d in raw_dims:
            if isinstance(d, Mapping):
                key, value = d.get("name", d.get("Name")), d.get("value", d.get("Value"))
                if isinstance(key, str) and isinstance(value, str):
                    dims[key] = value
    region = _opt_str(message.get("Region"), 128)
    return AlarmChange(
        alarm_name=name[:256],
        new_state=state[:32],
        old_state=_opt_str(message.get("OldStateValue"), 32),
        reason=_opt_str(message.get("NewStateReason"), 1024),
        region=region,
        alarm_arn=_opt_str(message.get("AlarmArn"), 512),
        dimensions=dims,
        metric_name=_opt_str(trigger.get("MetricName"), 256),
        namespace=_opt_str(trigger.get("Namespace"), 256),
        change_time=_opt_str(message.get("StateChangeTime"), 64),
    )


@dataclass(frozen=True)
class ExecutionChange:
    """A Step Functions execution status change (EventBridge), e.g. the retraining workflow timing out."""

    execution_arn: str
    state_machine_arn: str | None
    name: str
    status: str
    region: str | None
    account: str | None


def parse_execution_change(event: object) -> ExecutionChange:
    """Parse a "Step Functions Execution Status Change" event; raises MalformedEventError if unusable."""
    if not isinstance(event, Mapping) or event.get("source") != EXECUTION_EVENT_SOURCE:
        raise MalformedEventError(f"event: not an {EXECUTION_EVENT_SOURCE!r} event")
    if event.get("detail-type") != EXECUTION_DETAIL_TYPE:
        raise MalformedEventError(
            f"event.detail-type: {str(event.get('detail-type'))[:64]!a} is not {EXECUTION_DETAIL_TYPE!r}"
        )
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedEventError(f"event.detail: expected an object, got {type(detail).__name__}")
    arn, status = detail.get("executionArn"), detail.get("status")
    if not isinstance(arn, str) or not _EXECUTION_ARN.fullmatch(arn):
        raise MalformedEventError(f"detail.executionArn: {str(arn)[:200]!a} is not an execution ARN")
    if not isinstance(status, str) or not re.fullmatch(r"[A-Z_]{1,32}", status):
        raise MalformedEventError(f"detail.status: {str(status)[:40]!a} is not an execution status")
    machine = detail.get("stateMachineArn")
    return ExecutionChange(
        execution_arn=arn,
        state_machine_arn=machine if isinstance(machine, str) and _encodable(machine) else None,
        name=arn.rsplit(":", 1)[1],
        status=status,
        region=_opt_str(event.get("region"), 64),
        account=_opt_str(event.get("account"), 64),
    )
