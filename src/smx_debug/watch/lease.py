"""One evaluator run at a time, without reserved concurrency: a lease on the run, in the cursor table.

Runs can overlap once the function has no reserved concurrency (a run still going when the next schedule
fires, an invocation delayed in Lambda's queue, a manual invoke). Two runs that read the same cursors would both
evaluate every job and both hand the same triggers to the action core before either saved its cursors. So a
run first claims the lease, one item of the cursor table (key :data:`LEASE_KEY`, which no job name can be:
SageMaker names are letters, digits and hyphens), with a conditional PutItem that succeeds only when no lease
is live; a run that finds one live does nothing and says so. The lease outlasts the function's timeout
(``SMX_LEASE_SECONDS``, 90 s for a 60 s function), so a run Lambda killed cannot block the next one for long,
and a live holder can never see its lease taken over. The holder deletes it when it ends (conditionally: only
its own), so the next minute's run starts at once.

Why a lease rather than conditional cursor writes: conditions on the cursor writes would let the second run
evaluate every job and act before its writes were refused (acting twice, with only the ledger to catch it),
would cost a PutItem per job instead of a BatchWriteItem per 25, and BatchWriteItem takes no conditions.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.contracts import LEDGER_KEY_ATTRIBUTE, LEDGER_TTL_ATTRIBUTE

__all__ = ["LEASE_KEY", "RunLease"]

LEASE_KEY = "#evaluator-run"


class RunLease:
    """The run lease in ``table`` (an injected DynamoDB client); ``now`` is the run's clock (epoch seconds)."""

    def __init__(self, table: str, dynamodb: Any, *, seconds: float, now: float) -> None:
        self.table = table
        self.dynamodb = dynamodb
        self.seconds = seconds
        self.now = now
        self.owner = uuid.uuid4().hex
        self.held_until: float | None = None  # the live lease's end, when another run holds it

    def acquire(self) -> bool:
        """Claim the lease; False when another run holds a live one (its end in :attr:`held_until`)."""
        until = self.now + self.seconds
        try:
            self.dynamodb.put_item(
                TableName=self.table,
                Item={
                    LEDGER_KEY_ATTRIBUTE: {"S": LEASE_KEY},
                    "owner": {"S": self.owner},
                    "lease_until": {"N": repr(until)},
                    LEDGER_TTL_ATTRIBUTE: {"N": str(int(until) + 86_400)},
                },
                ConditionExpression="attribute_not_exists(#pk) OR #until < :now",
                ExpressionAttributeNames={"#pk": LEDGER_KEY_ATTRIBUTE, "#until": "lease_until"},
                ExpressionAttributeValues={":now": {"N": repr(self.now)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            answer: Mapping[str, Any] = dict(exc.response)
            held = (answer.get("Item") or {}).get("lease_until", {}).get("N")  # ReturnValuesOnConditionCheckFailure
            self.held_until = float(held) if held else None
            return False
        return True

    def release(self) -> None:
        """Delete the lease if it is still this run's (a lease taken over after expiring is left alone)."""
        try:
            self.dynamodb.delete_item(
                TableName=self.table,
                Key={LEDGER_KEY_ATTRIBUTE: {"S": LEASE_KEY}},
                ConditionExpression="#owner = :me",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":me": {"S": self.owner}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
