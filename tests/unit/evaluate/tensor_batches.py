"""Builders of tensor batches whose rule verdicts can be worked out by hand (imported by the tensor rule tests)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from smx_debug.evaluate import configured_rule
from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_data import TensorBatch
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.tensors import TensorValues

COLLECTIONS = {"gradients": "^gradient", "weights": "^(?!gradient).*weight", "losses": "[Ll]oss",
               "labels": "labels", "predictions": "predictions"}


def series(name: str, values: Sequence[Any], steps: Sequence[int] | None = None, *, mode: str | Sequence[str] = "TRAIN",
           worker: str | Sequence[str] = "worker_0") -> TensorValues:
    n = len(values)
    steps = list(range(n)) if steps is None else list(steps)
    modes = [mode] * n if isinstance(mode, str) else list(mode)
    workers = [worker] * n if isinstance(worker, str) else list(worker)
    return TensorValues.of(name, steps, modes, steps, workers, values)


def batch(*tensors: TensorValues, collections: Mapping[str, str] | None = None, **kwargs: Any) -> TensorBatch:
    colls = COLLECTIONS if collections is None else collections
    names = sorted({t.name for t in tensors} | set(kwargs.pop("extra_names", ())))
    return TensorBatch(arrays={t.name: t for t in tensors}, names=names,
                       collections={c: re.compile(r).search for c, r in colls.items()},  # type: ignore[misc]
                       **kwargs)


def run(rule: str, *batches: TensorBatch, **params: Any) -> RuleResult:
    """The rule's verdict after folding the batches in order."""
    ev = TensorEvaluator(None, [configured_rule(rule, overrides=params)])
    for b in batches:
        ev.update(b)
    return ev.results()[rule]


def split(b: TensorBatch, at: int) -> tuple[TensorBatch, TensorBatch]:
    """The batch cut in two at global step ``at`` (what two refreshes of a live trial would read)."""
    def part(keep: Any) -> TensorBatch:
        arrays = {}
        for name, s in b.arrays.items():
            m = keep(s.steps)
            arrays[name] = TensorValues.of(name, s.steps[m], s.modes[m], s.mode_steps[m], s.workers[m],
                                           [v for v, k in zip(s.values, m, strict=True) if k])
        return TensorBatch(arrays=arrays, names=b.names, collections=b.collections,
                           wall_times={k: v for k, v in b.wall_times.items() if keep(np.array([k]))[0]})
    return part(lambda s: s < at), part(lambda s: s >= at)
