"""Local evaluation of Debugger's built-in rules (profiler, scalar and tensor rules), batch and live.

The rules read pandas frames (docs/CONTRACTS.md) bundled in :class:`JobData` and return
:class:`RuleResult` objects that serialise to Debugger's ``profiler-reports/<Rule>.json`` shape. The readers
that fill the frames are :mod:`smx_debug.data`'s (statistics of them are :mod:`smx_debug.analysis`'s); rule names,
defaults and parameter checks are :mod:`smx_debug.rules.params`'.
"""

from __future__ import annotations

from smx_debug.data.frames import JobData
from smx_debug.data.load import LoadReport, load_path
from smx_debug.evaluate.live import LiveEvaluator, Transition
from smx_debug.evaluate.registry import evaluate, evaluate_rule
from smx_debug.evaluate.result import RuleResult
from smx_debug.rules.configured import ConfiguredRule, configured_rule

__all__ = [
    "ConfiguredRule",
    "JobData",
    "LiveEvaluator",
    "LoadReport",
    "RuleResult",
    "Transition",
    "configured_rule",
    "evaluate",
    "evaluate_rule",
    "load_path",
]
