"""The warning category for things a user should know about a plan that is still valid."""

from __future__ import annotations


class SmxDebugWarning(UserWarning):
    """Issued (and returned by ``DebugPlan.validate()``) for plans that are valid but likely wrong."""
