"""Rule name -> evaluator, and evaluation of a set of rules with parameter overrides."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from smx_debug.evaluate import scalar_rules, step_rules, system_rules
from smx_debug.evaluate.catalog import PROFILER_RULES, SCALAR_RULES, resolve_params, rule_defaults
from smx_debug.evaluate.data import JobData
from smx_debug.evaluate.result import RuleResult

__all__ = ["REGISTRY", "Evaluator", "evaluate", "evaluate_rule"]

Evaluator = Callable[[JobData, dict[str, Any]], RuleResult]

REGISTRY: dict[str, Evaluator] = {
    "BatchSize": system_rules.batch_size,
    "CPUBottleneck": system_rules.cpu_bottleneck,
    "Dataloader": step_rules.dataloader,
    "GPUMemoryIncrease": system_rules.gpu_memory_increase,
    "IOBottleneck": system_rules.io_bottleneck,
    "LoadBalancing": system_rules.load_balancing,
    "LowGPUUtilization": system_rules.low_gpu_utilization,
    "MaxInitializationTime": step_rules.max_initialization_time,
    "OverallSystemUsage": system_rules.overall_system_usage,
    "StepOutlier": step_rules.step_outlier,
    "LossNotDecreasing": scalar_rules.loss_not_decreasing,
    "Overfit": scalar_rules.overfit,
    "Overtraining": scalar_rules.overtraining,
    "StalledTrainingRule": scalar_rules.stalled_training,
}
assert set(REGISTRY) == set(PROFILER_RULES) | set(SCALAR_RULES)


def evaluate_rule(rule: str, data: JobData, overrides: Mapping[str, Any] | None = None) -> RuleResult:
    """Evaluate one rule with its defaults updated by ``overrides``."""
    rule_defaults(rule)  # unknown rule -> UnknownNameError with a suggestion
    return REGISTRY[rule](data, resolve_params(rule, overrides))


def evaluate(
    data: JobData,
    rules: Iterable[str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RuleResult]:
    """Evaluate ``rules`` (default: all profiler and scalar rules) on ``data``.

    Args:
        data: the job's frames.
        rules: rule names; None means every rule we know.
        overrides: per rule, parameter values replacing the defaults ("what-if" thresholds).
    """
    names = list(rules) if rules is not None else [*PROFILER_RULES, *SCALAR_RULES]
    overrides = overrides or {}
    for rule, values in overrides.items():
        resolve_params(rule, values)  # an unknown rule or bad value fails even if the rule is not selected
    params = {rule: resolve_params(rule, overrides.get(rule)) for rule in names}  # validate all first
    return {rule: REGISTRY[rule](data, params[rule]) for rule in names}
