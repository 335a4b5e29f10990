"""The stacks of the smx-debug CDK app."""

from __future__ import annotations

from infra.stacks.guard_stack import GuardStack

__all__ = ["GuardStack"]
