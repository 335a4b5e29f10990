"""What happened to the job: its status, when each rule first fired, whether and when it was stopped, by whom.

The facts come from DescribeTrainingJob (status, rule statuses with their IssuesFound time, the Stopping
transition, MaxRuntimeInSeconds) and from the actions ledger (the stop item, ``contracts.stop_key(job)``,
says which function stopped it and when). Both are optional: a report of a local folder has neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from smx_debug.contracts import (
    ISSUES_FOUND,
    JOB_STOPPED,
    JOB_STOPPING,
    LEDGER_CLAIMED_AT_ATTRIBUTE,
    LEDGER_DONE_AT_ATTRIBUTE,
    LEDGER_KEY_ATTRIBUTE,
    RULE_FIELDS,
    RULE_KINDS,
    stop_key,
)


@dataclass(frozen=True)
class JobOutcome:
    """Facts about a job beyond its metrics (epoch ns times; None = unknown)."""

    status: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    stop_ns: int | None = None
    stopped_by: str | None = None
    stop_rule: str | None = None
    max_runtime_s: int | None = None
    onset_ns: int | None = None
    triggers: Mapping[str, int] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @property
    def stopped(self) -> bool:
        """True when the job was stopped (status Stopping/Stopped or a stop in the ledger)."""
        return self.stop_ns is not None or self.status in (JOB_STOPPING, JOB_STOPPED)

    def with_onset(self, onset_ns: int | None) -> JobOutcome:
        """A copy with the problem's known onset (simulations, post-mortems)."""
        return replace(self, onset_ns=onset_ns)


def _ns(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, int | float):
        return int(float(value) * 1e9)
    if isinstance(value, str):
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
    return None


def outcome_from_describe(desc: Mapping[str, Any]) -> JobOutcome:
    """The outcome a DescribeTrainingJob response tells (boto3 datetimes or ISO strings)."""
    triggers: dict[str, int] = {}
    for key in (RULE_FIELDS[kind][0] for kind in RULE_KINDS):
        for st in desc.get(key) or []:
            when = _ns(st.get("LastModifiedTime"))
            if st.get("RuleEvaluationStatus") == ISSUES_FOUND and when is not None:
                triggers[str(st.get("RuleConfigurationName"))] = when
    stop_ns = None
    status = desc.get("TrainingJobStatus")
    for tr in desc.get("SecondaryStatusTransitions") or []:
        if tr.get("Status") == JOB_STOPPING:  # SecondaryStatus, spelled as the job status
            stop_ns = _ns(tr.get("StartTime"))
    if stop_ns is None and status in (JOB_STOPPING, JOB_STOPPED):
        stop_ns = _ns(desc.get("TrainingEndTime") or desc.get("LastModifiedTime"))
    stopping = desc.get("StoppingCondition") or {}
    return JobOutcome(
        status=status, start_ns=_ns(desc.get("TrainingStartTime") or desc.get("CreationTime")),
        end_ns=_ns(desc.get("TrainingEndTime")), stop_ns=stop_ns,
        stopped_by="StopTrainingJob (DescribeTrainingJob)" if stop_ns is not None else None,
        max_runtime_s=stopping.get("MaxRuntimeInSeconds"), triggers=triggers, sources=("DescribeTrainingJob",),
    )


def outcome_from_ledger_item(outcome: JobOutcome, item: Mapping[str, Any] | None) -> JobOutcome:
    """``outcome`` completed by the ledger's stop item (plain values or DynamoDB-typed attributes)."""
    if not item:
        return outcome
    plain = {k: (next(iter(v.values())) if isinstance(v, dict) and len(v) == 1 else v) for k, v in item.items()}
    when = plain.get(LEDGER_DONE_AT_ATTRIBUTE) or plain.get(LEDGER_CLAIMED_AT_ATTRIBUTE)
    stop_ns = int(float(when) * 1e9) if when is not None else outcome.stop_ns
    actor = plain.get("actor")
    return replace(
        outcome, stop_ns=stop_ns, stopped_by=f"{actor} (ledger)" if actor else "smx-debug (ledger)",
        stop_rule=str(plain["rule"]) if plain.get("rule") else outcome.stop_rule,
        sources=(*outcome.sources, "ledger"),
    )


def fetch_outcome(job_name: str, *, sagemaker_client: Any, dynamodb_client: Any = None,
                  ledger_table: str | None = None) -> JobOutcome:
    """DescribeTrainingJob, then the ledger's stop item when a table is given."""
    outcome = outcome_from_describe(sagemaker_client.describe_training_job(TrainingJobName=job_name))
    if dynamodb_client is not None and ledger_table:
        got = dynamodb_client.get_item(TableName=ledger_table, Key={LEDGER_KEY_ATTRIBUTE: {"S": stop_key(job_name)}},
                                       ConsistentRead=True)
        outcome = outcome_from_ledger_item(outcome, got.get("Item"))
    return outcome
