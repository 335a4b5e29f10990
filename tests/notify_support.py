"""What the action handlers record to and notify in the local AWS, for the tests that run them: the ledger table,
the topic, and a queue subscribed to the topic to read what was sent."""

from __future__ import annotations

import json
from typing import Any

from smx_debug import local
from smx_debug.local import LocalAws
from smx_debug.local.clients import client


def ledger_and_inbox(aws: LocalAws, table: str) -> tuple[str, str]:
    """Create the ledger table ``table`` (key ``pk``, on demand) and topic ``smx-notify`` with queue ``smx-inbox``
    subscribed to it; returns (topic ARN, queue URL)."""
    client(aws, "dynamodb").create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    topic = str(client(aws, "sns").create_topic(Name="smx-notify")["TopicArn"])
    return topic, local.subscribe_queue(aws, topic, "smx-inbox")


def inbox(aws: LocalAws, queue_url: str) -> list[dict[str, Any]]:
    """Every notification that reached the queue since the last call, taken off it (SQS bodies are the SNS
    envelopes: ``Message`` is the text)."""
    sqs = client(aws, "sqs")
    out: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not batch:
            return out
        for message in batch:
            out.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
