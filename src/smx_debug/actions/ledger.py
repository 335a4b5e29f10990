"""The action ledger: a DynamoDB table (partition key ``pk``, string) that makes actions exactly-once.

A claim is a lease (Powertools' idempotency utility is the model; its bug #1038 was a claim that never
expired). Claiming ``pk`` is a conditional put that succeeds when the item does not exist, or when it is
an unfinished claim whose lease has run out (its holder died: Lambda timeout, out of memory, a crash
between claim and action). Only the winner acts; a loser gets the record that holds the key in the same
answer (``ReturnValuesOnConditionCheckFailure``). A completed item is never taken over; it carries the TTL
attribute :data:`~smx_debug.contracts.LEDGER_TTL_ATTRIBUTE`, which the stack enables on the table, so the
table does not grow forever. Every item records who did what, when and why.

Attributes: ``pk``, ``state`` (``claimed``/``done``), ``claimed_at``, ``lease_until`` (epoch seconds; a
claim is live until then), ``done_at``, ``expires_at`` (the TTL) and the caller's record and outcome.
Imports only botocore and the standard library.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from botocore.exceptions import ClientError

from smx_debug.contracts import (
    DEFAULT_LEASE_SECONDS,
    LEDGER_CLAIMED_AT_ATTRIBUTE,
    LEDGER_DONE_AT_ATTRIBUTE,
    LEDGER_KEY_ATTRIBUTE,
    LEDGER_LEASE_ATTRIBUTE,
    LEDGER_RETENTION_SECONDS,
    LEDGER_TTL_ATTRIBUTE,
)

CLAIMED = "claimed"
DONE = "done"
_RESERVED = {LEDGER_KEY_ATTRIBUTE, "state", LEDGER_CLAIMED_AT_ATTRIBUTE, LEDGER_LEASE_ATTRIBUTE, LEDGER_DONE_AT_ATTRIBUTE, LEDGER_TTL_ATTRIBUTE}


class LedgerLike(Protocol):
    """What the claim-act-complete helper needs from a ledger."""

    lease_seconds: float

    def claim_or_holder(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None: ...
    def complete(self, pk: str, outcome: Mapping[str, object]) -> None: ...
    def release(self, pk: str) -> None: ...
    def get(self, pk: str) -> dict[str, str] | None: ...


def _attr(value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    return {"S": str(value).encode("utf-8", "replace").decode("utf-8")[:4096]}


def _strings(item: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """A DynamoDB item with every attribute as a string."""
    return {k: str(next(iter(v.values()))) for k, v in item.items()}


def _text(value: object) -> str:
    return str(value).encode("utf-8", "replace").decode("utf-8")[:4096]


class Ledger:
    """Lease claims in DynamoDB.

    Args:
        dynamodb: a boto3 DynamoDB client.
        table: the table name.
        clock: epoch seconds, injectable for tests.
        lease_seconds: how long a claim stays live; must outlast the function timeout.
        retention_seconds: how long a completed record is kept (its TTL).
    """

    def __init__(
        self,
        dynamodb: Any,
        table: str,
        clock: Callable[[], float] = time.time,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        retention_seconds: float = LEDGER_RETENTION_SECONDS,
    ) -> None:
        self._ddb = dynamodb
        self.table = table
        self._clock = clock
        self.lease_seconds = lease_seconds
        self.retention_seconds = retention_seconds

    def claim(self, pk: str, record: Mapping[str, object]) -> bool:
        """Claim ``pk`` for one lease; False if it is done or claimed by someone whose lease is live (a plain lease,
        such as the evaluator's run lease; actions go through :meth:`claim_or_holder`)."""
        return self.claim_or_holder(pk, record) is None

    def claim_or_holder(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        """Claim ``pk`` for one lease: None when this call holds it now, else the record that holds it (done, or
        claimed by someone whose lease is live), read in the same call (``ReturnValuesOnConditionCheckFailure``),
        so finding an action done costs one request, not two."""
        for _ in range(2):
            holder = self._claim(pk, record)
            if holder is None or holder:
                return holder
            holder = self.get(pk)  # an answer without the item: read it
            if holder is not None:
                return holder
            # released between the two requests (its holder failed and gave it up): claim again
        return {}

    def _claim(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        now = self._clock()
        lease_until = now + self.lease_seconds
        item = {
            LEDGER_KEY_ATTRIBUTE: {"S": pk},
            "state": {"S": CLAIMED},
            LEDGER_CLAIMED_AT_ATTRIBUTE: _attr(now),
            LEDGER_LEASE_ATTRIBUTE: _attr(lease_until),
            LEDGER_TTL_ATTRIBUTE: _attr(int(lease_until + self.retention_seconds)),
        }
        item.update({k: _attr(v) for k, v in record.items() if v is not None and k not in _RESERVED})
        try:
            self._ddb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk) OR (#state = :claimed AND #lease < :now)",
                ExpressionAttributeNames={
                    "#pk": LEDGER_KEY_ATTRIBUTE,
                    "#state": "state",
                    "#lease": LEDGER_LEASE_ATTRIBUTE,
                },
                ExpressionAttributeValues={":claimed": {"S": CLAIMED}, ":now": _attr(now)},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                response: Mapping[str, Any] = exc.response  # "Item" (ALL_OLD) is not in botocore's stubs
                return _strings(response.get("Item") or {})
            raise
        return None

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        """Mark a claim done, record the outcome and start the record's retention (TTL)."""
        now = self._clock()
        names = {"#state": "state", "#done_at": LEDGER_DONE_AT_ATTRIBUTE, "#ttl": LEDGER_TTL_ATTRIBUTE}
        values = {":done": {"S": DONE}, ":now": _attr(now), ":ttl": _attr(int(now + self.retention_seconds))}
        sets = ["#state = :done", "#done_at = :now", "#ttl = :ttl"]
        for i, (key, value) in enumerate(outcome.items()):
            if value is None or key in _RESERVED:
                continue
            names[f"#o{i}"] = key
            values[f":o{i}"] = _attr(value)
            sets.append(f"#o{i} = :o{i}")
        self._ddb.update_item(
            TableName=self.table,
            Key={LEDGER_KEY_ATTRIBUTE: {"S": pk}},
            UpdateExpression="SET " + ", ".join(sets),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def release(self, pk: str) -> None:
        """Drop an unfinished claim after a failure, so a retry may act at once; a completed one is kept."""
        try:
            self._ddb.delete_item(
                TableName=self.table,
                Key={LEDGER_KEY_ATTRIBUTE: {"S": pk}},
                ConditionExpression="#state = :claimed",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":claimed": {"S": CLAIMED}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def get(self, pk: str) -> dict[str, str] | None:
        """The record for ``pk`` with every attribute as a string, or None."""
        item = self._ddb.get_item(
            TableName=self.table, Key={LEDGER_KEY_ATTRIBUTE: {"S": pk}}, ConsistentRead=True
        ).get("Item")
        return _strings(item) if item else None


class MemoryLedger:
    """The same contract (leases, takeover of expired claims, TTL) in memory: for tests and for deployments
    without a table (no dedup across invocations: metrics and notifications become at-least-once)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        retention_seconds: float = LEDGER_RETENTION_SECONDS,
    ) -> None:
        self.items: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self.lease_seconds = lease_seconds
        self.retention_seconds = retention_seconds

    def claim(self, pk: str, record: Mapping[str, object]) -> bool:
        return self.claim_or_holder(pk, record) is None

    def claim_or_holder(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        with self._lock:
            return self._claim(pk, record)

    def _claim(self, pk: str, record: Mapping[str, object]) -> dict[str, str] | None:
        now = self._clock()
        held = self.items.get(pk)
        if held is not None and not (held["state"] == CLAIMED and float(held[LEDGER_LEASE_ATTRIBUTE]) < now):
            return {LEDGER_KEY_ATTRIBUTE: pk, **held}
        lease_until = now + self.lease_seconds
        self.items[pk] = {
            **{k: _text(v) for k, v in record.items() if v is not None and k not in _RESERVED},
            "state": CLAIMED,
            LEDGER_CLAIMED_AT_ATTRIBUTE: repr(now),
            LEDGER_LEASE_ATTRIBUTE: repr(lease_until),
            LEDGER_TTL_ATTRIBUTE: str(int(lease_until + self.retention_seconds)),
        }
        return None

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        now = self._clock()
        self.items.setdefault(pk, {}).update(
            {
                **{k: _text(v) for k, v in outcome.items() if v is not None and k not in _RESERVED},
                "state": DONE,
                LEDGER_DONE_AT_ATTRIBUTE: repr(now),
                LEDGER_TTL_ATTRIBUTE: str(int(now + self.retention_seconds)),
            }
        )

    def release(self, pk: str) -> None:
        if self.items.get(pk, {}).get("state") == CLAIMED:
            del self.items[pk]

    def get(self, pk: str) -> dict[str, str] | None:
        item = self.items.get(pk)
        return None if item is None else {LEDGER_KEY_ATTRIBUTE: pk, **item}
