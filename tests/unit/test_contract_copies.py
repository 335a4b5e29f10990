"""Outside the actions, too, no module keeps a copy of a contract that src/smx_debug/contracts.py owns.

The scan (every string literal but docstrings, against every value contracts.py names) is the actions' test's own
(tests/unit/actions/test_actions_contract_copies.py), loaded by path so both use one definition. The places listed in
ALLOWED use a string equal to a contract's value for another meaning.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [
    *sorted((ROOT / "src" / "smx_debug").glob("*.py")),
    *(p for part in ("cli", "config", "evaluate", "fleet", "htmlreport", "reports", "rules", "simulate", "watch")
      for p in sorted((ROOT / "src" / "smx_debug" / part).rglob("*.py"))),
    *sorted((ROOT / "infra").rglob("*.py")),
]
# (file relative to the repository, value): why it is not a copy
ALLOWED = {
    ("src/smx_debug/contracts.py", "*"): "the owner",
    ("src/smx_debug/reports/profiler_report.py", "RuleTriggered"): "a field of Debugger's rule report JSON",
    ("src/smx_debug/evaluate/result.py", "RuleTriggered"): "a field of Debugger's rule report JSON",
    ("src/smx_debug/evaluate/live.py", "IssuesFound"): "the RuleStatus Literal type (mypy checks the values)",
    ("src/smx_debug/evaluate/catalog.py", "true"): "parsing a boolean rule parameter",
    ("infra/config.py", "true"): "parsing a boolean cdk.json context value",
    ("src/smx_debug/config/render.py", "DebugRuleConfigurations"): "CreateTrainingJob field, spelled out (STYLE 3)",
    ("src/smx_debug/config/render.py", "ProfilerRuleConfigurations"): "CreateTrainingJob field, spelled out (STYLE 3)",
    ("src/smx_debug/fleet/append.py", "team"): "the training_jobs column (contracts.FLEET_TABLES) named after the tag",
    ("src/smx_debug/fleet/engines.py", "true"): "parsing Athena's boolean result values",
    ("src/smx_debug/fleet/sql.py", "true"): "writing a boolean as an Athena literal",
    ("infra/components/fleet.py", "true"): "a Glue table parameter (projection.enabled)",
    ("src/smx_debug/fleet/collector.py", "true"): "parsing the boolean SMX_EVALUATOR_APPENDS",
    ("infra/stacks/guard_stack.py", "true"): "writing the boolean SMX_EVALUATOR_APPENDS",
    ("src/smx_debug/simulate/generator.py", "%Y%m%d%H"): "Debugger's hour folders (system/incremental/<yyyyMMddHH>)",
    ("src/smx_debug/simulate/fleet.py", "%Y%m%d%H"): "Debugger's hour folders (system/incremental/<yyyyMMddHH>)",
    ("src/smx_debug/cli/evaluate.py", "Reason"): "a column header of the rules table, not the metric dimension",
}


def _scan() -> ModuleType:
    path = Path(__file__).parent / "actions" / "test_actions_contract_copies.py"
    spec = importlib.util.spec_from_file_location("_contract_scan", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_literal_copy_of_a_contract_outside_actions(path: Path) -> None:
    scan = _scan()
    owned = scan._owned_values()
    rel = path.relative_to(ROOT).as_posix()
    if (rel, "*") in ALLOWED:
        return
    copies = [
        f"{rel}:{line}: {value!r} is contracts.{owned[value]}"
        for line, value in scan._literals(ast.parse(path.read_text(encoding="utf-8")))
        if value in owned and (rel, value) not in ALLOWED
    ]
    assert not copies, "import these from smx_debug.contracts:\n" + "\n".join(copies)
