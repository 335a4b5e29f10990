"""`smx-debug rules list|show`: the rule catalog (`rules evaluate` is added by its own module)."""

from __future__ import annotations

import argparse
from typing import Any

from smx_debug.cli._output import as_table, as_text, emit, output_format
from smx_debug.contracts import RULE_KINDS

RULE_FAMILIES = ("debugger", "smx")  # smx_debug.rules.definitions.RuleFamily (imported lazily: a fast --help)

__all__ = ["register"]


def register(subparsers: Any) -> Any:
    """Add the `rules` group and return its subparsers so `rules evaluate` can join it."""
    parser = subparsers.add_parser("rules", help="the rule catalog and local rule evaluation")
    sub = parser.add_subparsers(dest="rules_command", required=True, metavar="RULES_COMMAND")

    lst = sub.add_parser("list", help="list every rule: Debugger's built-in Debugger and profiler rules, and ours")
    lst.add_argument("--kind", choices=RULE_KINDS)
    lst.add_argument("--family", choices=RULE_FAMILIES,
                     help="debugger: Debugger's built-ins; smx: smx-debug's own rules")
    lst.set_defaults(func=_list)

    show = sub.add_parser("show", help="a rule's parameters, defaults and collections")
    show.add_argument("name", help="rule function or class name, e.g. loss_not_decreasing or LowGPUUtilization")
    show.set_defaults(func=_show)
    return sub


def _as_dict(spec: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "function": spec.function,
        "kind": spec.kind,
        "family": spec.family,
        "description": spec.description,
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
            {k: v for k, v in vars(c).items() if v is not None} for c in spec.collections
        ],
    }


def _list(args: argparse.Namespace) -> int:
    from smx_debug.rules import list_rules

    specs = list_rules(args.kind, family=args.family)
    fmt = output_format(args)
    if fmt == "json":
        emit([_as_dict(s) for s in specs])
        return 0
    rows = [(s.function, s.kind, s.family, s.description) for s in specs]
    if fmt == "text":
        emit(as_text(rows))
    else:
        emit(as_table(rows) if rows else "(no rules)")
    return 0


def _show(args: argparse.Namespace) -> int:
    from smx_debug.rules import get_rule

    spec = get_rule(args.name)
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
        extras = ", ".join(f"{k}={v}" for k, v in vars(c).items() if k != "name" and v is not None)
        lines.append(f"  needs collection {c.name}" + (f" ({extras})" if extras else ""))
    emit("\n".join(lines))
    return 0
