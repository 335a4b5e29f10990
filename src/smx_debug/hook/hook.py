"""The PyTorch hook: smdebug's ``smd.Hook`` API on PyTorch 2, without smdebug.

What it saves and when: :mod:`smx_debug.hook` and docs/hook.md. How it stays a good guest:

- A step starts in the registered module's forward pre-hook (run eagerly, also when the module is compiled:
  register the compiled module when its forward is one of ``torch.nn``'s own, e.g. ``nn.Sequential``). There
  the hook decides once what the step saves; on a step that saves nothing the per-module hooks read one
  boolean and return.
- Module inputs/outputs are only stashed (detached references) during the forward; values are copied,
  reduced and written when the next step starts, so the forward stays free of host syncs, clocks and numpy,
  and ``torch.compile`` traces the hooks without graph breaks (one extra graph for the saving steps).
- Only modules whose input/output names can match a saved collection get a forward hook at all.
- Gradients are read in the optimizer's step pre-hook: after backward, after DDP's all-reduce and after
  ``GradScaler`` unscaled them.
- Tensors are only read (``detach``/``clone``), never changed. A failure to write is logged once and counted,
  never raised into the training step.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch._dynamo.eval_frame import OptimizedModule
from torch.optim.optimizer import register_optimizer_step_pre_hook

from smx_debug.contracts import TRAINING_JOB_NAME_ENV
from smx_debug.errors import ConfigError, NotFoundError, UnknownNameError
from smx_debug.hook import singleton
from smx_debug.hook.collection import (
    BUILTIN_REGEXES,
    RULE_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
    CollectionKeys,
    unknown_collection,
)
from smx_debug.hook.guard import VERDICT_FILE, GuardStop, check_guard, resolve_guard_rules, settings_rules
from smx_debug.hook.json_config import HookSettings, read_hook_config, settings_from_plan
from smx_debug.hook.reduction_config import ReductionConfig
from smx_debug.hook.save_config import SaveConfig
from smx_debug.hook.sink import TensorSink
from smx_debug.hook.summaries import compute as compute_statistics
from smx_debug.hook.summaries import record_name, statistics_by_collection, to_host
from smx_debug.rules.definitions import TRAIN_LOSS_MEAN, VAL_LOSS_MEAN, closest
from smx_debug.tensors.layout import END_OF_JOB
from smx_debug.tensors.mode_keys import ModeKeys
from smx_debug.tensors.reductions import reduction_tensor_name
from smx_debug.tensors.writer import TrialWriter

if TYPE_CHECKING:
    from smx_debug.evaluate.tensor_guard import InProcessGuard
    from smx_debug.rules.configured import RuleLike

log = logging.getLogger("smx_debug.hook")

GRADIENT_PREFIX = "gradient/"
SCALAR_PREFIX = "scalar/"
INPUT_SUFFIX = "_input_"
OUTPUT_SUFFIX = "_output_"
# Activation modules and the word the rules' default regexes look for (DeadRelu ``.*relu_output``,
# PoorWeightInitialization ``.*relu_input``, SaturatedActivation ``.*tanh_input|.*sigmoid_input``).
ACTIVATION_KINDS: tuple[tuple[type[nn.Module], str], ...] = (
    (nn.ReLU, "relu"), (nn.ReLU6, "relu"), (nn.Tanh, "tanh"), (nn.Sigmoid, "sigmoid"),
)
_NO_GRADIENT_MODES = (ModeKeys.EVAL, ModeKeys.PREDICT)
_NEVER = 2**62  # the next save step of a mode that saves no more
# summaries: the labels and predictions of every training step since the last save, for ClassImbalance (its default
# regexes .*labels and .*predictions, its 500-sample minimum; the training data's classes: EVAL and PREDICT steps
# save their own step's values, as smdebug): what save_tensor puts in these collections, else the registered
# classification loss's targets and argmax of its scores under these names; per tensor and save, the latest steps'
# values that hold at least this many samples (bounded: older steps are dropped as newer ones come)
LOSS_LABELS, LOSS_PREDICTIONS = "labels", "predictions"
LABEL_COLLECTIONS = (LOSS_LABELS, LOSS_PREDICTIONS)
LABEL_MODES = (ModeKeys.TRAIN, ModeKeys.GLOBAL)
INTERVAL_LABELS = 512
_LOSS_KEY = f"loss:{LOSS_LABELS}"  # the registered loss's kept (targets, scores), in a mode's _KeptLabels


def module_tensor_base(name: str, module: nn.Module) -> str:
    """The base of a module's tensor names: its path, as smdebug names it, and for a ReLU/Tanh/Sigmoid module
    whose path does not already end in ``relu``/``tanh``/``sigmoid``, that word appended (``features.1`` ->
    ``features.1_relu``), so the rules' default regexes find it in any model (``features.1_relu_output_0``).
    """
    for cls, kind in ACTIVATION_KINDS:
        if isinstance(module, cls):
            return name if name.endswith(kind) else f"{name}_{kind}"
    return name


def _detached(value: Any) -> Any:
    """Tensors in ``value`` (nested tuples/lists) detached; anything else dropped."""
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, tuple | list):
        return tuple(_detached(v) for v in value)
    return None


def _flat_tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _flat_tensors(item)


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A host copy in a dtype Debugger's readers know: bfloat16 widens to float32 (exactly); others keep theirs."""
    t = tensor.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return np.array(t.cpu().numpy(), copy=True)


