"""EventBridge -> Lambda on the local AWS: events and schedule ticks delivered to deployed handlers, in-process.

moto's TestEventPattern is a stub and it cannot run Lambda targets without Docker. :func:`deliver_event` matches an
event against the default bus's enabled rules (with moto's own pattern matcher, ``moto.events.models.EventPattern``)
and runs each tagged Lambda target (:func:`~smx_debug.local.awslambda.invoke.invoke_handler`), in the order
rule_metrics, stop_training, notify, retrain; :func:`deliver_schedule` runs one tick of the scheduled rules (the
evaluator's and the fleet collector's). Each edge is authorized by the function's policy
(:mod:`smx_debug.local.iam`); a refused event goes to the target's DLQ if EventBridge may send there.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import moto.events.models as events_models

from smx_debug.contracts import ACTION_HANDLERS
from smx_debug.errors import AccessDeniedError
from smx_debug.local.awslambda.invoke import Delivery, function_target, invoke_handler, send_to_queue
from smx_debug.local.clients import client
from smx_debug.local.iam.authorize import authorize_service
from smx_debug.local.patching import serve
from smx_debug.local.server import LocalAws
from smx_debug.local.sns import delivery as sns_delivery

HANDLER_ORDER = ACTION_HANDLERS


def _order(name: str) -> int:
    return HANDLER_ORDER.index(name) if name in HANDLER_ORDER else len(HANDLER_ORDER)


def deliver_event(
    aws: LocalAws,
    event: Mapping[str, Any],
    handlers: Mapping[str, Callable[[Any, Any], Any] | Mapping[str, str]] | None = None,
    *,
    lambdas_dir: Path | None = None,
) -> list[Delivery]:
    """Deliver ``event`` the way EventBridge would, running Lambda targets in-process.

    With ``handlers`` (no deployed functions, e.g. unit-style tests) each entry runs in turn:
    ``{"stop_training": {"SMX_WATCH_PREFIXES": "demo-"}}`` runs ``lambdas/actions/handler.py``'s ``stop_training``
    with that environment; a callable is called as ``fn(event, None)``. Without it, every enabled rule
    on the default bus whose pattern matches is followed to its Lambda targets; functions without the
    ``smx-debug:handler`` tag are skipped. Deliveries run in the order metrics, stop, notify, retrain.
    """
    sns_delivery.install()  # what the handlers publish reaches SNS's subscribers on this LocalAws
    serve(aws)
    deliveries: list[Delivery] = []
    if handlers is not None:
        for name in sorted(handlers, key=_order):
            target = handlers[name]
            if callable(target):
                try:
                    deliveries.append(Delivery(name, name, result=target(copy.deepcopy(dict(event)), None)))
                except Exception as exc:
                    deliveries.append(Delivery(name, name, error=exc))
            else:
                deliveries.append(invoke_handler(aws, name, event, target, lambdas_dir=lambdas_dir))
        return deliveries

    events = client(aws, "events")
    plan: list[tuple[str, str, dict[str, str], Any]] = []
    for page in events.get_paginator("list_rules").paginate(EventBusName="default"):
        for rule in page.get("Rules", []):
            if rule.get("State") != "ENABLED" or not rule.get("EventPattern"):
                continue
            pattern = events_models.EventPattern(rule["EventPattern"],
                                                 events_models.EventPatternParser(rule["EventPattern"]).parse())
            if not pattern.matches_event(json.loads(json.dumps(event, default=str))):
                continue
            plan += _lambda_targets(aws, rule, event, deliveries)
    for function, handler, env, payload in sorted(plan, key=lambda p: (_order(p[1]), p[0])):
        deliveries.append(
            invoke_handler(aws, handler, payload, env, function_name=function, lambdas_dir=lambdas_dir)
        )
    return deliveries


def _lambda_targets(aws: LocalAws, rule: Mapping[str, Any], event: Any,
                    refused: list[Delivery]) -> list[tuple[str, str, dict[str, str], Any]]:
    """The tagged Lambda targets of ``rule`` that EventBridge may invoke (the function's policy must allow
    events.amazonaws.com for this rule). A refused invocation is a Delivery with AccessDeniedError, and the
    event goes to the target's dead-letter queue when EventBridge may send there."""
    events = client(aws, "events")
    plan: list[tuple[str, str, dict[str, str], Any]] = []
    for target in events.list_targets_by_rule(Rule=rule["Name"], EventBusName="default")["Targets"]:
        if ":lambda:" not in target["Arn"]:
            continue
        function, handler, env = function_target(aws, target["Arn"])
        if handler is None:
            continue
        payload = json.loads(target["Input"]) if target.get("Input") else event
        edge = authorize_service(aws, "events.amazonaws.com", "lambda:InvokeFunction", target["Arn"],
                                     source_arn=rule["Arn"], edge=f"EventBridge rule {rule['Name']} -> Lambda")
        if edge.allowed:
            plan.append((function, handler, env, payload))
            continue
        refused.append(Delivery(function=function, handler=handler, error=AccessDeniedError(edge.message)))
        dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
        if dlq and authorize_service(aws, "events.amazonaws.com", "sqs:SendMessage", dlq, source_arn=rule["Arn"],
                                         edge=f"EventBridge rule {rule['Name']} -> its DLQ").allowed:
            send_to_queue(aws, dlq, json.dumps(payload, default=str))
    return plan


def deliver_schedule(aws: LocalAws, *, handlers: Sequence[str] | None = None,
                     lambdas_dir: Path | None = None) -> list[Delivery]:
    """One tick of every enabled scheduled rule (``rate(...)``/``cron(...)``) on the default bus: EventBridge's
    "Scheduled Event" to each tagged Lambda target (only those running one of ``handlers``, if given: the
    evaluator's schedule and the fleet collector's tick at different rates), through the same edge checks as
    :func:`deliver_event`."""
    events = client(aws, "events")
    sns_delivery.install()  # what the handlers publish reaches SNS's subscribers on this LocalAws
    serve(aws)
    deliveries: list[Delivery] = []
    plan: list[tuple[str, str, dict[str, str], Any]] = []
    for page in events.get_paginator("list_rules").paginate(EventBusName="default"):
        for rule in page.get("Rules", []):
            if rule.get("State") != "ENABLED" or not rule.get("ScheduleExpression"):
                continue
            event = {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event",
                     "source": "aws.events", "account": rule["Arn"].split(":")[4],
                     "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": aws.region,
                     "resources": [rule["Arn"]], "detail": {}}
            plan += _lambda_targets(aws, rule, event, deliveries)
    for function, handler, env, payload in plan:
        if handlers is not None and handler not in handlers:
            continue
        deliveries.append(invoke_handler(aws, handler, payload, env, function_name=function, lambdas_dir=lambdas_dir))
    return deliveries

