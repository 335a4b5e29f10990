"""What happens when a rule fires. Imports only boto3 and the standard library (the Lambda assets ship it)."""

from __future__ import annotations

from smx_debug.actions.events import (
    AlarmChange,
    JobStateChange,
    MalformedEventError,
    RuleStatus,
    parse_alarm_message,
    parse_state_change,
    parse_step,
    parse_time,
)
from smx_debug.actions.handlers import (
    Runtime,
    handle_notify,
    handle_retrain,
    handle_rule_metrics,
    handle_stop_training,
)
from smx_debug.actions.ledger import Ledger, MemoryLedger
from smx_debug.actions.notify import Notification, alarm_notification, rule_notification
from smx_debug.actions.respond import METRIC_NAME, notify_rules, publish_rule_metrics, stop_job
from smx_debug.actions.retrain import DEFAULT_STRATEGIES, init_state, monitor_step, plan_next, train_step
from smx_debug.actions.settings import DEFAULT_NAMESPACE, Settings
from smx_debug.tags import ActionSpec, DecodedTags, decode_tags, encode_tags

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_STRATEGIES",
    "METRIC_NAME",
    "ActionSpec",
    "AlarmChange",
    "DecodedTags",
    "JobStateChange",
    "Ledger",
    "MalformedEventError",
    "MemoryLedger",
    "Notification",
    "RuleStatus",
    "Runtime",
    "Settings",
    "alarm_notification",
    "decode_tags",
    "encode_tags",
    "handle_notify",
    "handle_retrain",
    "handle_rule_metrics",
    "handle_stop_training",
    "init_state",
    "monitor_step",
    "notify_rules",
    "parse_alarm_message",
    "parse_state_change",
    "parse_step",
    "parse_time",
    "plan_next",
    "publish_rule_metrics",
    "rule_notification",
    "stop_job",
    "train_step",
]
