"""The scheduled evaluator: smx-debug's own rule evaluation for every watched job, with or without Debugger.

:func:`run_once` is one run (the Lambda ``lambdas/evaluator`` calls it every minute); :class:`WatchSpec` is the
set of rules a job gets, rendered by its debug plan. See docs/evaluator.md.

The spec and settings import only the standard library (a debug plan renders specs without loading the
evaluation); the run and its data sources, which need numpy and pandas, load on first use.
"""

from __future__ import annotations

from smx_debug._lazy import lazy_getattr
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

# Lazy: run.py needs numpy and pandas; a debug plan imports smx_debug.watch for the spec alone.
_LAZY = dict.fromkeys(("Clients", "JobOutcome", "Responder", "RunReport", "Trigger", "run_once"), "smx_debug.watch.run")

__getattr__ = lazy_getattr(__name__, _LAZY)
