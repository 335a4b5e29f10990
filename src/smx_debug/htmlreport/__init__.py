"""Our report: one self-contained HTML file (inline CSS and SVG charts, no network to view), verdict first."""

from __future__ import annotations

from smx_debug.htmlreport.compare import render_comparison, write_comparison
from smx_debug.htmlreport.cost import CostEstimate, RightSizing, estimate_cost, right_size
from smx_debug.htmlreport.model import ReportInput, ReportModel, TensorInput, build_model
from smx_debug.htmlreport.outcome import JobOutcome, fetch_outcome
from smx_debug.htmlreport.render import render_report, write_report

__all__ = [
    "CostEstimate",
    "JobOutcome",
    "ReportInput",
    "ReportModel",
    "RightSizing",
    "TensorInput",
    "build_model",
    "estimate_cost",
    "fetch_outcome",
    "render_comparison",
    "render_report",
    "right_size",
    "write_comparison",
    "write_report",
]
