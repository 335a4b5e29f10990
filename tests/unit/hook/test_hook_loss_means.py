"""The hook saves the interval means of the training and evaluation losses (``train_loss_mean``, ``val_loss_mean``,
the names the recommended profile's loss rules read) when asked, and by default from a ``profile: recommended`` plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import smx_debug.hook as smd  # noqa: E402
from smx_debug.config import DebugPlan  # noqa: E402
from smx_debug.hook.json_config import settings_from_plan  # noqa: E402
from smx_debug.rules.definitions import TRAIN_LOSS_MEAN, VAL_LOSS_MEAN  # noqa: E402

MakeHook = Callable[..., tuple[smd.Hook, smd.MemorySink]]


class _Fixed(torch.nn.Module):
    """A loss module whose output is its target: the test knows every step's loss."""

    def forward(self, out: Any, target: Any) -> Any:
        return target + 0 * out.sum()


def _run(hook: smd.Hook, train_losses: list[float], val_losses: list[float]) -> None:
    model, loss_fn = torch.nn.Linear(2, 1), _Fixed()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x = torch.ones(1, 2)
    for i, value in enumerate(train_losses):
        loss_fn(model(x), torch.tensor(value))
        if i == len(train_losses) // 2 - 1:  # an evaluation pass in the middle
            hook.set_mode(smd.modes.EVAL)
            for v in val_losses:
                loss_fn(model(x), torch.tensor(v))
            hook.set_mode(smd.modes.TRAIN)
    hook.set_mode(smd.modes.TRAIN)


def _saved(sink: smd.MemorySink, name: str) -> list[tuple[int, float]]:
    return [(s.step, float(sink.tensor(f"scalar/{name}", s.step)[0])) for s in sink.steps
            if f"scalar/{name}" in sink.names(s.step)]


def test_hook_loss_means_saves_the_mean_of_each_interval_and_of_the_evaluation_pass(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=4), loss_means=True)
    hook.set_mode(smd.modes.TRAIN)
    train = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    _run(hook, train, [10.0, 20.0])
    hook.close()
    means = [v for _, v in _saved(sink, TRAIN_LOSS_MEAN)]
    assert means == pytest.approx([2.5, 6.5])  # steps 0-3 saved at train step 4, steps 4-7 at train step 8
    assert [v for _, v in _saved(sink, VAL_LOSS_MEAN)] == pytest.approx([15.0])


def test_hook_loss_means_off_by_default_saves_no_means(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=4))
    hook.set_mode(smd.modes.TRAIN)
    _run(hook, [1.0, 2.0, 3.0, 4.0, 5.0], [10.0])
    hook.close()
    assert _saved(sink, TRAIN_LOSS_MEAN) == [] and _saved(sink, VAL_LOSS_MEAN) == []


@pytest.mark.parametrize(("fields", "expected"), [({"profile": "recommended"}, True), ({}, False),
                                                  ({"guard": "evaluator", "rules": [{"name": "ExplodingTensor"}]},
                                                   False)])
def test_hook_loss_means_on_from_a_recommended_plan(fields: dict[str, Any], expected: bool) -> None:
    plan = DebugPlan.from_dict({"region": "us-west-2", "s3_output_path": "s3://my-bucket/debug", **fields})
    assert settings_from_plan(plan, "/tmp/unused").loss_means is expected
