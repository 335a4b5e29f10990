"""SNS on the local AWS: deliveries to queues and functions authorized, Lambda subscriptions run in-process.

After :func:`install`, publishing to a topic with a Lambda subscription runs the subscribed function's handler
in-process (moto's ``LambdaBackend.send_sns_message`` would need Docker), recorded on the LocalAws
(:func:`sns_lambda_deliveries`); every delivery to a queue or a function is authorized first as
sns.amazonaws.com for the topic by the endpoint's policy and key (:mod:`smx_debug.local.iam`), a refused message
going to the subscription's DLQ. :func:`subscribe_queue` makes a queue a topic may deliver to.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import moto.awslambda.models as lambda_models
import moto.sns.models as sns_models

from smx_debug.contracts import HANDLER_TAG
from smx_debug.errors import NotFoundError
from smx_debug.local.awslambda.invoke import (
    Deliveries,
    Delivery,
    function_target,
    invoke_handler,
    send_to_queue,
)
from smx_debug.local.clients import client
from smx_debug.local.iam.authorize import authorize_service
from smx_debug.local.patching import patch_once, served
from smx_debug.local.server import LocalAws


def install() -> None:
    """Run SNS -> Lambda subscriptions in-process and authorize every SNS delivery, on the LocalAws moto serves
    (:func:`smx_debug.local.patching.served`). Idempotent."""
    patch_once(lambda_models.LambdaBackend, "send_sns_message", _send_sns_message)
    patch_once(sns_models.Subscription, "publish", _authorized_subscription)


def _send_sns_message(original: Callable[..., Any]) -> Callable[..., Any]:
    def send_sns_message(self: Any, function_name: str, message: str, subject: str | None = None,
                         qualifier: str | None = None) -> None:
        aws = served()
        if aws is not None:
            aws.recorder(Deliveries).add(_deliver_sns(aws, function_name, message, subject), sns=True)

    return send_sns_message


def _authorized_subscription(original: Callable[..., Any]) -> Callable[..., Any]:
    """SNS delivers to a queue or a function as sns.amazonaws.com for the topic: the endpoint's policy (and
    key policy) must allow it; a refused delivery goes to the subscription's dead-letter queue if SNS may
    send there, else it is lost (as in AWS, after SNS's retries)."""

    def publish(self: Any, message: str, message_id: str, *args: Any, **kwargs: Any) -> None:
        aws = served()
        if aws is None or self.protocol not in ("sqs", "lambda"):
            return original(self, message, message_id, *args, **kwargs)  # type: ignore[no-any-return]
        action = "sqs:SendMessage" if self.protocol == "sqs" else "lambda:InvokeFunction"
        topic = self.topic.arn
        name = topic.rsplit(":", 1)[-1]
        if authorize_service(aws, "sns.amazonaws.com", action, self.endpoint, source_arn=topic,
                                 edge=f"SNS {name} -> {self.protocol}").allowed:
            return original(self, message, message_id, *args, **kwargs)  # type: ignore[no-any-return]
        redrive = self.attributes.get("RedrivePolicy")
        dlq = json.loads(redrive).get("deadLetterTargetArn") if isinstance(redrive, str) else None
        if dlq and authorize_service(aws, "sns.amazonaws.com", "sqs:SendMessage", dlq, source_arn=topic,
                                         edge=f"SNS {name} subscription -> its DLQ").allowed:
            send_to_queue(aws, dlq, json.dumps({"Message": message, "MessageId": message_id}))
        return None

    return publish



def _deliver_sns(aws: LocalAws, function_arn_or_name: str, message: str, subject: str | None) -> Delivery:
    try:
        function, handler, env = function_target(aws, function_arn_or_name)
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


def sns_lambda_deliveries(aws: LocalAws) -> list[Delivery]:
    """The SNS -> Lambda deliveries made on ``aws`` so far (and clears them)."""
    return aws.recorder(Deliveries).take()
