"""The debug plan: a typed description of how a training job is watched, rendered for SageMaker.

Names load lazily, so a module that needs only the plan's pydantic base (``smx_debug.config.base``: the tensor
reader's collections model, which the scheduled evaluator's Lambda imports) does not import the plan and PyYAML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smx_debug._lazy import lazy_getattr

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

_LAZY = {
    "MAX_RULES_PER_KIND": "smx_debug.config.plan",
    "CollectionConfig": "smx_debug.config.models",
    "DataloaderProfiling": "smx_debug.config.models",
    "DebugPlan": "smx_debug.config.plan",
    "FrameworkProfiling": "smx_debug.config.models",
    "HookConfig": "smx_debug.config.models",
    "MetricRange": "smx_debug.config.models",
    "NotifyAction": "smx_debug.config.actions",
    "ProfilerSettings": "smx_debug.config.models",
    "PythonProfiling": "smx_debug.config.models",
    "RuleAction": "smx_debug.config.actions",
    "RuleConfig": "smx_debug.config.models",
    "SmxDebugWarning": "smx_debug.config.warnings",
    "StopTrainingAction": "smx_debug.config.actions",
}

if TYPE_CHECKING:
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


__getattr__ = lazy_getattr(__name__, _LAZY)
