"""The Lambda entry points' shared body: build clients once, parse, verify, call the core, log the outcome.

The guard rejects only what the event parser says is malformed (:class:`MalformedEventError`): it is
logged as one JSON line with ``"rejected": true`` and the handler returns normally (retrying cannot fix
it). An event naming a job this deployment must not touch (:class:`EventRefusedError`) is logged and
dropped the same way. Every other exception (an AWS failure left after retries, a live claim held by
another invocation, a bug) propagates, so Lambda retries the invocation and then keeps the event in the
dead-letter queue. Imports only boto3 and the standard library.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from smx_debug.actions.events import (
    MalformedEventError,
    parse_alarm_message,
    parse_execution_change,
    parse_state_change,
)
from smx_debug.actions.notify import alarm_notification, execution_notification
from smx_debug.actions.once import once
from smx_debug.actions.respond import respond
from smx_debug.actions.retrain import run_step
from smx_debug.actions.runtime import Deadline, Runtime, log_json
from smx_debug.actions.verify import EventRefusedError, debugger_triggers, verify_job
from smx_debug.contracts import (
    EXECUTION_EVENT_SOURCE,
    UNREPORTED_EXECUTION_STATUSES,
    Env,
    alarm_key,
    ledger_key,
)
from smx_debug.errors import ConfigError


def _guard(name: str, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        result = body()
    except (MalformedEventError, EventRefusedError) as exc:
        what = "rejected" if isinstance(exc, MalformedEventError) else "refused"
        log_json(logging.WARNING, handler=name, **{what: True}, reason=str(exc)[:1000])
        return {what: True, "reason": str(exc)[:1000]}
    except Exception as exc:
        log_json(logging.ERROR, handler=name, error=type(exc).__name__, message=str(exc)[:1000])
        raise
    log_json(logging.INFO, handler=name, **result)
    return result


def handle_state_change(event: object, runtime: Runtime, actions: Collection[str],
                        deadline: Deadline | None = None) -> dict[str, Any]:
    """The Debugger-event path: parse -> verify with SageMaker -> :func:`respond` with SageMaker's triggers.

    An event that claims no rule found issues costs no AWS call; one that does is checked against
    DescribeTrainingJob and ListTags, and only what SageMaker shows is acted on, within ``deadline``.
    """
    change = parse_state_change(event)
    if not change.triggered():
        return {"job": change.job_name, "skipped": "no rule found issues"}
    job = verify_job(
        runtime.clients("sagemaker"),
        job_name=change.job_name,
        job_arn=change.job_arn,
        event_account=change.account,
        event_region=change.region,
        deployment_account=runtime.settings.account,
        deployment_region=runtime.settings.region,
    )
    return respond(
        job,
        debugger_triggers(job),
        settings=runtime.settings,
        ledger=runtime.ledger,
        clients=runtime.clients,
        actions=actions,
        deadline=deadline,
    )


def handle_rule_metrics(event: object, runtime: Runtime, context: Any = None) -> dict[str, Any]:
    """EventBridge state change -> ``SmxDebug/RuleTriggered`` datapoints for newly triggered rules; ``context``
    (Lambda's) bounds the invocation."""
    deadline = runtime.deadline(context)
    return _guard(
        "rule_metrics",
        lambda: {"action": "metrics", **handle_state_change(event, runtime, ("metric",), deadline)},
    )


def handle_stop_training(event: object, runtime: Runtime, context: Any = None) -> dict[str, Any]:
    """EventBridge state change -> StopTrainingJob (``stop``) and the retraining workflow (``retrain``)."""
    deadline = runtime.deadline(context)
    return _guard(
        "stop_training",
        lambda: {"action": "stop", **handle_state_change(event, runtime, ("stop", "retrain"), deadline)},
    )


def _sns_records(event: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    records = event.get("Records")
    if not isinstance(records, list):
        return None
    return [r for r in records if isinstance(r, Mapping)]


def _notify_alarms(records: list[Mapping[str, Any]], runtime: Runtime, deadline: Deadline) -> dict[str, Any]:
    sent: list[dict[str, str]] = []
    rejected: list[str] = []
    topic = runtime.settings.topic_arn
    if not topic:
        raise ConfigError(
            f"{Env.TOPIC_ARN}: not set, nowhere to send alarm notifications", field=Env.TOPIC_ARN, value=None
        )
    for record in records:
        sns_part = record.get("Sns")
        if not isinstance(sns_part, Mapping):
            rejected.append("record without Sns")
            continue
        try:
            alarm = parse_alarm_message(sns_part.get("Message"))
        except MalformedEventError as exc:
            rejected.append(str(exc)[:300])
            continue
        when = alarm.change_time or str(sns_part.get("MessageId"))

        def act(alarm: Any = alarm) -> dict[str, object]:
            note = alarm_notification(alarm, region=runtime.region)
            return {"outcome": "published", "message_id": note.publish(runtime.clients("sns"), topic)}

        done = once(
            runtime.ledger,
            alarm_key(alarm.alarm_name, alarm.new_state, when),
            {"action": "notify", "alarm": alarm.alarm_name, "actor": runtime.settings.actor},
            act,
            repeatable=False,
            deadline=deadline,
        )
        if done.acted:
            sent.append(
                {
                    "alarm": alarm.alarm_name,
                    "state": alarm.new_state,
                    "message_id": str(done.record["message_id"]),
                }
            )
    if rejected and not sent:
        raise MalformedEventError("; ".join(rejected))
    return {"action": "notify", "alarms": sent, "rejected_records": rejected}


def _notify_execution(event: object, runtime: Runtime, deadline: Deadline) -> dict[str, Any]:
    change = parse_execution_change(event)
    settings = runtime.settings
    result: dict[str, Any] = {"action": "notify", "execution": change.execution_arn, "status": change.status}
    if change.status not in UNREPORTED_EXECUTION_STATUSES:
        return {**result, "skipped": "the workflow's end step reports this ending"}
    if (change.account, change.region) != (settings.account, settings.region) or (
        settings.state_machine_arn and change.state_machine_arn != settings.state_machine_arn
    ):
        raise EventRefusedError(
            f"execution {change.execution_arn!r} is not this deployment's retraining workflow"
        )
    topic = settings.topic_arn
    if not topic:
        raise ConfigError(
            f"{Env.TOPIC_ARN}: not set, nowhere to send the message", field=Env.TOPIC_ARN, value=None
        )

    def act() -> dict[str, object]:
        note = execution_notification(change, region=runtime.region)
        return {"outcome": "published", "message_id": note.publish(runtime.clients("sns"), topic)}

    key = ledger_key("execution", change.execution_arn, change.status, "notify")
    done = once(
        runtime.ledger,
        key,
        {"action": "notify", "execution": change.execution_arn, "actor": settings.actor},
        act,
        repeatable=False,
        deadline=deadline,
    )
    return {**result, "sent": done.acted}


def handle_notify(event: object, runtime: Runtime, context: Any = None) -> dict[str, Any]:
    """EventBridge state change -> rule message; SNS-delivered CloudWatch alarm -> alarm message; the
    retraining execution timed out or aborted -> a message (every other ending is its end step's)."""
    deadline = runtime.deadline(context)

    def body() -> dict[str, Any]:
        records = _sns_records(event) if isinstance(event, Mapping) else None
        if records is not None:
            return _notify_alarms(records, runtime, deadline)
        if isinstance(event, Mapping) and event.get("source") == EXECUTION_EVENT_SOURCE:
            return _notify_execution(event, runtime, deadline)
        return {"action": "notify", **handle_state_change(event, runtime, ("notify",), deadline)}

    return _guard("notify", body)


def handle_retrain(event: object, runtime: Runtime, context: Any = None) -> dict[str, Any]:
    """Step Functions task ``{"step": "init"|"train"|"monitor"|"end", "state": {...}}`` -> the new state, within
    the invocation's time (``context``: Lambda's; the stop a monitor or end step makes, and its messages)."""
    return run_step(event, runtime, runtime.deadline(context))
