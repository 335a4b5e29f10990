"""What several of smx-debug's own rules share: a state keeping one small record per tensor between batches,
and the walk over a batch's raw values. Imports only the standard library at module level (numpy inside the
functions: building a plan must not import it); not a rule (the registry skips modules named ``_*``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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


def records(batch: Any, name: str, *, modes: tuple[str, ...] | None = None) -> Iterator[tuple[int, str, Any]]:
    """``(global step, mode, values as a float64 array)`` of each saved record of ``name`` in the batch, in step
    order; records of another mode than ``modes`` (default any), strings, integers and empty values are skipped."""
    import numpy as np

    series = batch.arrays.get(name)
    if series is None or not len(series):
        return
    block = series.block
    for i in range(len(series)):
        mode = str(series.modes[i])
        if modes is not None and mode not in modes:
            continue
        value = np.asarray(block[i] if block is not None else series.records[i])
        if value.dtype.kind != "f" or not value.size:
            continue
        yield int(series.steps[i]), mode, value.astype(np.float64, copy=False)


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
