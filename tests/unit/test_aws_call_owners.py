"""One owner per AWS read contract (issue 21): GetMetricData and DescribeTrainingJob-with-translation.

Read with ``ast`` from the source of src/smx_debug. ``local/`` (the local AWS's emulation) answers these calls, so it
is not scanned; nor is ``actions/`` for DescribeTrainingJob: its calls are its own by design (they decide, not read).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "smx_debug"

# GetMetricData: the one module that calls it (data.cloudwatch_batch.read_metrics and data.cloudwatch's
# instance_metrics/training_metrics both go through data.cloudwatch.metric_data_results).
GET_METRIC_DATA_OWNER = "smx_debug/data/cloudwatch.py"
# DescribeTrainingJob: data.sources.describe_job owns the call with error translation. The others call it plainly
# (no try/except around it) and are listed with why.
DESCRIBE_OWNER = "smx_debug/data/sources.py"
DESCRIBE_PLAIN = {
    "smx_debug/htmlreport/outcome.py": "fetch_outcome with an injected client; errors propagate to the caller",
    "smx_debug/cli/report.py": "a tensor-only job's facts for the report; the CLI reports the raw error",
}


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


def _in_try(tree: ast.AST, name: str) -> list[int]:
    """Lines that use ``name`` inside the body of a ``try`` that has an ``except`` (an error translated there)."""
    return [line for node in ast.walk(tree) if isinstance(node, ast.Try) and node.handlers
            for stmt in node.body for line in _names(stmt, name)]


def test_get_metric_data_is_called_by_one_module() -> None:
    callers = [f"{rel}:{line}" for rel, tree in _scanned() if rel != GET_METRIC_DATA_OWNER
               for line in _names(tree, "get_metric_data")]
    assert not callers, f"GetMetricData outside {GET_METRIC_DATA_OWNER} (use its metric_data_results):\n" + "\n".join(
        callers)


def test_get_metric_data_owner_still_calls_it() -> None:
    owner = dict(_scanned())[GET_METRIC_DATA_OWNER]
    assert _names(owner, "get_metric_data")


def test_describe_training_job_with_translation_lives_only_in_data_sources() -> None:
    translated = [f"{rel}:{line}" for rel, tree in _scanned("actions") if rel != DESCRIBE_OWNER
                  for line in _in_try(tree, "describe_training_job")]
    assert not translated, "DescribeTrainingJob translated outside data.sources (use describe_job):\n" + "\n".join(
        translated)
    assert _in_try(dict(_scanned("actions"))[DESCRIBE_OWNER], "describe_training_job")


def test_describe_training_job_plain_calls_are_the_listed_ones() -> None:
    callers = {rel for rel, tree in _scanned("actions") if _names(tree, "describe_training_job")} - {DESCRIBE_OWNER}
    assert callers == set(DESCRIBE_PLAIN), "list a new plain DescribeTrainingJob caller (or use describe_job)"
