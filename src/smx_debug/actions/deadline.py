"""The invocation's deadline: start an AWS call only while its worst case still fits in the function's time.

Each call is bounded by its retries and socket timeouts (:func:`smx_debug.actions.settings.call_budget_seconds`,
24 s by default), but an event that triggers several rules makes several claim-act-complete rounds, and their sum
is not bounded by anything (issue 20: 6 rules with 3 s answers took 60.6-63.9 s in a 60 s function, so Lambda
killed it holding a claim). :class:`Deadline` reads what Lambda says is left
(``context.get_remaining_time_in_millis()``) and :func:`smx_debug.actions.once.once` asks it before each call
that starts something: the claim, then the action. What does not fit is left unclaimed (or its claim is
released) and the invocation fails with :class:`OutOfTimeError`, so Lambda redelivers the event and the
redelivery does the rest (what was done is found in the ledger). Recording an action that has happened and
releasing a claim are always sent. Imports only the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smx_debug.errors import SmxDebugError


class OutOfTimeError(SmxDebugError, TimeoutError):
    """Raised when too little of the invocation is left to start a call; the redelivery does the rest."""

    def __init__(self, what: str, left: float, needed: float) -> None:
        self.what, self.left, self.needed = what, left, needed
        super().__init__(
            f"{what}: {left:.1f} s of the invocation left, a call may take {needed:g} s; "
            "left for the redelivery"
        )


@dataclass(frozen=True)
class Deadline:
    """What is left of one invocation (``remaining_ms``: Lambda's clock) and the worst case of one call."""

    remaining_ms: Callable[[], float] | None
    call_seconds: float

    @classmethod
    def of(cls, context: Any, call_seconds: float) -> Deadline:
        """The deadline of a Lambda ``context``; unbounded when there is none (a direct call, a test)."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        return cls(remaining if callable(remaining) else None, call_seconds)

    def left(self) -> float:
        """Seconds left of the invocation (infinite without a context)."""
        return math.inf if self.remaining_ms is None else float(self.remaining_ms()) / 1000.0

    def fits(self) -> bool:
        """Whether one more call can run to its worst case before the function times out."""
        return self.left() >= self.call_seconds

    def keeping(self, seconds: float) -> Deadline:
        """This deadline with ``seconds`` kept for what must follow it (a final message, saving state)."""
        remaining = self.remaining_ms
        if remaining is None:
            return self
        return Deadline(lambda: max(0.0, float(remaining()) - seconds * 1000.0), self.call_seconds)

    def require(self, what: str) -> None:
        """Raise :class:`OutOfTimeError` unless one more call fits."""
        left = self.left()
        if left < self.call_seconds:
            raise OutOfTimeError(what, left, self.call_seconds)
