"""One owner per AWS read contract (issue 21): GetMetricData.

Read with ``ast`` from the source of src/smx_debug. ``local/`` (the local AWS's emulation) answers these calls, so it
is not scanned.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "smx_debug"

# GetMetricData: the one module that calls it (data.cloudwatch_batch.read_metrics and data.cloudwatch's
# instance_metrics/training_metrics both go through data.cloudwatch.metric_data_results).
GET_METRIC_DATA_OWNER = "smx_debug/data/cloudwatch.py"


def _scanned(*skipped: str) -> list[tuple[str, ast.Module]]:
    """Every module of src/smx_debug but ``local/`` and the ``skipped`` packages, as (path, tree)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) > 1 and rel.parts[0] in {"local", *skipped}:
            continue
        out.append((path.relative_to(PACKAGE.parent).as_posix(), ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _names(tree: ast.AST, name: str) -> list[int]:
    """Lines that use ``name`` as an attribute (``client.name``) or a string (``get_paginator("name")``)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr == name)
        or (isinstance(node, ast.Constant) and node.value == name)
    ]


def test_get_metric_data_is_called_by_one_module() -> None:
    callers = [f"{rel}:{line}" for rel, tree in _scanned() if rel != GET_METRIC_DATA_OWNER
               for line in _names(tree, "get_metric_data")]
    assert not callers, f"GetMetricData outside {GET_METRIC_DATA_OWNER} (use its metric_data_results):\n" + "\n".join(
        callers)


def test_get_metric_data_owner_still_calls_it() -> None:
    owner = dict(_scanned())[GET_METRIC_DATA_OWNER]
    assert _names(owner, "get_metric_data")
