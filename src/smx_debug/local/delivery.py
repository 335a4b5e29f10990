"""EventBridge -> Lambda and SNS -> Lambda on the local AWS: deployed handlers run in-process (no Docker).

moto cannot run Lambda code without Docker, and its TestEventPattern is a stub. Here a function's code is the
entry of the handler named by the function's tag ``smx-debug:handler`` (:data:`smx_debug.contracts.HANDLER_TAG`,
set by the infrastructure): ``lambdas/<dir>/handler.py`` and the function in it, as
:func:`smx_debug.contracts.handler_entry` says (the infrastructure's Handler setting comes from there too):

- :func:`invoke_handler` runs one handler as Lambda would: the function's environment, clients pointed at the
  local server, a warm module reused while the environment is unchanged (:func:`reset_handlers` forgets them),
  an exception captured in the :class:`Delivery`; a deployed function's handler gets Lambda's context and fails
  past its Timeout (:mod:`smx_debug.local.lambda_context`).
- :func:`deliver_event` matches an event against the default bus's enabled rules (with moto's own pattern
  matcher, ``moto.events.models.EventPattern``) and runs each tagged Lambda target, in the order rule_metrics,
  stop_training, notify, retrain.
- **SNS -> Lambda**: after :func:`install`, publishing to a topic with a Lambda subscription runs the
  subscribed function's handler the same way (moto's ``LambdaBackend.send_sns_message``);
  :func:`sns_lambda_deliveries` returns what ran.
- :func:`deliver_schedule` runs one tick of the scheduled rules (the evaluator's and the fleet collector's).
- :func:`concurrent_invocations` runs one function's handler on several threads at once (an event source
  mapping's concurrent executions, :mod:`smx_debug.local.event_sources`).

Every edge is authorized by :mod:`smx_debug.local.iam` as AWS does: EventBridge -> Lambda by the function's
policy (a refused event goes to the target's DLQ if EventBridge may send there), SNS -> queue or function by the
endpoint's policy and key (a refused message goes to the subscription's DLQ), and the function's own calls by
its role's policies.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.contracts import ACTION_HANDLERS, HANDLER_TAG, handler_entry
from smx_debug.errors import NotFoundError
from smx_debug.local import iam
from smx_debug.local.clients import client
from smx_debug.local.lambda_context import FunctionLimits, function_limits, timed_out
from smx_debug.local.server import LocalAws

__all__ = [
    "HANDLER_ORDER",
    "Delivery",
    "concurrent_invocations",
    "deliver_event",
    "deliver_schedule",
    "install",
    "invoke_handler",
    "reset_handlers",
    "sns_lambda_deliveries",
    "subscribe_queue",
]

HANDLER_ORDER = ACTION_HANDLERS

_env_lock = threading.RLock()  # os.environ is process-wide: one in-process Lambda invocation at a time
_lock = threading.Lock()
_installed = False
_active: LocalAws | None = None
_sns_deliveries: list[Delivery] = []
_module_cache: dict[str, ModuleType] = {}


@dataclass(frozen=True)
class Delivery:
    """One in-process Lambda invocation: which function/handler ran and what it returned or raised."""

    function: str
    handler: str
    result: Any = None
    error: BaseException | None = None


def reset_handlers() -> None:
    """Forget warm in-process handlers, so the next delivery is a cold start, and the SNS -> Lambda deliveries not
    yet collected (call after ``aws.reset()``: they belong to resources that are gone)."""
    with _env_lock:
        _module_cache.clear()
        _sns_deliveries.clear()


def install(aws: LocalAws | None = None) -> None:
    """Run SNS -> Lambda subscriptions in-process (patched once per process), on ``aws`` from now on. Idempotent."""
    global _installed, _active
    if aws is not None:
        _active = aws
    if _installed:
        return
    with _lock:
        if _installed:
            return
        from moto.awslambda.models import LambdaBackend

        def send_sns_message(
            self: Any,
            function_name: str,
            message: str,
            subject: str | None = None,
            qualifier: str | None = None,
        ) -> None:
            if _active is None:
                return
            _sns_deliveries.append(_deliver_sns(_active, function_name, message, subject))

        setattr(LambdaBackend, "send_sns_message", send_sns_message)  # noqa: B010 (moto would need Docker)
        from moto.sns.models import Subscription

        from smx_debug.local.patching import patch_once

        patch_once(Subscription, "publish", _authorized_subscription)
        _installed = True


def _authorized_subscription(original: Callable[..., Any]) -> Callable[..., Any]:
    """SNS delivers to a queue or a function as sns.amazonaws.com for the topic: the endpoint's policy (and
    key policy) must allow it; a refused delivery goes to the subscription's dead-letter queue if SNS may
    send there, else it is lost (as in AWS, after SNS's retries)."""

    def publish(self: Any, message: str, message_id: str, *args: Any, **kwargs: Any) -> None:
        if _active is None or self.protocol not in ("sqs", "lambda"):
            return original(self, message, message_id, *args, **kwargs)  # type: ignore[no-any-return]
        action = "sqs:SendMessage" if self.protocol == "sqs" else "lambda:InvokeFunction"
        topic = self.topic.arn
        name = topic.rsplit(":", 1)[-1]
        if iam.authorize_service(_active, "sns.amazonaws.com", action, self.endpoint, source_arn=topic,
                                 edge=f"SNS {name} -> {self.protocol}").allowed:
            return original(self, message, message_id, *args, **kwargs)  # type: ignore[no-any-return]
        redrive = self.attributes.get("RedrivePolicy")
        dlq = json.loads(redrive).get("deadLetterTargetArn") if isinstance(redrive, str) else None
        if dlq and iam.authorize_service(_active, "sns.amazonaws.com", "sqs:SendMessage", dlq, source_arn=topic,
                                         edge=f"SNS {name} subscription -> its DLQ").allowed:
            _send_to_queue(_active, dlq, json.dumps({"Message": message, "MessageId": message_id}))
        return None

    return publish


def _send_to_queue(aws: LocalAws, queue_arn: str, body: str) -> None:
    account, name = queue_arn.split(":", 5)[4:]
    sqs = client(aws, "sqs")
    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"],
                     MessageBody=body)


