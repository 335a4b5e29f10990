"""Parse EventBridge "SageMaker Training Job State Change" events and CloudWatch alarm messages.

The event's ``detail`` mirrors DescribeTrainingJob. Real events carry epoch-millisecond timestamps
(numbers or strings); DescribeTrainingJob output (moto, boto3, the Go SDK) carries datetimes or ISO
strings. Everything is normalised to float epoch seconds. Fields may be missing; anything we need
that is absent or of the wrong type raises :class:`MalformedEventError`, which handlers log as
rejected. Imports only the standard library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from smx_debug.errors import DataError

__all__ = [
    "DETAIL_TYPE",
    "ISSUES_FOUND",
    "SOURCE",
    "AlarmChange",
    "JobStateChange",
    "MalformedEventError",
    "RuleStatus",
    "parse_alarm_message",
    "parse_state_change",
    "parse_step",
    "parse_time",
    "rule_statuses_from_description",
]

SOURCE = "aws.sagemaker"
DETAIL_TYPE = "SageMaker Training Job State Change"
ISSUES_FOUND = "IssuesFound"
_MAX_NAME = 256  # rule configuration and job names are far shorter; longer is junk, not data
_STEP = re.compile(r"\bat step (\d{1,18})\b")


class MalformedEventError(DataError):
    """Raised when an event lacks what we need; handlers log it as rejected and return normally."""


@dataclass(frozen=True)
class RuleStatus:
    """One entry of ``DebugRuleEvaluationStatuses`` or ``ProfilerRuleEvaluationStatuses``."""

    name: str
    status: str
    kind: str = "debug"  # or "profiler"
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
class JobStateChange:
    """What one state-change event says about one training job."""

    job_name: str
    job_arn: str | None
    status: str | None
    secondary_status: str | None = None
    last_modified: float | None = None
    rules: tuple[RuleStatus, ...] = ()
    tags: Mapping[str, str] | None = None  # None: the event did not carry tags, ask ListTags
    region: str | None = None
    account: str | None = None
    event_id: str | None = None
    hyperparameters: Mapping[str, str] = field(default_factory=dict)

    def triggered(self) -> tuple[RuleStatus, ...]:
        """Rules whose evaluation currently reports IssuesFound."""
        return tuple(r for r in self.rules if r.status == ISSUES_FOUND)


def parse_time(value: object) -> float | None:
    """Epoch seconds from epoch ms/s (number or digit string), an ISO-8601 string or a datetime; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.timestamp()
    number: float | None = None
    if isinstance(value, int | float):
        number = float(value)
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


def parse_step(details: object) -> int | None:
    """The step in "... Evaluation of the rule X at step 500 resulted in the condition being met"."""
    if not isinstance(details, str):
        return None
    match = _STEP.search(details[:4096])
    return int(match.group(1)) if match else None


def _opt_str(value: object, limit: int = 2048) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _rules(raw: object, kind: str) -> list[RuleStatus]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise MalformedEventError(f"detail.{kind}: expected a list, got {type(raw).__name__}")
    out: list[RuleStatus] = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            continue  # one bad entry must not hide the others
        name = entry.get("RuleConfigurationName")
        status = entry.get("RuleEvaluationStatus")
        if not isinstance(name, str) or not isinstance(status, str) or not 0 < len(name) <= _MAX_NAME:
            continue
        details = _opt_str(entry.get("StatusDetails"))
        out.append(
            RuleStatus(
                name=name,
                status=status[:64],
                kind="profiler" if kind.startswith("Profiler") else "debug",
                details=details,
                step=parse_step(details),
                evaluation_job_arn=_opt_str(entry.get("RuleEvaluationJobArn"), 512),
                last_modified=parse_time(entry.get("LastModifiedTime")),
            )
        )
    return out


def rule_statuses_from_description(detail: Mapping[str, Any]) -> tuple[RuleStatus, ...]:
    """Rule statuses from a DescribeTrainingJob response or an event ``detail``; bad entries skipped."""
    return tuple(
        _rules(detail.get("DebugRuleEvaluationStatuses"), "DebugRuleEvaluationStatuses")
        + _rules(detail.get("ProfilerRuleEvaluationStatuses"), "ProfilerRuleEvaluationStatuses")
    )


def parse_state_change(event: object) -> JobStateChange:
    """Parse a "SageMaker Training Job State Change" event; raises MalformedEventError if unusable."""
    if not isinstance(event, Mapping):
        raise MalformedEventError(f"event: expected an object, got {type(event).__name__}")
    source, detail_type = event.get("source"), event.get("detail-type")
    if source != SOURCE or detail_type != DETAIL_TYPE:
        raise MalformedEventError(
            f"event: source {str(source)[:64]!r} / detail-type {str(detail_type)[:64]!r} is not "
            f"{SOURCE!r} / {DETAIL_TYPE!r}"
        )
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise MalformedEventError(f"event.detail: expected an object, got {type(detail).__name__}")
    name = detail.get("TrainingJobName")
    if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME:
        raise MalformedEventError(f"detail.TrainingJobName: expected a job name, got {str(name)[:80]!r}")
    tags_raw = detail.get("Tags")
    tags: dict[str, str] | None = None
    if isinstance(tags_raw, Mapping):
        tags = {k: v for k, v in tags_raw.items() if isinstance(k, str) and isinstance(v, str)}
    hyper = detail.get("HyperParameters")
    hyperparameters = (
        {k: v for k, v in hyper.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(hyper, Mapping)
        else {}
    )
    return JobStateChange(
        job_name=name,
        job_arn=_opt_str(detail.get("TrainingJobArn"), 512),
        status=_opt_str(detail.get("TrainingJobStatus"), 64),
        secondary_status=_opt_str(detail.get("SecondaryStatus"), 64),
        last_modified=parse_time(detail.get("LastModifiedTime")),
        rules=rule_statuses_from_description(detail),
        tags=tags,
        region=_opt_str(event.get("region"), 64),
        account=_opt_str(event.get("account"), 64),
        event_id=_opt_str(event.get("id"), 128),
        hyperparameters=hyperparameters,
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
            message = json.loads(message)
        except ValueError as exc:
            raise MalformedEventError(f"Sns.Message: not JSON ({exc})") from None
    if not isinstance(message, Mapping):
        raise MalformedEventError(f"Sns.Message: expected an alarm object, got {type(message).__name__}")
    name, state = message.get("AlarmName"), message.get("NewStateValue")
    if not isinstance(name, str) or not name or not isinstance(state, str) or not state:
        raise MalformedEventError("Sns.Message: AlarmName and NewStateValue are required strings")
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
