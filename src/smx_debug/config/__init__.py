"""The debug plan: a typed description of how a training job is watched, rendered for SageMaker."""

from __future__ import annotations

from smx_debug.config.actions import NotifyAction, RuleAction, StopTrainingAction
from smx_debug.config.models import (
    CollectionConfig,
    DataloaderProfiling,
    FrameworkProfiling,
    HookConfig,
    MetricRange,
    ProfilerSettings,
    PythonProfiling,
    RuleConfig,
)
from smx_debug.config.plan import MAX_RULES_PER_KIND, DebugPlan
from smx_debug.config.warnings import SmxDebugWarning

__all__ = [
    "MAX_RULES_PER_KIND",
    "CollectionConfig",
    "DataloaderProfiling",
    "DebugPlan",
    "FrameworkProfiling",
    "HookConfig",
    "MetricRange",
    "NotifyAction",
    "ProfilerSettings",
    "PythonProfiling",
    "RuleAction",
    "RuleConfig",
    "SmxDebugWarning",
    "StopTrainingAction",
]
