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
from typing import Any

from bench_support import bench_module

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "smx_debug"
FIGURES = bench_module("structure_figures")

# Lowest first. A top-level module (smx_debug/<name>.py) is its own room.
FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "contracts", "quiet", "permissions", "_lazy", "_json"}),  # standard library only
    frozenset({"tags", "pricing", "instances"}),
    frozenset({"rules"}),
    frozenset({"config", "actions"}),
    frozenset({"data"}),
    frozenset({"tensors"}),
    frozenset({"analysis", "evaluate", "hook"}),
    frozenset({"htmlreport", "watch", "fleet", "integrations"}),
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


# A function-local import that only dodges a module-level import cycle hides the circle instead of breaking it.
# (importer, imported) pairs allowed to close one, each with why the import stays inside a function.
LOCAL_CYCLE_IMPORTS: dict[tuple[str, str], str] = {
    **{
        ("smx_debug.cli", f"smx_debug.cli.{sub}"): "main loads the command modules once parsed: a fast --help"
        for sub in ("_failure", "evaluate", "fleet", "plan", "report", "rules", "trace")
    },
}


def _module_imports() -> tuple[dict[str, Any], dict[str, set[str]]]:
    """Per smx_debug module (bench/structure_figures.py reads them): the module itself, and the smx_debug modules it
    imports only inside a function (``if TYPE_CHECKING:`` blocks skipped)."""
    mods = {name: m for name, m in FIGURES.read_modules(ROOT).items() if name.startswith("smx_debug")}
    return mods, {name: m.arrows["local"] - m.arrows["top"] for name, m in mods.items()}


def test_layering_no_function_local_import_dodges_a_module_cycle() -> None:
    mods, local = _module_imports()
    dodges = {
        (module, target)
        for module, targets in local.items()
        for target in targets
        if module in FIGURES._closure(mods, target, ("top",))  # what importing target loads at module level
    }
    unexplained = sorted(dodges - LOCAL_CYCLE_IMPORTS.keys())
    assert not unexplained, (
        f"function-local imports that close a module-level import cycle: {unexplained}; break the cycle (move "
        "what both need to a module both import, or inject it), or allow-list the pair with its reason"
    )
    assert all(reason.strip() for reason in LOCAL_CYCLE_IMPORTS.values())
    stale = sorted(LOCAL_CYCLE_IMPORTS.keys() - dodges)
    assert not stale, f"allow-listed pairs that no longer close a cycle (remove them): {stale}"
