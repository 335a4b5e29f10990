"""One JSON decoder for every untrusted document: nesting too deep to decode is malformed JSON like any other.

``json.loads`` raises :class:`RecursionError` on a document nested deeper than the interpreter's recursion limit
(a 100,000-level array is a few hundred kilobytes), and a reader that guards only for :class:`ValueError` lets it
escape. :func:`loads` turns it into :class:`JsonTooDeepError`, a :class:`json.JSONDecodeError` (so also a
:class:`ValueError`), so each caller's existing skip-and-count path takes it. Standard library only: the Lambda
assets ship it.
"""

from __future__ import annotations

import json
from typing import Any


class JsonTooDeepError(json.JSONDecodeError):
    """Raised when a JSON document is nested deeper than the decoder may recurse."""


def loads(data: str | bytes | bytearray, **kwargs: Any) -> Any:
    """``json.loads(data, **kwargs)`` whose only failure is :class:`ValueError` (``JSONDecodeError``).

    >>> loads("[" * 100_000 + "]" * 100_000)
    Traceback (most recent call last):
    ...
    smx_debug._json.JsonTooDeepError: nested too deep to decode: line 1 column 1 (char 0)
    """
    try:
        return json.loads(data, **kwargs)
    except RecursionError:
        doc = data if isinstance(data, str) else ""
        raise JsonTooDeepError("nested too deep to decode", doc[:64], 0) from None
