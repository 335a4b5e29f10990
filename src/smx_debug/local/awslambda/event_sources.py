"""SQS -> Lambda event source mappings on the local AWS: pollers with Lambda's batch, concurrency and failure rules.

moto stores an ``AWS::Lambda::EventSourceMapping`` but delivers inside SendMessage itself, synchronously, one
batch at a time, through Docker, ignoring ``ScalingConfig`` and ``FunctionResponseTypes``; and it creates any
mapping AWS would refuse. Here, as AWS does:

- **Creation is checked** (:func:`install`, patched into moto's CreateEventSourceMapping, so CloudFormation's
  create fails too): an SQS mapping's ``BatchSize`` is 1-10 (more needs ``MaximumBatchingWindowInSeconds``),
  ``ScalingConfig.MaximumConcurrency`` is 2-1000, and the queue's visibility timeout is at least the function's
  timeout (``InvalidParameterValueException: Queue visibility timeout: ... is less than Function timeout: ...``).
- **Messages are not delivered by SendMessage** but by :func:`poll`, Lambda's pollers: it receives batches of up
  to ``BatchSize`` messages with the queue's visibility timeout and runs the function's handler in process on
  at most ``MaximumConcurrency`` threads at once (:func:`smx_debug.local.awslambda.invoke.concurrent_invocations`), each
  with Lambda's SQS event (``Records`` with ``messageId``, ``receiptHandle``, ``body``, ``attributes``
  ``ApproximateReceiveCount``/``SentTimestamp``/..., ``eventSource`` ``aws:sqs``, ``eventSourceARN``).
- **Results as Lambda reads them**: a function error leaves the whole batch on the queue (visible again after
  the visibility timeout); with ``ReportBatchItemFailures``, the messages of ``batchItemFailures`` stay and the
  others are deleted, and a response naming an unknown or empty ``itemIdentifier`` fails the whole batch. A
  message received more than the queue's ``maxReceiveCount`` times goes to its dead-letter queue (moto's SQS
  does that on receive).
- **The edge is authorized** by :mod:`smx_debug.local.iam`: Lambda polls with the function's execution role,
  which must allow ``sqs:ReceiveMessage``, ``sqs:DeleteMessage`` and ``sqs:GetQueueAttributes`` on the queue (and
  ``kms:Decrypt`` on its key when it is encrypted); a denied poll is a Delivery with AccessDeniedError and the
  mapping is not polled.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moto.awslambda.exceptions import InvalidParameterValueException, ValidationException
from moto.awslambda.models import LambdaBackend
from moto.sqs.models import Queue, sqs_backends

from smx_debug.contracts import HANDLER_TAG
from smx_debug.errors import AccessDeniedError
from smx_debug.local.awslambda.invoke import concurrent_invocations
from smx_debug.local.clients import client
from smx_debug.local.iam.authorize import authorize_role_edge
from smx_debug.local.patching import patch_once
from smx_debug.local.server import LocalAws

MAX_LOCAL_THREADS = 32  # in-process threads one mapping's poller uses at most (AWS: up to 1,000 executions)
_EDGE_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
_queue_lock = threading.Lock()


@dataclass(frozen=True)
class Mapping_:
    """One enabled SQS event source mapping as the poller uses it."""

    uuid: str
    function: str
    function_arn: str
    handler: str
    environment: Mapping[str, str]
    role_arn: str
    queue_arn: str
    queue_url: str
    batch_size: int
    maximum_concurrency: int | None
    report_batch_item_failures: bool


@dataclass(frozen=True)
class Invocation:
    """One invocation by a poller: the batch's message ids, what the handler returned or raised, its time span
    (``time.monotonic``) and the ids that stayed on the queue."""

    function: str
    message_ids: tuple[str, ...]
    result: Any
    error: BaseException | None
    started: float
    ended: float
    failed_ids: tuple[str, ...]


def most_at_once(invocations: Sequence[Invocation]) -> int:
    """The most of ``invocations`` that ran at one instant (what a mapping's ``MaximumConcurrency`` bounds)."""
    edges = sorted([(i.started, 1) for i in invocations] + [(i.ended, -1) for i in invocations])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


# -- creation, checked ---------------------------------------------------------------------------------------


def _check(backend: Any, spec: Mapping[str, Any]) -> None:
    arn = str(spec.get("EventSourceArn") or "")
    if ":sqs:" not in arn:
        return
    batch = spec.get("BatchSize")
    window = int(spec.get("MaximumBatchingWindowInSeconds") or 0)
    if batch is not None and int(batch) > 10 and window <= 0:
        raise InvalidParameterValueException(
            "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than 10")
    concurrency = (spec.get("ScalingConfig") or {}).get("MaximumConcurrency")
    if concurrency is not None and not 2 <= int(concurrency) <= 1000:
        bound = "greater than or equal to 2" if int(concurrency) < 2 else "less than or equal to 1000"
        raise ValidationException(str(concurrency), "scalingConfig.maximumConcurrency", f"Member must have value {bound}")
    function = backend._lambdas.get_function_by_name_or_arn_with_qualifier(spec.get("FunctionName", ""))
    queue = next((q for q in sqs_backends[backend.account_id][backend.region_name].queues.values()
                  if q.queue_arn == arn), None)
    visibility = int(getattr(queue, "visibility_timeout", 30)) if queue is not None else None
    if visibility is not None and visibility < int(function.timeout):
        raise InvalidParameterValueException(
            f"Queue visibility timeout: {visibility} seconds is less than Function timeout: {int(function.timeout)} "
            "seconds")


def install() -> None:
    """Check new mappings as Lambda does, and stop moto from delivering inside SendMessage (patched once per
    process). Idempotent."""
    def checked(original: Any) -> Any:
        def create_event_source_mapping(self: Any, spec: dict[str, Any]) -> Any:
            _check(self, spec)
            return original(self, spec)

        return create_event_source_mapping

    def not_delivered(original: Any) -> Any:
        def add_message(self: Any, message: Any) -> None:
            with _queue_lock:  # moto delivers to the mappings it finds on the queue: hide them for this call
                saved, self.lambda_event_source_mappings = self.lambda_event_source_mappings, {}
                try:
                    original(self, message)
                finally:
                    self.lambda_event_source_mappings = saved

        return add_message

    patch_once(LambdaBackend, "create_event_source_mapping", checked)
    patch_once(Queue, "add_message", not_delivered)


# -- polling -------------------------------------------------------------------------------------------------


def mappings(aws: LocalAws, *, function: str | None = None) -> list[Mapping_]:
    """The enabled SQS mappings to tagged functions (of ``function`` only, if given)."""
    lam, sqs = client(aws, "lambda"), client(aws, "sqs")
    out: list[Mapping_] = []
    kwargs = {"FunctionName": function} if function else {}
    for page in lam.get_paginator("list_event_source_mappings").paginate(**kwargs):
        for esm in page.get("EventSourceMappings", []):
            if esm.get("State") != "Enabled" or ":sqs:" not in esm.get("EventSourceArn", ""):
                continue
            described = lam.get_function(FunctionName=esm["FunctionArn"])
            handler = (described.get("Tags") or {}).get(HANDLER_TAG)
            if handler is None:
                continue
            config = described["Configuration"]
            account, name = esm["EventSourceArn"].split(":")[4:6]
            out.append(Mapping_(
                uuid=esm["UUID"], function=config["FunctionName"], function_arn=config["FunctionArn"], handler=handler,
                environment=dict((config.get("Environment") or {}).get("Variables") or {}), role_arn=config["Role"],
                queue_arn=esm["EventSourceArn"],
                queue_url=sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"],
                batch_size=int(esm.get("BatchSize") or 10),
                maximum_concurrency=(esm.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                report_batch_item_failures="ReportBatchItemFailures" in (esm.get("FunctionResponseTypes") or []),
            ))
    return out


def _record(message: Mapping[str, Any], mapping: Mapping_, region: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"],
        "attributes": dict(message.get("Attributes") or {}), "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody"), "eventSource": "aws:sqs", "eventSourceARN": mapping.queue_arn,
        "awsRegion": region,
    }


def _failed_ids(mapping: Mapping_, ids: Sequence[str], result: Any, error: BaseException | None) -> tuple[str, ...]:
    """The batch's messages that stay on the queue, as Lambda reads the function's answer."""
    if error is not None:
        return tuple(ids)
    if not mapping.report_batch_item_failures or not isinstance(result, Mapping):
        return ()
    items = result.get("batchItemFailures")
    if items is None:
        return ()
    if not isinstance(items, list):
        return tuple(ids)  # a malformed answer fails the whole batch
    failed: list[str] = []
    for item in items:
        identifier = item.get("itemIdentifier") if isinstance(item, Mapping) else None
        if not isinstance(identifier, str) or identifier not in ids:
            return tuple(ids)
        failed.append(identifier)
    return tuple(dict.fromkeys(failed))


def _authorized(aws: LocalAws, mapping: Mapping_) -> str | None:
    """None when the function's role may poll the queue, else AWS's message."""
    for action in _EDGE_ACTIONS:
        outcome = authorize_role_edge(aws, "lambda.amazonaws.com", mapping.role_arn, action, mapping.queue_arn,
                                          source_arn=mapping.function_arn,
                                          edge=f"Lambda event source mapping {mapping.uuid[:8]} -> {action}")
        if not outcome.allowed:
            return outcome.message
    return None


def _batches(aws: LocalAws, mapping: Mapping_, gate: threading.Semaphore) -> Iterator[list[dict[str, Any]]]:
    """Batches received from the queue while messages are visible; each waits for a free execution first."""
    sqs = client(aws, "sqs")
    while True:
        gate.acquire()
        got = sqs.receive_message(QueueUrl=mapping.queue_url, MaxNumberOfMessages=mapping.batch_size,
                                  AttributeNames=["All"], WaitTimeSeconds=0).get("Messages", [])
        if not got:
            gate.release()
            return
        yield got


def poll(aws: LocalAws, *, function: str | None = None, lambdas_dir: Path | None = None,
         threads: int | None = None) -> list[Invocation]:
    """Poll every enabled SQS mapping (of ``function``) until its queue has no visible message left, as
    Lambda's pollers do (see the module docstring); returns the invocations in the order they ended.

    ``threads``: run at most this many of the mapping's concurrent executions at once in this process (never
    more than its ``MaximumConcurrency``; default that, capped at :data:`MAX_LOCAL_THREADS`). Executions are
    threads of one process here, so they overlap their I/O but share its CPU: a benchmark that wants each
    execution's own time runs them one at a time."""
    install()
    done: list[Invocation] = []
    for mapping in mappings(aws, function=function):
        denied = _authorized(aws, mapping)
        if denied is not None:
            now = time.monotonic()
            done.append(Invocation(mapping.function, (), None, AccessDeniedError(denied), now, now, ()))
            continue
        done.extend(_drain(aws, mapping, lambdas_dir, threads))
    return done


def _drain(aws: LocalAws, mapping: Mapping_, lambdas_dir: Path | None, threads: int | None) -> list[Invocation]:
    width = max(1, min(mapping.maximum_concurrency or 1000, MAX_LOCAL_THREADS, threads or MAX_LOCAL_THREADS))
    gate = threading.Semaphore(width)
    sqs = client(aws, "sqs")
    lock = threading.Lock()
    done: list[Invocation] = []
    with concurrent_invocations(aws, mapping.handler, mapping.environment, function_name=mapping.function,
                                lambdas_dir=lambdas_dir) as invoke, ThreadPoolExecutor(max_workers=width) as pool:

        def run(batch: list[dict[str, Any]]) -> None:
            try:
                ids = tuple(m["MessageId"] for m in batch)
                started = time.monotonic()
                delivery = invoke({"Records": [_record(m, mapping, aws.region) for m in batch]})
                ended = time.monotonic()
                failed = _failed_ids(mapping, ids, delivery.result, delivery.error)
                for m in batch:
                    if m["MessageId"] not in failed:
                        sqs.delete_message(QueueUrl=mapping.queue_url, ReceiptHandle=m["ReceiptHandle"])
                with lock:
                    done.append(Invocation(mapping.function, ids, delivery.result, delivery.error, started, ended,
                                           failed))
            finally:
                gate.release()

        for batch in _batches(aws, mapping, gate):
            pool.submit(run, batch)
    return done
