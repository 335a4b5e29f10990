"""Our report: one self-contained HTML file (inline CSS and SVG charts, no network to view), verdict first."""

from __future__ import annotations

from smx_debug.htmlreport.compare import render_comparison, write_comparison
from smx_debug.htmlreport.cost import (
    CostEstimate,
    InstanceSpec,
    RightSizing,
    estimate_cost,
    instance_spec,
    job_cost,
    price_table,
    right_size,
)
from smx_debug.htmlreport.model import ReportInput, ReportModel, TensorInput, build_model
from smx_debug.htmlreport.outcome import (
    JobOutcome,
    fetch_outcome,
    outcome_from_describe,
    outcome_from_ledger_item,
)
from smx_debug.htmlreport.render import render_report, write_report

__all__ = [
    "CostEstimate",
    "InstanceSpec",
    "JobOutcome",
    "ReportInput",
    "ReportModel",
    "RightSizing",
    "TensorInput",
    "build_model",
    "estimate_cost",
    "fetch_outcome",
    "instance_spec",
    "job_cost",
    "outcome_from_describe",
    "outcome_from_ledger_item",
    "price_table",
    "render_comparison",
    "render_report",
    "right_size",
    "write_comparison",
    "write_report",
]
