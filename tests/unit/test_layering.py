"""The house's floors: imports between smx_debug's packages run down, never up, and never in a circle.

Read with ``ast`` from the source: every import of ``smx_debug.<package>`` by another package counts, at module
level or inside a function (a function-local import dodging a circle is still an arrow), except under
``if TYPE_CHECKING:``. A package may import its own floor's other packages as long as no circle forms.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "smx_debug"

# Lowest first. A top-level module (smx_debug/<name>.py) is its own room.
FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "contracts", "quiet", "permissions"}),  # standard library only
    frozenset({"tags", "pricing", "instances"}),
    frozenset({"rules"}),
    frozenset({"config", "actions"}),
    frozenset({"data"}),
    frozenset({"tensors"}),
    frozenset({"analysis", "evaluate", "hook"}),
    frozenset({"reports", "htmlreport", "watch", "fleet"}),
    frozenset({"simulate"}),
    frozenset({"cli", "local"}),
    frozenset({"__init__", "__main__"}),  # the package's face and `python -m smx_debug`
)
# (importer, imported): why the arrow runs up. At most one, and it must say why.
UPWARD: dict[tuple[str, str], str] = {}


def _floor(room: str) -> int:
    for i, rooms in enumerate(FLOORS):
        if room in rooms:
            return i
    raise AssertionError(f"smx_debug.{room} is on no floor of tests/unit/test_layering.py: give it one")


def _room(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                yield from _imports(other)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _arrows() -> dict[tuple[str, str], list[str]]:
    arrows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _room(path)
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module:
                    continue
                names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "smx_debug" else [node.module]
            else:
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] != "smx_debug" or len(parts) < 2 or parts[1] == source:
                    continue
                target = parts[1]
                if (PACKAGE / target).is_dir() or (PACKAGE / f"{target}.py").is_file():
                    arrows[(source, target)].append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return arrows


def test_layering_no_import_runs_up_a_floor() -> None:
    upward = [
        f"{a} -> {b} ({', '.join(where[:3])})"
        for (a, b), where in sorted(_arrows().items())
        if _floor(a) < _floor(b) and (a, b) not in UPWARD
    ]
    assert not upward, "imports running up the house:\n" + "\n".join(upward)


def test_layering_at_most_one_named_upward_arrow_and_it_exists() -> None:
    assert len(UPWARD) <= 1
    arrows = _arrows()
    for arrow, why in UPWARD.items():
        assert why and arrow in arrows, f"{arrow} is listed as the upward arrow but no longer exists: delete it"


def test_layering_no_circle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in _arrows():
        graph[a].add(b)
    circles: list[list[str]] = []

    def visit(room: str, path: list[str]) -> None:
        for nxt in sorted(graph[room]):
            if nxt == path[0]:
                circles.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:  # each circle once, from its smallest room
                visit(nxt, [*path, nxt])

    for room in sorted(graph):
        visit(room, [room])
    assert not circles, "package circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_layering_every_room_is_on_a_floor() -> None:
    rooms = {_room(p) for p in PACKAGE.rglob("*.py")}
    for room in rooms:
        _floor(room)
