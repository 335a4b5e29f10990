"""Where the hook's saved steps go: a writer of Debugger's tensor layout, or memory (tests, dry runs)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from smx_debug.hook.modes import ModeKeys

__all__ = ["MemorySink", "SavedStep", "TensorSink"]


class TensorSink(Protocol):
    """What the hook writes to: one call per saved step, the collections, and the end of training."""

    def write_step(self, step: int, mode: ModeKeys, mode_step: int, tensors: Mapping[str, np.ndarray]) -> None:
        """Write one step's tensors (names -> numpy arrays) for this worker."""

    def write_collections(self, collections: Mapping[str, Mapping[str, Any]], *, num_workers: int) -> None:
        """Write (or rewrite) this worker's collections file."""

    def close(self, *, training_ended: bool) -> None:
        """Flush and close; ``training_ended`` writes the end-of-training marker."""


@dataclass(frozen=True)
class SavedStep:
    """One step as the hook handed it to its sink."""

    step: int
    mode: ModeKeys
    mode_step: int
    tensors: Mapping[str, np.ndarray]


@dataclass
class MemorySink:
    """Keeps what the hook writes in memory: ``steps``, ``collections``, ``num_workers``, ``ended``."""

    steps: list[SavedStep] = field(default_factory=list)
    collections: dict[str, dict[str, Any]] = field(default_factory=dict)
    num_workers: int = 0
    closed: bool = False
    ended: bool = False

    def write_step(self, step: int, mode: ModeKeys, mode_step: int, tensors: Mapping[str, np.ndarray]) -> None:
        """Record one step."""
        self.steps.append(SavedStep(step, mode, mode_step, dict(tensors)))

    def write_collections(self, collections: Mapping[str, Mapping[str, Any]], *, num_workers: int) -> None:
        """Record the collections."""
        self.collections = {k: dict(v) for k, v in collections.items()}
        self.num_workers = num_workers

    def close(self, *, training_ended: bool) -> None:
        """Mark closed."""
        self.closed = True
        self.ended = training_ended

    def tensor(self, name: str, step: int) -> np.ndarray:
        """The value saved for ``name`` at global ``step``; KeyError when it was not saved."""
        for saved in self.steps:
            if saved.step == step and name in saved.tensors:
                return saved.tensors[name]
        raise KeyError(f"{name!r} was not saved at step {step}")

    def names(self, step: int | None = None) -> set[str]:
        """Tensor names saved (at ``step``, or at any step)."""
        return {n for s in self.steps if step is None or s.step == step for n in s.tensors}
