"""What happens when a rule fires. Imports only boto3 and the standard library (the Lambda assets ship it).

Entry points: :func:`respond` (the action core, for any caller that has a :class:`VerifiedJob` and its
:class:`Trigger` s, such as the scheduled evaluator) and the Lambda handlers (parse -> verify -> respond), each
with its :class:`Runtime` (settings, clients, ledger). The rest is imported from its module
(``smx_debug.actions.events``, ``.notify``, ``.retrain``, ...); the Lambda functions import from the modules.
"""

from __future__ import annotations

from smx_debug.actions.events import MalformedEventError
from smx_debug.actions.handlers import (
    handle_notify,
    handle_retrain,
    handle_rule_metrics,
    handle_state_change,
    handle_stop_training,
)
from smx_debug.actions.ledger import Ledger, MemoryLedger
from smx_debug.actions.once import ClaimInProgressError, once
from smx_debug.actions.respond import ACTIONS, respond
from smx_debug.actions.runtime import Deadline, Runtime
from smx_debug.actions.settings import Settings
from smx_debug.actions.verify import EventRefusedError, Trigger, VerifiedJob, verify_job
from smx_debug.errors import OutOfTimeError

__all__ = [
    "ACTIONS",
    "ClaimInProgressError",
    "Deadline",
    "EventRefusedError",
    "Ledger",
    "MalformedEventError",
    "MemoryLedger",
    "OutOfTimeError",
    "Runtime",
    "Settings",
    "Trigger",
    "VerifiedJob",
    "handle_notify",
    "handle_retrain",
    "handle_rule_metrics",
    "handle_state_change",
    "handle_stop_training",
    "once",
    "respond",
    "verify_job",
]
