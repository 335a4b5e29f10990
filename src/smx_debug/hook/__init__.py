"""smdebug's PyTorch hook API on PyTorch 2: ``import smx_debug.hook as smd`` (extra ``smx-debug[torch]``).

::

    import smx_debug.hook as smd
    hook = smd.Hook(out_dir="/tmp/run", save_config=smd.SaveConfig(save_interval=100),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.EVAL)

On SageMaker, ``smd.Hook.create_from_json_file()`` (or ``smd.get_hook(create_if_not_exists=True)``) builds the
hook the job's ``DebugHookConfig`` describes; locally, ``smd.Hook.from_plan(plan, out_dir)``. What is saved,
what it costs and how to port a script: docs/hook.md. This is the only part of smx-debug that imports torch.
"""

from __future__ import annotations

try:
    import torch as _torch  # noqa: F401  (fail here, with the way out, rather than deep inside)
except ModuleNotFoundError as exc:  # pragma: no cover - the test environment has torch
    raise ModuleNotFoundError(
        "smx_debug.hook needs PyTorch: pip install 'smx-debug[torch]' (or install the torch build for your "
        "machine first)", name="torch") from exc

from smx_debug._lazy import lazy_getattr
from smx_debug.hook.collection import Collection, CollectionKeys
from smx_debug.hook.guard import GuardStop
from smx_debug.hook.hook import Hook, get_hook
from smx_debug.hook.json_config import HookSettings, parse_hook_config, read_hook_config
from smx_debug.hook.reduction_config import ReductionConfig
from smx_debug.hook.save_config import SaveConfig, SaveConfigMode
from smx_debug.hook.singleton import del_hook, set_hook
from smx_debug.hook.sink import MemorySink, SavedStep, TensorSink
from smx_debug.tensors.mode_keys import ModeKeys

modes = ModeKeys
"""``smd.modes.TRAIN`` / ``EVAL`` / ``PREDICT`` / ``GLOBAL``, as in smdebug."""

__all__ = [
    "Collection",
    "CollectionKeys",
    "GuardStop",
    "Hook",
    "HookSettings",
    "MemorySink",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "SavedStep",
    "TensorSink",
    "create_trial",
    "del_hook",
    "get_hook",
    "modes",
    "parse_hook_config",
    "read_hook_config",
    "set_hook",
]


# smd.create_trial as in smdebug.pytorch, loaded on first use: the reader (pandas) stays out of training
__getattr__ = lazy_getattr(__name__, {"create_trial": "smx_debug.tensors.trial"})
