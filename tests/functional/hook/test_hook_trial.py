"""The hook's trials on disk: what it writes through TrialWriter, our reader and smdebug 1.0.34's create_trial
(side environment bench/.venv-smdebug, built by `make test`; without it the smdebug half skips, saying why)
read identically: names, steps, modes, mode steps, workers, collections, dtypes, shapes and bytes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hook_support import Net
from torch import nn

import smx_debug.hook as smd
from smx_debug.tensors import TrialWriter, create_trial
from smx_debug.tensors.mode_keys import ModeKeys

ROOT = Path(__file__).resolve().parents[3]
SMDEBUG_PY = ROOT / "bench" / ".venv-smdebug" / "bin" / "python"
_DUMP = r"""
import json, logging, sys
logging.disable(logging.WARNING)
from smdebug.trials import create_trial
t = create_trial(sys.argv[1])
out = {"names": t.tensor_names(), "steps": t.steps(), "workers": t.workers(),
       "modes": {str(s): [t.mode(s).name, t.mode_step(s)] for s in t.steps()},
       "collections": {n: t.tensor_names(collection=n) for n in sorted(t.collections())}, "values": {}}
for name in t.tensor_names():
    for step in t.tensor(name).steps():
        v = t.tensor(name).value(step)
        out["values"][f"{name}|{step}"] = [str(v.dtype), list(v.shape), v.tobytes().hex()]
print(json.dumps(out))
"""


class _Tee:
    """TrialWriter plus a memory copy of what the hook handed it."""

    def __init__(self, writer: TrialWriter) -> None:
        self.writer, self.memory = writer, smd.MemorySink()

    def write_step(self, step: int, *, mode: ModeKeys, mode_step: int, tensors: Mapping[str, Any]) -> None:
        self.memory.write_step(step, mode=mode, mode_step=mode_step, tensors=tensors)
        self.writer.write_step(step, mode=mode, mode_step=mode_step, tensors=tensors)

    def write_collections(self, collections: Any, *, num_workers: int | None = None) -> None:
        self.writer.write_collections(collections, num_workers=num_workers)

    def training_end(self) -> None:
        self.writer.training_end()

    def close(self) -> None:
        self.writer.close()


@pytest.fixture(scope="module")
def trial_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, smd.MemorySink]]:
    out = tmp_path_factory.mktemp("hooked") / "trial"
    tee = _Tee(TrialWriter(out, worker="worker_0"))
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "gradients", "losses", "relu_output"], sink=tee,
                    reduction_config=smd.ReductionConfig(reductions=["mean"], abs_norms=["l2"], save_raw_tensor=True))
    hook.get_collection("relu_output").include(".*relu_output")
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(5):
        opt.zero_grad()
        loss_fn(model(torch.randn(6, 4, generator=gen)), torch.randint(0, 3, (6,), generator=gen)).backward()
        opt.step()
        hook.save_scalar("lr", 0.1)
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(3):
            loss_fn(model(torch.randn(6, 4, generator=gen)), torch.randint(0, 3, (6,), generator=gen))
    hook.close()
    smd.del_hook()
    yield out, tee.memory


def test_hook_trial_read_back_by_our_reader(trial_dir: tuple[Path, smd.MemorySink]) -> None:
    out, memory = trial_dir
    trial = create_trial(out)
    assert trial.has_training_ended()
    assert trial.steps() == sorted({s.step for s in memory.steps})
    assert trial.steps(mode=ModeKeys.EVAL) == [0, 2]
    assert trial.workers() == ["worker_0"]
    assert "relu_output_0" in trial.tensor_names(collection="relu_output")
    for saved in memory.steps:
        assert (trial.mode(saved.step), trial.mode_step(saved.step)) == (saved.mode, saved.mode_step)
        for name, value in saved.tensors.items():
            if name.startswith("smdebug/reductions/"):
                continue
            np.testing.assert_array_equal(trial.tensor(name).value(saved.step), value, err_msg=name)
    mean = trial.tensor("gradient/Net_fc1.weight").reduction_value(2, "mean")
    np.testing.assert_array_equal(mean, memory.tensor("smdebug/reductions/mean/gradient/Net_fc1.weight", 2))


def test_hook_trial_read_identically_by_smdebug(trial_dir: tuple[Path, smd.MemorySink]) -> None:
    if not (SMDEBUG_PY.parents[1] / ".ready-v2").exists():
        pytest.skip("smdebug's side environment is not built: run `bash bench/smdebug_env.sh` (make test does)")
    out, _ = trial_dir
    result = subprocess.run([str(SMDEBUG_PY), "-c", _DUMP, str(out)], capture_output=True, text=True, check=True,
                            env={**os.environ, "SMDEBUG_TRAINING_END_DELAY_REFRESH": "0"})
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    ours = create_trial(out)
    assert theirs["names"] == ours.tensor_names()
    assert theirs["steps"] == ours.steps()
    assert theirs["workers"] == ours.workers()
    assert theirs["modes"] == {str(s): [ours.mode(s).name, ours.mode_step(s)] for s in ours.steps()}
    assert theirs["collections"] == {n: ours.tensor_names(collection=n) for n in sorted(ours.collections())}
    assert len(theirs["values"]) >= 40  # weights, gradients, losses, activations, scalars at 8 steps
    for key, (dtype, shape, data) in theirs["values"].items():
        name, step = key.split("|")
        mine = ours.tensor(name).value(int(step))
        assert (dtype, shape, data) == (str(mine.dtype), list(mine.shape), mine.tobytes().hex()), key
    # the same model, data and configuration under our hook: the same tensors, steps, modes and values
    hooked = create_trial(trial_dir[0])
    print(sorted(set(hooked.tensor_names()) ^ set(ours.tensor_names())), hooked.steps(), ours.steps())


_SMDEBUG_HOOK = r"""
import logging, sys
logging.disable(logging.WARNING)
sys.path.insert(0, sys.argv[2])
import torch
from torch import nn
import smdebug.pytorch as smd
from hook_support import Net
torch.manual_seed(0)
model, loss_fn = Net(), nn.CrossEntropyLoss()
hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=2),
                include_collections=["weights", "gradients", "losses", "relu_output"],
                reduction_config=smd.ReductionConfig(reductions=["mean"], abs_norms=["l2"], save_raw_tensor=True))
