"""The bounded JSON decoder: a document nested past the recursion limit is malformed JSON, not a RecursionError."""

from __future__ import annotations

import json

import pytest

from smx_debug._json import JsonTooDeepError, loads

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("data", [DEEP, DEEP.encode(), '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_json_loads_deep_document_raises_json_decode_error(data: str | bytes) -> None:
    with pytest.raises(json.JSONDecodeError, match="nested too deep") as info:
        loads(data)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, JsonTooDeepError)


def test_json_loads_plain_document_is_json_loads() -> None:
    assert loads('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert loads(b"[1]") == [1]
    with pytest.raises(json.JSONDecodeError):
        loads("{")
