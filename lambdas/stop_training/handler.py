"""Lambda entry point `handler.handler` for stop_training: a thin adapter over smx_debug.actions.

Environment (read once per cold start): see docs/CONTRACTS.md, "Lambda handlers". Only a malformed event
returns normally; any other failure raises, so Lambda retries and the DLQ keeps the event.
"""

from __future__ import annotations

from typing import Any

from smx_debug.actions.handlers import Runtime, handle_stop_training

_runtime: Runtime | None = None


def handler(event: Any, context: Any = None) -> Any:
    global _runtime
    if _runtime is None:
        _runtime = Runtime.from_env(context=context)  # the account comes from the function's ARN
    return handle_stop_training(event, _runtime, context)  # the context bounds the invocation by Lambda's time left
