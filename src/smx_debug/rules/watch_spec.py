"""Which rules the evaluator applies to a job: the watch spec, and the rules it can evaluate without Debugger.

A debug plan that guards with the evaluator renders a :class:`WatchSpec` (its rule configurations, keyed by
configuration name, with the parameters the plan set): rules judged on CloudWatch minutes (:data:`MINUTE_DEFAULTS`)
and tensor rules judged on the job's tensors (:data:`TENSOR_WATCH_RULES`). The spec is stored in the stack's bucket under
``EVALUATOR_SPEC_PREFIX + <sha256>.json`` and the job carries the key in the ``smx-debug:evaluator`` tag (tag
values hold at most 256 characters; the key holds 92). Deployment-wide default rules (``cdk.json``) use the
same JSON form. Standard library only: the plan renders it and the Lambda reads it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from smx_debug import _json as bounded_json
from smx_debug.contracts import EVALUATOR_SPEC_PREFIX
from smx_debug.errors import ConfigError
from smx_debug.rules.definitions import ParamValue
from smx_debug.rules.params import TENSOR_RULES, check_configuration_name
from smx_debug.rules.registry import rule_defs

SPEC_VERSION: Final = 1

# Rules the evaluator judges from CloudWatch's 1-minute data, with the parameters it uses unless the plan sets them
# (each rule's ``minute_defaults`` in the registry: rules._builtin_local says why they are sized for minutes).
MINUTE_DEFAULTS: Final[Mapping[str, Mapping[str, ParamValue]]] = {
    d.name: d.minute_defaults for kind in ("profiler", "debugger") for d in rule_defs(kind=kind)
    if d.minute_defaults is not None
}
# The tensor rules, judged on the job's tensors in S3 (its DebugHookConfig output) with the catalog's defaults. The
# loss rules above that are tensor rules too (LossNotDecreasing, Overfit, Overtraining) stay on the training metrics.
TENSOR_WATCH_RULES: Final = tuple(r for r in TENSOR_RULES if r not in MINUTE_DEFAULTS)
EVALUATOR_RULES: Final = (*MINUTE_DEFAULTS, *TENSOR_WATCH_RULES)
_WINDOWS: Final = {"CPUBottleneck": 5, "LowGPUUtilization": 5, "GPUMemoryIncrease": 10}
DEFAULT_RULE_WINDOW: Final = 10


@dataclass(frozen=True)
class WatchedRule:
    """One rule configuration the evaluator applies: ``name`` is the RuleConfigurationName (the key everywhere).

    ``parameters`` holds only what the plan set; :meth:`resolved` adds the evaluator's minute defaults.
    """

    name: str
    rule: str
    parameters: Mapping[str, ParamValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = check_configuration_name(self.name)
        if problem is not None:
            raise ConfigError(
                f"watch spec: rule configuration name {self.name!r} {problem}",
                field="rules[].name", value=self.name,
            )
        if self.rule not in EVALUATOR_RULES:
            raise ConfigError(
                f"watch spec: rule {self.rule!r} (configuration {self.name!r}) cannot be evaluated without "
                f"Debugger; the evaluator evaluates {', '.join(EVALUATOR_RULES)}",
                field="rules[].rule", value=self.rule,
            )
        for key, value in self.parameters.items():
            if not isinstance(key, str) or not isinstance(value, bool | int | float | str):
                raise ConfigError(
                    f"watch spec: parameter {key!r} of {self.name!r} must be a bool, number or string, got {value!r}",
                    field=f"rules[{self.name}].parameters.{key}", value=value,
                )

    @property
    def reads_tensors(self) -> bool:
        """Judged on the job's tensors (:data:`TENSOR_WATCH_RULES`), not on CloudWatch minutes."""
        return self.rule in TENSOR_WATCH_RULES

    def resolved(self) -> dict[str, ParamValue]:
        """The evaluator's minute defaults (none for a tensor rule: the catalog's apply) updated with the plan's
        parameters."""
        return {**MINUTE_DEFAULTS.get(self.rule, {}), **self.parameters}

    @property
    def window_minutes(self) -> int:
        """How many of the latest minutes one evaluation looks at."""
        window = _WINDOWS.get(self.rule, DEFAULT_RULE_WINDOW)
        if self.rule == "LossNotDecreasing":
            # Align LossNotDecreasing's checks (every num_steps steps from the window's first step) so that the
            # newest minute is always a check: the window spans a whole number of num_steps, plus one.
            n = max(1, int(self.resolved()["num_steps"]))
            window = n * max(1, -(-(DEFAULT_RULE_WINDOW - 1) // n)) + 1
        return window

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rule": self.rule, "parameters": dict(self.parameters)}


@dataclass(frozen=True)
class WatchSpec:
    """The evaluator's rules for one job (or a deployment's defaults), in order, unique by configuration name."""

    rules: tuple[WatchedRule, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ConfigError(
                    f"watch spec: rule configuration name {rule.name!r} is used twice", field="rules", value=rule.name
                )
            seen.add(rule.name)

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces), so equal specs have equal keys."""
        body = {"version": SPEC_VERSION, "rules": [r.as_dict() for r in self.rules]}
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @property
    def key(self) -> str:
        """The object key in the stack's bucket, content-addressed: the same spec always has the same key."""
        return f"{EVALUATOR_SPEC_PREFIX}{hashlib.sha256(self.to_json().encode()).hexdigest()}.json"

    def store(self, bucket: str, *, s3_client: Any) -> str:
        """Put the spec in ``bucket`` (the stack's bucket, output ``OutputBucketName``) at :attr:`key`; returns the key.

        Content-addressed, so storing the same spec twice is harmless and a stored spec never changes.
        """
        s3_client.put_object(Bucket=bucket, Key=self.key, Body=self.to_json().encode(), ContentType="application/json")
        return self.key

    def merged_with(self, defaults: WatchSpec, *, skip: frozenset[str] = frozenset()) -> WatchSpec:
        """This spec's rules, then each default rule whose configuration name is neither here nor in ``skip``."""
        names = {r.name for r in self.rules} | skip
        return WatchSpec(rules=(*self.rules, *(r for r in defaults.rules if r.name not in names)))

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "watch spec") -> WatchSpec:
        """Parse :meth:`to_json`'s form (or a bare list of rules, as ``cdk.json`` defaults may be written).

        Raises:
            ConfigError: not JSON, an unknown version, or a bad rule (the message names ``source`` and the field).
        """
        try:
            body = bounded_json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:  # ValueError: also nested too deep
            raise ConfigError(f"{source}: not JSON ({exc})", field="(spec)", value=str(text)[:80]) from None
        if isinstance(body, list):
            body = {"version": SPEC_VERSION, "rules": body}
        if not isinstance(body, dict) or body.get("version") != SPEC_VERSION or not isinstance(body.get("rules"), list):
            raise ConfigError(
                f"{source}: expected {{'version': {SPEC_VERSION}, 'rules': [...]}}", field="(spec)", value=str(body)[:80]
            )
        rules = []
        for i, item in enumerate(body["rules"]):
            if not isinstance(item, dict) or not isinstance(item.get("rule"), str):
                raise ConfigError(f"{source}: rules[{i}] needs a 'rule' name", field=f"rules[{i}]", value=item)
            params = item.get("parameters", {})
            if not isinstance(params, dict):
                raise ConfigError(f"{source}: rules[{i}].parameters must be a mapping", field=f"rules[{i}]", value=params)
            extra = set(item) - {"name", "rule", "parameters"}
            if extra:
                raise ConfigError(
                    f"{source}: rules[{i}] has unknown fields {sorted(extra)}", field=f"rules[{i}]", value=sorted(extra)
                )
            try:
                rules.append(WatchedRule(name=item.get("name") or item["rule"], rule=item["rule"], parameters=params))
            except ConfigError as exc:
                raise ConfigError(f"{source}: {exc}", field=exc.field, value=exc.value) from None
        try:
            return cls(rules=tuple(rules))
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}", field=exc.field, value=exc.value) from None
