"""Rule parameters: names, defaults and validation, in one adapter module.

Defaults and bounds come from the project's rule catalog (:func:`smx_debug.rules.get_rule`); if a rule
is missing there we fall back to ``smdebug_rulesconfig`` (profiler rules) or to the defaults of the
Debugger developer guide (scalar rules), so switching the source is a change here only. Tensor rules
(:data:`TENSOR_RULES`) take their defaults from the catalog only; a rule we cannot evaluate (the XGBoost
rules, SimilarAcrossRuns) raises :class:`~smx_debug.errors.ConfigError` naming it and why.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.rules.catalog import TENSOR_RULES, unsupported_reason  # the owner of both

__all__ = [
    "PROFILER_RULES",
    "SCALAR_RULES",
    "TENSOR_RULES",
    "parse_assignment",
    "parse_value",
    "resolve_params",
    "rule_defaults",
]

PROFILER_RULES: tuple[str, ...] = (
    "BatchSize",
    "CPUBottleneck",
    "Dataloader",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "OverallSystemUsage",
    "StepOutlier",
)
SCALAR_RULES: tuple[str, ...] = ("LossNotDecreasing", "Overfit", "Overtraining", "StalledTrainingRule")

# Developer-guide defaults of the scalar rules, used only if the catalog lacks a rule.
_SCALAR_DEFAULTS: dict[str, dict[str, Any]] = {
    "LossNotDecreasing": {"tensor_regex": None, "num_steps": 10, "diff_percent": 0.1,
                          "increase_threshold_percent": 5, "mode": None},
    "Overfit": {"start_step": 0, "patience": 1, "ratio_threshold": 0.1},
    "Overtraining": {"patience_train": 5, "patience_validation": 10, "delta": 0.01},
    "StalledTrainingRule": {"threshold": 1800},
}


@cache
def _catalog_specs(rule: str) -> dict[str, Any] | None:
    """ParamSpecs of ``rule`` from the rule catalog, or None if the catalog lacks the rule."""
    from smx_debug.rules import get_rule

    try:
        spec = get_rule(rule)
    except LookupError:
        return None
    return {p.name: p for p in spec.parameters}


@cache
def _rulesconfig_defaults(rule: str) -> dict[str, Any]:
    from smdebug_rulesconfig.profiler_rules import rules as rc  # type: ignore[import-untyped]

    sig = inspect.signature(getattr(rc, rule).__init__)
    return {n: p.default for n, p in sig.parameters.items() if n != "self"}


def _unknown(kind: str, name: str, choices: Iterable[str]) -> UnknownNameError:
    close = difflib.get_close_matches(name, list(choices), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}{hint}", name=name, suggestion=close[0] if close else None)


def rule_defaults(rule: str) -> dict[str, Any]:
    """The default parameters of ``rule`` (a copy).

    Raises:
        ConfigError: for a catalog rule smx-debug cannot evaluate (TreeDepth, FeatureImportanceOverweight,
            CreateXgboostReport need an XGBoost hook; SimilarAcrossRuns a second trial), naming it and why.
        UnknownNameError: for a name that is no rule, with the closest one.
    """
    if rule not in PROFILER_RULES and rule not in SCALAR_RULES and rule not in TENSOR_RULES:
        reason = unsupported_reason(rule)
        if reason is not None:
            raise ConfigError(f"rule {rule} cannot be evaluated by smx-debug: {reason}", field="rule", value=rule)
        raise _unknown("rule", rule, (*PROFILER_RULES, *SCALAR_RULES, *TENSOR_RULES))
    specs = _catalog_specs(rule)
    if specs is not None:
        # The catalog leaves some defaults to the rule container (None); we fill them from the guide.
        guide = _SCALAR_DEFAULTS.get(rule, {})
        return {name: spec.default if spec.default is not None else guide.get(name) for name, spec in specs.items()}
    if rule in _SCALAR_DEFAULTS:
        return dict(_SCALAR_DEFAULTS[rule])
    return dict(_rulesconfig_defaults(rule))


def parse_value(text: str) -> Any:
    """Parse a command-line value: int, float, true/false, none, else the string."""
    low = text.strip().lower()
    if low in {"none", "null"}:
        return None
    if low in {"true", "false"}:
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_assignment(text: str, *, rule: str | None = None) -> tuple[str, str, Any]:
    """Parse ``Rule.param=value`` into ``(rule, param, value)``; with ``rule`` (the one rule selected), a bare
    ``param=value`` is that rule's."""
    key, sep, raw = text.partition("=")
    head, dot, param = key.strip().partition(".")
    if sep and not dot and rule is not None and head:
        return rule, head, parse_value(raw)
    if not sep or not dot or not head or not param:
        expected = "Rule.param=value" if rule is None else "param=value"
        raise ConfigError(f"--set expects {expected}, got {text!r}", field="--set", value=text)
    return head, param, parse_value(raw)


def _coerce(rule: str, name: str, value: Any) -> Any:
    field = f"{rule}.{name}"
    specs = _catalog_specs(rule)
    spec = specs.get(name) if specs else None
    if value is None or spec is None:
        return value
    if spec.type == "int" and isinstance(value, float) and value.is_integer():
        value = int(value)
    if spec.type in {"str", "regex"} and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    problem = spec.check(value)
    if problem:
        raise ConfigError(f"{field}: {problem} (got {value!r})", field=field, value=value)
    return value


def resolve_params(rule: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults of ``rule`` updated with ``overrides``, each checked against the catalog's bounds."""
    params = rule_defaults(rule)
    for name, value in (overrides or {}).items():
        if name not in params:
            raise _unknown(f"parameter of {rule}", name, params)
        params[name] = _coerce(rule, name, value)
    return params
