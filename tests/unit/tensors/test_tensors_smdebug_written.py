"""Compatibility, smdebug -> us: a trial written by smdebug 1.0.34's own FileWriter (tests/data/tensors/
make_smdebug_trials.py, run in bench/.venv-smdebug) reads here as smdebug's own reader read it
(smdebug_written.expected.json): names, steps, modes, mode steps, workers, collections, dtypes, shapes, bytes.
Where smdebug's reader fails or is wrong, ours reads what was written: int16, uint16/32/64 and complex64 (its
KeyError) and int8 (it says uint8)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from smx_debug.errors import TensorUnavailableError
from smx_debug.tensors import create_trial, modes

HERE = Path(__file__).parents[2] / "data/tensors"
EXPECTED = json.loads((HERE / "smdebug_written.expected.json").read_text())
TRIAL = create_trial(HERE / "smdebug_written")


def _written(name: str, step: int, worker: str) -> np.ndarray:
    """What make_smdebug_trials.py passed to smdebug's writer for a t_<dtype> tensor."""
    base = np.arange(-2, 4).reshape(2, 3) * (step + 1) + int(worker[-1])
    return base.astype(name.removeprefix("t_"))


def test_smdebug_written_trial_layout_reads_as_smdebug_read_it() -> None:
    assert TRIAL.tensor_names() == EXPECTED["tensor_names"]
    assert TRIAL.steps() == EXPECTED["steps"] and TRIAL.workers() == EXPECTED["workers"]
    assert TRIAL.steps(modes.TRAIN) == EXPECTED["train_steps"] and TRIAL.steps(modes.EVAL) == EXPECTED["eval_steps"]
    assert {str(s): [TRIAL.mode(s).name, TRIAL.mode_step(s)] for s in TRIAL.steps()} == EXPECTED["modes"]
    assert {n: TRIAL.tensor_names(collection=n) for n in sorted(TRIAL.collections())} == EXPECTED["collections"]
    assert TRIAL.skipped == {}


@pytest.mark.parametrize("key", sorted(EXPECTED["values"]))
def test_smdebug_written_value_is_what_smdebug_read_or_what_was_written(key: str) -> None:
    name, step_text, worker = key.split("|")
    step = int(step_text)
    want = EXPECTED["values"][key]
    if want.get("error") == "TensorUnavailableForStep":  # a tensor saved only as reductions
        with pytest.raises(TensorUnavailableError, match="only its reductions were saved"):
            TRIAL.tensor(name).value(step, worker=worker)
        return
    got = TRIAL.tensor(name).value(step, worker=worker)
    if "error" in want:  # smdebug's reader cannot read this dtype (KeyError): ours reads what was written
        assert want["error"] == "KeyError"
        expected = _written(name, step, worker)
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
        return
    assert list(got.shape) == want["shape"]
    if got.dtype.kind == "U":
        assert got.tolist() == want["hex"]
        return
    assert got.tobytes().hex() == want["hex"]
    # smdebug reads DT_INT8 as uint8; ours as the int8 that was written.
    assert str(got.dtype) == ("int8" if name == "t_int8" else want["dtype"])


@pytest.mark.parametrize("key", sorted(EXPECTED["reductions"]))
def test_smdebug_written_reduction_value_matches_smdebug(key: str) -> None:
    name, step, worker, red, is_abs = key.split("|")
    got = TRIAL.tensor(name).reduction_value(int(step), red, worker=worker, abs=is_abs == "True")
    if red == "l2":
        # Computed from a 2-D value, smdebug's reader takes np.linalg.norm(value, ord=2): the matrix 2-norm (and
        # fails above 2-D). Ours is the vector norm of all elements, what smdebug's hooks save (torch.norm(p=2)).
        value = TRIAL.tensor(name).value(int(step), worker=worker)
        assert float(got) == pytest.approx(float(np.sqrt((value.astype(np.float64) ** 2).sum())), rel=1e-6)
        assert np.float32(np.linalg.norm(value, ord=2)).tobytes().hex() == EXPECTED["reductions"][key]
        return
    assert np.asarray(got).tobytes().hex() == EXPECTED["reductions"][key]


def test_smdebug_written_frame_holds_its_saved_reductions_and_scalars() -> None:
    df = TRIAL.frame(["fc1.weight", "loss"])
    assert len(df) == 6 * 2 * 4  # 3 reductions and the loss, per step and worker
    row = df[(df.step == 5) & (df.worker == "worker_1") & (df.reduction == "abs_max")].iloc[0]
    assert (row["mode"], row["mode_step"]) == ("EVAL", 1)
    assert row["value"] == pytest.approx(np.abs(_written("t_float32", 5, "worker_1") / 7).max())
