"""Local evaluation of Debugger's built-in profiler rules and scalar rules, batch and live.

The rules read pandas frames (docs/CONTRACTS.md) bundled in :class:`JobData` and return
:class:`RuleResult` objects that serialise to Debugger's ``profiler-reports/<Rule>.json`` shape.
"""

from __future__ import annotations

from smx_debug.data.cloudwatch import INSTANCE_METRICS, instance_metrics, training_metrics
from smx_debug.data.frames import (
    JobData,
    empty_dataloader,
    empty_scalars,
    empty_steps,
    empty_system,
    series_frame,
)
from smx_debug.data.load import LoadReport, load_path, load_source
from smx_debug.data.metrics_file import read_scalars
from smx_debug.evaluate.live import LiveEvaluator, RuleStatus, Transition
from smx_debug.evaluate.registry import REGISTRY, evaluate, evaluate_rule
from smx_debug.evaluate.result import RuleResult, encode_parameters
from smx_debug.rules.configured import ConfiguredRule, configured_rule
from smx_debug.rules.params import (
    PROFILER_RULES,
    SCALAR_RULES,
    parse_assignment,
    parse_value,
    resolve_params,
    rule_defaults,
)

__all__ = [
    "INSTANCE_METRICS",
    "PROFILER_RULES",
    "REGISTRY",
    "SCALAR_RULES",
    "ConfiguredRule",
    "JobData",
    "LiveEvaluator",
    "LoadReport",
    "RuleResult",
    "RuleStatus",
    "Transition",
    "configured_rule",
    "empty_dataloader",
    "empty_scalars",
    "empty_steps",
    "empty_system",
    "encode_parameters",
    "evaluate",
    "evaluate_rule",
    "instance_metrics",
    "load_path",
    "load_source",
    "parse_assignment",
    "parse_value",
    "read_scalars",
    "resolve_params",
    "rule_defaults",
    "series_frame",
    "training_metrics",
]
