"""The reader's bulk API: ``Trial.arrays`` (raw values as blocks, saved reductions, wall times) and
``create_trial(start_step=)``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from smx_debug.errors import ConfigError
from smx_debug.tensors import Collection, TrialWriter, create_trial, reduction_tensor_name


def _write(root: Path, steps: range = range(5), workers: tuple[str, ...] = ("worker_0", "worker_1")) -> None:
    for worker in workers:
        with TrialWriter(root, worker=worker) as w:
            w.write_collections([Collection(name="weights", include_regex=("weight",))], num_workers=len(workers))
            for step in steps:
                w.write_step(step, mode="train" if step % 2 == 0 else "eval", mode_step=step // 2,
                             wall_time=1_700_000_000.0 + step, tensors={
                                 "loss": np.float32(step), "fc.weight": np.full((3, 2), step, np.float32),
                                 reduction_tensor_name("fc.bias", "mean", abs=True): np.float32(step / 10)})


def test_trial_arrays_gives_blocks_reductions_and_wall_times(tmp_path: Path) -> None:
    _write(tmp_path)
    got = create_trial(tmp_path).arrays(["fc.weight", "loss", "fc.bias"])
    w = got.values["fc.weight"]
    assert w.block is not None and w.block.shape == (10, 3, 2) and w.block.dtype == np.float32
    assert w.steps.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert w.workers.tolist() == ["worker_0", "worker_1"] * 5
    assert w.modes.tolist()[:4] == ["TRAIN", "TRAIN", "EVAL", "EVAL"] and w.mode_steps.tolist()[:4] == [0, 0, 0, 0]
    assert w.block[:, 0, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert "fc.bias" not in got.values  # saved as a reduction only
    bias = got.reductions[got.reductions["tensor"] == "fc.bias"]
    assert bias["reduction"].unique().tolist() == ["abs_mean"] and len(bias) == 10
    assert got.wall_times == {s: 1_700_000_000.0 + s for s in range(5)}


def test_trial_arrays_step_range_reads_those_steps_only(tmp_path: Path) -> None:
    _write(tmp_path)
    got = create_trial(tmp_path).arrays(["fc.weight"], start_step=2, end_step=4)
    assert got.values["fc.weight"].steps.tolist() == [2, 2, 3, 3]
    assert sorted(got.wall_times) == [2, 3]


def test_trial_arrays_unknown_name_gives_nothing(tmp_path: Path) -> None:
    _write(tmp_path)
    got = create_trial(tmp_path).arrays(["no.such.tensor"])
    assert got.values == {} and got.reductions.empty and got.wall_times == {}


def test_create_trial_start_step_never_reads_earlier_files(tmp_path: Path) -> None:
    _write(tmp_path, workers=("worker_0",))
    (tmp_path / "index/000000000/000000000001_worker_0.json").write_text("not an index")  # before the start
    trial = create_trial(tmp_path, start_step=3)
    assert trial.steps() == [3, 4] and trial.skipped == {}
    assert create_trial(tmp_path).skipped  # read from the start, the damaged index is met (and counted)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_create_trial_bad_start_step_raises_config_error_naming_it(tmp_path: Path, bad: object) -> None:
    _write(tmp_path, workers=("worker_0",))
    with pytest.raises(ConfigError, match="start_step") as err:
        create_trial(tmp_path, start_step=bad)  # type: ignore[arg-type]
    assert err.value.field == "start_step"
