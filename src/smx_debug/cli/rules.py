"""`smx-debug rules list|show`: the rule catalog (`rules evaluate` is added by its own module)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from smx_debug.contracts import RULE_KINDS

RULE_FAMILIES = ("debugger", "smx")  # smx_debug.rules.definitions.RuleFamily (imported lazily: a fast --help)

__all__ = ["register"]


def register(subparsers: Any) -> Any:
    """Add the `rules` group and return its subparsers so `rules evaluate` can join it."""
    parser = subparsers.add_parser("rules", help="the rule catalog and local rule evaluation")
    sub = parser.add_subparsers(dest="rules_command", required=True, metavar="RULES_COMMAND")

    lst = sub.add_parser("list", help="list every rule: Debugger's built-in Debugger and profiler rules, and ours")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.add_argument("--kind", choices=RULE_KINDS)
    lst.add_argument("--family", choices=RULE_FAMILIES,
                     help="debugger: Debugger's built-ins; smx: smx-debug's own rules")
    lst.set_defaults(func=_list)

    show = sub.add_parser("show", help="a rule's parameters, defaults and collections")
    show.add_argument("name", help="rule function or class name, e.g. loss_not_decreasing or LowGPUUtilization")
    show.add_argument("--json", action="store_true", help="machine-readable output")
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
    if args.json:
        json.dump([_as_dict(s) for s in specs], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not specs:
        print("(no rules)")
        return 0
    width = max(len(s.function) for s in specs)
    for s in specs:
        print(f"{s.function:<{width}}  {s.kind:<8}  {s.family:<8}  {s.description}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from smx_debug.rules import get_rule

    spec = get_rule(args.name)
    data = _as_dict(spec)
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    family = "Debugger's built-in" if spec.family == "debugger" else "smx-debug's own"
    print(f"{spec.name} ({spec.kind} rule, {family}; plan name: {spec.function})")
    print(f"  {spec.description}")
    if spec.frameworks:
        print(f"  frameworks: {', '.join(spec.frameworks)}")
    if spec.parameter_prefixes:
        print("  parameters: <ProfilerRule>_<parameter>, e.g. LowGPUUtilization_threshold_p95: 60")
    for p in spec.parameters:
        default = "required" if p.required else ("container default" if p.default is None else repr(p.default))
        print(f"  {p.name}: {p.type} = {default}  - {p.description}")
    for c in spec.collections:
        extras = ", ".join(f"{k}={v}" for k, v in vars(c).items() if k != "name" and v is not None)
        print(f"  needs collection {c.name}" + (f" ({extras})" if extras else ""))
    return 0
