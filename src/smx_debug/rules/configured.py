"""A rule configuration as it travels through evaluation: keyed by its configuration name, never re-derived.

A plan may use one rule twice (``LowGPUUtilization`` as ``LowGPU-strict`` and ``LowGPU-lax``); each is one
:class:`ConfiguredRule` carrying its rule class and its typed parameters (its rule's parameter model, validated
once when the configuration is built), and each is evaluated on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from smx_debug.errors import ConfigError
from smx_debug.rules.params import PROFILER_RULES, SCALAR_RULES, resolve_params, rule_defaults
from smx_debug.rules.registry import RuleParams, find


class ConfiguredRule(BaseModel):
    """One rule configuration to evaluate.

    Attributes:
        name: the ``RuleConfigurationName``; the key of its result and of its live status.
        rule: the rule class (a key of ``REGISTRY``), e.g. ``LowGPUUtilization``.
        parameters: every parameter the rule runs with (catalog defaults updated by the plan), as written: what
            a result shows as its ``parameters``.
        params: the same values as an instance of the rule's parameter model (:attr:`RuleDef.params
            <smx_debug.rules.registry.RuleDef.params>`), validated once here: what its evaluator receives.

    Raises:
        ConfigError: a value its rule's model refuses (``VanishingGradient.threshold: expected float, got str``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    rule: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    _params: RuleParams = PrivateAttr(default=None)

    def __init__(self, *, _checked: bool = False, **data: Any) -> None:
        super().__init__(**data)
        rule = find(self.rule)
        if rule is not None and rule.name == self.rule:  # else no evaluator has this name (said where it is sought)
            # after pydantic's own checks, so that a bad value is a ConfigError; values checked against the catalog
            # already (configured_rule, checked_rule: ``_checked``) are only typed, not checked again
            self._params = rule.validate_params(self.parameters, checked=_checked)

    @property
    def params(self) -> RuleParams:
        """The typed parameters (an instance of the rule's parameter model)."""
        if self._params is None:
            rule = find(self.rule)
            if rule is None or rule.name != self.rule:
                raise ConfigError(f"rule {self.rule!r} (configuration {self.name!r}) is no rule of the registry",
                                  field="rule", value=self.rule)
            self._params = rule.validate_params(self.parameters)  # built by model_validate: validated on first use
        return self._params

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
    return ConfiguredRule(name=name or rule, rule=rule, parameters=resolve_params(rule, overrides), _checked=True)


def checked_rule(rule: str, *, name: str, parameters: Mapping[str, Any]) -> ConfiguredRule:
    """``rule`` with its catalog defaults updated by ``parameters`` that a plan's RuleConfig has already checked
    against the catalog (the plan-threshold path checks each value once, where the plan is read)."""
    return ConfiguredRule(name=name, rule=rule, parameters={**rule_defaults(rule), **parameters}, _checked=True)


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
