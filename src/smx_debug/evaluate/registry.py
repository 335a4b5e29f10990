"""Rule class -> evaluator on a job's frames (derived from the rule registry), and evaluation of a set of rule
configurations keyed by configuration name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from smx_debug.data.frames import JobData
from smx_debug.evaluate import scalar_rules, step_rules, system_rules
from smx_debug.evaluate.result import RuleResult
from smx_debug.rules.configured import ConfiguredRule, RuleLike, configure, configured_rule
from smx_debug.rules.registry import RuleParams, rule_defs

Evaluator = Callable[[JobData, RuleParams], RuleResult]
"""A rule on a job's frames, given its configuration's typed parameters (:attr:`ConfiguredRule.params`)."""

# Debugger's built-ins evaluated on a job's frames, bound by name to their evaluators (grouped by the data they read;
# the registry in smx_debug.rules, one floor below, cannot import them). The registry says which rules these are.
_BUILTIN: dict[str, Evaluator] = {
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
REGISTRY: dict[str, Evaluator] = {d.name: _BUILTIN[d.name] for d in rule_defs() if "job" in d.evaluates_on}


def run(config: ConfiguredRule, data: JobData) -> RuleResult:
    """Evaluate one configuration; the result carries its configuration name and its parameters as written."""
    result = REGISTRY[config.rule](data, config.params)
    return result.model_copy(update={"configuration_name": config.name, "parameters": dict(config.parameters)})


def evaluate_rule(rule: RuleLike, data: JobData, overrides: Mapping[str, Any] | None = None) -> RuleResult:
    """Evaluate one rule (a class name with its defaults, or a :class:`ConfiguredRule`) updated by ``overrides``."""
    config = rule if isinstance(rule, ConfiguredRule) else configured_rule(rule)
    return run(config.with_overrides(overrides) if overrides else config, data)


def evaluate(
    data: JobData,
    rules: Iterable[RuleLike] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, RuleResult]:
    """Evaluate ``rules`` (default: all profiler and scalar rules) on ``data``, keyed by configuration name.

    Args:
        data: the job's frames.
        rules: :class:`ConfiguredRule` objects and/or rule class names (a name is that rule with its
            defaults, named after its class); None means every rule we know. One rule may appear under
            several configuration names: each is evaluated.
        overrides: per configuration name (or rule class: all its configurations), parameter values
            replacing the ones configured ("what-if" thresholds).
    """
    configs = configure(rules, overrides)  # validates everything before any rule runs
    return {c.name: run(c, data) for c in configs}
