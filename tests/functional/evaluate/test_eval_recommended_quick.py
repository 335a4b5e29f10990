"""SmxWeightGrowth at its defaults on two tiny real PyTorch runs recorded by smx_debug.hook: a learning rate x100 at
step 150 that blows the weights up (the run may end at a huge finite loss or in NaN: both are accepted, which one
depends on rounding, not on the machine's load), and the same run without the fault."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from hook_support import mlp, scale_lr, sgd_step, teacher_task  # noqa: E402

ONSET, STEPS, SAVE_INTERVAL = 150, 300, 50


def _run(out_dir: Path, *, lr_factor: float) -> list[float]:
    import smx_debug.hook as smd
    from smx_debug.hook.save_config import SaveConfig

    g, _, x, y = teacher_task(4096)
    model, loss_fn = mlp(), torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = smd.Hook(out_dir=str(out_dir), save_config=SaveConfig(save_interval=SAVE_INTERVAL),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for step in range(STEPS):
        if step == ONSET:
            scale_lr(opt, lr_factor)
        losses.append(float(sgd_step(model, loss_fn, opt, x, y, g).detach()))
    hook.close()
    return losses


def _judge(out_dir: Path) -> object:
    from smx_debug.evaluate.tensor_eval import evaluate_trial

    return evaluate_trial(str(out_dir), ["SmxWeightGrowth"])["SmxWeightGrowth"]


def test_weight_growth_learning_rate_x100_fires_at_the_first_save_after_the_onset(tmp_path: Path) -> None:
    losses = _run(tmp_path / "exploding", lr_factor=100.0)
    after = losses[ONSET:]
    # it did blow up: NaN, or a loss 10x the worst of the last steps before the onset (measured: 16,000 from 1.6)
    assert any(math.isnan(v) for v in after) or max(after) > 10 * max(losses[ONSET - 10:ONSET]), after[:20]
    result = _judge(tmp_path / "exploding")
    assert result.triggered, result.message
    assert ONSET < result.trigger_step <= ONSET + SAVE_INTERVAL, result.message


def test_weight_growth_same_run_without_the_fault_stays_quiet(tmp_path: Path) -> None:
    _run(tmp_path / "healthy", lr_factor=1.0)
    result = _judge(tmp_path / "healthy")
    assert result.datapoints > 0 and not result.triggered, result.message