def _reduce(tensor: torch.Tensor, reduction: str, absolute: bool) -> torch.Tensor:
    """One reduction as smdebug's PyTorch hook computes it (torch's ``std``/``var`` are unbiased); half
    precision is reduced in float32 and integers/booleans in float64."""
    t = tensor.detach()
    if not t.is_floating_point() and not t.is_complex():
        t = t.double()
    elif t.dtype in (torch.float16, torch.bfloat16):
        t = t.float()
    if absolute:
        t = t.abs()
    if reduction == "variance":
        return t.var()
    if reduction in ("l1", "l2"):
        norm: torch.Tensor = torch.linalg.vector_norm(t, ord=int(reduction[1]))
        return norm
    result: torch.Tensor = getattr(t, reduction)()
    return result


class _KeptLabels:
    """One tensor's values of the steps since the last save: the latest that hold at least INTERVAL_LABELS samples."""

    __slots__ = ("coll", "sizes", "total", "values")

    def __init__(self, coll: str) -> None:
        self.coll = coll
        self.values: deque[Any] = deque()
        self.sizes: deque[int] = deque()
        self.total = 0

    def add(self, value: Any) -> None:
        """Keep one step's value (a loss's (targets, scores): its targets' count)."""
        first = value[0] if isinstance(value, tuple) else value
        self.add_sized(value, len(first) if first.ndim else 1)

    def add_sized(self, value: Any, size: int) -> None:
        """Keep one step's value of ``size`` samples."""
        self.values.append(value)
        self.sizes.append(size)
        self.total += size
        while len(self.values) > 1 and self.total - self.sizes[0] >= INTERVAL_LABELS:
            self.total -= self.sizes.popleft()
            self.values.popleft()


