"""What several of smx-debug's own rules share: their parameter model's configuration, a state keeping one small
record per tensor between batches, the tensors a rule skips, the walk over a batch's raw values (and over the
records a rule has not seen yet), the walk over a statistic of a tensor (the summary the hook saved, else computed
from the raw values), and the judgement of a value against a rule's limit. A rule keeps what is its own: its
parameters, its statistic, its comparison, its message and its metadata. numpy is a lazy module (building a plan
must not import it); not a rule (the registry skips modules named ``_*``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from smx_debug._lazy import lazy_module
from smx_debug.rules.definitions import SMDEBUG_STATISTICS, parse_summary_name, summary_tensor_name

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

LEARNING_MODES = ("TRAIN", "GLOBAL")  # the modes in which parameters change (nothing learns in EVAL)


class OwnParams(BaseModel):
    """The base of a rule's ``Params``: frozen, and an unknown parameter is refused (what ``define`` requires)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass
class SmxLastSeen:
    """A rule's tally and, per tensor, what it kept from the tensor's last judged record (a few numbers, never a
    model's size): its step and the values the rule compares with."""

    tally: Any
    last: dict[str, list[float]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)

    def unseen(self, name: str, found: Iterable[tuple[int, str, Any]]) -> Iterator[tuple[int, str, Any, int]]:
        """``(step, mode, value, the step of the record seen before it, -1 for none)`` of each record of ``found``
        after the last record of ``name`` this state has seen, each noted as seen (``seen``) before it is yielded."""
        for step, mode, value in found:
            last_step = self.seen.get(name, -1)
            if last_step >= step:
                continue
            self.seen[name] = step
            yield step, mode, value, last_step


class LastSeenEvaluator:
    """The start of an evaluator whose state is :class:`SmxLastSeen` (a rule's ``Evaluator`` subclasses it and
    gives ``update``)."""

    state_types = (SmxLastSeen,)

    def start(self, params: Any, tally: Any) -> SmxLastSeen:
        return SmxLastSeen(tally)


def records(batch: Any, name: str, *, modes: tuple[str, ...] | None = None,
            integers: bool = False) -> Iterator[tuple[int, str, Any]]:
    """``(global step, mode, values as a float64 array)`` of each saved record of ``name`` in the batch, in step
    order; records of another mode than ``modes`` (default any), strings, integers and empty values are skipped.
    With ``integers``, the integer (and boolean) records instead, as int64 arrays (class ids), floats skipped."""
    kinds, dtype = ("iub", np.int64) if integers else ("f", np.float64)
    series = batch.arrays.get(name)
    if series is None or not len(series):
        return
    block = series.block
    for i in range(len(series)):
        mode = str(series.modes[i])
        if modes is not None and mode not in modes:
            continue
        value = np.asarray(block[i] if block is not None else series.records[i])
        if value.dtype.kind not in kinds or not value.size:
            continue
        yield int(series.steps[i]), mode, value.astype(dtype, copy=False)


@dataclass(frozen=True)
class Limit:
    """A rule's limit on the value it judges: a value above it (``upper``), else below it, fires, and with
    ``inclusive`` the limit itself does too; the chart draws it as the value's upper (lower) bound."""

    value: float
    upper: bool
    inclusive: bool = False

    def fires(self, v: Any) -> Any:
        """Whether ``v`` is beyond the limit (False for NaN)."""
        if self.upper:
            return v >= self.value if self.inclusive else v > self.value
        return v <= self.value if self.inclusive else v < self.value

    def bounds(self) -> dict[str, float | None]:
        """The chart's ``lower`` and ``upper`` bounds."""
        return {"lower": None, "upper": self.value} if self.upper else {"lower": self.value, "upper": None}


def above(limit: float) -> Limit:
    """A value above ``limit`` fires."""
    return Limit(limit, upper=True)


def at_least(limit: float) -> Limit:
    """A value at or above ``limit`` fires."""
    return Limit(limit, upper=True, inclusive=True)


def below(limit: float) -> Limit:
    """A value below ``limit`` fires."""
    return Limit(limit, upper=False)


def at_most(limit: float) -> Limit:
    """A value at or below ``limit`` fires."""
    return Limit(limit, upper=False, inclusive=True)


def judge_one(tally: Any, name: str, step: int, mode: str, value: Any, limit: Limit, describe: str, *,
              statistic: str, fires: bool | None = None) -> None:
    """Count one judgement of ``name`` at ``step`` (the tally's verdict, message and chart): ``value`` fires when it
    is beyond ``limit``, unless ``fires`` says otherwise; ``describe`` is the message (``{v}``: the value)."""
    violated = limit.fires(value) if fires is None else fires
    tally.add_one(name, step, value, violated, describe, mode=mode, statistic=statistic, **limit.bounds())


