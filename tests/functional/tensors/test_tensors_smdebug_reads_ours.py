"""Compatibility, us -> smdebug: what TrialWriter writes, smdebug 1.0.34's own create_trial reads identically
(names, steps, modes, mode steps, workers, collections, dtypes, shapes, bytes, saved reductions). smdebug runs in
the side environment bench/.venv-smdebug, which `make test` builds with bench/smdebug_env.sh; without it this
test skips and says so."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from smx_debug.tensors import (
    Collection,
    RawTensor,
    ReductionConfig,
    TrialWriter,
    create_trial,
    reduction_tensor_name,
)

ROOT = Path(__file__).resolve().parents[3]
SMDEBUG_PY = ROOT / "bench" / ".venv-smdebug" / "bin" / "python"
# The dtypes smdebug's reader can read (it reads int8 as uint8); the others it writes but cannot read back.
READABLE = ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool", "complex128")
UNREADABLE = ("int16", "uint16", "uint32", "uint64", "complex64")

_DUMP = r"""
import json, logging, os, sys
logging.disable(logging.WARNING)
from smdebug.trials import create_trial
from smdebug.core.modes import ModeKeys
t = create_trial(sys.argv[1])
out = {"names": t.tensor_names(), "steps": t.steps(), "workers": t.workers(),
       "train": t.steps(mode=ModeKeys.TRAIN), "eval": t.steps(mode=ModeKeys.EVAL),
       "modes": {str(s): [t.mode(s).name, t.mode_step(s)] for s in t.steps()},
       "collections": {n: t.tensor_names(collection=n) for n in sorted(t.collections())}, "values": {}, "red": {}}
for name in t.tensor_names():
    tensor = t.tensor(name)
    for step in tensor.steps():
        for worker in t.workers():
            key = f"{name}|{step}|{worker}"
            try:
                v = tensor.value(step, worker=worker)
                out["values"][key] = [str(v.dtype), list(v.shape), v.tolist() if v.dtype.kind == "U" else v.tobytes().hex()]
            except Exception as exc:
                out["values"][key] = [type(exc).__name__]
            for (red, is_abs) in tensor.reduction_values(step, worker=worker):
                out["red"][f"{key}|{red}|{is_abs}"] = tensor.reduction_value(step, red, worker=worker, abs=is_abs).tobytes().hex()
print(json.dumps(out))
"""


def _values(step: int, worker: int) -> dict[str, object]:
    base = np.arange(-2, 4).reshape(2, 3) * (step + 1) + worker
    out: dict[str, object] = {f"t_{d}": base.astype(d) for d in (*READABLE, *UNREADABLE)}
    out["loss"] = 1.0 / (step + 1)  # a Python float: [x] float64, as smdebug's hook saves scalars
    out["labels"] = np.array(["cat", f"dog{step}"])
    out["bf16"] = RawTensor("bfloat16", np.array([0x3F80, 0xC040 + step], np.uint16))
    out[reduction_tensor_name("fc.weight", "l2")] = np.float32(step)
    out[reduction_tensor_name("fc.weight", "mean", abs=True)] = np.float64(step / 2)
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ours")
    for w, worker in enumerate(("worker_0", "worker_1")):
        with TrialWriter(root, worker=worker) as writer:
            writer.write_collections(
                [Collection(name="weights", include_regex=("weight",),
                            reduction_config=ReductionConfig(reductions=("l2_norm", "abs_mean"))),
                 Collection(name="losses", tensor_names=("loss",))], num_workers=2)
            for step in range(5):
                mode, mode_step = ("train", step) if step < 3 else ("eval", step - 3)
                writer.write_step(step, mode=mode, mode_step=mode_step, tensors=_values(step, w),
                                  wall_time=1.7e9 + step)
            writer.training_end()
    return root


@pytest.fixture(scope="module")
def smdebug_view(written: Path) -> dict[str, object]:
    if not (SMDEBUG_PY.parents[1] / ".ready-v2").exists():  # the marker bench/smdebug_env.sh leaves when done
        pytest.skip("smdebug's side environment is not built: run `bash bench/smdebug_env.sh` (make test does)")
    out = subprocess.run([str(SMDEBUG_PY), "-c", _DUMP, str(written)], capture_output=True, text=True, check=True,
                         env={**os.environ, "SMDEBUG_TRAINING_END_DELAY_REFRESH": "0", "SMDEBUG_LOG_LEVEL": "error"})
    view: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return view


def test_smdebug_reads_our_trial_layout_as_we_do(written: Path, smdebug_view: dict[str, object]) -> None:
    ours = create_trial(written)
    assert smdebug_view["names"] == ours.tensor_names()
    assert smdebug_view["steps"] == ours.steps() == [0, 1, 2, 3, 4]
    assert smdebug_view["workers"] == ours.workers() == ["worker_0", "worker_1"]
    assert smdebug_view["train"] == ours.steps("train") and smdebug_view["eval"] == ours.steps("eval") == [0, 1]
    assert smdebug_view["modes"] == {str(s): [ours.mode(s).name, ours.mode_step(s)] for s in ours.steps()}
    assert smdebug_view["collections"] == {n: ours.tensor_names(collection=n) for n in sorted(ours.collections())}


def test_smdebug_reads_our_values_byte_for_byte(written: Path, smdebug_view: dict[str, object]) -> None:
    ours = create_trial(written)
    values = smdebug_view["values"]
    assert isinstance(values, dict)
    checked = 0
    for key, theirs in values.items():
        name, step_text, worker = key.split("|")
        step = int(step_text)
        if name == "fc.weight":  # saved only as reductions: smdebug has no value either
            assert theirs == ["TensorUnavailableForStep"]
            continue
        mine = ours.tensor(name).value(step, worker=worker)
        if name.removeprefix("t_") in UNREADABLE:
            assert theirs == ["KeyError"], key  # smdebug 1.0.34 writes these dtypes but cannot read them
            continue
        dtype, shape, data = theirs
        assert shape == list(mine.shape), key
        assert data == (mine.tolist() if mine.dtype.kind == "U" else mine.tobytes().hex()), key
        assert dtype == ("uint8" if name == "t_int8" else str(mine.dtype)), key  # smdebug reads int8 as uint8
        checked += 1
    assert checked == 2 * 5 * (len(READABLE) + 3)
    widened = (np.array([0x3F80, 0xC042], np.uint32) << 16).view(np.float32)  # bfloat16 bits -> float32
    assert widened.tolist() == [1.0, -3.03125]
    assert values["bf16|2|worker_0"] == ["float32", [2], widened.tobytes().hex()]


def test_smdebug_reads_our_saved_reductions(written: Path, smdebug_view: dict[str, object]) -> None:
    ours = create_trial(written)
    red = smdebug_view["red"]
    assert isinstance(red, dict) and len(red) == 2 * 5 * 2
    for key, hexed in red.items():
        name, step, worker, reduction, is_abs = key.split("|")
        mine = ours.tensor(name).reduction_value(int(step), reduction, worker=worker, abs=is_abs == "True")
        assert mine.tobytes().hex() == hexed, key
