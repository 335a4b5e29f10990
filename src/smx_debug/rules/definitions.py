"""The catalog's types: a rule (RuleSpec), its parameters (ParamSpec) and the collections it needs."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Literal

from smx_debug.contracts import RuleKind
from smx_debug.errors import UnknownNameError

# The scalars the hook saves for the recommended profile (``scalar/<name>``: the mean training loss of each save
# interval, the mean loss of each evaluation pass) and the loss rules read (SmxLossPlateau, SmxOverfitMeans).
TRAIN_LOSS_MEAN = "train_loss_mean"
VAL_LOSS_MEAN = "val_loss_mean"
LOSS_MEANS_KEY = "save_loss_means"
"""The ``HookParameters`` key (value ``True``) a plan with the recommended profile renders so the hook saves them."""

# Per-layer summary statistics (docs/hook.md, "What the hook saves"): a rule of our own names the statistics it
# reads in its CollectionRequirement; with ``HookParameters.save_summaries`` the hook saves them instead of the
# collection's whole tensors. ``abs_mean`` and ``l2`` are smdebug's reduction records
# (``smdebug/reductions/abs_mean/<tensor>``, read by any reader of Debugger's layout); the others are named summary
# tensors ``smx/summaries/<statistic>/<tensor>``: ``share_zero`` (share of exact zeros), ``share_abs_gt_<limit>``
# (share of |x| > limit), ``count_nonfinite`` (NaN and infinite values), ``init_scale`` (std(x) x sqrt(fan-in) of a
# matrix or kernel, numpy's std), ``sample`` (up to 512 values evenly spaced over the flattened tensor).
SUMMARIES_KEY = "save_summaries"
"""The ``HookParameters`` key (value ``True``) a plan with the recommended profile renders so the hook saves the
summary statistics (and every step's labels and predictions since the last save)."""
SUMMARY_PREFIX = "smx/summaries/"
SMDEBUG_STATISTICS = ("abs_mean", "l2")
"""Statistics written as smdebug's reduction records (the others as named summary tensors)."""


def summary_tensor_name(tensor: str, statistic: str) -> str:
    """The name a named summary statistic of ``tensor`` is saved under.

    >>> summary_tensor_name("fc1.weight", "share_zero")
    'smx/summaries/share_zero/fc1.weight'
    """
    return f"{SUMMARY_PREFIX}{statistic}/{tensor}"


def parse_summary_name(name: str) -> tuple[str, str] | None:
    """``(tensor, statistic)`` of a named summary tensor, or None when ``name`` is not one."""
    if not name.startswith(SUMMARY_PREFIX):
        return None
    statistic, sep, tensor = name[len(SUMMARY_PREFIX):].partition("/")
    return (tensor, statistic) if sep and tensor and statistic else None


def share_beyond(limit: float) -> str:
    """The statistic name of the share of |x| beyond ``limit`` (``share_abs_gt_5``)."""
    return f"share_abs_gt_{limit:g}"
GUARD_KEY = "in_process_guard"
"""The ``HookParameters`` key (``warn`` or ``stop``) a plan's ``in_process_guard`` renders (smx_debug.hook.guard)."""
GUARD_RULES_KEY = "in_process_guard_rules"
"""The ``HookParameters`` key holding the guard's rule configurations that are not a recommended rule at its
defaults, as JSON ``[[configuration name, rule, {parameter: value}], ...]`` (absent: the profile at its defaults),
continued in ``in_process_guard_rules_1`` ... ``_7`` when longer than a ``HookParameters`` value."""
GUARD_RULES_PARTS = 8
HOOK_PARAMETER_VALUE_MAX = 256
"""SageMaker's limit on one ``HookParameters`` value (``ConfigValue``: 0-256 characters)."""

ParamType = Literal["int", "float", "bool", "str", "regex"]
ParamValue = bool | int | float | str
RuleFamily = Literal["debugger", "smx"]
"""``debugger``: Debugger's built-ins (faithful to smdebug-rulesconfig and the guide); ``smx``: smx-debug's own."""


@dataclass(frozen=True)
class ParamSpec:
    """One rule parameter: type, default (None: the container decides), bounds and a description."""

    name: str
    type: ParamType
    default: ParamValue | None
    description: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    required: bool = False

    def check(self, value: object) -> str | None:
        """Return why ``value`` is not acceptable, or None when it is."""
        if self.type == "bool":
            ok = isinstance(value, bool)
        elif self.type == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.type == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            return f"expected {self.type}, got {type(value).__name__}"
        if self.type == "regex":
            try:
                re.compile(str(value))
            except re.error as exc:
                return f"invalid regular expression ({exc})"
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):  # NaN passes every comparison below as False
                return "must be a finite number"
            if self.ge is not None and value < self.ge:
                return f"must be >= {self.ge:g}"
            if self.gt is not None and value <= self.gt:
                return f"must be > {self.gt:g}"
            if self.le is not None and value > self.le:
                return f"must be <= {self.le:g}"
        return None


@dataclass(frozen=True)
class CollectionRequirement:
    """A tensor collection a rule needs saved, with the parameters smdebug_rulesconfig gives it."""

    name: str
    include_regex: str | None = None
    save_interval: int | None = None
    save_steps: str | None = None
    statistics: tuple[str, ...] = ()
    """The per-layer summary statistics the rule reads from this collection (see :data:`SUMMARIES_KEY`); with them
    the hook of a recommended-profile plan saves those instead of the whole tensors."""


@dataclass(frozen=True)
class RuleSpec:
    """One catalog entry.

    ``saved_steps_needed`` is how many saved steps of its collection the rule needs before it can
    fire: an int, or the name of the parameter that says so (used for the starvation warning).
    ``parameter_prefixes`` is set only for ProfilerReport, whose parameters are
    ``<ProfilerRule>_<parameter>``. ``collections`` are added to the hook automatically.
    """

    name: str
    function: str
    kind: RuleKind
    description: str
    parameters: tuple[ParamSpec, ...] = ()
    collections: tuple[CollectionRequirement, ...] = ()
    frameworks: tuple[str, ...] = ()
    saved_steps_needed: int | str = 1
    parameter_prefixes: bool = False
    reads: tuple[str, ...] = ()
    """Collections the rule reads without requiring them (for the starvation warning only)."""
    family: RuleFamily = "debugger"
    """``smx`` for smx-debug's own rules, which Debugger's rule container cannot run."""

    def param(self, name: str) -> ParamSpec:
        """The parameter ``name``; raises UnknownNameError suggesting the closest one."""
        for spec in self.parameters:
            if spec.name == name:
                return spec
        names = [p.name for p in self.parameters]
        suggestion = closest(name, names)
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        known = ", ".join(names) or "none"
        raise UnknownNameError(
            f"rule {self.name} has no parameter {name!r}{hint} (parameters: {known})",
            name=name,
            suggestion=suggestion,
        )

    def needed_saved_steps(self, parameters: dict[str, ParamValue]) -> int:
        """Saved steps the rule needs before it can fire, given the user's parameters."""
        if isinstance(self.saved_steps_needed, int):
            return self.saved_steps_needed
        value = parameters.get(self.saved_steps_needed, self.param(self.saved_steps_needed).default)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1


def closest(name: str, candidates: list[str]) -> str | None:
    """The candidate closest to ``name`` (case-insensitive), or None if nothing is close."""
    lowered = {c.lower(): c for c in candidates}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None
