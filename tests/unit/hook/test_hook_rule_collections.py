"""The collections the built-in rules read (smdebug-rulesconfig's ``relu_output``, ``relu_input``; SaturatedActivation's
``tanh_input``, ``sigmoid_input``): named in ``include_collections``, the hook saves them with the rules' regexes, and a
name it cannot save raises before the first step."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch
from hook_support import Net, train
from torch import nn

import smx_debug.hook as smd
from smx_debug.errors import UnknownNameError
from smx_debug.hook.collection import RULE_COLLECTIONS
from smx_debug.hook.json_config import parse_hook_config

MakeHook = Callable[..., tuple[smd.Hook, smd.MemorySink]]
ACTIVATIONS = {"1_relu_input_0", "1_relu_output_0", "3_tanh_input_0", "3_tanh_output_0", "5_sigmoid_input_0",
               "5_sigmoid_output_0"}


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Sigmoid(),
                         nn.Linear(8, 3))


@pytest.mark.parametrize(("name", "saved"), [
    ("relu_output", {"1_relu_output_0"}), ("relu_input", {"1_relu_input_0"}),
    ("tanh_input", {"3_tanh_input_0"}), ("sigmoid_input", {"5_sigmoid_input_0"}),
])
def test_hook_rule_collection_named_alone_saves_its_activations(make_hook: MakeHook, name: str,
                                                                saved: set[str]) -> None:
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["weights", name])
    model = _model()
    hook.register_module(model)
    train(model, 2)
    hook.close()
    assert sink.names(1) & ACTIVATIONS == saved
    assert "Sequential_0.weight" in sink.names(1)


def test_hook_rule_collection_configured_by_the_user_keeps_only_their_regex(make_hook: MakeHook) -> None:
    """A plan that sets DeadRelu's tensor_regex configures relu_output with it: the rule's default is not added."""
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["relu_output"])
    hook.get_collection("relu_output").include("^3_tanh_output")
    model = _model()
    hook.register_module(model)
    train(model, 1)
    hook.close()
    assert sink.names(0) & ACTIVATIONS == {"3_tanh_output_0"}


@pytest.mark.parametrize(("name", "suggestion"), [("gradeints", "gradients"), ("relu_ouptut", "relu_output")])
def test_hook_unknown_collection_raises_at_register_module_before_any_step(make_hook: MakeHook, name: str,
                                                                          suggestion: str) -> None:
    hook, _ = make_hook(include_collections=["weights", name])
    model = Net()
    with pytest.raises(UnknownNameError) as info:
        hook.register_module(model)
    assert info.value.suggestion == suggestion
    assert name in str(info.value)
    model(torch.randn(1, 4))  # nothing was registered: training runs, unobserved
    assert hook.step == -1


def test_hook_custom_collection_configured_after_construction_is_saved(make_hook: MakeHook) -> None:
    """smdebug's own pattern: name a collection of your own, then configure it before registering the model."""
    hook, sink = make_hook(save_config=smd.SaveConfig(save_interval=1), include_collections=["l_mod"])
    model = Net()
    hook.get_collection("l_mod").add_module_tensors(model.fc2, inputs=True, outputs=True)
    hook.register_module(model)
    train(model, 1)
    hook.close()
    assert {"fc2_input_0", "fc2_output_0"} <= sink.names(0)


def test_hook_from_settings_unknown_collection_raises_when_built() -> None:
    settings = smd.HookSettings(out_dir="/tmp/smx-hook-test-unused", save_config=smd.SaveConfig(save_interval=1),
                                include_collections=("weights", "relu_output", "gradeints"))
    with pytest.raises(UnknownNameError) as info:
        smd.Hook.from_settings(settings, sink=smd.MemorySink())
    smd.del_hook()
    assert info.value.name == "gradeints"


def test_hook_from_settings_rule_collection_takes_the_rule_regex() -> None:
    settings = smd.HookSettings(out_dir="/tmp/smx-hook-test-unused", save_config=smd.SaveConfig(save_interval=1),
                                include_collections=("relu_output",))
    hook = smd.Hook.from_settings(settings, sink=smd.MemorySink())
    hook.close()
    smd.del_hook()
    assert hook.get_collection("relu_output").include_regex == [".*relu_output"]


def test_hook_rule_collections_as_docs_hook_md_lists_them() -> None:
    """docs/hook.md's table of the collections the rules read is RULE_COLLECTIONS (the rule catalog's)."""
    from pathlib import Path

    from smx_debug.hook.collection import RULE_COLLECTIONS

    text = (Path(__file__).resolve().parents[3] / "docs" / "hook.md").read_text()
    section = text.split("### The collections the rules read", 1)[1].split("```", 1)[0]
    listed: dict[str, str] = {}
    for row in section.splitlines():
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]  # '\|' is a cell's pipe
        if len(cells) == 3 and cells[0].startswith("`"):
            names = [n.strip(" `") for n in cells[0].split(",")]
            regexes = [r.split("(")[0].strip(" `") for r in cells[1].split("`, `")]
            listed.update(zip(names, regexes, strict=True))
    assert listed == {name: regex for name, (regex,) in RULE_COLLECTIONS.items()}


@pytest.mark.parametrize(("name", "saved"), [("relu_output", {"1_relu_output_0"}), ("tanh_input", {"3_tanh_input_0"})])
def test_hook_config_rule_collection_without_include_regex_saves_with_the_rules_regex(name: str,
                                                                                      saved: set[str]) -> None:
    """A DebugHookConfig entry naming a rules' collection without include_regex (as a hand-written config, or
    Debugger's console, gives it) is accepted: the hook fills in the rules' regex."""
    settings = parse_hook_config({"LocalPath": "/tmp/smx-hook-test-unused",
                                  "CollectionConfigurations": [{"CollectionName": name,
                                                                "CollectionParameters": {"save_interval": "1"}}]})
    assert [c.name for c in settings.collections] == [name] and settings.collections[0].include_regex == ()
    sink = smd.MemorySink()
    hook = smd.Hook.from_settings(settings, sink=sink)
    try:
        model = _model()
        hook.register_module(model)
        train(model, 2)
    finally:
        hook.close()
        smd.del_hook()
    assert hook.get_collection(name).include_regex == list(RULE_COLLECTIONS[name])
    assert sink.names(1) & ACTIVATIONS == saved
