"""Lambda entry points of the four action functions: a thin adapter over smx_debug.actions.

One module, four names; each function's Handler setting names its own (``handler.rule_metrics``,
``handler.stop_training``, ``handler.notify``, ``handler.retrain``: :func:`smx_debug.contracts.handler_entry`).
Environment (read once per cold start): see docs/CONTRACTS.md, "Lambda handlers". Only a malformed event returns
normally; any other failure raises, so Lambda retries and the DLQ keeps the event. The runtime built at a cold
start is kept in this module: a deployed function runs one of the four names, and the local AWS loads this
module once per function and environment, so two functions never share it.
"""

from __future__ import annotations

from typing import Any

from smx_debug.actions.handlers import (
    handle_notify,
    handle_retrain,
    handle_rule_metrics,
    handle_stop_training,
)
from smx_debug.actions.runtime import Runtime

_runtime: Runtime | None = None


def _warm(context: Any) -> Runtime:
    global _runtime
    if _runtime is None:
        _runtime = Runtime.from_env(context=context)  # the account comes from the function's ARN
    return _runtime


def rule_metrics(event: Any, context: Any = None) -> Any:
    """Debugger rule triggers -> RuleTriggered metrics (the context bounds the invocation by Lambda's time left)."""
    return handle_rule_metrics(event, _warm(context), context)


def stop_training(event: Any, context: Any = None) -> Any:
    """Stops watched training jobs whose triggered rule asks for it; starts retraining."""
    return handle_stop_training(event, _warm(context), context)


def notify(event: Any, context: Any = None) -> Any:
    """Debugger rule triggers and alarms -> human-readable SNS messages."""
    return handle_notify(event, _warm(context), context)


def retrain(event: Any, context: Any = None) -> Any:
    """One step of the retraining workflow (init, train, monitor, end), within the invocation's time."""
    return handle_retrain(event, _warm(context), context)
