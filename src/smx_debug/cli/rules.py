"""`smx-debug rules list|show` (options in ``cli._parser``): the rule catalog; `rules evaluate` is ``cli.evaluate``."""

from __future__ import annotations

import argparse
from typing import Any

from smx_debug import rules as catalog
from smx_debug.cli._output import as_table, as_text, emit, output_format
from smx_debug.rules.catalog import rule_profiles


def _given(collection: Any) -> dict[str, Any]:
    """A collection requirement's fields that say something (not None, not empty)."""
    return {k: v for k, v in vars(collection).items() if v is not None and v != ()}


def _as_dict(spec: Any) -> dict[str, Any]:
    return {
        **{field: getattr(spec, field) for field in ("name", "function", "kind", "family", "description")},
        "profiles": list(rule_profiles(spec.name)),
        "frameworks": list(spec.frameworks),
        "parameters": [
            {
                "name": p.name,
                "type": p.type,
                "default": p.default,
                "required": p.required,
                "description": p.description,
                **{k: v for k, v in (("ge", p.ge), ("gt", p.gt), ("le", p.le)) if v is not None},
            }
            for p in spec.parameters
        ],
        "collections": [
            _given(c) for c in spec.collections
        ],
    }


def _list(args: argparse.Namespace) -> int:
    specs = catalog.list_rules(args.kind, family=args.family, profile=args.profile)
    fmt = output_format(args)
    if fmt == "json":
        emit([_as_dict(s) for s in specs])
        return 0
    # the profiles last: a script's fourth column (the description) stays where it was
    rows = [(s.function, s.kind, s.family, s.description, ",".join(rule_profiles(s.name)) or "-") for s in specs]
    if fmt == "text":
        emit(as_text(rows))
    else:
        emit(as_table(rows) if rows else "(no rules)")
    return 0


def _show(args: argparse.Namespace) -> int:
    spec = catalog.get_rule(args.name)
    if output_format(args) == "json":
        emit(_as_dict(spec))
        return 0
    # one rule: the same lines for table and text
    family = "Debugger's built-in" if spec.family == "debugger" else "smx-debug's own"
    lines = [f"{spec.name} ({spec.kind} rule, {family}; plan name: {spec.function})", f"  {spec.description}"]
    if spec.frameworks:
        lines.append(f"  frameworks: {', '.join(spec.frameworks)}")
    if spec.parameter_prefixes:
        lines.append("  parameters: <ProfilerRule>_<parameter>, e.g. LowGPUUtilization_threshold_p95: 60")
    for p in spec.parameters:
        default = "required" if p.required else ("container default" if p.default is None else repr(p.default))
        lines.append(f"  {p.name}: {p.type} = {default}  - {p.description}")
    for c in spec.collections:
        extras = ", ".join(f"{k}={v}" for k, v in _given(c).items() if k != "name")
        lines.append(f"  needs collection {c.name}" + (f" ({extras})" if extras else ""))
    emit("\n".join(lines))
    return 0
