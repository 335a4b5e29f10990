"""The path a reviewer takes: a tiny PyTorch run written by ``smx_debug.hook`` from a ``profile: recommended`` plan
(``Hook.from_plan``), judged by ``smx-debug rules evaluate TRIAL --plan plan.yaml --json -``. A learning rate x100
at a known step (the run may end at a huge finite loss or in NaN: either is accepted) is flagged; the same run without
the fault is not. Both runs have a validation pass every 100 steps: the hook saves the interval means of the losses
by itself, so the loss rules have data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hook_support import mlp, scale_lr, sgd_step, teacher_task  # noqa: E402

ONSET, STEPS, SAVE_INTERVAL, EVAL_EVERY, VAL_BATCHES = 150, 300, 50, 100, 8
PLAN = f"""\
region: us-west-2
s3_output_path: s3://bucket/debug
profile: recommended
hook:
  save_interval: {SAVE_INTERVAL}
"""


def _run(plan_path: Path, out_dir: Path, *, lr_factor: float) -> None:
    import smx_debug.hook as smd
    from smx_debug.config import DebugPlan

    g, teacher, x, y = teacher_task(4096)
    x_val = torch.randn(VAL_BATCHES * 64, 16, generator=g)
    y_val = (x_val @ teacher).argmax(1)
    model, loss_fn = mlp(), torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hook = smd.Hook.from_plan(DebugPlan.from_file(plan_path), out_dir=out_dir)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    for step in range(STEPS):
        if step == ONSET:
            scale_lr(opt, lr_factor)
        sgd_step(model, loss_fn, opt, x, y, g)
        if step % EVAL_EVERY == EVAL_EVERY - 1:  # a validation pass: the hook saves its mean loss
            hook.set_mode(smd.modes.EVAL)
            with torch.no_grad():
                for i in range(0, VAL_BATCHES * 64, 64):
                    loss_fn(model(x_val[i:i + 64]), y_val[i:i + 64])
            hook.set_mode(smd.modes.TRAIN)
    hook.close()


def _global(train_step: int) -> int:
    """The global step of a training step (each validation pass before it adds its steps)."""
    return train_step + VAL_BATCHES * (train_step // EVAL_EVERY)


def _evaluate(tmp_path: Path, *, lr_factor: float, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from smx_debug.cli import main

    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(PLAN, encoding="utf-8")
    trial = tmp_path / "trial"
    _run(plan_path, trial, lr_factor=lr_factor)
    capsys.readouterr()
    main(["rules", "evaluate", str(trial), "--plan", str(plan_path), "--json", "-"])
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_profile_recommended_learning_rate_x100_is_flagged_by_rules_evaluate(tmp_path: Path, capsys) -> None:
    from smx_debug.rules.registry import profile_rules

    out = _evaluate(tmp_path, lr_factor=100.0, capsys=capsys)
    assert set(out) == set(profile_rules("recommended"))
    growth = out["SmxWeightGrowth"]
    assert growth["RuleTriggered"] > 0 and growth["status"] == "IssuesFound", growth
    first = re.search(r"at step (\d+)", growth["reason"])  # a global step: the validation passes' steps count
    assert first is not None and _global(ONSET) < int(first.group(1)) <= _global(ONSET + SAVE_INTERVAL), growth


def test_profile_recommended_same_run_without_the_fault_is_not_flagged(tmp_path: Path, capsys) -> None:
    out = _evaluate(tmp_path, lr_factor=1.0, capsys=capsys)
    flagged = {name: r["reason"] for name, r in out.items() if r["RuleTriggered"]}
    assert flagged == {}
    assert out["SmxWeightGrowth"]["Datapoints"] > 0 and out["SmxStalledWeights"]["Datapoints"] > 0
    # the hook saved the interval means of the losses by itself (the plan's profile asks for them)
    assert out["SmxOverfitMeans"]["Datapoints"] > 0, out["SmxOverfitMeans"]["reason"]
    from smx_debug.tensors import create_trial

    assert "scalar/train_loss_mean" in create_trial(str(tmp_path / "trial")).tensor_names()
