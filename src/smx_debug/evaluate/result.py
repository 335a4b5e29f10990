"""The result of one rule evaluation, in the shape of Debugger's ``profiler-reports/<Rule>.json``."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


def jsonable(value: Any) -> Any:
    """Turn numpy scalars/arrays and non-string keys into plain JSON values (NaN becomes None)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [jsonable(v) for v in value]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    return value


def encode_parameters(params: Mapping[str, Any]) -> str:
    """Encode parameters as Debugger does in ``RuleParameters``: ``k:v`` lines, Python ``str`` of each value."""
    return "\n".join(f"{k}:{v}" for k, v in params.items())


def encode_set_parameters(params: BaseModel) -> str:
    """:func:`encode_parameters` of a rule's typed parameters that are set (not None)."""
    return encode_parameters({k: v for k, v in params.model_dump().items() if v is not None})


class Trace(BaseModel):
    """What a tensor rule judged over the steps, for a chart: one statistic of one tensor (the first that met the
    condition) per saved record, and the bounds outside which it fires (``lower``: below it; ``upper``: above
    it). Long runs are thinned to a few hundred points (every k-th record); NaN and infinity are kept."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor: str
    statistic: str
    steps: tuple[int, ...] = ()
    values: tuple[float, ...] = ()
    lower: float | None = None
    upper: float | None = None


class RuleResult(BaseModel):
    """One rule's verdict over the data seen so far.

    ``rule_triggered``, ``violations``, ``details``, ``datapoints`` and ``rule_parameters`` map one to
    one to Debugger's JSON keys. ``trigger_step`` (the scan or training step at which the condition was
    first met) and ``message`` are ours and are left out of :meth:`to_debugger_json`, as are
    ``configuration_name`` (the ``RuleConfigurationName`` the result is keyed by; the rule class when empty),
    ``parameters`` (the typed values the rule ran with; ``rule_parameters`` is only their Debugger text) and
    ``trace`` (a tensor rule's statistic over the steps, for the report's chart). ``rule`` is the rule class.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    rule_triggered: int = 0
    violations: int = 0
    details: dict[str, Any] = Field(default_factory=dict)
    datapoints: int = 0
    rule_parameters: str = ""
    trigger_step: int | None = None
    message: str = ""
    configuration_name: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    trace: Trace | None = None

    @property
    def name(self) -> str:
        """The configuration name (the rule class for a rule evaluated without one)."""
        return self.configuration_name or self.rule

    @property
    def triggered(self) -> bool:
        """True when the rule's condition was met at least once."""
        return self.rule_triggered > 0

    def to_debugger_json(self) -> dict[str, Any]:
        """The Debugger ``profiler-reports/<Rule>.json`` object."""
        return {
            "RuleTriggered": int(self.rule_triggered),
            "Violations": int(self.violations),
            "Details": jsonable(self.details),
            "Datapoints": int(self.datapoints),
            "RuleParameters": self.rule_parameters,
        }

    def dumps(self) -> str:
        """The Debugger JSON as text (key order as AWS writes it)."""
        return json.dumps(self.to_debugger_json())
