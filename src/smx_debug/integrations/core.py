"""What the framework callbacks share: which hook they drive, and how a loss the framework computed is recorded.

Framework-free (no transformers, no lightning here): :mod:`smx_debug.integrations.transformers` and
:mod:`smx_debug.integrations.lightning` adapt their framework's events to a :class:`HookDriver`.

What is recorded (docs/frameworks.md):

- the loss the framework computed for each batch, as ``loss_output_0`` (collection ``losses``) at the saving steps,
  in the batch's mode (TRAIN, EVAL, PREDICT): the per-step series Debugger's loss rules read;
- every loss the framework logs (Hugging Face's interval mean ``loss`` and ``eval_loss``; what a LightningModule
  logs under a name containing ``loss``, e.g. ``train_loss_epoch``, ``val_loss``) as the scalar
  ``scalar/<logged name>`` at the step it was logged, in that step's mode, also in the ``losses`` collection.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from smx_debug.contracts import TRAINING_JOB_NAME_ENV
from smx_debug.errors import ConfigError
from smx_debug.hook.collection import CollectionKeys
from smx_debug.hook.hook import SCALAR_PREFIX, Hook, get_hook
from smx_debug.hook.save_config import SaveConfig
from smx_debug.tensors.mode_keys import ModeKeys

log = logging.getLogger("smx_debug.integrations")

LOSS_TENSOR = "loss"
"""The per-batch loss the framework computed is saved as ``loss_output_0`` (the ``losses`` collection's regex)."""
DEFAULT_COLLECTIONS = (CollectionKeys.WEIGHTS, CollectionKeys.GRADIENTS, CollectionKeys.LOSSES)
"""What ``SmxDebugCallback(out_dir=...)`` saves (with ``save_interval``, default SaveConfig's)."""


def resolve_hook(hook: Hook | None = None, *, plan: Any = None, out_dir: str | os.PathLike[str] | None = None,
                 save_interval: int | None = None) -> Hook | None:
    """The hook a callback drives.

    - ``hook``: that one (nothing else may be given);
    - ``plan`` (a :class:`~smx_debug.DebugPlan` or a plan file) and ``out_dir``: the hook a job launched with the plan
      gets (:meth:`Hook.from_plan`), writing to ``out_dir``;
    - ``out_dir`` alone: weights, gradients and losses every ``save_interval`` steps;
    - nothing: the job's hook (:func:`smx_debug.hook.get_hook` with ``create_if_not_exists=True``: the current hook,
      else the job's settings). On a SageMaker job without settings that is None (a warning; the run goes on
      unwatched); anywhere else it is a ConfigError saying what to pass.
    """
    if hook is not None:
        if not isinstance(hook, Hook):
            raise ConfigError(f"hook must be a smx_debug.hook.Hook, got {type(hook).__name__}", field="hook",
                              value=type(hook).__name__)
        given = [name for name, v in (("plan", plan), ("out_dir", out_dir), ("save_interval", save_interval))
                 if v is not None]
        if given:
            raise ConfigError(f"give hook= or {'/'.join(given)}=, not both: the hook has its own settings",
                              field=given[0], value=locals()[given[0]])
        return hook
    if save_interval is not None and (isinstance(save_interval, bool) or not isinstance(save_interval, int)
                                      or save_interval < 1):
        raise ConfigError(f"save_interval must be a positive integer, got {save_interval!r}",
                          field="save_interval", value=save_interval)
    if plan is not None:
        if out_dir is None:
            raise ConfigError("plan= needs out_dir=: the directory or s3:// prefix the trial is written to",
                              field="out_dir", value=None)
        if save_interval is not None:
            raise ConfigError("save_interval comes from the plan (hook.save_interval) when plan= is given",
                              field="save_interval", value=save_interval)
        return Hook.from_plan(_load_plan(plan), out_dir)
    if out_dir is not None:
        return Hook(out_dir=out_dir, save_config=SaveConfig(save_interval=save_interval) if save_interval else None,
                    include_collections=list(DEFAULT_COLLECTIONS))
    if save_interval is not None:
        raise ConfigError("save_interval needs out_dir= (a job's settings bring their own interval)",
                          field="save_interval", value=save_interval)
    found = get_hook(create_if_not_exists=True)
    if found is not None:
        return found
    if TRAINING_JOB_NAME_ENV in os.environ:
        log.warning("smx_debug: this SageMaker job has no hook settings (launched without a plan's hook or a "
                    "DebugHookConfig): SmxDebugCallback saves nothing and training goes on")
        return None
    raise ConfigError("SmxDebugCallback() without arguments takes the hook settings of a SageMaker job, and there "
                      "are none here: pass out_dir='trial' (and save_interval=), plan=plan with out_dir=, or "
                      "hook=smd.Hook(...)", field="out_dir", value=None)


def _load_plan(plan: Any) -> Any:
    from smx_debug.config.plan import DebugPlan  # local: a plan (PyYAML) only when one is passed

    if isinstance(plan, DebugPlan):
        return plan
    if isinstance(plan, str | os.PathLike):
        return DebugPlan.from_file(Path(plan))
    raise ConfigError(f"plan must be a DebugPlan or a plan file's path, got {type(plan).__name__}", field="plan",
                      value=type(plan).__name__)


def loss_of(output: Any) -> torch.Tensor | None:
    """The loss in what a model or a step returned: a scalar tensor, or the ``loss`` of a mapping/ModelOutput."""
    if isinstance(output, torch.Tensor):
        return output if output.numel() == 1 else None
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    return loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None


class HookDriver:
    """A hook driven by a framework's events: modes, steps, losses, the stop seam and the end of the trial.

    The callbacks call :meth:`start` with the model, :meth:`begin_batch` at each batch start in the batch's mode,
    :meth:`record_loss` / :meth:`record_logged` with what the framework computed and logged, :meth:`should_stop`
    after each batch and :meth:`close` at the end of training. A driver without a hook (a SageMaker job without
    settings) does nothing.
    """

    def __init__(self, hook: Hook | None) -> None:
        self.hook = hook
        self.closed = False
        self._warned_closed = False
        self._step_open = False  # a step began and no mode switch has written it yet

    @property
    def active(self) -> bool:
        """Whether there is an open hook to drive."""
        if self.hook is None:
            return False
        if self.closed:
            if not self._warned_closed:
                self._warned_closed = True
                log.warning("smx_debug: the trial was closed at the end of training; later evaluation or "
                            "prediction runs are not recorded")
            return False
        return True

    def start(self, model: nn.Module) -> None:
        """Register ``model`` (once) and let the framework's batch events start the steps."""
        if self.hook is None or self.closed:
            return
        if not self.hook.is_registered(model):
            self.hook.register_module(model)
        self.hook.follow_step_events()

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch the hook's mode (writing the finished step) when it differs."""
        if self.active and self.hook is not None and self.hook.mode != mode:
            self.hook.set_mode(mode)
            self._step_open = False

    def begin_batch(self, mode: ModeKeys) -> None:
        """A batch of ``mode`` starts: a new step of the hook."""
        if self.active and self.hook is not None:
            if self.hook.mode != mode:
                self.hook.set_mode(mode)
            self.hook.start_step()
            self._step_open = True

    def record_loss(self, output: Any) -> None:
        """Record the batch's loss (from a tensor, a mapping or a ModelOutput) when the step saves."""
        if self.hook is None or self.closed:
            return
        loss = loss_of(output)
        if loss is not None:
            self.hook.record_tensor_value(LOSS_TENSOR, loss)

    def record_logged(self, logs: Mapping[str, Any]) -> None:
        """Record each logged value whose name contains ``loss`` as ``scalar/<name>`` (collection ``losses``), at
        the step that is open; with none open (after a mode switch) there is no step to hold them, and they are
        not recorded."""
        if not self.active or self.hook is None or not self._step_open:
            return
        losses = self.hook.get_collection(CollectionKeys.LOSSES)
        for name, value in logs.items():
            if "loss" not in name:
                continue
            number = _number(value)
            if number is None:
                continue
            self.hook.save_scalar(name, number)
            losses.add_tensor_name(SCALAR_PREFIX + name)

    def should_stop(self) -> bool:
        """Whether the hook was asked to stop (:meth:`Hook.request_stop`, the in-process guard's seam)."""
        return self.hook is not None and self.hook.stop_reason is not None

    def close(self) -> None:
        """Write what is pending and close the trial (once)."""
        if self.hook is not None and not self.closed:
            self.closed = True
            self.hook.close()


def _number(value: Any) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().cpu()) if value.numel() == 1 else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)  # NaN and infinities too: a diverging loss is what the rules look for


class DrivingCallback:
    """What every framework's ``SmxDebugCallback`` takes and holds: the hook it drives, through a :class:`HookDriver`.

    Args:
        hook: a hook of your own (``smd.Hook(...)``); nothing else may be given with it.
        plan: a :class:`~smx_debug.DebugPlan` (or a plan file) whose hook settings to use, with ``out_dir``.
        out_dir: where the trial is written (a directory or ``s3://`` prefix); alone, weights, gradients and
            losses are saved every ``save_interval`` steps.
        save_interval: with ``out_dir`` alone.

    Without arguments, the job's settings on SageMaker (``smd.get_hook(create_if_not_exists=True)``).
    """

    def __init__(self, hook: Hook | None = None, *, plan: Any = None, out_dir: str | os.PathLike[str] | None = None,
                 save_interval: int | None = None) -> None:
        self.driver = HookDriver(resolve_hook(hook, plan=plan, out_dir=out_dir, save_interval=save_interval))
        self._init_framework_state()

    def _init_framework_state(self) -> None:
        """The framework's own state of a run, set when the callback is made (none here)."""

    @property
    def hook(self) -> Hook | None:
        """The hook this callback drives (None on a SageMaker job without hook settings)."""
        return self.driver.hook
