"""The data layer: every reader of what Debugger, SageMaker and CloudWatch write, and the frames they fill.

Each question is one call that returns a DataFrame: :func:`rule_summary` (which rules fired, when, why),
:func:`system_metrics` (how busy were the GPUs and CPUs), :func:`framework_metrics` and :func:`step_durations`
(where did the time go), :func:`profiler_report` (the ProfilerReport rule's output). ``job_or_path`` is a
training job name, an ``s3://`` URI or a local folder. Statistics of these frames are :mod:`smx_debug.analysis`'s.

Names load lazily: a Lambda that imports one reader of this package (CloudWatch, job errors) does not load
pandas' readers of profiler output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smx_debug._lazy import lazy_getattr

__all__ = [
    "SystemMetricsReader",
    "framework_metrics",
    "profiler_report",
    "rule_summary",
    "rule_summary_many",
    "step_durations",
    "system_metrics",
    "system_metrics_wide",
    "wait_for_rules",
]

_LAZY = {name: f"smx_debug.data.{module}" for module, names in {
    "framework_trace": ("framework_metrics", "step_durations"),
    "profiler_output": ("profiler_report",),
    "rule_statuses": ("rule_summary", "rule_summary_many", "wait_for_rules"),
    "system": ("SystemMetricsReader", "system_metrics", "system_metrics_wide"),
}.items() for name in names}

if TYPE_CHECKING:
    from smx_debug.data.framework_trace import framework_metrics, step_durations
    from smx_debug.data.profiler_output import profiler_report
    from smx_debug.data.rule_statuses import rule_summary, rule_summary_many, wait_for_rules
    from smx_debug.data.system import SystemMetricsReader, system_metrics, system_metrics_wide


__getattr__ = lazy_getattr(__name__, _LAZY)
