"""Lambda entry point: the scheduled evaluator (one run of smx_debug.watch per invocation)."""

from __future__ import annotations

from typing import Any

from smx_debug.watch.handler import handle_scheduled


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Find the watched running jobs, evaluate their new minutes, act on what fires (see docs/evaluator.md)."""
    return handle_scheduled(event, context)
