"""Lambda for the tests that prove a handler ends inside its timeout (the action handlers, the retrain steps, the
evaluator): a fresh copy of a function's entry module, and Lambda's time on a fake clock (a context whose time
left runs on it, clients whose calls take time of it). Nothing sleeps; each slow call moves the clock on.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def entry_point(handler: str, name: str) -> ModuleType:
    """A fresh copy of ``lambdas/<handler>/handler.py`` (its own cold-start state), as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "lambdas" / handler / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clock:
    """Epoch seconds that move only when a slow call (or the test) moves them."""

    def __init__(self, now: float = 1_795_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Context:
    """The Lambda context: the time left of this invocation on ``clock``, and optionally the function's ARN."""

    def __init__(self, clock: Clock, timeout: float, invoked_function_arn: str | None = None) -> None:
        self.clock, self.ends = clock, clock.now + timeout
        if invoked_function_arn is not None:
            self.invoked_function_arn = invoked_function_arn

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.ends - self.clock.now) * 1000))


class Crash(BaseException):
    """A process death (Lambda timeout, out of memory): no ``except Exception`` runs after it, not even the release
    of a ledger claim."""


class CrashAfterClaim:
    """Mixed into a ledger class (``class CrashingLedger(CrashAfterClaim, Ledger)``): its next ``crashes`` claims
    that succeed end in a :class:`Crash` before the action, the claim left behind."""

    crashes = 1

    def claim_or_holder(self, pk: str, record: Any) -> dict[str, str] | None:
        holder: dict[str, str] | None = super().claim_or_holder(pk, record)  # type: ignore[misc]
        if holder is None and self.crashes:
            self.crashes -= 1
            raise Crash(pk)
        return holder


class Slow:
    """Every call of the wrapped client takes ``answer`` seconds of ``clock`` (its model, exceptions and
    paginators pass through)."""

    def __init__(self, target: Any, clock: Clock, answer: float) -> None:
        self._target, self._clock, self._answer = target, clock, answer

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name in ("meta", "exceptions", "get_paginator") or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._clock.now += self._answer
            return attr(*args, **kwargs)

        return call
