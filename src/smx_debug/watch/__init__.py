"""The scheduled evaluator: smx-debug's own rule evaluation for every watched job, with or without Debugger.

:func:`run_once` is one run (the Lambda ``lambdas/evaluator`` calls it every minute); :class:`WatchSpec` is the
set of rules a job gets, rendered by its debug plan. See docs/evaluator.md.

The spec and settings import only the standard library (a debug plan renders specs without loading the
evaluation); the run and its data sources, which need numpy and pandas, load on first use.
"""

from __future__ import annotations

from typing import Any

from smx_debug.rules.watch_spec import (
    EVALUATOR_RULES,
    MINUTE_DEFAULTS,
    TENSOR_WATCH_RULES,
    WatchedRule,
    WatchSpec,
)
from smx_debug.watch.settings import EvaluatorSettings

__all__ = [
    "EVALUATOR_RULES",
    "MINUTE_DEFAULTS",
    "TENSOR_WATCH_RULES",
    "Clients",
    "EvaluatorSettings",
    "JobOutcome",
    "Responder",
    "RunReport",
    "Trigger",
    "WatchSpec",
    "WatchedRule",
    "run_once",
]

_LAZY = {"Clients", "JobOutcome", "Responder", "RunReport", "Trigger", "run_once"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # Lazy: run.py needs numpy and pandas; a debug plan imports smx_debug.watch for the spec alone.
        from smx_debug.watch import run

        return getattr(run, name)
    raise AttributeError(f"module 'smx_debug.watch' has no attribute {name!r}")
