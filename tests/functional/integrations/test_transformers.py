"""The Hugging Face Trainer with ``callbacks=[SmxDebugCallback(...)]``, run in bench/.venv-transformers: the
docs/frameworks.md snippet as written (healthy) and with a learning rate that blows the weights up, then the trial
judged by the project's CLI; modes, the stop seam and the no-settings error by small scripts."""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_side_env import JUDGED, docs_snippet, flagged, run, run_snippet_with_lr, side_python_fixture

from smx_debug.tensors.trial import create_trial

pytestmark = pytest.mark.slow
HEALTHY_LR = "lr = 3e-3\n"
python = side_python_fixture("transformers")


def test_transformers_docs_snippet_healthy_writes_a_trial_not_flagged(python: Path, tmp_path: Path) -> None:
    done = run(python, docs_snippet("transformers"), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    trial = create_trial(str(tmp_path / "trial"))
    assert set(trial.tensor_names(collection="losses")) == {"loss_output_0", "scalar/loss", "scalar/eval_loss"}
    loss = trial.tensor("loss_output_0")
    assert loss.steps(mode="TRAIN") == [0, 4, 8, 12, 16, 20] and loss.steps(mode="EVAL")
    assert trial.tensor("scalar/eval_loss").steps(mode="EVAL")
    assert "gradient/BertForSequenceClassification_classifier.weight" in trial.tensor_names()
    assert flagged(tmp_path / "trial", *JUDGED) == dict.fromkeys(JUDGED, False)


def test_transformers_docs_snippet_exploding_lr_is_detected(python: Path, tmp_path: Path) -> None:
    run_snippet_with_lr(python, "transformers", HEALTHY_LR, "lr = 1e4\n", tmp_path)
    assert flagged(tmp_path / "trial", "WeightUpdateRatio")["WeightUpdateRatio"]


SEAM = '''
import json
{snippet}
'''


def _snippet_with(extra: str, callbacks: str) -> str:
    code = docs_snippet("transformers").replace("trainer.train()\n", "")
    code = code.replace('callbacks=[SmxDebugCallback(out_dir="trial", save_interval=4)]', callbacks)
    return code + extra


def test_transformers_callback_stop_request_stops_training_the_trainer_way(python: Path, tmp_path: Path) -> None:
    # a fake guard: asks the hook to stop after the 3rd optimizer step
    extra = '''
from transformers import TrainerCallback
class FakeGuard(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            smx.hook.request_stop("fake guard: stop")
trainer.add_callback(FakeGuard())
trainer.pop_callback(smx)
trainer.add_callback(smx)  # after the guard: it reads the request at the same step's end
trainer.train()
print("STOPPED_AT", trainer.state.global_step, smx.hook.stop_reason)
'''
    code = _snippet_with(extra, 'callbacks=[smx := SmxDebugCallback(out_dir="trial", save_interval=1)]')
    done = run(python, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "STOPPED_AT 3 fake guard: stop" in done.stdout
    assert create_trial(str(tmp_path / "trial")).tensor("loss_output_0").steps(mode="TRAIN") == [0, 1, 2]


def test_transformers_callback_predict_steps_are_predict_mode(python: Path, tmp_path: Path) -> None:
    extra = '''
trainer.evaluate()
trainer.predict(data[64:80])
smx.driver.close()
'''
    code = _snippet_with(extra, 'callbacks=[smx := SmxDebugCallback(out_dir="trial", save_interval=1)]')
    done = run(python, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    loss = create_trial(str(tmp_path / "trial")).tensor("loss_output_0")
    assert len(loss.steps(mode="EVAL")) == 4 and len(loss.steps(mode="PREDICT")) == 2  # batches of 8
    assert loss.steps(mode="TRAIN") == []


def test_transformers_callback_without_settings_outside_sagemaker_names_what_to_pass(python: Path,
                                                                                      tmp_path: Path) -> None:
    code = "from smx_debug.integrations.transformers import SmxDebugCallback\nSmxDebugCallback()\n"
    done = run(python, code, tmp_path)
    assert done.returncode == 1
    assert "ConfigError: SmxDebugCallback() without arguments takes the hook settings of a SageMaker job" in done.stderr
