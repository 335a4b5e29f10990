"""What smx-debug's own rules share (smx_debug.rules.own._shared): a rule's limit (its comparison and its chart
bound), the tensors a rule judges, the per-tensor statistic judgement and the walk over the records a state has not
seen yet."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pydantic
import pytest
from pydantic import Field

from smx_debug.evaluate.tensor_data import TensorBatch
from smx_debug.rules.own._shared import (
    OwnParams,
    SmxLastSeen,
    above,
    at_least,
    at_most,
    below,
    judge_one,
    judge_statistic,
    judged_tensors,
    share_zero,
)
from smx_debug.tensors.arrays import TensorValues


class _Tally:
    """Keeps each judgement it is given (the evaluator's Tally counts them)."""

    def __init__(self) -> None:
        self.judged: list[tuple[Any, ...]] = []

    def add_one(self, tensor: str, step: int, value: float, violated: bool, describe: str, **kw: Any) -> None:
        self.judged.append((tensor, step, value, bool(violated), describe, kw["mode"], kw["statistic"],
                            kw["lower"], kw["upper"]))


def _batch(values: dict[str, list[tuple[int, Any]]], collections: dict[str, set[str]] | None = None) -> TensorBatch:
    arrays = {name: TensorValues.of(name, [s for s, _ in recs], ["TRAIN"] * len(recs), [s for s, _ in recs],
                                    [""] * len(recs), [np.asarray(v) for _, v in recs])
              for name, recs in values.items()}
    preds = {c: (lambda members: lambda n: n in members)(m) for c, m in (collections or {}).items()}
    return TensorBatch(arrays=arrays, names=tuple(values), collections=preds)


@pytest.mark.parametrize(("limit", "value", "fires"), [
    (above(1.0), 1.5, True), (above(1.0), 1.0, False), (above(1.0), 0.5, False),
    (at_least(1.0), 1.0, True), (at_least(1.0), 0.99, False),
    (below(1.0), 0.5, True), (below(1.0), 1.0, False), (below(1.0), 1.5, False),
    (at_most(1.0), 1.0, True), (at_most(1.0), 1.01, False),
    (above(1.0), math.nan, False), (at_least(1.0), math.nan, False), (below(1.0), math.nan, False),
    (at_most(1.0), math.nan, False),
])
def test_limit_fires_beyond_it_and_at_it_only_when_inclusive(limit: Any, value: float, fires: bool) -> None:
    assert limit.fires(value) is fires


def test_judge_one_draws_the_limit_on_its_side_of_the_chart() -> None:
    tally = _Tally()
    judge_one(tally, "fc.weight", 500, "TRAIN", 3.0, above(2.0), "{v:g} above", statistic="scale")
    judge_one(tally, "fc.weight", 1000, "TRAIN", 1.0, below(2.0), "{v:g} below", statistic="scale")
    assert tally.judged == [("fc.weight", 500, 3.0, True, "{v:g} above", "TRAIN", "scale", None, 2.0),
                            ("fc.weight", 1000, 1.0, True, "{v:g} below", "TRAIN", "scale", 2.0, None)]


def test_judge_one_fires_overrides_the_limit_but_keeps_its_chart_bound() -> None:
    tally = _Tally()
    judge_one(tally, "val_loss_mean", 500, "EVAL", 30.0, above(10.0), "{v:g}%", statistic="rise", fires=False)
    judge_one(tally, "fc.weight", 500, "TRAIN", 2.0, above(10.0), "{v:g} NaN", statistic="growth", fires=True)
    assert [(j[3], j[8]) for j in tally.judged] == [(False, 10.0), (True, 10.0)]


def test_judged_tensors_skip_regex_and_collections_leave_the_rest_in_order() -> None:
    b = _batch({}, {"labels": {"labels"}})
    names = ["fc.weight", "fc.bias", "labels", "smx/summaries/share_zero/conv.weight", "conv.weight"]
    assert judged_tensors(b, names, skip="bias$", skip_collections="labels,predictions") == ["fc.weight",
                                                                                           "conv.weight"]


def test_judged_tensors_empty_skip_regex_skips_nothing() -> None:
    assert judged_tensors(_batch({}), ["fc.bias", "fc.weight"], skip="") == ["fc.bias", "fc.weight"]


def test_judged_tensors_only_keeps_what_it_finds_with_the_flags() -> None:
    names = ["gradient/fc.weight", "gradient/fc.bias", "gradient/EMB.weight"]
    assert judged_tensors(_batch({}), names, only=r"weight[^./]*$") == ["gradient/fc.weight", "gradient/EMB.weight"]
    assert judged_tensors(_batch({}), names, skip="emb", flags=re.IGNORECASE) == names[:2]


def test_judge_statistic_judges_each_record_against_the_limit() -> None:
    state = SmxLastSeen(_Tally())
    b = _batch({"fc.weight": [(0, np.zeros(4)), (500, np.array([0.0, 1.0, 2.0, 3.0]))]})
    judge_statistic(state, b, "fc.weight", "share_zero", share_zero, at_least(0.5), "{v:.0%} zero", label="zeros")
    assert state.tally.judged == [("fc.weight", 0, 1.0, True, "{v:.0%} zero", "TRAIN", "zeros", None, 0.5),
                                  ("fc.weight", 500, 0.25, False, "{v:.0%} zero", "TRAIN", "zeros", None, 0.5)]


def test_judge_statistic_once_finite_judges_the_first_finite_record_only() -> None:
    state = SmxLastSeen(_Tally())
    b = _batch({"fc.weight": [(0, np.ones(4)), (500, np.ones(4)), (1000, np.ones(4))]})
    means = iter([math.nan, 2.0, 3.0])
    judge_statistic(state, b, "fc.weight", "a_mean", lambda v: next(means), above(1.0), "{v:g}", label="mean",
                    finite=True, once=True)
    assert [(j[1], j[2]) for j in state.tally.judged] == [(500, 2.0)]
    assert state.seen == {"fc.weight": 500}


def test_state_unseen_yields_only_records_after_the_last_seen_with_the_step_before() -> None:
    state = SmxLastSeen(_Tally(), seen={"loss": 500})
    found = [(0, "TRAIN", 1.0), (500, "TRAIN", 2.0), (1000, "TRAIN", 3.0), (1500, "TRAIN", 4.0)]
    assert list(state.unseen("loss", found)) == [(1000, "TRAIN", 3.0, 500), (1500, "TRAIN", 4.0, 1000)]
    assert state.seen == {"loss": 1500}
    assert list(state.unseen("loss", found)) == []


def test_own_params_subclass_is_frozen_and_refuses_an_unknown_parameter() -> None:
    class Params(OwnParams):
        factor: float = Field(10.0, gt=1, description="growth that fires")

    with pytest.raises(pydantic.ValidationError, match="extra"):
        Params(factor=2.0, fator=3.0)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        Params().factor = 3.0  # type: ignore[misc]
