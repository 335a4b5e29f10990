"""The rule catalog: every built-in Debugger and profiler rule, with typed parameters.

The data lives in :mod:`smx_debug.rules._builtin` (our own copy, cross-checked against
``smdebug_rulesconfig`` by a test so drift is caught). Names resolve case-insensitively from the
``rule_configs`` function name (``exploding_tensor``) or the rule class name (``ExplodingTensor``).
"""

from __future__ import annotations

from smx_debug.contracts import RuleKind
from smx_debug.errors import UnknownNameError
from smx_debug.rules._builtin import RULES
from smx_debug.rules.definitions import CollectionRequirement, ParamSpec, RuleSpec, closest

__all__ = [
    "CollectionRequirement",
    "ParamSpec",
    "RuleKind",
    "RuleSpec",
    "closest",
    "get_rule",
    "list_rules",
]


def _index() -> dict[str, RuleSpec]:
    index: dict[str, RuleSpec] = {}
    for spec in RULES:
        index[spec.name.lower()] = spec
        index[spec.function.lower()] = spec
    return index


_INDEX = _index()


def get_rule(name: str) -> RuleSpec:
    """Look a rule up by function or class name; unknown names raise with the closest suggestion."""
    spec = _INDEX.get(name.lower())
    if spec is not None:
        return spec
    candidates = sorted({n for s in list_rules() for n in (s.name, s.function)})
    suggestion = closest(name, candidates)
    hint = f"; did you mean {suggestion!r}?" if suggestion else " (see `smx-debug rules list`)"
    raise UnknownNameError(f"unknown rule {name!r}{hint}", name=name, suggestion=suggestion)


def list_rules(kind: RuleKind | None = None) -> list[RuleSpec]:
    """All catalog rules (debugger rules first, then profiler rules), optionally of one kind."""
    return [spec for spec in RULES if kind is None or spec.kind == kind]
