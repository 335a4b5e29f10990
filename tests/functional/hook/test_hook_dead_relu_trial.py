"""A hook that names DeadRelu's collection (``include_collections=[..., "relu_output"]``, as the rule's documentation
does) writes a trial DeadRelu judges: the hook, the trial writer and reader, and the rule together."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hook_support import train
from torch import nn

import smx_debug.hook as smd
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.rules.configured import configured_rule
from smx_debug.tensors import create_trial


@pytest.mark.parametrize(("bias", "fires"), [(-5.0, True), (0.5, False)])
def test_hook_relu_output_collection_judged_by_dead_relu(tmp_path: Path, bias: float, fires: bool) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    with torch.no_grad():
        model[0].bias.fill_(bias)  # -5: every ReLU output is 0 for these inputs (|w.x| < 5)
        model[0].weight.clamp_(-0.4, 0.4)
    hook = smd.Hook(out_dir=str(tmp_path / "trial"), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "relu_output"])
    try:
        hook.register_module(model)
        train(model, 3)
    finally:
        hook.close()
        smd.del_hook()
    trial = create_trial(str(tmp_path / "trial"))
    assert "1_relu_output_0" in trial.tensor_names(collection="relu_output")
    result = TensorEvaluator(trial, [configured_rule("DeadRelu")]).refresh()["DeadRelu"]
    assert result.datapoints > 0, result.message
    assert bool(result.rule_triggered) is fires, result
