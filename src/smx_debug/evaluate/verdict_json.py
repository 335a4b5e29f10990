"""The verdict document: ``smx-debug rules evaluate ... --json -``'s output, and the in-process guard's verdict file
(:mod:`smx_debug.evaluate.tensor_guard`): one object per rule configuration, its status and full reason, then Debugger's
own fields (:meth:`~smx_debug.evaluate.result.RuleResult.to_debugger_json`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smx_debug.contracts import ISSUES_FOUND, NO_ISSUES_FOUND


def rule_status(r: Any) -> str:
    """A result's status as SageMaker would show it; NoData when the rule saw nothing (OverallSystemUsage
    always reports)."""
    if r.triggered:
        return ISSUES_FOUND
    return "NoData" if r.datapoints == 0 and r.rule != "OverallSystemUsage" else NO_ISSUES_FOUND


def verdict_document(results: Mapping[str, Any]) -> dict[str, Any]:
    """Each configuration's status (as the table shows it) and full reason, then Debugger's own fields."""
    return {name: {"status": rule_status(r), "reason": r.message, **r.to_debugger_json()}
            for name, r in results.items()}