def _worker() -> tuple[str, int]:
    """This process's worker name and the number of workers (``worker_<rank>`` under torch.distributed)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return f"worker_{torch.distributed.get_rank()}", torch.distributed.get_world_size()
    return "worker_0", 1


def _is_sagemaker_job() -> bool:
    return TRAINING_JOB_NAME_ENV in os.environ


class Hook:
    """smdebug's PyTorch hook (``smd.Hook``), writing Debugger's tensor layout with current numpy and protobuf.

    Example::

        import smx_debug.hook as smd
        hook = smd.Hook(out_dir="/tmp/run", save_config=smd.SaveConfig(save_interval=100),
                        include_collections=["weights", "gradients", "losses"])
        hook.register_module(model)
        hook.register_loss(loss_fn)

    ``sink`` (keyword only, not in smdebug) replaces the file writer, e.g. with :class:`MemorySink`.
    ``guard`` (keyword only): ``"warn"`` or ``"stop"`` evaluates the recommended profile's rules (``guard_rules``
    configure them as a plan does) at each save, in this process; ``stop`` ends a plain training loop with
    :class:`~smx_debug.hook.GuardStop` (docs/hook.md, "The in-process guard").
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | None = None,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | Any = None,
        include_regex: str | Iterable[str] | None = None,
        include_collections: Iterable[str] | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        *,
        sink: TensorSink | None = None,
        guard: str | None = None,
        guard_rules: Iterable[RuleLike] | None = None,
        loss_means: bool = False,
        summaries: bool = False,
    ) -> None:
        if out_dir is None:
            raise ConfigError("out_dir is required: the directory or s3:// prefix the hook writes the trial to",
                              field="out_dir", value=None)
        self.out_dir = str(out_dir)
        _check_out_dir(self.out_dir)
        if include_workers not in ("one", "all"):
            raise ConfigError(f"include_workers must be 'one' or 'all', got {include_workers!r}",
                              field="include_workers", value=include_workers)
        if reduction_config is not None and not isinstance(reduction_config, ReductionConfig):
            raise ConfigError(f"reduction_config must be a ReductionConfig, got {type(reduction_config).__name__}",
                              field="reduction_config", value=reduction_config)
        if export_tensorboard or tensorboard_dir:
            log.warning("smx_debug.hook does not export TensorBoard summaries; export_tensorboard/tensorboard_dir "
                        "are ignored (the tensors are written to %s)", self.out_dir)
        self.dry_run = bool(dry_run)
        self.save_all = bool(save_all)
        self.include_workers = include_workers
        self.save_config = SaveConfig.parse(save_config)
        self.reduction_config = reduction_config or ReductionConfig(save_raw_tensor=True)
        self.collection_manager: dict[str, Collection] = {
            name: Collection(name, include_regex=regexes) for name, regexes in BUILTIN_REGEXES.items()
        }
        included = {CollectionKeys.LOSSES}
        if include_collections is not None:
            if isinstance(include_collections, str):
                include_collections = [include_collections]
            included.update(include_collections)
        if include_regex is not None:
            self.collection_manager[CollectionKeys.DEFAULT].include(include_regex)
            included.add(CollectionKeys.DEFAULT)
        if self.save_all:
            self.collection_manager[CollectionKeys.ALL].include(".*")
            included.add(CollectionKeys.ALL)
        self.include_collections: list[str] = sorted(included)

        self.step = -1
        self.mode = ModeKeys.GLOBAL
        self.mode_steps: dict[ModeKeys, int] = {ModeKeys.GLOBAL: -1}
        self._sink = sink
        self._worker: str | None = None
        self._num_workers = 1
        self._writes = True
        self._prepared = False
        self._closed = False
        self._saved_any = False
        # per step
        self._capture = False  # read by the module hooks (also inside compiled graphs): is anything saved?
        self._grad_capture = False
        self._saving: tuple[Collection, ...] = ()
        self._next_save: dict[ModeKeys, int] = {}  # per mode: its first mode step from the current one that saves
        self._step_key: tuple[int, ModeKeys, int] | None = None
        self._stash: list[tuple[str, Any, Any]] = []
        self._pending: dict[str, torch.Tensor] = {}
        self._scalars: list[tuple[str, np.ndarray]] = []
        self._custom: dict[str, tuple[Any, str]] = {}
        self._began_since_optimizer = False
        self._steps_from_events = False  # follow_step_events(): steps start only at start_step()
        self.stop_reason: str | None = None
        """Why the training loop was asked to stop (:meth:`request_stop`), or None."""
        self.guard = check_guard(guard)
        """The in-process guard's mode (``warn``, ``stop``) or None."""
        if guard_rules is not None and self.guard is None:
            raise ConfigError("guard_rules configures the in-process guard: set guard='warn' or 'stop' too",
                              field="guard_rules", value=list(guard_rules))
        self._guard: InProcessGuard | None = None
        if self.guard is not None:
            from smx_debug.evaluate.tensor_guard import InProcessGuard  # local: pandas, only with a guard

            self._guard = InProcessGuard(self.guard, resolve_guard_rules(guard_rules or ()),
                                         verdict_file=VERDICT_FILE)
        # loss_means: each mode's registered losses since its last mean was saved (detached tensors: no device sync
        # and no arithmetic per step; summed at the save step)
        self.loss_means = bool(loss_means)
        self._losses: dict[ModeKeys, list[torch.Tensor]] = {}
        self._loss_handles: list[Any] = []
        # summaries: per-layer statistics instead of the rules' collections' whole tensors, and each mode's labels
        # and predictions since its last save (save_tensor's, else the registered classification loss's inputs)
        self.summaries = bool(summaries)
        self._interval_labels: dict[ModeKeys, dict[str, _KeptLabels]] = {}
        # registration
        self._modules: list[tuple[nn.Module, nn.Module]] = []  # (where the step pre-hook is, the model)
        self._module_names: dict[int, str] = {}  # id(module) -> tensor-name base
        self._named: list[tuple[str, nn.Module]] = []  # modules whose inputs/outputs may be saved
        self._params: dict[int, tuple[str, nn.Parameter]] = {}  # id(param) -> (name, param)
        self._handles: list[Any] = []
        self._optimizer_handle: Any = None
        self._optimizer_params: dict[int, tuple[Any, int, int, list[Any]]] = {}  # id -> (groups, sizes, mine)
        self._warned: set[str] = set()
        self.write_failures = 0
        self._to_save: tuple[Collection, ...] = ()
        singleton.set_hook(self)
        atexit.register(self.close)

    # --- construction from a configuration -------------------------------------------------------

    @classmethod
    def create_from_json_file(cls, json_file_path: str | os.PathLike[str] | None = None) -> Hook:
        """The hook SageMaker's ``debughookconfig.json`` describes (``SMDEBUG_CONFIG_FILE_PATH`` overrides the
        path; ``json_file_path`` overrides both); with no file and no ``json_file_path``, the one the plan rendered
        into the job's environment (``SMX_DEBUG_OUTPUT``, ``SMX_DEBUG_HOOK``: a job without a DebugHookConfig).
        Neither raises NotFoundError naming both."""
        return cls.from_settings(read_hook_config(json_file_path))

    @classmethod
    def from_plan(cls, plan: Any, out_dir: str | os.PathLike[str], *, sink: TensorSink | None = None) -> Hook:
        """The hook a job launched with ``plan`` (a :class:`~smx_debug.DebugPlan`) would get, writing to ``out_dir``."""
        return cls.from_settings(settings_from_plan(plan, str(out_dir)), sink=sink)

    @classmethod
    def from_settings(cls, settings: HookSettings, *, sink: TensorSink | None = None) -> Hook:
        """The hook of parsed settings (see :func:`smx_debug.hook.json_config.parse_hook_config`)."""
        hook = cls(
            out_dir=settings.out_dir,
            export_tensorboard=settings.export_tensorboard,
            tensorboard_dir=settings.tensorboard_dir,
            dry_run=settings.dry_run,
            reduction_config=settings.reduction_config,
            save_config=settings.save_config,
            include_regex=settings.include_regex,
            include_collections=settings.include_collections,
            save_all=settings.save_all,
            include_workers=settings.include_workers,
            sink=sink,
            guard=settings.guard,
            guard_rules=settings_rules(settings.guard_rules) if settings.guard is not None else None,
            loss_means=settings.loss_means,
            summaries=settings.summaries,
        )
        for entry in settings.collections:
            coll = hook.get_collection(entry.name)
            coll.save_config = entry.save_config
            if entry.reduction_config is not None:
                coll.reduction_config = entry.reduction_config
            if entry.include_regex:
                coll.include(list(entry.include_regex))
            if entry.save_histogram is not None:
                coll.save_histogram = entry.save_histogram
        hook._check_collections()
        return hook

    # --- collections -----------------------------------------------------------------------------

    def get_collection(self, name: str, create: bool = True) -> Collection:
        """The collection ``name``; created (empty) when missing and ``create``."""
        coll = self.collection_manager.get(name)
        if coll is None:
            if not create:
                suggestion = closest(name, list(self.collection_manager))
                hint = f"; did you mean {suggestion!r}?" if suggestion else ""
                raise UnknownNameError(f"no collection {name!r}{hint}", name=name, suggestion=suggestion)
            coll = self.collection_manager[name] = Collection(name)
        return coll

    def get_collections(self) -> dict[str, Collection]:
        """All collections by name."""
        return dict(self.collection_manager)

    def _check_collections(self) -> None:
        """Every collection ``include_collections`` names can select tensors: a built-in one, one configured here
        (a regex, tensor names or modules), or one the built-in rules read (:data:`RULE_COLLECTIONS`), which takes
        the rules' regex unless configured. Any other name raises UnknownNameError: before training, at
        ``register_module`` (a script configures its own collections between building the hook and registering
        the model, as smdebug's do) or when the hook is built from a configuration."""
        for name in self.include_collections:
            found = self.collection_manager.get(name)
            if name in BUILTIN_REGEXES or (
                    found is not None and (found.include_regex or found.tensor_names or found.modules)):
                continue
            if name in RULE_COLLECTIONS:
                self.get_collection(name).include(list(RULE_COLLECTIONS[name]))
                continue
            raise unknown_collection(name, "include_collections names collection", "is not configured",
                                     f" (a collection of your own: hook.get_collection({name!r}).include(regex) "
                                     "before hook.register_module(model))")

    def add_collection(self, collection: Collection) -> None:
        """Add (or replace) a collection."""
        if not isinstance(collection, Collection):
            raise ConfigError(f"add_collection takes a Collection, got {type(collection).__name__}",
                              field="collection", value=collection)
        self.collection_manager[collection.name] = collection

    # --- registration ----------------------------------------------------------------------------

    def register_module(self, module: nn.Module) -> None:
        """Save this model's tensors: a step starts at each of its forward calls.

        Pass the compiled module (``torch.compile(model)``) when the model's own ``forward`` is one of
        ``torch.nn``'s (``nn.Sequential``): its pre-hook would otherwise be traced into the graph.
        """
        if not isinstance(module, nn.Module):
            raise ConfigError(f"register_module takes a torch.nn.Module, got {type(module).__name__}",
                              field="module", value=module)
        self._check_collections()
        model: nn.Module = getattr(module, "_orig_mod", module) if _is_compiled(module) else module
        if any(model is m for _, m in self._modules):
            raise ConfigError(f"module {type(model).__name__} is registered already", field="module",
                              value=type(model).__name__)
        top = type(model).__name__
        for name, sub in model.named_modules():
            base = module_tensor_base(name or top, sub)
            self._module_names[id(sub)] = base
            self._named.append((base, sub))
        for pname, param in model.named_parameters():
            self._params[id(param)] = (f"{top}_{pname}", param)
        self._handles.append(module.register_forward_pre_hook(self._forward_pre_hook))
        self._modules.append((module, model))
        if self._prepared:  # registered after training started: hook its modules now
            self._hook_modules([(n, m) for n, m in self._named if any(m is s for s in model.modules())])
        if self._optimizer_handle is None:
            self._optimizer_handle = register_optimizer_step_pre_hook(self._optimizer_pre_step)

    register_hook = register_module  # smdebug's alias

    def is_registered(self, module: nn.Module) -> bool:
        """Whether ``module`` (or the model a compiled ``module`` wraps) is registered."""
        model = getattr(module, "_orig_mod", module) if _is_compiled(module) else module
        return any(model is m for _, m in self._modules)

    def register_loss(self, loss_module: nn.Module) -> None:
        """Save a loss module's output (``<LossClass>_output_0``, the ``losses`` collection) and inputs."""
        if not isinstance(loss_module, nn.Module):
            raise ConfigError(f"register_loss takes a loss module such as nn.CrossEntropyLoss(), got "
                              f"{type(loss_module).__name__}", field="loss_module", value=loss_module)
        base = type(loss_module).__name__
        self._module_names[id(loss_module)] = base
        self._named.append((base, loss_module))
        if self._prepared:
            self._hook_modules([(base, loss_module)])
        if self.loss_means or self.summaries:
            self._loss_handles.append(loss_module.register_forward_hook(self._add_loss))

    # --- interval means of the losses (loss_means) -------------------------------------------------

    def _add_loss(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        mode = self.mode
        if self.loss_means and isinstance(outputs, torch.Tensor) and outputs.numel():
            key = ModeKeys.TRAIN if mode is ModeKeys.GLOBAL else mode
            losses = self._losses.get(key)
            if losses is None:
                losses = self._losses[key] = []
            losses.append(outputs.detach())
        if self.summaries and self._writes and (mode is ModeKeys.TRAIN or mode is ModeKeys.GLOBAL):
            self._add_loss_labels(inputs)

    # --- labels and predictions of every step between saves (summaries) ------------------------------

    def _add_loss_labels(self, inputs: Any) -> None:
        """A classification loss's targets (``labels``) and scores (``predictions``: their argmax, taken at the save
        step), as smdebug names a loss module's inputs 1 and 0: class ids of shape (N,) against scores (N, C)."""
        if not (isinstance(inputs, tuple) and len(inputs) >= 2):
            return
        scores, targets = inputs[0], inputs[1]
        if not (isinstance(scores, torch.Tensor) and isinstance(targets, torch.Tensor)) or targets.is_floating_point() \
                or targets.dim() != 1 or scores.dim() != 2 or scores.shape[0] != targets.shape[0]:
            return
        by_key = self._interval_labels.get(self.mode)
        kept = by_key.get(_LOSS_KEY) if by_key is not None else None
        if kept is None:
            kept = self._interval_labels.setdefault(self.mode, {})[_LOSS_KEY] = _KeptLabels(LOSS_LABELS)
        if targets.requires_grad:  # class ids seldom do: a detach is a microsecond a step
            targets = targets.detach()
        kept.add_sized((targets, scores.detach()), targets.shape[0])

    def _keep_labels(self, name: str, value: Any, coll: str, *, source: str) -> None:
        """Keep ``value`` (this step's, on its device: no copy, no sync) for the mode's next save: the latest steps'
        values that hold at least :data:`INTERVAL_LABELS` samples (the newest ones ClassImbalance judges, from a
        model as trained as the save's)."""
        kept = self._interval_labels.setdefault(self.mode, {}).get(f"{source}:{name}")
        if kept is None:
            kept = self._interval_labels[self.mode][f"{source}:{name}"] = _KeptLabels(coll)
        kept.add(value)

    def _interval_label_arrays(self, mode: ModeKeys) -> dict[str, tuple[np.ndarray, str]]:
        """The mode's kept labels and predictions, concatenated, by tensor name (what save_tensor gave wins over the
        loss's inputs), and forget them."""
        kept = self._interval_labels.pop(mode, {})
        custom = any(key.startswith("custom:") for key in kept)
        out: dict[str, tuple[np.ndarray, str]] = {}
        for key, labels in kept.items():
            source, _, name = key.partition(":")
            if source == "loss" and custom:  # the script saves its own: the loss's would count them twice
                continue
            if source == "loss":  # (targets, scores) per step
                out[LOSS_LABELS] = (_to_numpy(torch.cat([t for t, _ in labels.values])), LOSS_LABELS)
                predictions = torch.cat([p for _, p in labels.values]).argmax(-1)
                out[LOSS_PREDICTIONS] = (_to_numpy(predictions), LOSS_PREDICTIONS)
                continue
            arrays = [_to_numpy(v) if isinstance(v, torch.Tensor) else np.asarray(v) for v in labels.values]
            try:
                out[name] = (np.concatenate([a.reshape(-1) if a.ndim <= 1 else a for a in arrays]), labels.coll)
            except ValueError:  # shapes that do not stack: the step's own value only
                out[name] = (arrays[-1], labels.coll)
        return out

    def _save_loss_mean(self, mode: ModeKeys, name: str) -> None:
        """Save ``scalar/<name>``: the mean of ``mode``'s losses since the last one saved (none: nothing)."""
        losses = self._losses.pop(mode, [])
        if losses:
            mean = float(torch.stack([v.float().mean() for v in losses]).mean())
            self._scalars.append((SCALAR_PREFIX + name, self._scalar_array(mean, name)))

    # --- steps driven by a framework, and the stop seam -----------------------------------------------

    def follow_step_events(self) -> None:
        """From now on a step starts only at :meth:`start_step`, no longer at the registered module's forward.

        The framework integrations (:mod:`smx_debug.integrations`) call this, then :meth:`start_step` on the
        framework's own batch events, so a step that never calls the model itself (Lightning's
        ``self.encoder(x)`` style) saves too and a forward called twice in a step counts once."""
        self._steps_from_events = True

    def start_step(self) -> None:
        """Start the next step now (in the current mode), writing the finished one; see :meth:`follow_step_events`."""
        self._steps_from_events = True
        self._begin_step()

    def request_stop(self, reason: str) -> None:
        """Ask the training loop to stop, for ``reason`` (the first reason is kept; logged once).

        The seam of the in-process guard: a ``stop`` verdict calls this. The framework integrations read
        :attr:`stop_reason` after each batch and stop the loop the framework's way (Hugging Face:
        ``control.should_training_stop``; Lightning: ``trainer.should_stop``); a plain loop reads it itself
        (``if hook.stop_reason: break``)."""
        if self.stop_reason is None:
            self.stop_reason = str(reason)
            log.warning("smx_debug.hook: stop requested: %s", self.stop_reason)

    # --- modes and custom values -----------------------------------------------------------------

    def set_mode(self, mode: ModeKeys) -> None:
        """Switch to TRAIN, EVAL, PREDICT or GLOBAL; the next forward starts a step of that mode."""
        if not isinstance(mode, ModeKeys):
            raise ConfigError(f"mode must be one of smd.modes (TRAIN, EVAL, PREDICT, GLOBAL), got {mode!r}",
                              field="mode", value=mode)
        if self.loss_means and self.mode == ModeKeys.EVAL and mode != ModeKeys.EVAL:
            self._save_loss_mean(ModeKeys.EVAL, VAL_LOSS_MEAN)  # the pass's mean, with its last step
        self._flush()
        self.mode = mode
        self.mode_steps.setdefault(mode, -1)
        self._saving, self._capture, self._grad_capture = (), False, False

    def save_scalar(self, name: str, value: Any, sm_metric: bool = False, timestamp: float | None = None) -> None:
        """Save a scalar as ``scalar/<name>`` with the current step (every call is saved, as in smdebug)."""
        array = self._scalar_array(value, name)
        if sm_metric:
            self._warn_once("sm_metric", "save_scalar(sm_metric=True): SageMaker metrics are not written by "
                            "smx_debug.hook; the scalar is saved as a tensor")
        self._scalars.append((SCALAR_PREFIX + name, array))

    def save_tensor(self, tensor_name: str, tensor_value: Any,
                    collections_to_write: str | Iterable[str] = CollectionKeys.DEFAULT) -> None:
        """Save a value of your own in a collection at the current step (written when the step saves)."""
        names = [collections_to_write] if isinstance(collections_to_write, str) else list(collections_to_write)
        value = tensor_value.detach().clone() if isinstance(tensor_value, torch.Tensor) else np.asarray(tensor_value)
        for coll in names:
            self.get_collection(coll).add_tensor_name(tensor_name)
            self._custom[tensor_name] = (value, coll)
            if self.summaries and self._writes and coll in LABEL_COLLECTIONS and self.mode in LABEL_MODES:
                self._keep_labels(tensor_name, value, coll, source="custom")

    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a tensor computed outside a module (``F.mse_loss(...)``) as ``<tensor_name>_output_0``."""
        if not isinstance(tensor_value, torch.Tensor):
            raise ConfigError(f"record_tensor_value: {tensor_name!r} must be a torch.Tensor, got "
                              f"{type(tensor_value).__name__}", field="tensor_value", value=tensor_name)
        if self._capture:
            self._stash.append((tensor_name, None, tensor_value.detach()))

    def close(self) -> None:
        """Write what is pending, the collections and (outside SageMaker) the end-of-training marker."""
        if self._closed:
            return
        self._closed = True
        try:
            self._flush()
            for handle in (*self._handles, *self._loss_handles):
                handle.remove()
            if self._optimizer_handle is not None:
                self._optimizer_handle.remove()
            if self._writes and not self.dry_run and (self._sink is not None or self._saved_any):
                sink = self._get_sink()
                self._write_collections()
                # on SageMaker the platform uploads LocalPath and marks the end, as for smdebug; a trial written
                # straight to S3 (a job without a DebugHookConfig) has nobody else to mark it
                if not _is_sagemaker_job() or self.out_dir.startswith("s3://"):
                    sink.training_end()
                sink.close()
        except Exception as exc:
            self._write_failed(exc)
        if self._guard is not None:
            try:
                self._guard.finish()  # the steps written last, the end marker; stop: the verdict file
            except Exception as exc:  # the guard never breaks the training's end: logged, as a write failure
                self._write_failed(exc)
            if self.guard == "stop" and self._guard.fired:
                self.request_stop(f"in-process guard: {self._guard.reason()}")

    # --- the step lifecycle ----------------------------------------------------------------------

    # Never traced: run eagerly before a compiled forward (as its own frame), and at the head of the graph
    # when torch.compile inlines the model's hooks (nn.Sequential compiled after registering: one break there).
    @torch.compiler.disable  # type: ignore[untyped-decorator]
    def _forward_pre_hook(self, module: nn.Module, inputs: Any) -> None:
        if not self._steps_from_events:
            self._begin_step()

    def _begin_step(self) -> None:
        if self._closed and self._guard is not None:
            return  # the guard stopped the training: a framework may still finish its step
        if not self._prepared:
            self._prepare()
            if self._guard is not None and self._writes and not self.dry_run:
                self._sink = self._guard.tee(self._get_sink(), self._worker or "worker_0")
        self._flush()
        if self._guard is not None and self._guard.pending and self._guard_stopped():
            return
        self.step += 1
        self.mode_steps[self.mode] = self.mode_steps.get(self.mode, -1) + 1
        if self.mode != ModeKeys.GLOBAL:
            self.mode_steps[ModeKeys.GLOBAL] = self.step
        mode_step = self.mode_steps[self.mode]
        self._step_key = (self.step, self.mode, mode_step)
        self._began_since_optimizer = True
        if not self._writes or mode_step < self._next_save.get(self.mode, 0):
            return  # a step that saves nothing: one comparison (_flush left nothing to capture)
        kept = tuple(
            c for c in self._to_save
            if c.save_config is not None
            and not (self.mode in _NO_GRADIENT_MODES and c.name in (CollectionKeys.GRADIENTS,
                                                                    CollectionKeys.OPTIMIZER_VARIABLES))
        )
        saving = tuple(c for c in kept if c.save_config.should_save_step(self.mode, mode_step))  # type: ignore[union-attr]
        later = (c.save_config.next_save_step(self.mode, mode_step + 1) for c in kept)  # type: ignore[union-attr]
        self._next_save[self.mode] = min((s for s in later if s is not None), default=_NEVER)
        self._saving = saving
        if saving and self.loss_means and self.mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL):
            self._save_loss_mean(ModeKeys.TRAIN, TRAIN_LOSS_MEAN)  # the interval's mean, at its save step
        self._capture = bool(saving)
        self._grad_capture = bool(saving) and self.mode not in _NO_GRADIENT_MODES
        if saving:
            for name, param in self._params.values():
                if self._saved_in(name):
                    self._pending[name] = param.detach().clone()

    def _guard_stopped(self) -> bool:
        """Judge the steps just written. When a rule fires in ``stop`` mode: ask the loop to stop, close the trial
        (the verdict is written) and raise :class:`GuardStop`; when steps come from a framework's events
        (:meth:`follow_step_events`: its integration stops it the framework's way on :attr:`stop_reason`),
        return True instead."""
        assert self._guard is not None
        try:
            fired = self._guard.check()
        except Exception as exc:  # a rule that cannot judge never breaks the training step: logged once
            self._write_failed(exc)
            return False
        if not fired or self.guard != "stop":
            return False
        step = self._guard.last_step
        self.close()
        guard = self._guard
        if not self._steps_from_events:
            raise GuardStop(f"smx_debug.hook guard stopped the training after step {step}: {guard.reason()}",
                            step=step, fired=guard.fired, verdict=guard.verdict or {},
                            verdict_path=guard.verdict_path)
        return True

    def _prepare(self) -> None:
        """First step: resolve the collections to save, the worker, and hook the modules that can match."""
        self._check_collections()  # done at register_module; again for names added to include_collections since
        self._worker, self._num_workers = _worker()
        self._writes = self.include_workers == "all" or self._worker == "worker_0"
        for coll in self.collection_manager.values():
            coll.save_config = (coll.save_config.merged(self.save_config) if coll.save_config is not None
                                else self.save_config)
            if coll.name in SCALAR_COLLECTIONS:
                coll.reduction_config = ReductionConfig(save_raw_tensor=True)
            elif coll.reduction_config is None:
                coll.reduction_config = self.reduction_config
            for module, (inputs, outputs) in coll.modules.items():
                base = self._module_names.get(id(module))
                if base is None:
                    raise ConfigError(f"collection {coll.name!r}: add_module_tensors names a module that is not "
                                      f"registered ({type(module).__name__}); register_module(model) first",
                                      field="modules", value=type(module).__name__)
                if inputs:
                    coll.include("^" + re.escape(base + INPUT_SUFFIX))
                if outputs:
                    coll.include("^" + re.escape(base + OUTPUT_SUFFIX))
        if CollectionKeys.ALL in self.include_collections:
            self._to_save = tuple(self.collection_manager.values())
        else:
            self._to_save = tuple(self.collection_manager[n] for n in self.include_collections)
        self._next_save.clear()
        self._prepared = True
        if self._writes:
            self._hook_modules(self._named)

    def _hook_modules(self, named: Iterable[tuple[str, nn.Module]]) -> None:
        """Forward hooks on the modules whose input or output names can be saved."""
        for base, module in named:
            probes = (base + INPUT_SUFFIX + "0", base + OUTPUT_SUFFIX + "0")
            if any(c.matches(p) for c in self._to_save for p in probes):
                self._handles.append(module.register_forward_hook(self._stasher(base)))

    def _stasher(self, base: str) -> Callable[[nn.Module, Any, Any], None]:
        hook = self

        def forward_hook(module: nn.Module, inputs: Any, outputs: Any) -> None:
            if hook._capture:
                hook._stash.append((base, _detached(inputs), _detached(outputs)))

        return forward_hook

    def _optimizer_pre_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        groups = optimizer.param_groups
        cached = self._optimizer_params.get(id(optimizer))
        if cached is None or cached[0] is not groups or cached[1] != len(groups) or cached[2] != len(self._params):
            mine = [p for group in groups for p in group["params"] if id(p) in self._params]
            cached = self._optimizer_params[id(optimizer)] = (groups, len(groups), len(self._params), mine)
        mine = cached[3]
        if not mine:
            return
        if not self._began_since_optimizer:
            self._warn_once("no-step", "the optimizer stepped but no step of the registered module started: its "
                            "forward pre-hook did not run (if torch.compile traced it, register the compiled "
                            "module: hook.register_module(torch.compile(model)))")
        self._began_since_optimizer = False
        if not self._grad_capture:
            return
        for param in mine:
            name, _ = self._params[id(param)]
            gname = GRADIENT_PREFIX + name
            if param.grad is not None and self._saved_in(gname):
                self._pending[gname] = param.grad.detach().clone()

    # --- writing ---------------------------------------------------------------------------------

    def _saved_in(self, name: str) -> bool:
        return any(c.matches(name) for c in self._saving)

    @staticmethod
    def _named_captures(stash: list[tuple[str, Any, Any]]) -> Iterator[tuple[str, torch.Tensor]]:
        """smdebug's names: ``<module>_input_<i>``/``<module>_output_<i>``, numbered on within a step."""
        counters: dict[str, int] = {}
        for base, inputs, outputs in stash:
            for suffix, value in ((INPUT_SUFFIX, inputs), (OUTPUT_SUFFIX, outputs)):
                for tensor in _flat_tensors(value):
                    key = base + suffix
                    index = counters.get(key, 0)
                    counters[key] = index + 1
                    yield f"{key}{index}", tensor

    def _flush(self) -> None:
        """Write the finished step's tensors (if any) and forget them; failures are logged once, not raised."""
        if not (self._saving or self._scalars or self._custom):
            return  # nothing was saved, so nothing was stashed or captured either
        stash, pending, scalars, custom = self._stash, self._pending, self._scalars, self._custom
        key, saving = self._step_key, self._saving
        self._stash, self._pending, self._scalars, self._custom = [], {}, [], {}
        self._saving, self._capture, self._grad_capture = (), False, False
        if key is None or not self._writes or self.dry_run:
            return
        if not (saving or scalars):
            return
        try:
            arrays = self._arrays(saving, stash, pending, custom)
            for name, array in scalars:
                arrays[name] = array
            if arrays:
                step, mode, mode_step = key
                self._get_sink().write_step(step, mode=mode, mode_step=mode_step, tensors=arrays)
                if not self._saved_any:
                    self._saved_any = True
                    self._write_collections()
        except Exception as exc:
            self._write_failed(exc)

    def _arrays(self, saving: tuple[Collection, ...], stash: list[tuple[str, Any, Any]],
                pending: dict[str, torch.Tensor], custom: dict[str, tuple[Any, str]]) -> dict[str, np.ndarray]:
        captured = dict(self._named_captures(stash))
        captured.update(pending)
        arrays: dict[str, np.ndarray] = {}
        for name, tensor in captured.items():
            colls = [c for c in saving if c.matches(name)]
            if colls:
                for c in colls:
                    c.add_tensor_name(name)
                self._write_tensor(name, tensor, colls, arrays)
        if saving:
            for name, (value, coll_name) in custom.items():
                coll = self.collection_manager[coll_name]
                if isinstance(value, torch.Tensor):
                    self._write_tensor(name, value, [coll], arrays)
                else:
                    arrays[name] = value
            if self.summaries and self._step_key is not None:
                for name, (array, coll_name) in self._interval_label_arrays(self._step_key[1]).items():
                    self.get_collection(coll_name).add_tensor_name(name)
                    arrays[name] = array
        return arrays

    def _write_tensor(self, name: str, tensor: torch.Tensor, colls: list[Collection],
                      arrays: dict[str, np.ndarray]) -> None:
        """The tensor's records: its reductions, its summary statistics (summaries) and its values. With summaries,
        a collection the statistics stand for keeps whole tensors only when its own reduction_config asks
        (save_raw_tensor), not by the hook-wide default."""
        summarised = statistics_by_collection() if self.summaries else {}
        stats = tuple(dict.fromkeys(s for c in colls for s in summarised.get(c.name, ())))
        raw = False
        done: set[tuple[str, bool]] = set()
        for coll in colls:
            config = coll.reduction_config or self.reduction_config
            if coll.name in SCALAR_COLLECTIONS or (config.save_raw_tensor and not (
                    coll.name in summarised and config is self.reduction_config)):
                raw = True
            if coll.name in SCALAR_COLLECTIONS or tensor.numel() == 0:
                continue
            for reduction, absolute in config.names():
                if (reduction, absolute) in done:
                    continue
                done.add((reduction, absolute))
                arrays[reduction_tensor_name(name, reduction, abs=absolute)] = _to_numpy(
                    _reduce(tensor, reduction, absolute))
        if stats:
            for stat, value in to_host(tensor, compute_statistics(tensor, stats)).items():
                arrays[record_name(name, stat)] = value
        if raw and tensor.numel() > 0:
            arrays[name] = _to_numpy(tensor)

    def _write_collections(self) -> None:
        self._get_sink().write_collections([c.file_model() for c in self.collection_manager.values()],
                                           num_workers=self._num_workers)

    def _get_sink(self) -> TensorSink:
        if self._sink is None:
            self._sink = TrialWriter(self.out_dir, worker=self._worker or _worker()[0])
        return self._sink

    def _write_failed(self, exc: Exception) -> None:
        self.write_failures += 1
        if self.write_failures == 1:
            log.error("smx_debug.hook could not write to %s (%s: %s); training goes on, later failures are only "
                      "counted (hook.write_failures)", self.out_dir, type(exc).__name__, exc)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    @staticmethod
    def _scalar_array(value: Any, name: str) -> np.ndarray:
        if isinstance(value, torch.Tensor):
            array = _to_numpy(value)
        elif isinstance(value, int | float | np.number | bool):
            array = np.array([value])
        else:
            array = np.asarray(value)
        if array.size != 1:
            raise ConfigError(f"save_scalar: {name!r} must be a single number, got shape {array.shape}",
                              field="value", value=name)
        return array


def _is_compiled(module: nn.Module) -> bool:
    return isinstance(module, OptimizedModule)


def _check_out_dir(out_dir: str) -> None:
    if out_dir.startswith("s3://"):
        return
    if (Path(out_dir).expanduser() / END_OF_JOB).exists():
        raise ConfigError(f"out_dir {out_dir!r} holds a finished trial ({END_OF_JOB}); write each run to a "
                          "new directory", field="out_dir", value=out_dir)


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = False) -> Hook | None:
    """The current hook; with ``create_if_not_exists`` and none yet, the one the job's JSON config describes,
    else the one its plan rendered into its environment (None when there is neither, as outside a guarded job)."""
    current = singleton.current_hook()
    if isinstance(current, Hook):
        return current
    if create_if_not_exists:
        try:
            return Hook.create_from_json_file(json_config_path)
        except NotFoundError:
            return None
    return None

