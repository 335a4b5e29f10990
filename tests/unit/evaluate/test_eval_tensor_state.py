"""The tensor rules' state kept between runs in another process (the scheduled evaluator): a trial evaluated in
pieces, each piece restored from the last one's snapshot and reading only its own steps (plus the few records
UnchangedTensor and WeightUpdateRatio compare with), fires every rule at the step one pass over it does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smx_debug.errors import DataError
from smx_debug.evaluate import configured_rule
from smx_debug.evaluate.tensor_eval import TensorEvaluator, evaluate_trial
from smx_debug.evaluate.tensor_state import load
from smx_debug.rules.params import TENSOR_RULES
from smx_debug.tensors import create_trial

TRIALS = Path(__file__).resolve().parents[2] / "data" / "tensor_rules"
EXPECTED: dict[str, dict[str, Any]] = json.loads((TRIALS / "expected.json").read_text())
PARAMS = {rule: spec["parameters"] for rules in EXPECTED.values() for rule, spec in rules.items()}
BUDGET = 200_000


def _configs() -> list[Any]:
    return [configured_rule(rule, overrides=PARAMS.get(rule)) for rule in TENSOR_RULES]


def _copy_until(src: Path, dst: Path, end: int | None) -> None:
    """The files of ``src`` for global steps before ``end`` (all, and the end marker, when None)."""
    for path in src.rglob("*"):
        if path.is_dir() or path.name == "expected.json":
            continue
        rel = path.relative_to(src)
        step = int(path.name[:12]) if path.name[:12].isdigit() else None
        if end is None or (step is not None and step < end) or rel.parts[0] == "collections":
            if rel.name == "training_job_end.ts" and end is not None:
                continue
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            if not (dst / rel).exists():
                shutil.copy(path, dst / rel)


def _in_pieces(src: Path, dst: Path, cuts: list[int | None]) -> dict[str, int | None]:
    """The first trigger step of every rule over ``src`` evaluated in pieces ending at ``cuts``."""
    first: dict[str, int | None] = {c.name: None for c in _configs()}
    blob = None
    for cut in cuts:
        _copy_until(src, dst, cut)
        snapshot = load(blob) if blob is not None else None
        trial = create_trial(str(dst), start_step=snapshot.read_from if snapshot else 0)
        now = 1e12 if cut is None else 0.0  # StalledTrainingRule: the silence after the end is long
        ev = TensorEvaluator.restore(trial, _configs(), snapshot, clock=lambda now=now: now)
        for name, result in ev.refresh().items():
            if first[name] is None and result.triggered:
                first[name] = result.trigger_step
        blob = ev.snapshot(budget=BUDGET)
        assert len(blob) < BUDGET
    return first


@pytest.mark.parametrize("trial", sorted(t for t in EXPECTED if t != "stalled_training"))
def test_tensor_state_evaluated_in_pieces_fires_where_one_pass_does(trial: str, tmp_path: Path) -> None:
    whole = {name: r.trigger_step if r.triggered else None
             for name, r in evaluate_trial(str(TRIALS / trial), _configs()).items()}
    assert _in_pieces(TRIALS / trial, tmp_path, [25, 55, 65, None]) == whole


def test_tensor_state_unchanged_tensor_compares_with_values_read_again(tmp_path: Path) -> None:
    _copy_until(TRIALS / "frozen_layer", tmp_path, 55)
    ev = TensorEvaluator(create_trial(str(tmp_path)), ["UnchangedTensor", "WeightUpdateRatio"])
    ev.refresh()
    snapshot = load(ev.snapshot(budget=BUDGET))
    assert snapshot.cursor == 51
    assert {(ref[0], ref[4]) for ref in snapshot.history} == {("UnchangedTensor", 40), ("UnchangedTensor", 50),
                                                              ("WeightUpdateRatio", 50)}
    assert snapshot.read_from == 40
    _copy_until(TRIALS / "frozen_layer", tmp_path, 65)
    trial = create_trial(str(tmp_path), start_step=snapshot.read_from)
    results = TensorEvaluator.restore(trial, ["UnchangedTensor", "WeightUpdateRatio"], snapshot).refresh()
    assert results["UnchangedTensor"].trigger_step == 60  # 60 equals 50 and 40, read again from the trial
    # frozen from 50: the update into 50 was judged in the first piece, the one into 60 against 50 read again
    assert (results["WeightUpdateRatio"].trigger_step, results["WeightUpdateRatio"].rule_triggered) == (50, 2)


def test_tensor_state_too_large_drops_details_then_refuses(tmp_path: Path) -> None:
    _copy_until(TRIALS / "healthy", tmp_path, None)
    ev = TensorEvaluator(create_trial(str(tmp_path)), _configs())
    ev.refresh()
    full = ev.snapshot(budget=BUDGET)
    lean = ev.snapshot(budget=len(full) - 1)
    assert len(lean) < len(full)
    assert load(lean).states["VanishingGradient"].tensors == {}
    assert load(full).states["VanishingGradient"].tensors
    with pytest.raises(DataError, match="more than 100"):
        ev.snapshot(budget=100)


@pytest.mark.parametrize("blob", [b"not zlib", __import__("zlib").compress(b'{"format": 99}'),
                                  __import__("zlib").compress(b'{"format": 1, "cursor": 1, "rules": {}, '
                                                              b'"states": {"x": {"$dc": "os.system"}}, '
                                                              b'"history": []}'),
                                  __import__("zlib").compress(b"[" * 100_000 + b"]" * 100_000)])
def test_tensor_state_load_refuses_what_it_did_not_write(blob: bytes) -> None:
    with pytest.raises(DataError):
        load(blob)


def test_tensor_state_keeps_arrays_sets_and_nan(tmp_path: Path) -> None:
    _copy_until(TRIALS / "class_imbalance", tmp_path, None)
    ev = TensorEvaluator(create_trial(str(tmp_path)), ["ClassImbalance", "CheckInputImages"])
    ev.refresh()
    back = load(ev.snapshot(budget=BUDGET)).states
    before = ev._states["ClassImbalance"]
    assert np.array_equal(back["ClassImbalance"].labels, before.labels)
    assert back["ClassImbalance"].tally.fired_steps == before.tally.fired_steps
