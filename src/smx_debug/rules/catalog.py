"""The rule catalog: every rule of the registry (:mod:`smx_debug.rules.registry`), with typed parameters.

Two families: Debugger's built-in Debugger and profiler rules (:mod:`smx_debug.rules._builtin`, our own copy,
cross-checked against ``smdebug_rulesconfig`` by a test so drift is caught) and smx-debug's own rules
(:mod:`smx_debug.rules.own`). Names resolve case-insensitively from the ``rule_configs`` function name
(``exploding_tensor``) or the rule class name (``ExplodingTensor``).
"""

from __future__ import annotations

from smx_debug.contracts import RuleKind
from smx_debug.errors import UnknownNameError
from smx_debug.rules.definitions import RuleFamily, RuleSpec, closest
from smx_debug.rules.registry import Profile, find, rule_defs


def get_rule(name: str) -> RuleSpec:
    """Look a rule up by function or class name; unknown names raise with the closest suggestion."""
    found = find(name)
    if found is None:
        raise _unknown(name)
    return found.spec


def _unknown(name: str) -> UnknownNameError:
    candidates = sorted({n for s in list_rules() for n in (s.name, s.function)})
    suggestion = closest(name, candidates)
    hint = f"; did you mean {suggestion!r}?" if suggestion else " (see `smx-debug rules list`)"
    return UnknownNameError(f"unknown rule {name!r}{hint}", name=name, suggestion=suggestion)


def list_rules(kind: RuleKind | None = None, *, family: RuleFamily | None = None,
               profile: Profile | None = None) -> list[RuleSpec]:
    """All catalog rules (Debugger's debugger rules, ours, then the profiler rules), optionally of one kind and/or
    family (``debugger``: Debugger's built-ins; ``smx``: smx-debug's own) and/or among those a plan's ``profile``
    adds at their defaults (``recommended``; ``debugger`` adds none: that profile is the rules the plan lists)."""
    return [d.spec for d in rule_defs(kind=kind, family=family) if profile is None or profile in d.profiles]


def rule_profiles(name: str) -> tuple[Profile, ...]:
    """The profiles (other than ``debugger``) that add the rule ``name`` at its defaults."""
    found = find(name)
    if found is None:
        raise _unknown(name)
    return found.profiles
