"""The Lambda entry points' shared body: build clients once, parse, call the core, log the outcome.

A malformed event is logged as one JSON line with ``"rejected": true`` and the reason, and the handler
returns normally (retrying cannot fix it). An AWS failure left after botocore's standard retries
propagates, so Lambda retries the invocation or sends the event to the dead-letter queue.
Imports only boto3 and the standard library.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.actions.events import MalformedEventError, parse_alarm_message, parse_state_change
from smx_debug.actions.ledger import Ledger, MemoryLedger
from smx_debug.actions.notify import alarm_notification
from smx_debug.actions.respond import LedgerLike, job_tags, notify_rules, publish_rule_metrics, stop_job
from smx_debug.actions.runtime import ClientFactory, client_factory, log_json
from smx_debug.actions.settings import Settings

__all__ = [
    "Runtime",
    "handle_notify",
    "handle_retrain",
    "handle_rule_metrics",
    "handle_stop_training",
]

_DEFAULT_REGION = "us-east-1"


@dataclass
class Runtime:
    """Settings, clients and ledger of one cold start."""

    settings: Settings
    clients: ClientFactory
    ledger: LedgerLike

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, clients: ClientFactory | None = None
    ) -> Runtime:
        settings = Settings.from_env(environ)
        factory = clients or client_factory(settings.region, settings.max_attempts)
        ledger: LedgerLike = (
            Ledger(factory("dynamodb"), settings.ledger_table) if settings.ledger_table else MemoryLedger()
        )
        return cls(settings=settings, clients=factory, ledger=ledger)

    @property
    def region(self) -> str:
        return self.settings.region or _DEFAULT_REGION


def _guard(name: str, event: object, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        result = body()
    except MalformedEventError as exc:
        log_json(logging.WARNING, handler=name, rejected=True, reason=str(exc)[:1000])
        return {"rejected": True, "reason": str(exc)[:1000]}
    except (ClientError, BotoCoreError) as exc:
        log_json(
            logging.ERROR, handler=name, rejected=False, error=type(exc).__name__, message=str(exc)[:1000]
        )
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        # Data we could not make sense of (a shape we did not foresee): reject, don't crash-loop.
        reason = f"unusable event ({type(exc).__name__}: {str(exc)[:500]})"
        log_json(logging.WARNING, handler=name, rejected=True, reason=reason)
        return {"rejected": True, "reason": reason}
    log_json(logging.INFO, handler=name, rejected=False, **result)
    return result


def handle_rule_metrics(event: object, runtime: Runtime) -> dict[str, Any]:
    """EventBridge state change -> ``SmxDebug/RuleTriggered`` datapoints for newly triggered rules."""

    def body() -> dict[str, Any]:
        change = parse_state_change(event)
        if not change.triggered():
            return {"action": "metrics", "job": change.job_name, "published": []}
        tags = job_tags(change, runtime.clients("sagemaker"), runtime.region)
        return publish_rule_metrics(
            change, runtime.settings, runtime.ledger, runtime.clients("cloudwatch"), tags
        )

    return _guard("rule_metrics", event, body)


def handle_stop_training(event: object, runtime: Runtime) -> dict[str, Any]:
    """EventBridge state change -> StopTrainingJob for a watched job whose rule asks for ``stop``."""

    def body() -> dict[str, Any]:
        change = parse_state_change(event)
        if not change.triggered():
            return {"action": "stop", "job": change.job_name, "skipped": "no rule found issues"}
        sagemaker = runtime.clients("sagemaker")
        tags = job_tags(change, sagemaker, runtime.region)
        return stop_job(change, runtime.settings, runtime.ledger, sagemaker, tags)

    return _guard("stop_training", event, body)


def _sns_records(event: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    records = event.get("Records")
    if not isinstance(records, list):
        return None
    return [r for r in records if isinstance(r, Mapping)]


def _notify_alarms(records: list[Mapping[str, Any]], runtime: Runtime) -> dict[str, Any]:
    sent: list[dict[str, str]] = []
    rejected: list[str] = []
    topic = runtime.settings.topic_arn
    if not topic:
        raise MalformedEventError("SMX_TOPIC_ARN is not set: nowhere to send alarm notifications")
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
        key = f"alarm#{alarm.alarm_name}#{alarm.new_state}#{alarm.change_time or sns_part.get('MessageId')}#notify"
        if not runtime.ledger.claim(key, {"action": "notify", "alarm": alarm.alarm_name}):
            continue
        try:
            message_id = alarm_notification(alarm, region=runtime.region).publish(
                runtime.clients("sns"), topic
            )
        except Exception:
            runtime.ledger.release(key)
            raise
        runtime.ledger.complete(key, {"outcome": "published", "message_id": message_id})
        sent.append({"alarm": alarm.alarm_name, "state": alarm.new_state, "message_id": message_id})
    if rejected and not sent:
        raise MalformedEventError("; ".join(rejected))
    return {"action": "notify", "alarms": sent, "rejected_records": rejected}


def handle_notify(event: object, runtime: Runtime) -> dict[str, Any]:
    """EventBridge state change -> rule message; SNS-delivered CloudWatch alarm -> alarm message."""

    def body() -> dict[str, Any]:
        records = _sns_records(event) if isinstance(event, Mapping) else None
        if records is not None:
            return _notify_alarms(records, runtime)
        change = parse_state_change(event)
        if not change.triggered():
            return {"action": "notify", "job": change.job_name, "sent": []}
        sagemaker = runtime.clients("sagemaker")
        tags = job_tags(change, sagemaker, runtime.region)
        return notify_rules(
            change, runtime.settings, runtime.ledger, runtime.clients("sns"), sagemaker, tags, runtime.region
        )

    return _guard("notify", event, body)


def handle_retrain(event: object, runtime: Runtime) -> dict[str, Any]:
    """Step Functions task ``{"step": "init"|"train"|"monitor", "state": {...}}`` -> the new state document."""
    from smx_debug.actions.retrain import run_step

    return run_step(event, runtime)
