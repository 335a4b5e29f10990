"""The hook under torch.compile and AMP: no graph breaks, one extra graph, gradients after unscaling."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hook_support import Net, train
from torch import nn
from torch._dynamo.utils import counters

import smx_debug.hook as smd

MakeHook = Callable[..., tuple[smd.Hook, smd.MemorySink]]
ACTIVATIONS = ("relu_output", ".*relu_output"), ("tanh_input", ".*tanh_input")


def _hook_everything(make_hook: MakeHook) -> tuple[smd.Hook, smd.MemorySink]:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=3),
                           include_collections=["weights", "gradients", "losses"])
    for name, regex in ACTIVATIONS:
        hook.get_collection(name).include(regex)
        hook.include_collections.append(name)
    return hook, sink


@pytest.mark.parametrize("register", ["compiled", "model"])
def test_hook_compiled_model_no_graph_break_same_values(make_hook: MakeHook, register: str) -> None:
    torch._dynamo.reset()
    counters.clear()
    model = Net()
    eager_model = copy.deepcopy(model)
    hook, sink = _hook_everything(make_hook)
    loss_fn = nn.CrossEntropyLoss()
    compiled = torch.compile(model, backend="aot_eager")
    hook.register_module(compiled if register == "compiled" else model)
    hook.register_loss(loss_fn)
    train(compiled, 8, loss_fn=loss_fn)
    hook.close()

    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] <= 2  # the steps that save, and the ones that do not
    eager_hook, eager_sink = _hook_everything(make_hook)
    eager_loss = nn.CrossEntropyLoss()
    eager_hook.register_module(eager_model)
    eager_hook.register_loss(eager_loss)
    train(eager_model, 8, loss_fn=eager_loss)
    eager_hook.close()
    assert [s.step for s in sink.steps] == [s.step for s in eager_sink.steps] == [0, 3, 6]
    for saved, expected in zip(sink.steps, eager_sink.steps, strict=True):
        assert set(saved.tensors) == set(expected.tensors)
        assert {"relu_output_0", "act_tanh_input_0", "gradient/Net_fc1.weight"} <= set(saved.tensors)
        for name, value in expected.tensors.items():
            np.testing.assert_allclose(saved.tensors[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_hook_sequential_compiled_after_registering_breaks_only_at_the_head(make_hook: MakeHook) -> None:
    torch._dynamo.reset()
    counters.clear()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    hook, sink = _hook_everything(make_hook)
    hook.register_module(model)
    train(torch.compile(model, backend="aot_eager"), 4)
    hook.close()
    assert [s.step for s in sink.steps] == [0, 3]
    assert "1_relu_output_0" in sink.names(3)
    assert sum(counters["graph_break"].values()) == 1  # before the forward: the step starts eagerly


def test_hook_gradients_read_after_amp_unscaling(make_hook: MakeHook) -> None:
    model = Net()
    reference = copy.deepcopy(model)
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["gradients"])
    hook.register_module(model)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.CrossEntropyLoss()(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    hook.close()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        nn.CrossEntropyLoss()(reference(x), y).backward()
    expected = reference.fc1.weight.grad
    assert expected is not None
    saved = sink.tensor("gradient/Net_fc1.weight", 0)
    np.testing.assert_allclose(saved, expected.numpy(), rtol=1e-6)  # unscaled, not 1024 times larger


def test_hook_gradients_after_backward_with_gradient_clipping(make_hook: MakeHook) -> None:
    model = Net()
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["gradients"])
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.CrossEntropyLoss()(model(torch.randn(6, 4) * 100), torch.randint(0, 3, (6,))).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
    clipped = model.fc1.weight.grad.detach().clone()  # type: ignore[union-attr]
    opt.step()
    hook.close()
    np.testing.assert_array_equal(sink.tensor("gradient/Net_fc1.weight", 0), clipped.numpy())
