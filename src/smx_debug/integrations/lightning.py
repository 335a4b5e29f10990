"""Lightning: ``lightning.Trainer(callbacks=[SmxDebugCallback()])``.

::

    from smx_debug.integrations.lightning import SmxDebugCallback
    trainer = lightning.Trainer(max_epochs=3, callbacks=[SmxDebugCallback()])  # locally: SmxDebugCallback(out_dir=...)

What it does, on Lightning's own events (docs/frameworks.md):

- registers the LightningModule (``setup``);
- a step starts at each batch start: ``on_train_batch_start`` (TRAIN), ``on_validation_batch_start`` and
  ``on_test_batch_start`` (EVAL), ``on_predict_batch_start`` (PREDICT); the sanity check's batches are not
  steps. So a ``training_step`` that calls ``self.encoder(x)`` instead of ``self(x)`` saves as well;
- records the loss the step returned (``outputs["loss"]``) at the saving steps, and the losses the module logs
  (``self.log("...loss...", ...)``) as scalars: the validation ones at ``on_validation_end`` (EVAL), the training
  ones at ``on_train_epoch_end`` (TRAIN). Lightning reduces the training epoch's values after the epoch's
  validation has run; such values are saved at the next training step, and the last epoch's are not saved;
- stops with ``trainer.should_stop`` once the hook was asked to stop (:meth:`smx_debug.hook.Hook.request_stop`,
  the in-process guard's seam);
- closes the trial at ``on_fit_end`` (or ``on_exception``); a ``validate``/``test``/``predict`` run outside
  ``fit`` closes it at its end.

lightning is imported here only; it is not a dependency of smx-debug.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning.pytorch.callbacks import Callback  # type: ignore[import-not-found, unused-ignore]

from smx_debug.integrations.core import DrivingCallback
from smx_debug.tensors.mode_keys import ModeKeys

__all__ = ["SmxDebugCallback"]


class SmxDebugCallback(DrivingCallback, Callback):  # type: ignore[misc, unused-ignore]
    """Watch a ``lightning.Trainer`` run with smx-debug's hook (arguments: :class:`DrivingCallback`'s)."""

    def _init_framework_state(self) -> None:
        self._before: dict[str, float] = {}  # the logged losses when the epoch started
        self._val_before: dict[str, float] = {}  # ... when the validation started
        self._eval_names: set[str] = set()  # names logged by validation
        self._held: dict[str, float] = {}  # training values to save at the next training step

    # --- registration and the end ---------------------------------------------------------------------

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.driver.start(pl_module)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self.driver.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.driver.close()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":  # validate/test/predict on their own: their run is the trial
            self.driver.close()

    # --- steps ----------------------------------------------------------------------------------------

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.driver.begin_batch(ModeKeys.TRAIN)
        if self._held:
            self.driver.record_logged(self._held)
            self._held = {}

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.driver.record_loss(outputs)
        if self.driver.should_stop():
            trainer.should_stop = True

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        if not trainer.sanity_checking:
            self.driver.begin_batch(ModeKeys.EVAL)

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                                dataloader_idx: int = 0) -> None:
        if not trainer.sanity_checking:
            self.driver.record_loss(outputs)

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self.driver.begin_batch(ModeKeys.EVAL)

    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int,
                          dataloader_idx: int = 0) -> None:
        self.driver.record_loss(outputs)

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self.driver.begin_batch(ModeKeys.PREDICT)

    # --- the losses the module logs -------------------------------------------------------------------

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._before = _losses(trainer.callback_metrics)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._val_before = _losses(trainer.callback_metrics)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking:
            return
        logged = _changed(self._val_before, _losses(trainer.callback_metrics))
        self._eval_names.update(logged)
        self.driver.record_logged(logged)

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self.driver.record_logged(_losses(trainer.callback_metrics))

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        logged = {k: v for k, v in _changed(self._before, _losses(trainer.callback_metrics)).items()
                  if k not in self._eval_names}
        hook = self.driver.hook
        if hook is not None and hook.mode == ModeKeys.TRAIN:
            self.driver.record_logged(logged)
        else:  # the epoch's validation ran last: the step now is an EVAL one
            self._held = logged


def _losses(metrics: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in metrics.items():
        # not the per-batch values of ``on_step=True`` (``<name>_step``): the per-batch loss is loss_output_0
        if "loss" in name and not name.endswith("_step") and getattr(value, "numel", lambda: 0)() == 1:
            out[name] = float(value)
    return out


def _changed(before: Mapping[str, float], now: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in now.items() if k not in before or not _same(before[k], v)}


def _same(a: float, b: float) -> bool:
    return a == b or (a != a and b != b)  # NaN equals NaN here
