"""CursorStore's batched DynamoDB calls: what DynamoDB leaves unprocessed is sent again, a bounded number of times."""

from __future__ import annotations

from typing import Any

import pytest

from smx_debug.watch.state import Cursor, CursorStore


class _Unprocessing:
    """A DynamoDB client fake that leaves the whole request unprocessed ``times`` times, then processes it."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.requests: list[dict[str, Any]] = []

    def _answer(self, request: dict[str, Any], key: str, done: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        if self.times:
            self.times -= 1
            return {key: request}
        return done

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        return self._answer(RequestItems, "UnprocessedKeys", {"Responses": {"cursors": []}})

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        return self._answer(RequestItems, "UnprocessedItems", {})


def _cursor(job: str) -> Cursor:
    return Cursor(job=job, checked_at=0.0)


@pytest.mark.parametrize("operation", ["load", "save"])
def test_cursor_store_unprocessed_request_sent_again_until_processed(operation: str) -> None:
    client = _Unprocessing(times=2)
    store = CursorStore("cursors", client, max_rounds=3)
    if operation == "load":
        assert store.load(["a", "b"]) == {}
    else:
        assert store.save([_cursor("a"), _cursor("b")]) == 2
    assert len(client.requests) == 3
    assert client.requests[0] == client.requests[1] == client.requests[2]


@pytest.mark.parametrize(("operation", "what"), [("load", "keys"), ("save", "items")])
def test_cursor_store_still_unprocessed_after_max_rounds_raises(operation: str, what: str) -> None:
    client = _Unprocessing(times=10)
    store = CursorStore("cursors", client, max_rounds=2)
    with pytest.raises(RuntimeError, match=f"DynamoDB left {what} of cursors unprocessed after 2 rounds"):
        if operation == "load":
            store.load(["a"])
        else:
            store.save([_cursor("a")])
    assert len(client.requests) == 2


class _Items:
    """A DynamoDB client fake whose BatchGetItem answers ``items``."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        return {"Responses": {"cursors": self.items}}


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("damage", [
    {"info": {"S": DEEP}},
    {"fired": {"S": DEEP}},
    {"data": {"B": __import__("zlib").compress(DEEP.encode())}},
    {"data": {"B": b"not zlib"}},
    {"info": {"S": "{"}},
])
def test_cursor_store_damaged_item_starts_over_and_the_others_load(damage: dict[str, Any]) -> None:
    from smx_debug.watch.state import _to_item

    good = _to_item(Cursor(job="a", checked_at=5.0, info={"hosts": 1}, fired={"CPUBottleneck": 7}), 10.0)
    bad = {**_to_item(Cursor(job="b", checked_at=5.0, data={"algo-1": {"m": {60: 1.0}}}), 10.0), **damage}
    cursors = CursorStore("cursors", _Items([bad, good])).load(["a", "b"])
    assert list(cursors) == ["a"]  # b starts over, as an item of another version does
    assert (cursors["a"].info, cursors["a"].fired) == ({"hosts": 1}, {"CPUBottleneck": 7})