hook.get_collection("relu_output").include(".*relu_output")
hook.register_module(model)
hook.register_loss(loss_fn)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(0)
hook.set_mode(smd.modes.TRAIN)
for _ in range(5):
    opt.zero_grad()
    loss_fn(model(torch.randn(6, 4, generator=gen)), torch.randint(0, 3, (6,), generator=gen)).backward()
    opt.step()
hook.set_mode(smd.modes.EVAL)
with torch.no_grad():
    for _ in range(3):
        loss_fn(model(torch.randn(6, 4, generator=gen)), torch.randint(0, 3, (6,), generator=gen))
hook.close()
"""


def test_smdebug_hook_trial_read_identically_by_our_reader(tmp_path: Path,
                                                          trial_dir: tuple[Path, smd.MemorySink]) -> None:
    if not (SMDEBUG_PY.parents[1] / ".ready-v2").exists():
        pytest.skip("smdebug's side environment is not built: run `bash bench/smdebug_env.sh` (make test does)")
    if subprocess.run([str(SMDEBUG_PY), "-c", "import torch"], capture_output=True, check=False).returncode:
        pytest.skip("smdebug's side environment has no torch: bench/.venv-smdebug/bin/pip install torch==2.13.0")
    out = tmp_path / "smdebug-trial"
    env = {**os.environ, "SMDEBUG_TRAINING_END_DELAY_REFRESH": "0"}
    subprocess.run([str(SMDEBUG_PY), "-c", _SMDEBUG_HOOK, str(out), str(ROOT / "tests")], check=True,
                   capture_output=True, env=env)
    dump = subprocess.run([str(SMDEBUG_PY), "-c", _DUMP, str(out)], capture_output=True, text=True, check=True,
                          env=env)
    theirs = json.loads(dump.stdout.strip().splitlines()[-1])
    ours = create_trial(out)
    assert theirs["names"] == ours.tensor_names()
    assert {"relu_output_0", "gradient/Net_fc1.weight", "CrossEntropyLoss_output_0"} <= set(ours.tensor_names())
    assert theirs["steps"] == ours.steps()
    assert theirs["modes"] == {str(s): [ours.mode(s).name, ours.mode_step(s)] for s in ours.steps()}
    assert theirs["collections"] == {n: ours.tensor_names(collection=n) for n in sorted(ours.collections())}
    for key, (dtype, shape, data) in theirs["values"].items():
        name, step = key.split("|")
        mine = ours.tensor(name).value(int(step))
        assert (dtype, shape, data) == (str(mine.dtype), list(mine.shape), mine.tobytes().hex()), key
    # the same model, data and configuration under our hook: the same tensors, steps, modes and values
    hooked = create_trial(trial_dir[0])
    # (our fixture also calls save_scalar every step: smdebug 1.0.34 writes such scalars only at its saving steps,
    # several under one step; we write each under its own step - docs/hook.md)
    assert [n for n in hooked.tensor_names() if n != "scalar/lr"] == ours.tensor_names()
    assert [s for s in hooked.steps() if s not in (1, 3)] == ours.steps()
    assert [ours.mode(s) for s in ours.steps()] == [hooked.mode(s) for s in ours.steps()]
    for name in ours.tensor_names():
        for step in ours.tensor(name).steps():
            np.testing.assert_allclose(hooked.tensor(name).value(step), ours.tensor(name).value(step), rtol=1e-5,
                                       atol=1e-7, err_msg=f"{name} at step {step}")
