"""The scheduled evaluator: smx-debug's own rule evaluation for every watched job, with or without Debugger.

:func:`run_once` is one run (the Lambda ``lambdas/evaluator`` calls it every minute, through
:mod:`smx_debug.watch.handler`); :class:`WatchSpec` is the set of rules a job gets, rendered by its debug plan.
A run is a pipeline, one module a step: lease and cursors (:mod:`~smx_debug.watch.state`), discover, read,
evaluate, act, save (:mod:`~smx_debug.watch.run` calls them in that order). See docs/evaluator.md.

The spec and settings import only the standard library (a debug plan renders specs without loading the
evaluation); the run and its data sources, which need numpy and pandas, load on first use.
"""

from __future__ import annotations

from smx_debug._lazy import lazy_getattr
from smx_debug.rules.watch_spec import WatchedRule, WatchSpec
from smx_debug.watch.settings import EvaluatorSettings

__all__ = ["Clients", "EvaluatorSettings", "WatchSpec", "WatchedRule", "run_once"]

# Lazy: the run needs numpy and pandas; a debug plan imports smx_debug.watch for the spec alone.
_LAZY = {"Clients": "smx_debug.watch.state", "run_once": "smx_debug.watch.run"}

__getattr__ = lazy_getattr(__name__, _LAZY)
