"""`smx-debug rules` commands (placeholder until its issue lands)."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> Any:
    """Add the `rules` group and return its subparsers so `rules evaluate` can join it."""
    parser = subparsers.add_parser("rules", help="the rule catalog and local rule evaluation")
    return parser.add_subparsers(dest="rules_command", required=True, metavar="RULES_COMMAND")
