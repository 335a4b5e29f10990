"""Reports: rule summaries and profiler output from S3 or disk into pandas, fast, and their statistics.

Each question is one call that returns a DataFrame: :func:`rule_summary` (which rules fired, when, why),
:func:`system_metrics` (how busy were the GPUs and CPUs), :func:`framework_metrics` and
:func:`step_durations` (where did the time go), :func:`profiler_report` (the ProfilerReport rule's output).
``job_or_path`` is a training job name, an ``s3://`` URI or a local folder.
"""

from __future__ import annotations

from smx_debug.analysis.dips import CAUSE_COLUMNS, DIP_COLUMNS, dip_causes, gpu_dips
from smx_debug.analysis.loop import dataloader_share, slow_loading_steps, slowest_operators, step_loading
from smx_debug.analysis.stats import step_outliers, step_statistics, training_phases, utilization_stats
from smx_debug.analysis.trace_export import TraceMark, chrome_trace, write_chrome_trace
from smx_debug.data.framework_trace import EVENT_COLUMNS, STEP_COLUMNS, framework_metrics, step_durations
from smx_debug.data.profiler_output import REPORT_COLUMNS, ProfilerReport, profiler_report
from smx_debug.data.rule_summary import (
    RULE_COLUMNS,
    SETTLED_STATUSES,
    RuleSummary,
    rule_summary,
    rule_summary_many,
    wait_for_rules,
)
from smx_debug.data.system import SYSTEM_COLUMNS, SystemMetricsReader, system_metrics, system_metrics_wide
from smx_debug.evaluate.step_rules import step_outlier_scans

__all__ = [
    "CAUSE_COLUMNS",
    "DIP_COLUMNS",
    "EVENT_COLUMNS",
    "REPORT_COLUMNS",
    "RULE_COLUMNS",
    "SETTLED_STATUSES",
    "STEP_COLUMNS",
    "SYSTEM_COLUMNS",
    "ProfilerReport",
    "RuleSummary",
    "SystemMetricsReader",
    "TraceMark",
    "chrome_trace",
    "dataloader_share",
    "dip_causes",
    "framework_metrics",
    "gpu_dips",
    "profiler_report",
    "rule_summary",
    "rule_summary_many",
    "slow_loading_steps",
    "slowest_operators",
    "step_durations",
    "step_loading",
    "step_outlier_scans",
    "step_outliers",
    "step_statistics",
    "system_metrics",
    "system_metrics_wide",
    "training_phases",
    "utilization_stats",
    "wait_for_rules",
    "write_chrome_trace",
]
