"""Hugging Face Trainer: ``Trainer(..., callbacks=[SmxDebugCallback()])``.

::

    from smx_debug.integrations.transformers import SmxDebugCallback
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=valid,
                      callbacks=[SmxDebugCallback()])   # on SageMaker; locally SmxDebugCallback(out_dir="trial")

What it does, on the Trainer's own events (docs/frameworks.md):

- registers the model (``on_init_end``, or ``on_train_begin`` for a ``model_init`` model);
- TRAIN steps start at ``on_step_begin`` (one per optimizer step, as ``state.global_step`` counts them); the
  evaluation loop's batches are EVAL steps and ``Trainer.predict``'s PREDICT steps, each starting at the batch's
  first forward (the Trainer calls the model itself there; ``on_prediction_step`` ends the batch);
- records the loss the model computed (``outputs.loss``) at the saving steps, and the losses the Trainer logs
  (``on_log``: the interval mean ``loss``, ``eval_loss``) as scalars;
- stops training with ``control.should_training_stop`` once the hook was asked to stop
  (:meth:`smx_debug.hook.Hook.request_stop`, the in-process guard's seam);
- closes the trial at ``on_train_end``.

transformers is imported here only; it is not a dependency of smx-debug.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch import nn
from transformers import Trainer, TrainerCallback  # type: ignore[import-not-found, unused-ignore]

from smx_debug.integrations.core import DrivingCallback
from smx_debug.tensors.mode_keys import ModeKeys

__all__ = ["SmxDebugCallback"]


class SmxDebugCallback(DrivingCallback, TrainerCallback):  # type: ignore[misc, unused-ignore]
    """Watch a ``transformers.Trainer`` run with smx-debug's hook (arguments: :class:`DrivingCallback`'s)."""

    def _init_framework_state(self) -> None:
        self._model: nn.Module | None = None
        self._handles: list[Any] = []
        self._eval_batch_pending = True  # the evaluation loop's next forward starts a step
        self._eval_mode: ModeKeys | None = None  # EVAL or PREDICT, found at the loop's first batch

    # --- registration ---------------------------------------------------------------------------------

    def _attach(self, model: nn.Module | None) -> None:
        if model is None or model is self._model or self.driver.hook is None:
            return
        for handle in self._handles:
            handle.remove()
        self.driver.start(model)
        self._model = model
        self._handles = [model.register_forward_pre_hook(self._forward_pre_hook),
                         model.register_forward_hook(self._forward_hook)]

    @torch.compiler.disable  # type: ignore[untyped-decorator]
    def _forward_pre_hook(self, module: nn.Module, inputs: Any) -> None:
        """The evaluation loop's batch starts at its first forward (``model.eval()``: not training)."""
        if module.training or not self._eval_batch_pending:
            return
        self._eval_batch_pending = False
        if self._eval_mode is None:
            self._eval_mode = ModeKeys.PREDICT if _in_predict() else ModeKeys.EVAL
        self.driver.begin_batch(self._eval_mode)

    def _forward_hook(self, module: nn.Module, inputs: Any, output: Any) -> None:
        self.driver.record_loss(output)

    # --- the Trainer's events -------------------------------------------------------------------------

    def on_init_end(self, args: Any, state: Any, control: Any, model: nn.Module | None = None,
                    **kwargs: Any) -> None:
        self._attach(model)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: nn.Module | None = None,
                       **kwargs: Any) -> None:
        self._attach(model)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.driver.begin_batch(ModeKeys.TRAIN)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.driver.should_stop():
            control.should_training_stop = True

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._eval_batch_pending = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if logs and "train_runtime" not in logs:  # not the run's summary (its train_loss: the whole run's mean)
            self.driver.record_logged(logs)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._end_evaluation()

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        self._end_evaluation()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.driver.close()

    def _end_evaluation(self) -> None:
        self._eval_batch_pending = True
        self._eval_mode = None
        self.driver.set_mode(ModeKeys.TRAIN)


def _in_predict() -> bool:
    """Whether ``Trainer.predict`` runs this evaluation loop: the Trainer's callbacks do not tell evaluate() from
    predict() until the loop has ended (``on_predict``), so look for its frame (once per loop)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "predict" and isinstance(frame.f_locals.get("self"), Trainer):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False
