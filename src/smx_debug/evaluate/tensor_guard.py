"""The in-process guard at work (``smx_debug.hook.Hook(guard=...)``; docs/hook.md): the steps the hook writes are
handed, beside its sink, to an in-memory trial
(:class:`~smx_debug.evaluate.tensor_memory.MemoryTrial`) that the evaluator of ``smx-debug rules evaluate``
(:class:`~smx_debug.evaluate.tensor_eval.TensorEvaluator`) reads incrementally, each step once, keeping its rules'
state between saves: the guard's verdicts are the evaluator's on the same trial, with no file read back and no AWS.

The hook drives it (it imports this module only when a guard is asked for, and hands it its rules and its
sink: nothing here imports the hook): :meth:`InProcessGuard.check` after each save, :meth:`InProcessGuard.finish`
when the trial is closed. The modes, the rules and the exception: :mod:`smx_debug.hook.guard`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_eval import TensorEvaluator
from smx_debug.evaluate.tensor_memory import MemoryTrial
from smx_debug.evaluate.verdict_json import verdict_document
from smx_debug.rules.configured import ConfiguredRule
from smx_debug.tensors.collections_file import Collection
from smx_debug.tensors.mode_keys import ModeKeys

log = logging.getLogger("smx_debug.hook")


class GuardTee:
    """A hook's sink (``smx_debug.hook.sink.TensorSink``) that writes to ``inner`` and hands each call on to
    ``trial``."""

    def __init__(self, inner: Any, trial: MemoryTrial) -> None:
        self.inner = inner
        self.trial = trial

    def write_step(self, step: int, *, mode: ModeKeys, mode_step: int, tensors: Mapping[str, Any]) -> None:
        """Write the step, then hold it for the guard (a step the writer refused is not judged)."""
        self.inner.write_step(step, mode=mode, mode_step=mode_step, tensors=tensors)
        self.trial.add_step(step, mode=mode, mode_step=mode_step, tensors=tensors)

    def write_collections(self, collections: Iterable[Collection], *, num_workers: int | None = None) -> None:
        """Write the collections file; the guard's trial declares the same collections."""
        collections = list(collections)
        self.inner.write_collections(collections, num_workers=num_workers)
        self.trial.set_collections(collections)

    def training_end(self) -> None:
        """Write the end marker; the guard's trial has ended."""
        self.inner.training_end()
        self.trial.end()

    def close(self) -> None:
        """Close the sink."""
        self.inner.close()


class InProcessGuard:
    """The rule configurations ``rules`` over what one hook writes.

    Args:
        mode: ``warn`` (log each rule once when it fires) or ``stop`` (the hook stops the training).
        rules: rule configurations evaluated on tensors (anything else is a ConfigError naming it); the hook's are
            the recommended profile's (``smx_debug.hook.guard.resolve_guard_rules``).
        verdict_file: the file ``stop`` writes the verdict to, at the trial's root, through the hook's trial writer
            (with a sink that writes no files, e.g. ``MemorySink``: in :attr:`verdict` only).
        worker: the worker name the hook writes as (set again by :meth:`tee`).
    """

    def __init__(self, mode: str, rules: Iterable[ConfiguredRule], *, verdict_file: str,
                 worker: str = "worker_0") -> None:
        self.mode = mode
        self.verdict_file = verdict_file
        self.trial = MemoryTrial(worker)
        self.evaluator = TensorEvaluator(self.trial, rules)
        self.results: dict[str, RuleResult] = {}
        self.fired: list[str] = []  # configurations that fired, in the order they did
        self.verdict: dict[str, Any] | None = None
        self.verdict_path: str | None = None
        self._files: Any = None  # the trial writer's file sink (local or S3), where the verdict goes

    @property
    def pending(self) -> bool:
        """Whether steps were written since the last :meth:`check` (else there is nothing to judge)."""
        return bool(self.trial.steps())

    @property
    def last_step(self) -> int:
        """The global step of the last save judged (-1 before the first)."""
        return self.evaluator.feed.cursor - 1

    def tee(self, sink: Any, worker: str) -> GuardTee:
        """``sink``, with what it writes handed to the guard (steps written as ``worker``)."""
        self.trial.worker = worker
        self._files = getattr(sink, "sink", None)  # a TrialWriter's (a MemorySink has none: the verdict stays here)
        return GuardTee(sink, self.trial)

    def check(self) -> list[str]:
        """Judge the steps written since the last check; the configurations that fired now (each once)."""
        self.results = self.evaluator.refresh()
        new = [name for name, r in self.results.items() if r.triggered and name not in self.fired]
        self.fired.extend(new)
        if self.mode == "warn":
            for name in new:
                log.warning("smx_debug.hook guard: rule %s fired at step %s: %s", name,
                            self.results[name].trigger_step, self.results[name].message)
        return new

    def reason(self) -> str:
        """Why the guard stops the training: the fired rules and their messages."""
        return "; ".join(f"{name}: {self.results[name].message}" for name in self.fired)

    def finish(self) -> None:
        """The trial was closed: judge what is left and, in ``stop`` mode when a rule fired, write the verdict."""
        self.check()
        if self.mode == "stop" and self.fired:
            self.verdict = verdict_document(self.results)
            if self._files is not None:
                self._files.put(self.verdict_file, json.dumps(self.verdict, indent=1).encode())
                self.verdict_path = f"{str(self._files.uri).rstrip('/')}/{self.verdict_file}"
