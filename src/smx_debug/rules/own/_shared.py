"""What several of smx-debug's own rules share: a state keeping one small record per tensor between batches,
the walk over a batch's raw values, and the walk over a statistic of a tensor (the summary the hook saved, else
computed from the raw values). numpy is a lazy module (building a plan must not import it); not a rule (the
registry skips modules named ``_*``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from smx_debug._lazy import lazy_module
from smx_debug.rules.definitions import SMDEBUG_STATISTICS, parse_summary_name, summary_tensor_name

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

LEARNING_MODES = ("TRAIN", "GLOBAL")  # the modes in which parameters change (nothing learns in EVAL)


@dataclass
class SmxLastSeen:
    """A rule's tally and, per tensor, what it kept from the tensor's last judged record (a few numbers, never a
    model's size): its step and the values the rule compares with."""

    tally: Any
    last: dict[str, list[float]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)


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


def judge_one(tally: Any, name: str, step: int, mode: str, value: float, violated: bool, describe: str, *,
              statistic: str, lower: float | None = None, upper: float | None = None) -> None:
    """Count one judgement of ``name`` at ``step`` (the tally's verdict, message and chart)."""
    tally.add_one(name, step, value, violated, describe, mode=mode, statistic=statistic, lower=lower, upper=upper)


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
