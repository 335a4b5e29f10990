"""The rule catalog: built-in Debugger and profiler rules, their parameters and evaluator images."""

from __future__ import annotations

from smx_debug.contracts import RuleKind
from smx_debug.rules.catalog import get_rule, list_rules
from smx_debug.rules.definitions import CollectionRequirement, ParamSpec, RuleSpec
from smx_debug.rules.images import RULE_IMAGE_ACCOUNTS, rule_evaluator_image
from smx_debug.rules.params import TENSOR_RULES

__all__ = [
    "RULE_IMAGE_ACCOUNTS",
    "TENSOR_RULES",
    "CollectionRequirement",
    "ParamSpec",
    "RuleKind",
    "RuleSpec",
    "get_rule",
    "list_rules",
    "rule_evaluator_image",
]
