"""Write tests/data/tensors/smdebug_written/ with smdebug 1.0.34's own writer, and expected.json with what
smdebug's own reader returns for it. Run in the side environment (never a project dependency):

    bash bench/smdebug_env.sh && bench/.venv-smdebug/bin/python tests/data/tensors/make_smdebug_trials.py

The trial: 2 workers, global steps 0-5 (TRAIN mode steps 0-3, then EVAL mode steps 0-1), one tensor per dtype
smdebug writes, reductions named by smdebug's get_reduction_tensor_name, each worker's collections file
(CollectionManager.export, num_workers=2) and the training_job_end.ts marker. expected.json records, per tensor,
step and worker, the dtype, shape and bytes (hex) smdebug's reader returns, or the exception it raises (it cannot
read int16, uint16/32/64 or complex64, and reads int8 as uint8).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"

import numpy as np
from smdebug.core.access_layer.utils import training_has_ended
from smdebug.core.collection import Collection
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.modes import ModeKeys
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.reductions import get_numpy_reduction, get_reduction_tensor_name
from smdebug.core.writer import FileWriter
from smdebug.trials import create_trial

HERE = Path(__file__).resolve().parent
OUT = HERE / "smdebug_written"
WORKERS = ("worker_0", "worker_1")
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "bool", "complex64", "complex128")


def values(step: int, worker: int) -> dict[str, np.ndarray]:
    base = np.arange(-2, 4).reshape(2, 3) * (step + 1) + worker
    out = {f"t_{d}": base.astype(d) for d in DTYPES}
    out["fc1.weight:0"] = (base / 7).astype(np.float32)
    out["loss"] = np.array([1.0 / (step + 1)])
    out["labels"] = np.array(["cat", f"dog{step}"])
    return out


def main() -> int:
    shutil.rmtree(OUT, ignore_errors=True)
    for w, worker in enumerate(WORKERS):
        for step in range(6):
            mode, mode_step = (ModeKeys.TRAIN, step) if step < 4 else (ModeKeys.EVAL, step - 4)
            writer = FileWriter(trial_dir=str(OUT), step=step, worker=worker)
            for name, value in values(step, w).items():
                writer.write_tensor(value, name, mode=mode, mode_step=mode_step, timestamp=1.6e9 + step)
            weight = values(step, w)["fc1.weight:0"]
            for red, is_abs in (("mean", False), ("max", True), ("l2", False)):
                writer.write_tensor(get_numpy_reduction(red, weight, abs=is_abs),
                                    get_reduction_tensor_name("fc1.weight:0", red, is_abs), mode=mode,
                                    mode_step=mode_step, timestamp=1.6e9 + step)
            writer.close()
        cm = CollectionManager()
        cm.add(Collection("weights", include_regex=["weight"],
                          reduction_config=ReductionConfig(reductions=["mean"], abs_reductions=["max"],
                                                           norms=["l2"], save_raw_tensor=True)))
        cm.add(Collection("losses", include_regex=["loss"]))
        cm.set_num_workers(len(WORKERS))
        cm.export(str(OUT), f"{worker}_collections.json")
    training_has_ended(str(OUT))

    trial = create_trial(str(OUT))
    expected: dict[str, object] = {
        "tensor_names": trial.tensor_names(), "steps": trial.steps(), "workers": trial.workers(),
        "train_steps": trial.steps(mode=ModeKeys.TRAIN), "eval_steps": trial.steps(mode=ModeKeys.EVAL),
        "modes": {str(s): [trial.mode(s).name, trial.mode_step(s)] for s in trial.steps()},
        "collections": {n: sorted(trial.tensor_names(collection=n)) for n in sorted(trial.collections())},
        "values": {}, "reductions": {},
    }
    for name in trial.tensor_names():
        tensor = trial.tensor(name)
        for step in tensor.steps():
            for worker in WORKERS:
                key = f"{name}|{step}|{worker}"
                try:
                    v = tensor.value(step, worker=worker)
                    expected["values"][key] = {"dtype": str(v.dtype), "shape": list(v.shape),  # type: ignore[index]
                                               "hex": v.tobytes().hex() if v.dtype.kind != "U" else v.tolist()}
                except Exception as exc:  # what smdebug cannot read is recorded, not fatal
                    expected["values"][key] = {"error": type(exc).__name__}  # type: ignore[index]
                for red, is_abs in (("mean", False), ("max", True), ("l2", False)):
                    if name == "fc1.weight:0":
                        r = tensor.reduction_value(step, red, abs=is_abs, worker=worker)
                        expected["reductions"][f"{key}|{red}|{is_abs}"] = np.asarray(r).tobytes().hex()  # type: ignore[index]
    (HERE / "smdebug_written.expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
