"""No module keeps a copy of a contract that src/smx_debug/contracts.py owns (docs/CONTRACTS.md).

Every string literal but docstrings, in every package (``actions/`` and ``local/`` included), ``infra/`` and
``lambdas/``, is checked against every value contracts.py names. The places listed in ALLOWED use a string equal
to a contract's value for another meaning.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

from smx_debug import contracts

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [
    *sorted((ROOT / "src" / "smx_debug").rglob("*.py")),
    *sorted((ROOT / "infra").rglob("*.py")),
    *sorted((ROOT / "lambdas").rglob("*.py")),
]
# (file relative to the repository, value): why it is not a copy
ALLOWED = {
    ("src/smx_debug/contracts.py", "*"): "the owner",
    ("src/smx_debug/data/profiler_output.py", "RuleTriggered"): "a field of Debugger's rule report JSON",
    ("src/smx_debug/evaluate/result.py", "RuleTriggered"): "a field of Debugger's rule report JSON",
    ("src/smx_debug/evaluate/live.py", "IssuesFound"): "the RuleStatus Literal type (mypy checks the values)",
    ("src/smx_debug/evaluate/live.py", "InProgress"): "the RuleStatus Literal type (mypy checks the values)",
    ("src/smx_debug/evaluate/live.py", "NoIssuesFound"): "the RuleStatus Literal type (mypy checks the values)",
    ("src/smx_debug/rules/params.py", "true"): "parsing a boolean rule parameter",
    ("infra/config.py", "true"): "parsing a boolean cdk.json context value",
    ("src/smx_debug/hook/json_config.py", "true"): "parsing a boolean of the hook's JSON configuration",
    ("src/smx_debug/local/iam/policy.py", "true"): "IAM condition values (Bool conditions)",
    ("src/smx_debug/local/iam/authorize.py", "true"): "IAM condition values (aws:SecureTransport)",
    ("src/smx_debug/local/iam/ledger.py", "true"): "IAM condition values (aws:SecureTransport)",
    ("src/smx_debug/local/s3/bucket_policy.py", "true"): "the aws:SecureTransport condition value of a request",
    ("src/smx_debug/local/sns/delivery.py", "true"): "SNS's RawMessageDelivery subscription attribute",
    ("src/smx_debug/config/request.py", "DebugRuleConfigurations"): "CreateTrainingJob field, spelled out (STYLE 3)",
    ("src/smx_debug/config/request.py", "ProfilerRuleConfigurations"): "CreateTrainingJob field, spelled out (STYLE 3)",
    ("src/smx_debug/fleet/append.py", "team"): "the training_jobs column (contracts.FLEET_TABLES) named after the tag",
    ("src/smx_debug/fleet/engines.py", "true"): "parsing Athena's boolean result values",
    ("src/smx_debug/fleet/sql.py", "true"): "writing a boolean as an Athena literal",
    ("infra/components/retraining.py", "Failed"): "the construct id of the state machine's Fail state",
    ("infra/components/fleet.py", "true"): "a Glue table parameter (projection.enabled)",
    ("src/smx_debug/fleet/collector.py", "true"): "parsing the boolean SMX_EVALUATOR_APPENDS",
    ("infra/stacks/guard_stack.py", "true"): "writing the boolean SMX_EVALUATOR_APPENDS",
    ("src/smx_debug/simulate/generator.py", "%Y%m%d%H"): "Debugger's hour folders (system/incremental/<yyyyMMddHH>)",
    ("src/smx_debug/simulate/fleet.py", "%Y%m%d%H"): "Debugger's hour folders (system/incremental/<yyyyMMddHH>)",
    ("src/smx_debug/watch/handler.py", "Failed"): "SendMessageBatch's answer field, not a job status",
    ("src/smx_debug/htmlreport/render.py", "Stopped"): "a row label of the report's outcome table",
    ("src/smx_debug/cli/evaluate.py", "Reason"): "a column header of the rules table, not the metric dimension",
}


def _owned_values() -> dict[str, str]:
    """Every string a contract names (constants, tuples of them, the Env names) -> the contract's name."""
    owned: dict[str, str] = {}
    for name in sorted(n for n in vars(contracts) if n.isupper()):  # the contracts' constants
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
    # botocore's error responses carry an "Error" key, spelled as the rule status
    owned.pop(contracts.RULE_ERROR, None)
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


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_literal_copy_of_a_contract(path: Path) -> None:
    owned = _owned_values()
    rel = path.relative_to(ROOT).as_posix()
    if (rel, "*") in ALLOWED:
        return
    copies = [
        f"{rel}:{line}: {value!r} is contracts.{owned[value]}"
        for line, value in _literals(ast.parse(path.read_text(encoding="utf-8")))
        if value in owned and (rel, value) not in ALLOWED
    ]
    assert not copies, "import these from smx_debug.contracts:\n" + "\n".join(copies)
