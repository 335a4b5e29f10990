"""The actions keep no copy of a contract that src/smx_debug/contracts.py owns (docs/CONTRACTS.md)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from smx_debug import contracts

ACTIONS = Path(contracts.__file__).parent / "actions"


def _owned_values() -> dict[str, str]:
    """Every string a contract names (constants, tuples of them, the Env names) -> the contract's name."""
    owned: dict[str, str] = {}
    for name in contracts.__all__:
        value = getattr(contracts, name)
        if isinstance(value, Mapping) and all(isinstance(v, contracts.FleetTable) for v in value.values()):
            values: tuple[object, ...] = tuple(value)  # FLEET_TABLES: the table names
        elif isinstance(value, Mapping):  # RULE_FIELDS: kind -> (status field, configuration field)
            values = tuple(v for pair in value.values() for v in pair)
        else:
            values = value if isinstance(value, tuple) else (value,)
        for item in values:
            if isinstance(item, str) and name.isupper():
                owned[item] = name
    for name, value in vars(contracts.Env).items():
        if name.isupper() and isinstance(value, str):
            owned[value] = f"Env.{name}"
    # rule kinds are a typed Literal; comparing a RuleKind with "debugger" is checked by mypy, not a copy
    for kind in contracts.RULE_KINDS:
        owned.pop(kind, None)
    # handler names double as action words (`notify`, `retrain`) and log names; contracts.handler_entry maps them
    for handler in contracts.ACTION_HANDLERS:
        owned.pop(handler, None)
    return owned


def _literals(tree: ast.Module) -> list[tuple[int, str]]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("path", sorted(ACTIONS.glob("*.py")), ids=lambda p: p.name)
def test_no_literal_copy_of_a_contract(path: Path) -> None:
    owned = _owned_values()
    copies = [
        f"{path.name}:{line}: {value!r} is contracts.{owned[value]}"
        for line, value in _literals(ast.parse(path.read_text(encoding="utf-8")))
        if value in owned
    ]
    assert not copies, "import these from smx_debug.contracts:\n" + "\n".join(copies)

