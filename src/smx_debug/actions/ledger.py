"""The action ledger: a DynamoDB table (partition key ``pk``, string) that makes actions exactly-once.

Before acting, a handler claims ``pk`` with a conditional put (``attribute_not_exists(pk)``); only the
winner acts. Duplicated, replayed or concurrent events lose the claim and do nothing. If the action
then fails, the claim is released so that Lambda's retry can act; when it succeeds, the item records
who did what, when and why. Imports only botocore and the standard library.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

__all__ = ["Ledger", "MemoryLedger", "ledger_key"]

_CLAIMED = "claimed"
_DONE = "done"


def ledger_key(*parts: str) -> str:
    """``job#rule#IssuesFound#action`` and the like; ``#`` never occurs in job or rule names."""
    return "#".join(parts)


def _attr(value: object) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    return {"S": str(value)[:4096]}


class Ledger:
    """Conditional-put claims in DynamoDB.

    Args:
        dynamodb: a boto3 DynamoDB client.
        table: the table name.
        clock: epoch seconds, injectable for tests.
    """

    def __init__(self, dynamodb: Any, table: str, clock: Callable[[], float] = time.time) -> None:
        self._ddb = dynamodb
        self.table = table
        self._clock = clock

    def claim(self, pk: str, record: Mapping[str, object]) -> bool:
        """Claim ``pk``; False if someone already holds or completed it."""
        item = {"pk": {"S": pk}, "state": {"S": _CLAIMED}, "claimed_at": _attr(self._clock())}
        item.update({k: _attr(v) for k, v in record.items() if v is not None and k not in item})
        try:
            self._ddb.put_item(
                TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        """Mark a claim done and record the outcome (what was done)."""
        names = {"#state": "state", "#done_at": "done_at"}
        values = {":done": {"S": _DONE}, ":now": _attr(self._clock())}
        sets = ["#state = :done", "#done_at = :now"]
        for i, (key, value) in enumerate(outcome.items()):
            if value is None:
                continue
            names[f"#o{i}"] = key
            values[f":o{i}"] = _attr(value)
            sets.append(f"#o{i} = :o{i}")
        self._ddb.update_item(
            TableName=self.table,
            Key={"pk": {"S": pk}},
            UpdateExpression="SET " + ", ".join(sets),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def release(self, pk: str) -> None:
        """Drop an unfinished claim after a failure, so a retry may act; a completed claim is kept."""
        try:
            self._ddb.delete_item(
                TableName=self.table,
                Key={"pk": {"S": pk}},
                ConditionExpression="#state = :claimed",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":claimed": {"S": _CLAIMED}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def get(self, pk: str) -> dict[str, str] | None:
        """The record for ``pk`` with every attribute as a string, or None."""
        item = self._ddb.get_item(TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True).get(
            "Item"
        )
        if not item:
            return None
        return {k: str(next(iter(v.values()))) for k, v in item.items()}


class MemoryLedger:
    """The same contract in memory: for unit tests and for deployments without a table (no dedup across
    invocations, so metrics and notifications become at-least-once)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, str]] = {}

    def claim(self, pk: str, record: Mapping[str, object]) -> bool:
        if pk in self.items:
            return False
        self.items[pk] = {"state": _CLAIMED, **{k: str(v) for k, v in record.items() if v is not None}}
        return True

    def complete(self, pk: str, outcome: Mapping[str, object]) -> None:
        self.items.setdefault(pk, {}).update(
            {"state": _DONE, **{k: str(v) for k, v in outcome.items() if v is not None}}
        )

    def release(self, pk: str) -> None:
        if self.items.get(pk, {}).get("state") == _CLAIMED:
            del self.items[pk]

    def get(self, pk: str) -> dict[str, str] | None:
        return self.items.get(pk)
