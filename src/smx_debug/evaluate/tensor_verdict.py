"""Shared parts of the tensor rules: which tensors a rule reads, and how its verdict adds up across batches.

Counting, the same for every tensor rule (Debugger invokes a tensor rule once per saved step):
``RuleTriggered`` is the number of global steps at which the condition was met, ``Violations`` the number of
(tensor, worker, step) records that met it, ``Datapoints`` the number of records judged, ``trigger_step`` the
first global step that met it, and ``message`` names the first tensor and value that did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smx_debug.errors import ConfigError
from smx_debug.evaluate.result import RuleResult, Trace, encode_set_parameters
from smx_debug.evaluate.tensor_data import Stat
from smx_debug.rules.registry import RuleParams

# Commas separate list items, except inside a {m,n} quantifier.
_ITEM_COMMA = re.compile(r",(?![^{]*\})")


def split_list(value: str | Sequence[str] | None, *, field: str) -> list[str]:
    """A parameter that is a list or a comma-separated string (the guide's "List of strings or a comma-separated
    string"), as a list of non-empty items; regexes are checked to compile."""
    if value is None:
        return []
    items = [value] if not isinstance(value, str) else _ITEM_COMMA.split(value)
    out = [str(i).strip() for i in items if str(i).strip()]
    if field.endswith("regex"):
        for item in out:
            try:
                re.compile(item)
            except re.error as exc:
                raise ConfigError(f"{field}: {item!r} is not a regular expression ({exc})", field=field,
                                  value=item) from None
    return out


@dataclass(frozen=True)
class Selection:
    """The tensors a rule reads in a trial, and what to add to the plan when there are none."""

    names: tuple[str, ...]
    hint: str = ""

    def __or__(self, other: Selection) -> Selection:
        names = tuple(dict.fromkeys(self.names + other.names))
        return Selection(names, "" if names else "; ".join(h for h in (self.hint, other.hint) if h))


def by_regex(patterns: Sequence[str], names: Iterable[str], *, what: str) -> Selection:
    """Tensors whose name matches one of ``patterns`` anywhere (``re.search``, as the trial API)."""
    compiled = [re.compile(p) for p in patterns]
    hit = tuple(n for n in names if any(c.search(n) for c in compiled))
    shown = "|".join(patterns)
    return Selection(hit, "" if hit else (
        f"no tensor matches {what} {shown!r}: save tensors matching it (add a collection with include_regex "
        f"{shown!r} to the plan's hook collections)"))


def by_collection(name: str, names: Iterable[str], collections: Mapping[str, Callable[[str], bool]]) -> Selection:
    """Tensors of the trial's collection ``name``."""
    pred = collections.get(name)
    if pred is None:
        known = ", ".join(sorted(collections)) or "none"
        return Selection((), f"the trial has no collection {name!r} (its collections: {known}): add {name!r} to "
                             f"the plan's hook collections")
    hit = tuple(n for n in names if pred(n))
    return Selection(hit, "" if hit else f"the trial's collection {name!r} holds no tensor yet")


def select_tensors(params: RuleParams, names: Sequence[str],
                   collections: Mapping[str, Callable[[str], bool]], *, regex_param: str = "tensor_regex",
                   all_by_default: bool = True) -> Selection:
    """``collection_names`` and ``tensor_regex`` (the union when both are given). With neither: every tensor
    (the guide: "If no patterns are passed, the rule compares all tensors gathered in the trials by default").
    A rule of our own whose parameters lack either reads neither."""
    colls = split_list(getattr(params, "collection_names", None), field="collection_names")
    regexes = split_list(getattr(params, regex_param, None), field=regex_param)
    if not colls and not regexes:
        if all_by_default:
            return Selection(tuple(names), "" if names else "the trial holds no tensor yet")
        return Selection((), f"set {regex_param} or collection_names")
    out = Selection(())
    for c in colls:
        out = out | by_collection(c, names, collections)
    if regexes:
        out = out | by_regex(regexes, names, what=regex_param)
    return out


@dataclass
class _TensorTally:
    violations: int = 0
    datapoints: int = 0
    first_step: int | None = None
    first_value: float | None = None
    last_value: float | None = None


TRACE_POINTS = 400  # points a trace keeps: every k-th record, k doubling as a run grows


@dataclass
class _Trace:
    """One tensor's statistic over the records judged, thinned to at most :data:`TRACE_POINTS` points."""

    statistic: str
    lower: float | None
    upper: float | None
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    stride: int = 1
    seen: int = 0

    def add(self, steps: np.ndarray, values: np.ndarray) -> None:
        keep = (self.seen + np.arange(len(steps))) % self.stride == 0
        self.seen += len(steps)
        self.steps = np.concatenate([self.steps, steps[keep]])
        self.values = np.concatenate([self.values, values[keep]])
        while len(self.steps) > TRACE_POINTS:
            self.steps, self.values, self.stride = self.steps[::2], self.values[::2], self.stride * 2


@dataclass
class Tally:
    """A tensor rule's counts so far (the state every tensor rule carries between batches)."""

    rule: str
    datapoints: int = 0
    violations: int = 0
    fired_steps: set[int] = field(default_factory=set)
    first: tuple[int, str] | None = None
    tensors: dict[str, _TensorTally] = field(default_factory=dict)
    hint: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    traces: dict[str, _Trace] = field(default_factory=dict)
    first_tensor: str | None = None

    def add(self, stat: Stat, violated: np.ndarray, describe: str, judged: np.ndarray | None = None, *,
            statistic: str = "", lower: float | None = None, upper: float | None = None) -> None:
        """Count the records of ``stat`` (those ``judged``, default all); ``violated`` marks the ones that met the
        condition; ``describe`` says why, a template of the value ``{v}``: ``"mean |x| {v:.3g} < 1e-07"``.
        ``statistic`` names the value and ``lower``/``upper`` the bounds outside which it fires, for the chart
        (:class:`~smx_debug.evaluate.result.Trace`)."""
        judged = np.ones(len(stat), bool) if judged is None else judged
        violated = violated & judged
        n = int(judged.sum())
        if not n:
            return
        trace = self.traces.setdefault(stat.tensor, _Trace(statistic, lower, upper))
        trace.add(stat.steps[judged], stat.values[judged])
        t = self.tensors.setdefault(stat.tensor, _TensorTally())
        t.datapoints += n
        self.datapoints += n
        t.last_value = float(stat.values[judged][-1])
        hits = np.flatnonzero(violated)
        if not len(hits):
            return
        t.violations += len(hits)
        self.violations += len(hits)
        steps = stat.steps[hits]
        self.fired_steps.update(int(s) for s in np.unique(steps))
        k = hits[0]
        step = int(stat.steps[k])
        if t.first_step is None:
            t.first_step, t.first_value = step, float(stat.values[k])
        if self.first is None or step < self.first[0]:
            where = f" (worker {stat.workers[k]})" if len({str(w) for w in stat.workers}) > 1 else ""
            self.first = (step, f"{stat.tensor} at step {step}{where}: {describe.format(v=float(stat.values[k]))}")
            self.first_tensor = stat.tensor

    def add_one(self, tensor: str, step: int, value: float, violated: bool, describe: str,
                *, mode: str = "GLOBAL", mode_step: int | None = None, worker: str = "", statistic: str = "",
                lower: float | None = None, upper: float | None = None) -> None:
        """Count one judgement (rules that judge a step as a whole, not a tensor record)."""
        stat = Stat(tensor, np.array([step], np.int64), np.array([mode], object),
                    np.array([step if mode_step is None else mode_step], np.int64), np.array([worker], object),
                    np.array([value], np.float64))
        self.add(stat, np.array([violated]), describe, statistic=statistic, lower=lower, upper=upper)

    def trace(self) -> Trace | None:
        """The chart of the first tensor that met the condition (else of the first tensor judged)."""
        name = self.first_tensor or next(iter(self.traces), None)
        got = self.traces.get(name) if name is not None else None
        if got is None:
            return None
        return Trace(tensor=name, statistic=got.statistic, steps=tuple(int(s) for s in got.steps),
                     values=tuple(float(v) for v in got.values), lower=got.lower, upper=got.upper)

    def result(self, params: RuleParams, *, details: Mapping[str, Any] | None = None) -> RuleResult:
        """The verdict so far (``params``: the rule's typed parameters, shown as ``rule_parameters``); without any
        judged record the message says what to add to the plan."""
        per = {name: {"violations": t.violations, "datapoints": t.datapoints, "first_step": t.first_step,
                      "first_value": t.first_value, "last_value": t.last_value}
               for name, t in sorted(self.tensors.items())}
        violating = sorted(n for n, t in self.tensors.items() if t.violations)
        if self.first is not None:
            more = (f"; {self.violations} violations at {len(self.fired_steps)} steps on "
                    f"{len(violating)} tensor{'s' if len(violating) != 1 else ''}")
            message = self.first[1] + more
        elif self.datapoints == 0:
            message = f"no data: {self.hint}" if self.hint else "no data: no saved step holds the tensors it reads"
        else:
            message = ""
        return RuleResult(
            rule=self.rule, rule_triggered=len(self.fired_steps), violations=self.violations,
            details={"tensors": per, "violating": violating, **self.extra, **(details or {})},
            datapoints=self.datapoints, rule_parameters=encode_set_parameters(params),
            trigger_step=min(self.fired_steps) if self.fired_steps else None, message=message, trace=self.trace(),
        )
