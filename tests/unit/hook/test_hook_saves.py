"""What the PyTorch hook saves, when, and under which names (smdebug 1.0.34's PyTorch hook is the reference)."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hook_support import Net, train
from torch import nn

import smx_debug.hook as smd
from smx_debug.config import DebugPlan
from smx_debug.errors import ConfigError

MakeHook = Callable[..., tuple[smd.Hook, smd.MemorySink]]
WEIGHTS = ["Net_fc1.weight", "Net_fc2.weight", "Net_fc3.weight"]


def test_hook_default_collections_saved_at_interval_with_smdebug_names(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=3),
                           include_collections=["weights", "biases", "gradients", "losses"])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(model, 7, loss_fn=loss_fn)
    hook.close()
    assert [(s.step, s.mode, s.mode_step) for s in sink.steps] == [
        (0, smd.modes.GLOBAL, 0), (3, smd.modes.GLOBAL, 3), (6, smd.modes.GLOBAL, 6)]
    assert sink.names(3) == {
        *WEIGHTS, "Net_fc1.bias", "Net_fc2.bias", "Net_fc3.bias", "CrossEntropyLoss_output_0",
        *(f"gradient/Net_{p}" for p in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                       "fc3.bias")),
    }
    assert sink.collections["weights"].tensor_names == tuple(sorted(WEIGHTS))
    assert sink.ended


def test_hook_values_are_the_step_weights_gradient_and_loss(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=2),
                           include_collections=["weights", "gradients", "losses"])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    reference = copy.deepcopy(model)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = train(model, 3, loss_fn=loss_fn)
    hook.close()
    # the reference, step by step: weights before the update, the gradient the optimizer used
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(6, 4, generator=gen), torch.randint(0, 3, (6,), generator=gen)
        weight = reference.fc1.weight.detach().clone()
        opt.zero_grad()
        nn.CrossEntropyLoss()(reference(x), y).backward()
        if step in (0, 2):
            np.testing.assert_array_equal(sink.tensor("Net_fc1.weight", step), weight.numpy())
            np.testing.assert_array_equal(sink.tensor("gradient/Net_fc1.weight", step),
                                          reference.fc1.weight.grad.numpy())  # type: ignore[union-attr]
            np.testing.assert_array_equal(sink.tensor("CrossEntropyLoss_output_0", step),
                                          losses[step].numpy())
        opt.step()


def test_hook_activations_named_for_rule_default_regexes(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=[])
    for name, regex in (("relu_output", ".*relu_output"), ("relu_input", ".*relu_input"),
                        ("tanh_input", ".*tanh_input|.*sigmoid_input")):
        hook.get_collection(name).include(regex)
        hook.include_collections.append(name)
    seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Sigmoid(), nn.Linear(8, 3))
    hook.register_module(seq)
    model = Net()
    hook2_names = {smd.hook.module_tensor_base(n, m) for n, m in model.named_modules() if n}  # type: ignore[attr-defined]
    train(seq, 1)
    hook.close()
    assert {"1_relu_output_0", "1_relu_input_0", "3_sigmoid_input_0"} <= sink.names(0)
    assert {"relu", "act_tanh", "fc1"} <= hook2_names  # a module already named relu keeps smdebug's name


def test_hook_eval_mode_counts_its_own_steps_and_skips_gradients(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(mode_save_configs={
        smd.modes.TRAIN: smd.SaveConfigMode(save_interval=2), smd.modes.EVAL: smd.SaveConfigMode(save_interval=1)}),
        include_collections=["weights", "gradients", "losses"])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    train(model, 3, loss_fn=loss_fn)
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(2):
            loss_fn(model(torch.randn(6, 4)), torch.randint(0, 3, (6,)))
    hook.close()
    assert [(s.step, s.mode.name, s.mode_step) for s in sink.steps] == [
        (0, "TRAIN", 0), (2, "TRAIN", 2), (3, "EVAL", 0), (4, "EVAL", 1)]
    assert not any(n.startswith("gradient/") for n in sink.names(3))
    assert "CrossEntropyLoss_output_0" in sink.names(4)


def test_hook_reductions_computed_as_smdebug_torch(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["weights"],
                           reduction_config=smd.ReductionConfig(
                               reductions=["min", "max", "mean", "std", "variance", "sum", "prod"],
                               norms=["l1", "l2"], abs_reductions=["mean"], abs_norms=["l2"]))
    model = Net()
    weight = model.fc1.weight.detach().clone()
    hook.register_module(model)
    train(model, 1)
    hook.close()
    saved = sink.steps[0].tensors
    assert "Net_fc1.weight" not in saved  # reductions instead of the raw tensor
    expected = {"min": weight.min(), "max": weight.max(), "mean": weight.mean(), "std": weight.std(),
                "variance": weight.var(), "sum": weight.sum(), "prod": weight.prod(),
                "l1": torch.norm(weight, p=1), "l2": torch.norm(weight, p=2)}
    for name, value in expected.items():
        np.testing.assert_allclose(saved[f"smdebug/reductions/{name}/Net_fc1.weight"], value.numpy(), rtol=1e-6)
    np.testing.assert_allclose(saved["smdebug/reductions/abs_mean/Net_fc1.weight"], weight.abs().mean().numpy())
    np.testing.assert_allclose(saved["smdebug/reductions/abs_l2/Net_fc1.weight"], torch.norm(weight).numpy())


def test_hook_losses_never_reduced(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["losses"],
                           reduction_config=smd.ReductionConfig(reductions=["mean"]))
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(model, 1, loss_fn=loss_fn)
    hook.close()
    assert sink.names(0) == {"CrossEntropyLoss_output_0"}


def test_hook_save_scalar_every_call_and_save_tensor_on_saved_steps(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=2), include_collections=["losses"])
    model = Net()
    hook.register_module(model)
    gen = torch.Generator().manual_seed(0)
    for step in range(3):
        model(torch.randn(2, 4, generator=gen))
        hook.save_scalar("lr", 0.5 * step)
        hook.save_tensor("mask", torch.full((2,), step), "masks")
    hook.close()
    assert [s.step for s in sink.steps] == [0, 1, 2]
    assert sink.tensor("scalar/lr", 1).tolist() == [0.5]
    assert sink.tensor("mask", 2).tolist() == [2, 2]
    assert "mask" not in sink.names(1)
    assert sink.collections["masks"].tensor_names == ("mask",)


@pytest.mark.parametrize(("dtype", "saved"), [(torch.bfloat16, np.float32), (torch.float16, np.float16)])
def test_hook_half_precision_saved_readably(make_hook: MakeHook, dtype: torch.dtype, saved: type) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["weights"],
                           reduction_config=smd.ReductionConfig(reductions=["mean"], save_raw_tensor=True))
    model = Net().to(dtype)
    weight = model.fc1.weight.detach().clone()
    hook.register_module(model)
    with torch.no_grad():
        model(torch.randn(2, 4, dtype=dtype))
    hook.close()
    value = sink.tensor("Net_fc1.weight", 0)
    assert value.dtype == saved
    np.testing.assert_array_equal(value, weight.float().numpy().astype(saved))
    mean = sink.tensor("smdebug/reductions/mean/Net_fc1.weight", 0)
    assert mean.dtype == np.float32
    np.testing.assert_allclose(mean, weight.float().mean().numpy(), rtol=1e-6)


def test_hook_never_changes_the_model_numerics(make_hook: MakeHook) -> None:
    hooked, plain = Net(), Net()
    plain.load_state_dict(hooked.state_dict())
    hook, _ = make_hook(save_config=smd.SaveConfig(save_interval=1), save_all=True)
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(hooked)
    hook.register_loss(loss_fn)
    with_hook = train(hooked, 4, loss_fn=loss_fn)
    without = train(plain, 4)
    assert all(torch.equal(a, b) for a, b in zip(with_hook, without, strict=True))
    for (name, a), (_, b) in zip(hooked.state_dict().items(), plain.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_hook_step_with_nothing_to_save_stashes_nothing(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=100), save_all=True)
    model = Net()
    hook.register_module(model)
    train(model, 2)
    assert not hook._stash and not hook._pending  # step 1 saves nothing: the module hooks only read a flag
    hook.close()
    assert [s.step for s in sink.steps] == [0]


class _FailingSink(smd.MemorySink):
    def write_step(self, *args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")


def test_hook_write_failure_logged_once_never_raised(make_hook: MakeHook, caplog: pytest.LogCaptureFixture) -> None:
    hook, _ = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["weights"],
                        sink=_FailingSink())
    model = Net()
    hook.register_module(model)
    with caplog.at_level(logging.ERROR, logger="smx_debug.hook"):
        train(model, 4)
        hook.close()
    assert hook.write_failures == 4
    records = [r for r in caplog.records if r.name == "smx_debug.hook"]
    assert len(records) == 1
    assert "No space left on device" in records[0].getMessage()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"out_dir": None}, "out_dir"), ({"include_workers": "two"}, "include_workers"),
     ({"save_config": 5}, "save_config"), ({"reduction_config": {"reductions": "mean"}}, "reduction_config")],
)
def test_hook_bad_argument_raises_config_error(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        smd.Hook(**{"out_dir": "/tmp/x", **kwargs})
    assert info.value.field == field


def test_hook_register_twice_or_non_module_raises(make_hook: MakeHook) -> None:
    hook, _ = make_hook()
    model = Net()
    hook.register_module(model)
    with pytest.raises(ConfigError, match="registered already"):
        hook.register_module(model)
    with pytest.raises(ConfigError, match=r"torch\.nn\.Module"):
        hook.register_module(lambda x: x)  # type: ignore[arg-type]


def test_hook_from_plan_saves_what_the_plan_renders(make_hook: MakeHook) -> None:
    plan = DebugPlan(region="us-west-2", s3_output_path="s3://bucket/debug", hook={"save_interval": 2},
                     rules=[{"name": "dead_relu"}, {"name": "loss_not_decreasing"}])
    sink = smd.MemorySink()
    hook = smd.Hook.from_plan(plan, "/tmp/unused", sink=sink)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(model, 3, loss_fn=loss_fn)
    hook.close()
    assert [s.step for s in sink.steps] == [0, 2]
    assert sink.names(2) == {"relu_output_0", "CrossEntropyLoss_output_0"}


def test_get_hook_creates_from_json_file_or_returns_none(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    smd.del_hook()
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(tmp_path / "missing.json"))
    assert smd.get_hook(create_if_not_exists=True) is None
    config = tmp_path / "debughookconfig.json"
    config.write_text('{"LocalPath": "%s", "HookParameters": {"save_interval": "3"}}' % (tmp_path / "out"))
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(config))
    hook = smd.get_hook(create_if_not_exists=True)
    try:
        assert isinstance(hook, smd.Hook)
        assert hook.out_dir == str(tmp_path / "out")
        assert smd.get_hook() is hook
    finally:
        assert hook is not None
        hook.close()
        smd.del_hook()
