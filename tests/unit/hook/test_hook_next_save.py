"""The hook decides once per step whether it saves: the mode's next save step, kept between saving steps."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hook_support import Net, train
from torch import nn

import smx_debug.hook as smd

MakeHook = Callable[..., tuple[smd.Hook, smd.MemorySink]]


@pytest.mark.parametrize(("interval", "start", "end", "steps"), [
    (1, 0, None, ()), (3, 0, None, ()), (4, 5, None, ()), (5, 2, 13, ()), (7, 0, 20, (3, 11)), (100, 10, 12, (2, 40)),
])
def test_save_config_mode_next_save_step_is_the_first_step_saved(interval: int, start: int, end: int | None,
                                                                 steps: tuple[int, ...]) -> None:
    config = smd.SaveConfigMode(save_interval=interval, start_step=start, end_step=end, save_steps=steps)
    for step in range(60):
        expected = next((s for s in range(step, 200) if config.should_save_step(s)), None)
        assert config.next_save_step(step) == expected, step


def test_hook_collections_with_their_own_save_configs_save_at_their_own_steps(make_hook: MakeHook) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=3), include_collections=["weights", "losses"])
    hook.get_collection("weights").save_config = smd.SaveConfigMode(save_interval=1000, save_steps=[1, 4])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(model, 7, loss_fn=loss_fn)
    hook.close()
    saved = {s.step: ({n for n in sink.names(s.step) if n.endswith("weight")} != set(),
                      "CrossEntropyLoss_output_0" in sink.names(s.step)) for s in sink.steps}
    assert saved == {0: (True, True), 1: (True, False), 3: (False, True), 4: (True, False), 6: (False, True)}
