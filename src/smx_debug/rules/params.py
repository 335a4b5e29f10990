"""Rule parameters: the one owner of their defaults, their validation and their encodings.

Defaults and bounds come from the rule catalog (:func:`smx_debug.rules.get_rule`); every check of a value
is :meth:`ParamSpec.check <smx_debug.rules.definitions.ParamSpec.check>`. The encodings live here too: ProfilerReport's
``<Rule>_<parameter>`` keys (:func:`split_profiler_report_key`), the command line's ``Rule.param=value``
(:func:`parse_assignment`) and the ``RuleConfigurationName`` rule (:func:`check_configuration_name`).
Which rules smx-debug evaluates is derived here from the registry (:mod:`smx_debug.rules.registry`):
:data:`PROFILER_RULES`, :data:`SCALAR_RULES`, :data:`TENSOR_RULES`; a rule we cannot evaluate (the XGBoost rules, SimilarAcrossRuns) raises
:class:`~smx_debug.errors.ConfigError` naming it and why. Standard library only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, Final

from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.rules.catalog import get_rule, list_rules
from smx_debug.rules.definitions import ParamSpec, RuleSpec, closest
from smx_debug.rules.registry import evaluated_on

PROFILER_REPORT: Final = "ProfilerReport"

# Rules evaluated on a job's frames: the profiler rules, and the scalar rules (the four Debugger rules that also
# read the training metrics); rules evaluated on a trial's tensors (the scalar rules are among them).
PROFILER_RULES: tuple[str, ...] = evaluated_on("job", kind="profiler")
SCALAR_RULES: tuple[str, ...] = evaluated_on("job", kind="debugger")
TENSOR_RULES: tuple[str, ...] = evaluated_on("tensors")
# Why the catalog's other Debugger rules are not evaluated here (the XGBoost ones are found by framework).
_NOT_LOCAL = {
    "SimilarAcrossRuns": "it compares this trial with another job's (other_trials); smx-debug does not evaluate "
                         "it locally: Debugger's rule container does",
}

# SageMaker's RuleConfigurationName becomes part of the rule's processing job name: letters, digits and
# inner hyphens (the stricter of botocore's '.*' and ProcessingJobName's pattern). One rule for the plan and the
# evaluator's watch spec.
CONFIGURATION_NAME_PATTERN: Final = r"^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$"
_CONFIGURATION_NAME = re.compile(CONFIGURATION_NAME_PATTERN)


def check_configuration_name(name: object) -> str | None:
    """Why ``name`` is not a RuleConfigurationName (letters, digits, inner '-'; 1-256 characters), or None."""
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > 256:
        return "must be at most 256 characters"
    if not _CONFIGURATION_NAME.match(name):
        return "must be letters, digits and '-', not starting or ending with '-'"
    return None


@cache
def _catalog_specs(rule: str) -> dict[str, ParamSpec] | None:
    """ParamSpecs of ``rule`` from the rule catalog, or None if the catalog lacks the rule."""
    try:
        spec = get_rule(rule)
    except LookupError:
        return None
    return {p.name: p for p in spec.parameters}


def _unknown(kind: str, name: str, choices: Iterable[str]) -> UnknownNameError:
    close = difflib.get_close_matches(name, list(choices), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}{hint}", name=name, suggestion=close[0] if close else None)


def unsupported_reason(rule: str) -> str | None:
    """Why the catalog rule ``rule`` cannot be evaluated by smx-debug, or None (unknown names: None too)."""
    specs = _catalog_specs(rule)
    if specs is None:
        return None
    if "xgboost" in get_rule(rule).frameworks:
        return ("it reads what smdebug's XGBoost hook saves (trees, feature importance), and smx-debug has no "
                "XGBoost hook; Debugger's rule container evaluates it for XGBoost jobs")
    return _NOT_LOCAL.get(rule)


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
    specs = _catalog_specs(rule) or {}  # every rule of the three lists is in the catalog (tested)
    return {name: spec.default for name, spec in specs.items()}


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


def split_profiler_report_key(key: str) -> tuple[RuleSpec, str] | UnknownNameError:
    """Resolve a ProfilerReport parameter ``<Rule>_<parameter>`` (rule name case-insensitive) into the profiler
    rule and its parameter name, or the UnknownNameError (with the closest key) saying why it names none."""
    rule_part, sep, param = key.partition("_")
    rules = {s.name.lower(): s for s in list_rules("profiler") if not s.parameter_prefixes}
    spec = rules.get(rule_part.lower())
    if not sep or spec is None:
        candidates = [f"{s.name}_{p.name}" for s in rules.values() for p in s.parameters]
        suggestion = closest(key, candidates)
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        return UnknownNameError(
            f"ProfilerReport parameters are <ProfilerRule>_<parameter>; {key!r} names no profiler rule{hint}",
            name=key,
            suggestion=suggestion,
        )
    try:
        spec.param(param.lower())
    except UnknownNameError as exc:
        return exc
    return spec, param.lower()
