"""Where the hook's saved steps go: :class:`~smx_debug.tensors.TrialWriter` (the default), or memory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from smx_debug.tensors.collections_file import Collection
from smx_debug.tensors.mode_keys import ModeKeys


class TensorSink(Protocol):
    """What the hook writes to: the part of :class:`~smx_debug.tensors.TrialWriter`'s API it uses."""

    def write_step(self, step: int, *, mode: ModeKeys, mode_step: int, tensors: Mapping[str, Any]) -> None:
        """Write one step's tensors (names -> numpy arrays) for this worker."""

    def write_collections(self, collections: Iterable[Collection], *, num_workers: int | None = None) -> None:
        """Write (or rewrite) this worker's collections file."""

    def training_end(self) -> None:
        """Write the end-of-training marker."""

    def close(self) -> None:
        """Stop writing."""


@dataclass(frozen=True)
class SavedStep:
    """One step as the hook handed it to its sink."""

    step: int
    mode: ModeKeys
    mode_step: int
    tensors: Mapping[str, np.ndarray]


@dataclass
class MemorySink:
    """Keeps what the hook writes in memory (tests, notebooks): ``steps``, ``collections``, ``num_workers``."""

    steps: list[SavedStep] = field(default_factory=list)
    collections: dict[str, Collection] = field(default_factory=dict)
    num_workers: int | None = None
    ended: bool = False
    closed: bool = False

    def write_step(self, step: int, *, mode: ModeKeys, mode_step: int, tensors: Mapping[str, Any]) -> None:
        """Record one step."""
        self.steps.append(SavedStep(step, mode, mode_step, dict(tensors)))

    def write_collections(self, collections: Iterable[Collection], *, num_workers: int | None = None) -> None:
        """Record the collections."""
        self.collections = {c.name: c for c in collections}
        self.num_workers = num_workers

    def training_end(self) -> None:
        """Record the end of training."""
        self.ended = True

    def close(self) -> None:
        """Mark closed."""
        self.closed = True

    def tensor(self, name: str, step: int) -> np.ndarray:
        """The value saved for ``name`` at global ``step``; KeyError when it was not saved."""
        for saved in self.steps:
            if saved.step == step and name in saved.tensors:
                return np.asarray(saved.tensors[name])
        raise KeyError(f"{name!r} was not saved at step {step}")

    def names(self, step: int | None = None) -> set[str]:
        """Tensor names saved (at ``step``, or at any step)."""
        return {n for s in self.steps if step is None or s.step == step for n in s.tensors}
