"""What happens when a rule fires. Imports only boto3 and the standard library (the Lambda assets ship it).

Entry points: :func:`respond` (the action core, for any caller that has a :class:`VerifiedJob` and its
:class:`Trigger` s, such as the scheduled evaluator) and the Lambda handlers (parse -> verify -> respond).
"""

from __future__ import annotations

from smx_debug.actions.deadline import Deadline, OutOfTimeError
from smx_debug.actions.events import (
    AlarmChange,
    JobStateChange,
    MalformedEventError,
    RuleStatus,
    parse_alarm_message,
    parse_state_change,
)
from smx_debug.actions.handlers import (
    Runtime,
    handle_notify,
    handle_retrain,
    handle_rule_metrics,
    handle_state_change,
    handle_stop_training,
)
from smx_debug.actions.ledger import Ledger, LedgerLike, MemoryLedger
from smx_debug.actions.notify import Notification, alarm_notification, rule_notification, shown_values
from smx_debug.actions.once import ClaimInProgressError, Once, once
from smx_debug.actions.respond import ACTIONS, METRIC_NAME, respond
from smx_debug.actions.retrain import DEFAULT_STRATEGIES
from smx_debug.actions.settings import DEFAULT_NAMESPACE, Settings, call_budget_seconds
from smx_debug.actions.stop import stop_once
from smx_debug.actions.verify import EventRefusedError, Trigger, VerifiedJob, debugger_triggers, verify_job
from smx_debug.tags import ActionSpec, DecodedTags, decode_tags, encode_tags

__all__ = [
    "ACTIONS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_STRATEGIES",
    "METRIC_NAME",
    "ActionSpec",
    "AlarmChange",
    "ClaimInProgressError",
    "Deadline",
    "DecodedTags",
    "EventRefusedError",
    "JobStateChange",
    "Ledger",
    "LedgerLike",
    "MalformedEventError",
    "MemoryLedger",
    "Notification",
    "Once",
    "OutOfTimeError",
    "RuleStatus",
    "Runtime",
    "Settings",
    "Trigger",
    "VerifiedJob",
    "alarm_notification",
    "call_budget_seconds",
    "debugger_triggers",
    "decode_tags",
    "encode_tags",
    "handle_notify",
    "handle_retrain",
    "handle_rule_metrics",
    "handle_state_change",
    "handle_stop_training",
    "once",
    "parse_alarm_message",
    "parse_state_change",
    "respond",
    "rule_notification",
    "shown_values",
    "stop_once",
    "verify_job",
]