def _lambdas_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    candidates = [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]
    for base in candidates:
        if (base / "lambdas").is_dir():
            return base / "lambdas"
    raise NotFoundError("no lambdas/ directory found above the working directory; pass lambdas_dir=")


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _load(handler_dir: Path, cache_key: str) -> ModuleType:
    module = _module_cache.get(cache_key)
    if module is None:
        path = handler_dir / "handler.py"
        if not path.is_file():
            raise NotFoundError(f"handler {str(path)!r} does not exist")
        name = f"_smx_lambda_{hashlib.sha1(cache_key.encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise NotFoundError(f"handler {str(path)!r} cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _module_cache[cache_key] = module
    return module


def _invocation_env(aws: LocalAws, handler: str, environment: Mapping[str, str] | None,
                    function_name: str | None) -> tuple[dict[str, str], str, FunctionLimits | None]:
    """The invocation's environment, its warm-module key, and the limits of the function when it is deployed.
    A deployed function runs as its role: its own key and the local IAM's client plugin (smx_debug.local.iam).
    Its GetFunction answer is read once, as the local account, before the function's credentials apply."""
    iam.install()
    described = _described(aws, function_name) if function_name else None
    role = iam.environment_of(aws, described) if described else None
    env = {**dict(environment or {}), **aws.environ(), **(role or {}),
           "AWS_LAMBDA_FUNCTION_NAME": function_name or handler}
    limits = function_limits(described["Configuration"]) if described else None
    return env, json.dumps([handler, function_name, sorted(env.items())]), limits


