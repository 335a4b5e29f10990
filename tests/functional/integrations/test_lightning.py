"""Lightning with ``callbacks=[SmxDebugCallback(...)]``, run in bench/.venv-lightning: docs/frameworks.md's
snippet (``training_step`` calls ``self.encoder(x)``, never ``self(x)``) as written (healthy) and with a learning
rate that makes the weights NaN, the trial judged by the project's CLI; the stop seam by a small script."""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_side_env import JUDGED, docs_snippet, flagged, run, run_snippet_with_lr, side_python_fixture

from smx_debug.tensors.trial import create_trial

pytestmark = pytest.mark.slow
HEALTHY_LR = "lr = 0.1\n"
python = side_python_fixture("lightning")


def test_lightning_docs_snippet_encoder_style_writes_a_trial_not_flagged(python: Path, tmp_path: Path) -> None:
    code = docs_snippet("lightning")
    assert "self.decoder(self.encoder(x))" in code and "self(x)" not in code
    done = run(python, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    trial = create_trial(str(tmp_path / "trial"))
    assert {"loss_output_0", "scalar/val_loss", "scalar/train_loss_epoch"} <= set(
        trial.tensor_names(collection="losses"))
    loss = trial.tensor("loss_output_0")
    assert loss.steps(mode="TRAIN")[:3] == [0, 4, 8] and loss.steps(mode="EVAL")  # 16 batches, then 4 validation
    assert "gradient/LitAutoEncoder_encoder.0.weight" in trial.tensor_names()
    assert flagged(tmp_path / "trial", *JUDGED) == dict.fromkeys(JUDGED, False)


def test_lightning_docs_snippet_exploding_lr_is_detected(python: Path, tmp_path: Path) -> None:
    run_snippet_with_lr(python, "lightning", HEALTHY_LR, "lr = 100\n", tmp_path)
    assert flagged(tmp_path / "trial", "ExplodingTensor")["ExplodingTensor"]


def test_lightning_callback_stop_request_sets_should_stop(python: Path, tmp_path: Path) -> None:
    code = docs_snippet("lightning").replace("trainer.fit(LitAutoEncoder(), train, valid)\n", "")
    code = code.replace('callbacks=[SmxDebugCallback(out_dir="trial", save_interval=4)]',
                        'callbacks=[FakeGuard(), smx := SmxDebugCallback(out_dir="trial", save_interval=1)]')
    fake = '''
class FakeGuard(L.Callback):  # asks the hook to stop in the 3rd training batch
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 3:
            smx.hook.request_stop("fake guard: stop")
'''
    code = code.replace("L.seed_everything(0)\n", fake + "\nL.seed_everything(0)\n")
    code += "trainer.fit(LitAutoEncoder(), train, valid)\nprint('STOPPED_AT', trainer.global_step)\n"
    done = run(python, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "STOPPED_AT 3" in done.stdout
    assert create_trial(str(tmp_path / "trial")).tensor("loss_output_0").steps(mode="TRAIN") == [0, 1, 2]
