"""Constructs of the guard stack: each creates one concern and exposes what it created."""

from __future__ import annotations

from infra.components.functions import GuardFunction
from infra.components.nag import acknowledge, acknowledge_wildcards
from infra.components.notifications import Notifications
from infra.components.retraining import RetrainingWorkflow
from infra.components.storage import LedgerTable, OutputBucket

__all__ = [
    "GuardFunction",
    "LedgerTable",
    "Notifications",
    "OutputBucket",
    "RetrainingWorkflow",
    "acknowledge",
    "acknowledge_wildcards",
]