def _described(aws: LocalAws, function_name: str) -> dict[str, Any] | None:
    try:
        return dict(client(aws, "lambda").get_function(FunctionName=function_name))
    except ClientError:
        return None  # not deployed: nothing to enforce, no context


def _call(module: ModuleType, handler: str, function_name: str | None, event: Any,
          limits: FunctionLimits | None) -> Delivery:
    context = limits.context() if limits else None
    try:
        entry = getattr(module, handler_entry(handler)[1].partition(".")[2])  # the function's Handler setting
        result = entry(copy.deepcopy(event), context)
    except Exception as exc:
        error: BaseException | None = exc
        result = None
    else:
        error = None
    late = timed_out(context, limits) if context and limits else None
    if late is not None:  # AWS would have ended it at the Timeout: whatever it returned or raised is lost
        return Delivery(function=function_name or handler, handler=handler, error=late)
    return Delivery(function=function_name or handler, handler=handler, result=result, error=error)


def invoke_handler(
    aws: LocalAws,
    handler: str,
    event: Any,
    environment: Mapping[str, str] | None = None,
    *,
    function_name: str | None = None,
    lambdas_dir: Path | None = None,
) -> Delivery:
    """Run ``handler``'s entry (``lambdas/<dir>/handler.py``, :func:`~smx_debug.contracts.handler_entry`) in-process
    as Lambda would, with ``environment`` and clients
    pointed at the local server. A module is reused while the function's environment is unchanged
    (a warm container); exceptions are captured in the Delivery, as Lambda captures them.

    When ``function_name`` is deployed on ``aws``, its code runs as the function's role: every call its
    clients make is authorized by :mod:`smx_debug.local.iam` against the role's policies first."""
    env, key, limits = _invocation_env(aws, handler, environment, function_name)
    with _env_lock, _environment(env):
        try:
            module = _load(_lambdas_dir(lambdas_dir) / handler_entry(handler)[0], key)
        except Exception as exc:
            return Delivery(function=function_name or handler, handler=handler, error=exc)
        return _call(module, handler, function_name, event, limits)


@contextlib.contextmanager
def concurrent_invocations(
    aws: LocalAws,
    handler: str,
    environment: Mapping[str, str] | None = None,
    *,
    function_name: str | None = None,
    lambdas_dir: Path | None = None,
) -> Iterator[Callable[[Any], Delivery]]:
    """Within the block, ``invoke(event)`` runs the function's handler as :func:`invoke_handler` does, and may
    be called from several threads at once (concurrent executions of one function, e.g. an event source
    mapping's). The process environment is the function's for the whole block (other invocations wait), and
    the warm module is shared, as one container's would be by its requests."""
    env, key, limits = _invocation_env(aws, handler, environment, function_name)
    with _env_lock, _environment(env):
        module = _load(_lambdas_dir(lambdas_dir) / handler_entry(handler)[0], key)
        yield lambda event: _call(module, handler, function_name, event, limits)


