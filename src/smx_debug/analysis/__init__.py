"""Analyses of loaded data (:mod:`smx_debug.data`'s frames): utilization and step statistics, training phases,
GPU dips and their causes, and a merged Chrome trace.

:func:`step_outlier_scans` is StepOutlier's own view of the steps, scan by scan (the rule's code in
:mod:`smx_debug.evaluate.step_rules`), beside the whole job's :func:`step_statistics`. Names load lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smx_debug._lazy import lazy_getattr

__all__ = [
    "chrome_trace",
    "dip_causes",
    "gpu_dips",
    "step_outlier_scans",
    "step_outliers",
    "step_statistics",
    "training_phases",
    "utilization_stats",
]

_LAZY = {name: module for module, names in {
    "smx_debug.analysis.dips": ("dip_causes", "gpu_dips"),
    "smx_debug.analysis.stats": ("step_outliers", "step_statistics", "training_phases", "utilization_stats"),
    "smx_debug.analysis.trace_export": ("chrome_trace",),
    "smx_debug.evaluate.step_rules": ("step_outlier_scans",),
}.items() for name in names}

if TYPE_CHECKING:
    from smx_debug.analysis.dips import dip_causes, gpu_dips
    from smx_debug.analysis.stats import step_outliers, step_statistics, training_phases, utilization_stats
    from smx_debug.analysis.trace_export import chrome_trace
    from smx_debug.evaluate.step_rules import step_outlier_scans


__getattr__ = lazy_getattr(__name__, _LAZY)
