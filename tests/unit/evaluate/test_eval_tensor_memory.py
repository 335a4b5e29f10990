"""MemoryTrial, the in-process guard's view of what a hook writes, returns what the trial's reader returns for the
same writes (raw values, reductions, scalars, a reduction that is not one number), and each step once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from smx_debug.evaluate.tensor_memory import MemoryTrial
from smx_debug.tensors import TrialWriter, create_trial
from smx_debug.tensors.collections_file import Collection
from smx_debug.tensors.mode_keys import ModeKeys
from smx_debug.tensors.reductions import reduction_tensor_name

STEPS: list[tuple[int, ModeKeys, int, dict[str, Any]]] = [
    (0, ModeKeys.TRAIN, 0, {
        "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
        reduction_tensor_name("fc.weight", "l2"): np.float32(7.4),
        reduction_tensor_name("fc.weight", "mean", abs=True): np.array(2.5, dtype=np.float64),
        reduction_tensor_name("fc.bias", "max"): np.array([1.0, 2.0], dtype=np.float32),  # not one number: skipped
        "scalar/train_loss_mean": np.array([0.5], dtype=np.float32),
        "labels": np.array([1, 0, 2], dtype=np.int64),
    }),
    (5, ModeKeys.EVAL, 0, {"scalar/val_loss_mean": np.array([0.7], dtype=np.float32)}),
    (10, ModeKeys.TRAIN, 10, {
        "fc.weight": np.ones((2, 3), dtype=np.float32),
        reduction_tensor_name("fc.weight", "l2"): np.float32(2.4),
        "labels": np.array([2, 2], dtype=np.int64),  # another shape: one array per record
    }),
]
NAMES = ["fc.weight", "fc.bias", "scalar/train_loss_mean", "scalar/val_loss_mean", "labels"]
COLLECTIONS = [Collection(name="weights", include_regex=(".*weight",))]


def _both(tmp_path: Path) -> tuple[Any, MemoryTrial]:
    memory = MemoryTrial("worker_0")
    with TrialWriter(tmp_path / "trial", worker="worker_0") as writer:
        for step, mode, mode_step, tensors in STEPS:
            writer.write_step(step, mode=mode, mode_step=mode_step, tensors=tensors)
            memory.add_step(step, mode=mode, mode_step=mode_step, tensors=tensors)
        writer.write_collections(COLLECTIONS, num_workers=1)
        memory.set_collections(COLLECTIONS)
        writer.training_end()
        memory.end()
    return create_trial(str(tmp_path / "trial")), memory


def _reductions(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in frame[["step", "mode", "mode_step", "worker", "tensor", "reduction",
                                                "value"]].itertuples(index=False))


def test_memory_trial_reads_as_the_trial_reader_reads_the_same_writes(tmp_path: Path) -> None:
    trial, memory = _both(tmp_path)
    assert memory.tensor_names() == trial.tensor_names()
    assert memory.steps() == trial.steps() and memory.loaded_all_steps == trial.loaded_all_steps
    assert {n: c.include_regex for n, c in memory.collections().items()} == {
        n: c.include_regex for n, c in trial.collections().items()}
    want, got = trial.arrays(NAMES, start_step=0, end_step=11), memory.arrays(NAMES, start_step=0, end_step=11)
    assert _reductions(got.reductions) == _reductions(want.reductions)
    assert sorted(got.values) == sorted(want.values)
    for name, values in want.values.items():
        mine = got.values[name]
        for field in ("steps", "modes", "mode_steps", "workers"):
            assert list(getattr(mine, field)) == list(getattr(values, field)), (name, field)
        assert len(mine.values) == len(values.values)
        for a, b in zip(mine.values, values.values, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert set(got.wall_times) == set(want.wall_times)


def test_memory_trial_drops_the_steps_read(tmp_path: Path) -> None:
    _, memory = _both(tmp_path)
    first = memory.arrays(["fc.weight"], start_step=0, end_step=6)
    assert list(first.values["fc.weight"].steps) == [0]
    assert memory.steps() == [10]
    again = memory.arrays(["fc.weight"], start_step=0, end_step=11)
    assert list(again.values["fc.weight"].steps) == [10]
    assert memory.steps() == []