def _function(aws: LocalAws, arn: str) -> tuple[str, str | None, dict[str, str]]:
    response = client(aws, "lambda").get_function(FunctionName=arn)
    config = response["Configuration"]
    env = (config.get("Environment") or {}).get("Variables") or {}
    return config["FunctionName"], (response.get("Tags") or {}).get(HANDLER_TAG), dict(env)


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
    install(aws)
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

    from moto.events.models import EventPattern, EventPatternParser

    events = client(aws, "events")
    plan: list[tuple[str, str, dict[str, str], Any]] = []
    for page in events.get_paginator("list_rules").paginate(EventBusName="default"):
        for rule in page.get("Rules", []):
            if rule.get("State") != "ENABLED" or not rule.get("EventPattern"):
                continue
            pattern = EventPattern(rule["EventPattern"], EventPatternParser(rule["EventPattern"]).parse())
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
    from smx_debug.errors import AccessDeniedError

    events = client(aws, "events")
    plan: list[tuple[str, str, dict[str, str], Any]] = []
    for target in events.list_targets_by_rule(Rule=rule["Name"], EventBusName="default")["Targets"]:
        if ":lambda:" not in target["Arn"]:
            continue
        function, handler, env = _function(aws, target["Arn"])
        if handler is None:
            continue
        payload = json.loads(target["Input"]) if target.get("Input") else event
        edge = iam.authorize_service(aws, "events.amazonaws.com", "lambda:InvokeFunction", target["Arn"],
                                     source_arn=rule["Arn"], edge=f"EventBridge rule {rule['Name']} -> Lambda")
        if edge.allowed:
            plan.append((function, handler, env, payload))
            continue
        refused.append(Delivery(function=function, handler=handler, error=AccessDeniedError(edge.message)))
        dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
        if dlq and iam.authorize_service(aws, "events.amazonaws.com", "sqs:SendMessage", dlq, source_arn=rule["Arn"],
                                         edge=f"EventBridge rule {rule['Name']} -> its DLQ").allowed:
            _send_to_queue(aws, dlq, json.dumps(payload, default=str))
    return plan


def deliver_schedule(aws: LocalAws, *, handlers: Sequence[str] | None = None,
                     lambdas_dir: Path | None = None) -> list[Delivery]:
    """One tick of every enabled scheduled rule (``rate(...)``/``cron(...)``) on the default bus: EventBridge's
    "Scheduled Event" to each tagged Lambda target (only those running one of ``handlers``, if given: the
    evaluator's schedule and the fleet collector's tick at different rates), through the same edge checks as
    :func:`deliver_event`."""
    install(aws)
    events = client(aws, "events")
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


def _deliver_sns(aws: LocalAws, function_arn_or_name: str, message: str, subject: str | None) -> Delivery:
    try:
        function, handler, env = _function(aws, function_arn_or_name)
    except Exception as exc:
        return Delivery(function=function_arn_or_name, handler="", error=exc)
    if handler is None:
        return Delivery(
            function=function,
            handler="",
            error=NotFoundError(f"function {function!r} has no {HANDLER_TAG} tag"),
        )
    record = {
        "EventSource": "aws:sns",
        "EventVersion": "1.0",
        "Sns": {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "Subject": subject,
            "Message": message,
            "Timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        },
    }
    # moto calls this from the server thread while the publisher waits; run the handler on our own thread
    # so its calls back into the server are served.
    box: list[Delivery] = []
    worker = threading.Thread(
        target=lambda: box.append(
            invoke_handler(aws, handler, {"Records": [record]}, env, function_name=function)
        )
    )
    worker.start()
    worker.join(timeout=60)
    return (
        box[0]
        if box
        else Delivery(function=function, handler=handler, error=TimeoutError("handler did not finish"))
    )


def subscribe_queue(aws: LocalAws, topic_arns: str | Sequence[str], queue_name: str, *, raw: bool = False) -> str:
    """Create queue ``queue_name`` whose policy lets SNS deliver from ``topic_arns`` (what a real account needs,
    and the console adds), subscribe it to each topic, and return its URL."""
    topics = [topic_arns] if isinstance(topic_arns, str) else list(topic_arns)
    sqs = client(aws, "sqs")
    url = str(sqs.create_queue(QueueName=queue_name)["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = {"Version": "2012-10-17", "Statement": [{
        "Sid": "TopicDelivers", "Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"},
        "Action": "sqs:SendMessage", "Resource": arn, "Condition": {"ArnEquals": {"aws:SourceArn": topics}}}]}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    attributes = {"RawMessageDelivery": "true"} if raw else {}
    for topic in topics:
        client(aws, "sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes=attributes)
    return url


def sns_lambda_deliveries() -> list[Delivery]:
    """SNS -> Lambda deliveries made so far (and clears the list)."""
    out = list(_sns_deliveries)
    _sns_deliveries.clear()
    return out
