"""Steps driven by a framework's batch events (Hook.follow_step_events / start_step) and the stop seam
(Hook.request_stop), which the framework integrations use."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import smx_debug.hook as smd


class EncoderStyle(nn.Module):
    """A module whose training step calls its parts, never ``self(x)`` (Lightning's documented style)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def step(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x).pow(2).mean()


def _run(model: EncoderStyle, hook: smd.Hook, steps: int, *, events: bool) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        if events:
            hook.start_step()
        opt.zero_grad()
        model.step(torch.randn(6, 4, generator=gen)).backward()
        opt.step()
    hook.close()


def _hooked(out_dir: Path) -> tuple[EncoderStyle, smd.Hook]:
    """An EncoderStyle model registered with a hook saving its weights and gradients every 2 steps."""
    model = EncoderStyle()
    hook = smd.Hook(out_dir=str(out_dir), save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "gradients"])
    hook.register_module(model)
    return model, hook


def test_hook_start_step_module_never_called_saves_each_event(tmp_path: Path) -> None:
    model, hook = _hooked(tmp_path / "t")
    _run(model, hook, 6, events=True)
    trial = smd.create_trial(str(tmp_path / "t"))
    assert trial.tensor("gradient/EncoderStyle_encoder.0.weight").steps() == [0, 2, 4]


def test_hook_module_never_called_without_events_saves_nothing(tmp_path: Path) -> None:
    # what the integrations fix: the registered module's forward never runs, so no step starts
    model, hook = _hooked(tmp_path / "t")
    _run(model, hook, 6, events=False)
    assert hook.step == -1 and not (tmp_path / "t").exists()


def test_hook_follow_step_events_forward_twice_counts_one_step(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(4, 2))
    hook = smd.Hook(out_dir=str(tmp_path / "t"), save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.follow_step_events()
    model(torch.randn(2, 4))  # a forward before any event starts nothing
    assert hook.step == -1
    for _ in range(3):
        hook.start_step()
        model(torch.randn(2, 4))
        model(torch.randn(2, 4))
    assert hook.step == 2 and hook.mode_steps[smd.modes.GLOBAL] == 2
    hook.close()


def test_hook_request_stop_keeps_the_first_reason(tmp_path: Path) -> None:
    hook = smd.Hook(out_dir=str(tmp_path / "t"))
    assert hook.stop_reason is None
    hook.request_stop("ExplodingTensor at step 40")
    hook.request_stop("LossNotDecreasing at step 50")
    assert hook.stop_reason == "ExplodingTensor at step 40"


def test_hook_is_registered_knows_the_compiled_module_model(tmp_path: Path) -> None:
    model, other = nn.Linear(2, 2), nn.Linear(2, 2)
    hook = smd.Hook(out_dir=str(tmp_path / "t"))
    hook.register_module(model)
    assert hook.is_registered(model) and not hook.is_registered(other)
