"""The in-process guard's face (docs/hook.md, "The in-process guard"): its modes, the rules it evaluates and the
exception a plain training loop gets when it stops the training.

``Hook(..., guard="warn"|"stop")`` (a plan: ``in_process_guard``) evaluates the recommended profile's rules inside
the training process at each save, on the steps just written (:mod:`smx_debug.evaluate.tensor_guard`, loaded only
when a guard is asked for: the evaluator's imports stay out of a training without one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from smx_debug import _json as bounded_json
from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.rules.configured import ConfiguredRule, RuleLike, configured_rule
from smx_debug.rules.definitions import GUARD_KEY, GUARD_RULES_KEY, GUARD_RULES_PARTS
from smx_debug.rules.registry import profile_rules

GUARD_MODES = ("warn", "stop")
_RULES_PART_KEYS = (GUARD_RULES_KEY, *(f"{GUARD_RULES_KEY}_{i}" for i in range(1, GUARD_RULES_PARTS)))
GUARD_PARAMETERS = frozenset({GUARD_KEY, *_RULES_PART_KEYS})
"""The guard's ``HookParameters`` keys (a plan renders them: ``DebugPlan.in_process_guard``)."""
VERDICT_FILE = "smx-guard-verdict.json"
"""The verdict a ``stop`` writes, at the trial's root (``<out_dir>/smx-guard-verdict.json``, also on S3)."""


class GuardStop(Exception):
    """Raised once, from the registered model's forward call that starts the step after the save on which a rule
    of the guard fired (``guard="stop"``): the trial is closed and the verdict written by then.

    Attributes:
        step: the global step of the last save the guard judged.
        fired: the configuration names of the rules that fired.
        verdict: the verdict document (what ``smx-debug rules evaluate TRIAL --json -`` prints for the trial).
        verdict_path: where it was written (None when it could not be: the failure is logged).
    """

    def __init__(self, message: str, *, step: int, fired: Sequence[str], verdict: Mapping[str, Any],
                 verdict_path: str | None) -> None:
        super().__init__(message)
        self.step = step
        self.fired = tuple(fired)
        self.verdict = dict(verdict)
        self.verdict_path = verdict_path


def check_guard(value: object, *, field: str = "guard") -> str | None:
    """``value`` as a guard mode (None: no guard); anything but None, ``warn`` or ``stop`` is a ConfigError."""
    if value is None or value in GUARD_MODES:
        return value
    raise ConfigError(f"{field} must be one of {', '.join(GUARD_MODES)} (or unset: no in-process guard), got "
                      f"{value!r}", field=field, value=value)


def resolve_guard_rules(configured: Iterable[RuleLike] = ()) -> list[ConfiguredRule]:
    """The guard's rule configurations: ``configured`` (rule names or configurations), then each rule of the
    recommended profile at its defaults whose class ``configured`` does not hold (a plan's rules are resolved the
    same way: a listed rule replaces the profile's rule of its class)."""
    given = [r if isinstance(r, ConfiguredRule) else configured_rule(r) for r in configured]
    classes = {c.rule for c in given}
    return [*given, *(configured_rule(name) for name in profile_rules("recommended") if name not in classes)]


def settings_rules(entries: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[ConfiguredRule]:
    """:func:`resolve_guard_rules` of the configurations a hook's settings carry (``(name, rule, parameters)``), each
    checked against the catalog (an unknown rule or parameter is a ConfigError naming it)."""
    return resolve_guard_rules(configured_rule(rule, name=name, overrides=dict(params))
                               for name, rule, params in entries)


def parse_guard(hook_params: Mapping[str, Any], source: str) -> dict[str, Any]:
    """``HookSettings``' ``guard`` and ``guard_rules`` from ``HookParameters`` (:data:`GUARD_PARAMETERS`): the mode,
    and the configurations a plan rendered as JSON ``[[name, rule, {parameter: value}], ...]``, each checked against
    the catalog. A bad value is a ConfigError naming ``HookParameters.<key>`` and the value."""
    field = f"HookParameters.{GUARD_KEY}"
    try:
        mode = check_guard(hook_params.get(GUARD_KEY), field=field)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}", field=field, value=exc.value) from None
    given = [key for key in _RULES_PART_KEYS if key in hook_params]
    if not given:
        return {"guard": mode, "guard_rules": ()}
    field = f"HookParameters.{GUARD_RULES_KEY}"
    if given != list(_RULES_PART_KEYS[:len(given)]):  # a part missing before a later one: another JSON joined
        gap = next(k for k in _RULES_PART_KEYS if k not in hook_params)
        raise ConfigError(f"{source}: HookParameters.{gap} is not set but a later part of {GUARD_RULES_KEY} is (a "
                          f"plan splits the guard's rules across {GUARD_RULES_KEY}, {GUARD_RULES_KEY}_1, ...: set "
                          "every part it rendered)", field=f"HookParameters.{gap}", value=None)
    raw = "".join(str(hook_params[key]) for key in given)
    if mode is None:
        raise ConfigError(f"{source}: {field} configures the in-process guard, but HookParameters.{GUARD_KEY} is "
                          "not set", field=field, value=raw)
    try:
        entries = bounded_json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: {field}: invalid JSON ({exc.msg})", field=field, value=raw) from None
    if not isinstance(entries, list) or not all(
            isinstance(e, list) and len(e) == 3 and isinstance(e[0], str) and e[0] and isinstance(e[1], str)
            and isinstance(e[2], dict) for e in entries):
        raise ConfigError(f"{source}: {field} must be a JSON list of [configuration name, rule, {{parameter: "
                          f"value}}], got {raw!r}", field=field, value=raw)
    rules = tuple((name, rule, dict(params)) for name, rule, params in entries)
    try:
        settings_rules(rules)
    except (ConfigError, UnknownNameError) as exc:
        raise ConfigError(f"{source}: {field}: {exc}", field=field, value=raw) from None
    return {"guard": mode, "guard_rules": rules}
