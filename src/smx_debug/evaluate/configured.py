"""A rule configuration as it travels through evaluation: keyed by its configuration name, never re-derived.

A plan may use one rule twice (``LowGPUUtilization`` as ``LowGPU-strict`` and ``LowGPU-lax``); each is one
:class:`ConfiguredRule` carrying its rule class and its typed parameters, and each is evaluated on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from smx_debug.errors import ConfigError
from smx_debug.rules.params import PROFILER_RULES, SCALAR_RULES, resolve_params, rule_defaults

if TYPE_CHECKING:
    from smx_debug.config import DebugPlan

__all__ = ["ConfiguredRule", "RuleLike", "configure", "configured_rule", "rules_from_plan"]

PROFILER_REPORT = "ProfilerReport"


class ConfiguredRule(BaseModel):
    """One rule configuration to evaluate.

    Attributes:
        name: the ``RuleConfigurationName``; the key of its result and of its live status.
        rule: the rule class (a key of ``REGISTRY``), e.g. ``LowGPUUtilization``.
        parameters: every parameter the rule runs with (catalog defaults updated by the plan), typed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    rule: str
    parameters: dict[str, Any] = Field(default_factory=dict)

    def with_overrides(self, overrides: Mapping[str, Any]) -> ConfiguredRule:
        """The same configuration with some parameters replaced (validated against the catalog)."""
        return configured_rule(self.rule, name=self.name, overrides={**self.parameters, **overrides})


RuleLike = str | ConfiguredRule


def configured_rule(rule: str, *, name: str | None = None, overrides: Mapping[str, Any] | None = None) -> ConfiguredRule:
    """``rule`` with its catalog defaults updated by ``overrides``; ``name`` defaults to the rule class.

    Example::

        strict = configured_rule("LowGPUUtilization", name="LowGPU-strict", overrides={"threshold_p95": 90})
    """
    if name is not None and (not isinstance(name, str) or not name):
        raise ConfigError(f"a rule configuration name must be a non-empty string, got {name!r}", field="name",
                          value=name)
    return ConfiguredRule(name=name or rule, rule=rule, parameters=resolve_params(rule, overrides))


def configure(
    rules: Iterable[RuleLike] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ConfiguredRule]:
    """Normalise a rule selection: strings become default configurations named after their class.

    ``rules=None`` means every profiler and scalar rule. ``overrides`` maps a configuration name (or a rule
    class: every configuration of that class) to parameter values; a key naming neither raises. Two
    configurations with one name raise: results are keyed by it.
    """
    given = list(rules) if rules is not None else [*PROFILER_RULES, *SCALAR_RULES]
    out = [r if isinstance(r, ConfiguredRule) else configured_rule(r) for r in given]
    for key, values in (overrides or {}).items():
        targets = [i for i, c in enumerate(out) if c.name == key]
        if not targets:
            rule_defaults(key)  # neither a configuration nor a rule class -> UnknownNameError with a hint
            resolve_params(key, values)  # bad values fail even when the rule is not selected
            targets = [i for i, c in enumerate(out) if c.rule == key]
        for i in targets:
            out[i] = out[i].with_overrides(values)
    seen: set[str] = set()
    for c in out:
        if c.name in seen:
            raise ConfigError(f"rule configuration name {c.name!r} is given twice; results are keyed by it",
                              field="rules", value=c.name)
        seen.add(c.name)
    return out


def rules_from_plan(
    plan: DebugPlan, *, expand_profiler_report: bool = True
) -> tuple[list[ConfiguredRule], list[str]]:
    """The plan's rules we evaluate locally, and the configuration names of those we cannot (tensor rules).

    Each profiler or scalar rule is one configuration named by its ``rule_configuration_name``.
    ``ProfilerReport`` expands to the ten profiler rules, named by class, with its ``<Rule>_<param>``
    parameters (unless ``expand_profiler_report=False``); an explicit configuration of the plan with the
    same name takes precedence.
    """
    ordered: list[tuple[bool, ConfiguredRule]] = []  # (from ProfilerReport?, configuration) in plan order
    skipped: list[str] = []
    by_lower = {r.lower(): r for r in PROFILER_RULES}
    for rc in plan.rules:
        cls = rc.spec.name
        if cls == PROFILER_REPORT:
            if not expand_profiler_report:
                continue
            params: dict[str, dict[str, Any]] = {}
            for key, value in rc.parameters.items():
                head, _, param = key.partition("_")
                target = by_lower.get(head.lower())
                if target is not None:
                    params.setdefault(target, {})[param.lower()] = value
            ordered.extend((True, configured_rule(r, overrides=params.get(r))) for r in PROFILER_RULES)
        elif cls in PROFILER_RULES or cls in SCALAR_RULES:
            config = configured_rule(cls, name=rc.rule_configuration_name, overrides=dict(rc.parameters))
            ordered.append((False, config))
        else:
            skipped.append(rc.rule_configuration_name)
    explicit = {c.name for from_report, c in ordered if not from_report}
    return [c for from_report, c in ordered if not (from_report and c.name in explicit)], skipped
