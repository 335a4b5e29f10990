"""Evaluate tensor rules over a trial, incrementally: each :meth:`TensorEvaluator.refresh` reads only the steps
saved since the previous one and folds them into every rule's state (a live trial re-reads nothing).

Example::

    from smx_debug.evaluate.tensor_eval import evaluate_trial
    results = evaluate_trial("/tmp/run", ["VanishingGradient", "ExplodingTensor"])
    results["VanishingGradient"].trigger_step
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from smx_debug.errors import ConfigError
from smx_debug.evaluate import tensor_input_rules, tensor_loss_rules  # noqa: F401  (their rules are TensorRules)
from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_data import TensorBatch
from smx_debug.evaluate.tensor_feed import TrialFeed
from smx_debug.evaluate.tensor_rules import Collections, TensorRule
from smx_debug.evaluate.tensor_state import Snapshot, dump
from smx_debug.evaluate.tensor_verdict import Selection, Tally, select_tensors
from smx_debug.rules.configured import ConfiguredRule, RuleLike, configure
from smx_debug.rules.definitions import SUMMARY_PREFIX, parse_summary_name
from smx_debug.rules.params import TENSOR_RULES
from smx_debug.rules.registry import RuleDef, rule_defs
from smx_debug.tensors import create_trial

__all__ = ["TensorEvaluator"]


class OwnTensorRule(TensorRule):
    """A rule of our own (:func:`smx_debug.rules.registry.define`) as a :class:`TensorRule`: its evaluator's
    ``update`` (and ``select``, ``start``, ``result`` where it has them, else the built-ins' defaults), given its
    typed parameters (the rule's model, validated once per configuration: :attr:`ConfiguredRule.params`). Its
    ``start(params, tally)`` gets the :class:`Tally` its state carries as ``tally`` (the default verdict is that
    tally's)."""

    def __init__(self, rule: RuleDef) -> None:
        self.rule = rule
        self.impl = rule.evaluator
        self.state_types = tuple(getattr(self.impl, "state_types", ()))  # type: ignore[misc]

    def select(self, params: Any, names: Sequence[str], collections: Collections) -> Selection:
        own = getattr(self.impl, "select", None)
        if own:
            chosen: Selection = own(params, names, collections)
            return chosen
        # a named summary tensor (smx/summaries/<statistic>/<tensor>) is selected when its tensor is, by its
        # tensor's name and collections; the selection names both (the tensor's raw values may be absent)
        summaries: dict[str, list[str]] = {}
        for name in names:
            parsed = parse_summary_name(name)
            if parsed is not None:
                summaries.setdefault(parsed[0], []).append(name)
        if not summaries:
            return select_tensors(params, names, collections)
        shown = [n for n in names if parse_summary_name(n) is None]
        known = set(shown)
        shown += [t for t in summaries if t not in known]
        sel = select_tensors(params, shown, collections)
        return Selection(sel.names + tuple(s for t in sel.names for s in summaries.get(t, ())), sel.hint)

    def start(self, params: Any) -> Any:
        own = getattr(self.impl, "start", None)
        return own(params, Tally(self.rule.name)) if own else Tally(self.rule.name)

    def update(self, state: Any, batch: TensorBatch, params: Any, selection: Selection) -> None:
        self.impl.update(state, batch, params, selection)

    def result(self, state: Any, params: Any) -> RuleResult:
        own = getattr(self.impl, "result", None)
        if own:
            return RuleResult.model_validate(own(state, params))
        tally = getattr(state, "tally", state)
        result: RuleResult = tally.result(params)
        return result


def _without_summaries(names: Sequence[str]) -> Sequence[str]:
    """``names`` without the named summary tensors: Debugger's rules judge tensors, and a rule of ours's statistic
    (``smx/summaries/share_zero/...``: a share, not a layer) is not one (AllZero, UnchangedTensor would judge it)."""
    return [n for n in names if not n.startswith(SUMMARY_PREFIX)]


def _builtin_rules() -> dict[str, TensorRule]:
    """Debugger's tensor rules by name: every TensorRule subclass that names one (grouped in tensor_rules,
    tensor_input_rules and tensor_loss_rules)."""
    found: dict[str, TensorRule] = {}
    todo: list[type[TensorRule]] = [TensorRule]
    while todo:
        cls = todo.pop()
        todo.extend(c for c in cls.__subclasses__() if c is not OwnTensorRule)
        if cls.name:
            found[cls.name] = cls()
    return found


_BUILTIN = _builtin_rules()
# Derived from the rule registry: each rule evaluated on tensors, with its evaluator.
TENSOR_REGISTRY: dict[str, TensorRule] = {
    d.name: OwnTensorRule(d) if d.family == "smx" else _BUILTIN[d.name]
    for d in rule_defs() if "tensors" in d.evaluates_on
}


def _tensor_configs(rules: Iterable[RuleLike] | None) -> list[ConfiguredRule]:
    configs = configure(list(rules) if rules is not None else list(TENSOR_RULES))
    for c in configs:
        if c.rule not in TENSOR_REGISTRY:
            raise ConfigError(f"rule {c.rule} (configuration {c.name!r}) does not read tensors; tensor rules: "
                              f"{', '.join(TENSOR_RULES)}", field="rule", value=c.rule)
    return configs


class TensorEvaluator:
    """Tensor rule configurations over one trial, with their state carried between refreshes.

    Args:
        trial: a :class:`smx_debug.tensors.Trial` (``create_trial(path)``).
        rules: rule classes (defaults) and/or :class:`ConfiguredRule` objects; None: every tensor rule.
        clock: "now" in epoch seconds for a live evaluation (StalledTrainingRule counts the silence up to it);
            None judges the trial as written.
    """

    def __init__(self, trial: Any, rules: Iterable[RuleLike] | None = None, *,
                 clock: Callable[[], float] | None = None, cursor: int | None = None) -> None:
        self.configs = _tensor_configs(rules)
        self.feed = TrialFeed(trial, cursor=cursor)
        self.clock = clock
        self._states = {c.name: TENSOR_REGISTRY[c.rule].start(c.params) for c in self.configs}
        self._selections: dict[str, Selection] = {}
        self.wall_times: dict[int, float] = {}  # global step -> wall time (epoch s) of the steps read
        self.waiting = ""  # why the last refresh read none of the trial's saved steps (TensorBatch.waiting)

    def snapshot(self, *, budget: int, names: Iterable[str] | None = None) -> bytes:
        """The state of configurations ``names`` (default all) and the cursor, in at most ``budget`` bytes, for
        :meth:`restore` in another process (the scheduled evaluator keeps it in the job's cursor item).

        Raises:
            DataError: when it does not fit ``budget`` even without per-tensor details.
        """
        keep = set(names) if names is not None else {c.name for c in self.configs}
        rules = {c.name: c.rule for c in self.configs if c.name in keep}
        return dump(self.feed.cursor, rules, self._states, budget=budget)

    @classmethod
    def restore(cls, trial: Any, rules: Iterable[RuleLike], snapshot: Snapshot | None, *,
                clock: Callable[[], float] | None = None) -> TensorEvaluator:
        """An evaluator that goes on from ``snapshot`` (:func:`smx_debug.evaluate.tensor_state.load` of a
        :meth:`snapshot`): its cursor and each configuration's state (a configuration it does not hold, or held
        for another rule class, starts afresh at the cursor). The values compared across steps are read again
        from ``trial``, which must be opened at ``snapshot.read_from`` or earlier."""
        ev = cls(trial, rules, clock=clock, cursor=snapshot.cursor if snapshot is not None else None)
        if snapshot is None:
            return ev
        restored = {c.name for c in ev.configs if snapshot.rules.get(c.name) == c.rule and c.name in snapshot.states}
        for name in restored:
            ev._states[name] = snapshot.states[name]
        refs = [ref for ref in snapshot.history if ref[0] in restored]
        if refs:
            got = trial.arrays({ref[1] for ref in refs}, start_step=min(ref[4] for ref in refs),
                               end_step=snapshot.cursor)
            for name, tensor, worker, mode, step in refs:
                values = got.values.get(tensor)
                hit: Any = [] if values is None else np.flatnonzero(
                    (values.steps == step) & (values.workers == worker) & (values.modes == mode))
                if len(hit):  # else that record is gone: the rule compares from the next step on
                    ev._states[name].refill((tensor, worker, mode), step, values.values[int(hit[0])])
        return ev

    def _select(self, names: list[str], collections: Mapping[str, Callable[[str], bool]]) -> set[str]:
        wanted: set[str] = set()
        tensors = _without_summaries(names)
        for c in self.configs:
            rule = TENSOR_REGISTRY[c.rule]
            sel = rule.select(c.params, names if isinstance(rule, OwnTensorRule) else tensors, collections)
            self._selections[c.name] = sel
            wanted.update(sel.names)
        return wanted

    def refresh(self, *, until: int | None = None) -> dict[str, RuleResult]:
        """Read the steps saved since the last refresh (before global step ``until``, when given: replaying a
        finished trial step by step), fold them into every rule, and return the verdicts."""
        self._selections = {}
        batch = self.feed.read(self._select, now=self.clock() if self.clock else None, until=until)
        self.waiting = batch.waiting
        self.wall_times.update(batch.wall_times)
        self.update(batch)
        return self.results()

    def update(self, batch: TensorBatch) -> None:
        """Fold one batch (built by the feed, or by hand in tests) into every rule's state."""
        for c in self.configs:
            rule = TENSOR_REGISTRY[c.rule]
            params = c.params
            sel = self._selections.get(c.name) or rule.select(
                params, batch.names if isinstance(rule, OwnTensorRule) else _without_summaries(batch.names),
                batch.collections)
            self._selections[c.name] = sel
            state = self._states[c.name]
            tally = getattr(state, "tally", state)
            if hasattr(tally, "hint"):  # what to add to the plan, shown while the rule has no data
                tally.hint = sel.hint
            with np.errstate(all="ignore"):  # NaN and infinity are data here (ExplodingTensor reports them)
                rule.update(state, batch, params, sel)

    def results(self) -> dict[str, RuleResult]:
        """The verdict of every configuration so far, keyed by configuration name."""
        out = {}
        for c in self.configs:
            result = TENSOR_REGISTRY[c.rule].result(self._states[c.name], c.params)
            update: dict[str, Any] = {"configuration_name": c.name, "parameters": dict(c.parameters)}
            if self.waiting and result.datapoints == 0:
                update["message"] = f"no data: {self.waiting}"
            out[c.name] = result.model_copy(update=update)
        return out


def evaluate_trial(trial: Any, rules: Iterable[RuleLike] | None = None, *, s3_client: Any = None,
                   sagemaker_client: Any = None) -> dict[str, RuleResult]:
    """Every given tensor rule over the whole trial (a Trial, a folder, an ``s3://`` prefix or a job name)."""
    if isinstance(trial, str | os.PathLike):
        trial = create_trial(trial, s3_client=s3_client, sagemaker_client=sagemaker_client)
    return TensorEvaluator(trial, rules).refresh()