def judge_statistic(state: SmxLastSeen, batch: Any, name: str, stat: str, raw: Callable[[Any], Any], limit: Limit,
                    describe: str, *, label: str, modes: tuple[str, ...] | None = None, finite: bool = False,
                    once: bool = False) -> None:
    """Judge statistic ``stat`` of tensor ``name`` (as :func:`statistic`: saved, else ``raw`` of the raw values) at
    each saved record of ``modes`` against ``limit`` (:func:`judge_one`; ``label``: the chart's name of the
    statistic). With ``finite``, a value that is None, NaN or infinite is not judged; with ``once``, only the
    tensor's first judged record is (``state.seen`` keeps its step)."""
    for step, mode, value in statistic(batch, name, stat, raw, modes=modes):
        if once and name in state.seen:
            continue
        if finite and (value is None or not math.isfinite(value)):
            continue
        if once:
            state.seen[name] = step
        judge_one(state.tally, name, step, mode, value, limit, describe, statistic=label)


def in_collections(batch: Any, name: str, collections: str) -> bool:
    """``name`` belongs to one of the comma-separated ``collections`` of the trial."""
    preds: dict[str, Callable[[str], bool]] = batch.collections
    for c in collections.split(","):
        pred = preds.get(c.strip())
        if pred is not None and pred(name):
            return True
    return False


def tensors(names: Iterable[str]) -> list[str]:
    """The tensors a selection names, in order, each once: a named summary tensor stands for its tensor."""
    out: dict[str, None] = {}
    for name in names:
        parsed = parse_summary_name(name)
        out[parsed[0] if parsed else name] = None
    return list(out)


def judged_tensors(batch: Any, names: Iterable[str], *, skip: str = "", skip_collections: str = "",
                   only: str | None = None, flags: int = 0) -> list[str]:
    """The tensors ``names`` select (:func:`tensors`) that a rule judges: not those whose name the regex ``skip``
    finds (an empty one finds none) or that belong to one of the comma-separated ``skip_collections``, and with
    ``only``, only those whose name the regex ``only`` finds (``flags``: both regexes')."""
    skipped = re.compile(skip, flags) if skip else None
    kept = re.compile(only, flags) if only is not None else None
    out = []
    for name in tensors(names):
        if (kept is not None and not kept.search(name)) or (skipped is not None and skipped.search(name)):
            continue
        if not (skip_collections and in_collections(batch, name, skip_collections)):
            out.append(name)
    return out


def statistic(batch: Any, name: str, stat: str, raw: Callable[[Any], Any], *,
              modes: tuple[str, ...] | None = None) -> Iterator[tuple[int, str, Any]]:
    """``(global step, mode, value)`` of statistic ``stat`` of tensor ``name`` per saved record, in step order: the
    summary the hook saved (smdebug's reduction record for ``abs_mean``/``l2``, else the named summary tensor),
    else ``raw`` of the raw values (float records only, as :func:`records`)."""
    if stat in SMDEBUG_STATISTICS:
        if stat in batch.saved_reductions(name):
            saved = batch.reduction(name, stat)
            for step, mode, value in zip(saved.steps.tolist(), saved.modes.tolist(), saved.values.tolist(),
                                         strict=True):
                if modes is None or str(mode) in modes:
                    yield int(step), str(mode), float(value)
            return
    else:
        summary = summary_tensor_name(name, stat)
        if summary in batch.arrays and len(batch.arrays[summary]):
            for step, mode, value in records(batch, summary, modes=modes):
                yield step, mode, value if value.size > 1 else float(value.reshape(-1)[0])
            return
    for step, mode, value in records(batch, name, modes=modes):
        yield step, mode, raw(value)


def share_zero(value: Any) -> float:
    """The share of exact zeros (statistic ``share_zero``)."""
    return float((value == 0).mean())


def count_nonfinite(value: Any) -> float:
    """How many values are NaN or infinite (statistic ``count_nonfinite``)."""
    return float((~np.isfinite(value)).sum())


def abs_mean(value: Any) -> float:
    """The mean absolute value (statistic ``abs_mean``)."""
    return float(np.abs(value).mean())


def l2_norm(value: Any) -> float:
    """The L2 norm over all values (statistic ``l2``)."""
    return float(np.sqrt(np.square(value).sum()))


def init_scale(value: Any) -> float | None:
    """std(w) x sqrt(fan-in) of a matrix or kernel (numpy's std; statistic ``init_scale``), None below 2-D."""
    if value.ndim < 2:
        return None
    return float(value.std() * np.sqrt(int(np.prod(value.shape[1:]))))


def share_abs_beyond(limit: float, value: Any) -> float:
    """The share of |x| beyond ``limit`` (statistic ``share_abs_gt_<limit>``)."""
    return float((np.abs(value) > limit).mean())
