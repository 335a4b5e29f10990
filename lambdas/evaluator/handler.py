"""Lambda entry point: the scheduled evaluator (one run of smx_debug.watch per invocation).

Settings and clients are built once per cold start and kept here, in the function's own module (as the action
handlers keep theirs), so two functions run in one process (the local AWS) never share them.
"""

from __future__ import annotations

from typing import Any

from smx_debug.watch.handler import EvaluatorRuntime, handle_invocation

_runtime: EvaluatorRuntime | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The schedule's run (find the watched running jobs, evaluate their new minutes or send them in shards, act
    on what fires) or a shard queue's batch (see docs/evaluator.md)."""
    global _runtime
    if _runtime is None:
        _runtime = EvaluatorRuntime.from_env(context=context)
    return handle_invocation(event, context, runtime=_runtime)
