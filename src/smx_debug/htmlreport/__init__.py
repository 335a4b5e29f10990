"""Our profiler report: one self-contained HTML file (inline CSS and SVG charts, no network to view)."""

from __future__ import annotations

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
from smx_debug.htmlreport.render import ReportInput, render_report, write_report

__all__ = [
    "CostEstimate",
    "InstanceSpec",
    "ReportInput",
    "RightSizing",
    "estimate_cost",
    "instance_spec",
    "job_cost",
    "price_table",
    "render_report",
    "right_size",
    "write_report",
]
