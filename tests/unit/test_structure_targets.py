"""The house's figures (issue 32), pinned: a narrow public surface, few function-local imports, each with its
reason, and no import cycle between modules, not even through ``if TYPE_CHECKING:`` or a function's import.

The figures are bench/structure_figures.py's (read with ``ast`` from src/smx_debug, infra/ and lambdas/; nothing
is imported or run): the test and the figures the docs quote cannot disagree.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from bench_support import bench_module

ROOT = Path(__file__).resolve().parents[2]
MAX_EXPORTED = 250
MAX_LOCAL_IMPORTS = 40
# The evaluator's walk with its steps (issue 32 asks <= 12; 16 is where the merges of small coupled modules
# stopped, docs/architecture.md "Measuring the structure"): it must not grow back.
MAX_WALK_MODULES = 16
LOCAL_REASON = "# local:"
# modules other than package faces whose names users import as the docs say (module -> where)
PUBLIC_MODULES: dict[str, str] = {
    "smx_debug.rules.registry": "define: a rule of our own (docs/rules.md, docs/architecture.md)",
    "smx_debug.evaluate.tensor_eval": "TensorEvaluator (docs/evaluate.md, docs/rules.md)",
    "smx_debug.evaluate.tensor_live": "TensorLiveEvaluator (docs/rules.md)",
    "smx_debug.integrations.transformers": "SmxDebugCallback for Hugging Face (docs/frameworks.md)",
    "smx_debug.integrations.lightning": "SmxDebugCallback for Lightning (docs/frameworks.md)",
}


@functools.cache
def _modules() -> dict[str, Any]:
    """The tree's modules with their imports read (read once for every test here; none changes them)."""
    mods: dict[str, Any] = bench_module("structure_figures").read_modules(ROOT)
    return mods


def test_structure_exported_names_at_most_250_and_only_from_faces() -> None:
    mods = _modules().values()
    internal = [f"{m.name} ({m.exported})" for m in mods
                if m.exported is not None and not m.is_package and m.name not in PUBLIC_MODULES]
    assert not internal, f"internal modules declaring __all__ (only package faces export): {internal}"
    total = sum(m.exported or 0 for m in mods)
    assert total <= MAX_EXPORTED, f"{total} exported names, more than {MAX_EXPORTED}"


def test_structure_function_local_imports_at_most_40_each_with_its_reason() -> None:
    mods = list(_modules().values())
    unexplained: list[str] = []
    for m in mods:
        lines = m.path.read_text(encoding="utf-8").splitlines()
        unexplained += [f"{m.path.relative_to(ROOT)}:{n}" for n in m.local_lines
                        if not lines[n - 1].partition(LOCAL_REASON)[2].strip()]
    assert not unexplained, f"function-local imports without `{LOCAL_REASON} <reason>` on their line: {unexplained}"
    total = sum(m.local_imports for m in mods)
    assert total <= MAX_LOCAL_IMPORTS, f"{total} function-local imports, more than {MAX_LOCAL_IMPORTS}"


def test_structure_no_import_cycle_between_modules_of_any_kind() -> None:
    figures = bench_module("structure_figures")
    src = {n: m for n, m in _modules().items() if n.startswith("smx_debug")}
    cycles = figures._sccs(figures._graph(src, ("top", "local", "typing")))
    assert not cycles, f"import cycles between modules (module level, TYPE_CHECKING, function-local): {cycles}"


def test_structure_evaluator_walk_at_most_16_modules() -> None:
    figures = bench_module("structure_figures")
    on_path, with_steps = figures.walk_modules(_modules())
    assert "smx_debug.actions.once" in on_path, f"the walk no longer reaches stop_once: {on_path}"
    assert len(with_steps) <= MAX_WALK_MODULES, (
        f"the evaluator's walk (Lambda event -> StopTrainingJob, with the functions it calls) crosses "
        f"{len(with_steps)} modules, more than {MAX_WALK_MODULES}: {with_steps}")
