"""The verdict log's lines: what the action core found and did, put in the fleet inbox for the collector.

Every call of :func:`smx_debug.actions.respond` (Debugger's rule events through the three handlers, and the
scheduled evaluator's triggers) ends by putting one small JSON-lines object under
:data:`~smx_debug.contracts.FLEET_INBOX_PREFIX` of the stack's bucket: one row per rule trigger and one per
action taken on it (the verdicts table's columns, :data:`~smx_debug.contracts.FLEET_TABLES`). The fleet
collector, the verdicts table's only writer, compacts the objects into the table and deletes them, so the
handlers stay boto3-only and no two functions ever write one Parquet file.

Idempotent on redelivery: a trigger's row carries the time its rule found issues (Debugger's
``LastModifiedTime``; the evaluator's run), so the three handlers of one event, and a redelivered event, write
the same trigger row, which the table's key (job, rule, event, action, time) keeps once; an action the ledger
found already done is not an action taken and writes no row; the object's key is a digest of its rows, so the
same rows rewrite the same object. A failure to put is logged and reported in the result, never raised: it
never stops or undoes an action. Imports only boto3 and the standard library.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.actions.runtime import ClientFactory, Deadline, log_json
from smx_debug.actions.settings import Settings
from smx_debug.actions.verify import Trigger, VerifiedJob
from smx_debug.contracts import (
    FLEET_HOUR_FORMAT,
    FLEET_INBOX_PREFIX,
    FLEET_TABLES,
    ISSUES_FOUND,
    RULE_FIELDS,
    VERDICTS_TABLE,
)
from smx_debug.tags import ActionSpec, watched_actions

TRIGGER_EVENT: Final = "trigger"  # the verdicts table's ``event``: a rule found issues ...
ACTION_EVENT: Final = "action"  # ... or an action was taken on it (``action``: metric, stop, notify, retrain)
_DETAIL_CHARS = 1000
_FIELDS = FLEET_TABLES[VERDICTS_TABLE].column_names
# respond()'s result key -> the verdict log's action name
_SINGLE = {"stop": "stop", "retrain": "retrain"}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def _text(value: object) -> str | None:
    if value is None or value == "":
        return None
    return str(value).encode("utf-8", "replace").decode("utf-8")[:_DETAIL_CHARS]


def _rule_types(description: Mapping[str, Any]) -> dict[str, str]:
    """Configuration name -> rule class, from the job's rule configurations (``rule_to_invoke``)."""
    out: dict[str, str] = {}
    for _status_field, config_field in RULE_FIELDS.values():
        for config in description.get(config_field) or []:
            rule = (config.get("RuleParameters") or {}).get("rule_to_invoke")
            if config.get("RuleConfigurationName") and rule:
                out[str(config["RuleConfigurationName"])] = str(rule)
    return out


def _row(job: str, rule: str, rule_type: str | None, event: str, verdict: str, action: str | None, source: str,
         time: float, detail: object = None) -> dict[str, Any]:
    row = {"job": job, "rule": rule, "rule_type": rule_type, "event": event, "verdict": verdict, "action": action,
           "source": source, "time": _iso(time), "detail": _text(detail)}
    return {k: row[k] for k in _FIELDS}


def _asking(triggered: Sequence[Trigger], applying: Mapping[str, Sequence[ActionSpec]], kind: str) -> Trigger | None:
    spec = ActionSpec(kind)
    return next((t for t in triggered if spec in applying.get(t.rule, ())), None)


def verdict_rows(job: VerifiedJob, triggered: Sequence[Trigger], result: Mapping[str, Any], *, settings: Settings,
                 now: float, applying: Mapping[str, Sequence[ActionSpec]] | None = None) -> list[dict[str, Any]]:
    """The verdict log's rows of one :func:`~smx_debug.actions.respond` call: one per trigger (at the time its
    rule found issues, else ``now``) and one per action it took or failed to take (at ``now``). Actions the
    ledger found already done, and actions no trigger asked for, are none. ``applying``: the actions each rule
    asks for, as :func:`~smx_debug.actions.respond.respond` decided them (None: decided here)."""
    if applying is None:
        applying = watched_actions(job.name, job.tags, prefixes=settings.watch_prefixes,
                                   opt_in_tag=settings.opt_in_tag, defaults=settings.default_actions,
                                   rules=[t.rule for t in triggered]) or {}
    types = _rule_types(job.description)
    by_rule = {t.rule: t for t in triggered}

    def rule_type(rule: str) -> str | None:
        found = by_rule.get(rule)
        return (found.rule_type if found is not None else None) or types.get(rule)

    rows = [_row(job.name, t.rule, rule_type(t.rule), TRIGGER_EVENT, ISSUES_FOUND, None, t.source,
                 t.time if t.time is not None else now, t.details) for t in triggered]

    def action(entry: Any, name: str, default: Trigger | None, done: str = "done") -> None:
        if not isinstance(entry, Mapping) or entry.get("duplicate") or entry.get("published") is False:
            return
        rule = entry.get("rule") or (default.rule if default is not None and "failed" in entry else None)
        if not rule:
            return  # e.g. "no triggered rule asks for stop"
        if "failed" in entry:
            verdict, detail = "failed", entry["failed"]
        elif "skipped" in entry:
            verdict, detail = "skipped", entry["skipped"]
        else:
            verdict = str(entry.get("outcome") or ("published" if entry.get("published") else done))
            detail = entry.get("topic") or entry.get("execution_name")
        source = by_rule[rule].source if rule in by_rule else triggered[0].source
        rows.append(_row(job.name, str(rule), rule_type(str(rule)), ACTION_EVENT, verdict, name, source, now,
                         detail))

    metrics = result.get("metrics")
    if isinstance(metrics, list):
        for trigger, entry in zip(triggered, metrics, strict=False):  # respond() keeps the triggers' order
            action({"rule": trigger.rule, **entry} if isinstance(entry, Mapping) else entry, "metric", trigger)
    for key, name in _SINGLE.items():
        if key in result:
            action(result[key], name, _asking(triggered, applying, name))
    notify = result.get("notify")
    if isinstance(notify, Mapping):
        for entry in notify.get("sent") or []:
            action(entry, "notify", None, "published")
    return rows


def inbox_key(job: str, rows: Sequence[Mapping[str, Any]], *, now: float) -> str:
    """Where one call's rows go: ``<inbox>verdicts/<hour of now>/<job>/<digest of the rows>.jsonl``."""
    body = _body(rows)
    hour = datetime.fromtimestamp(now, UTC).strftime(FLEET_HOUR_FORMAT[0])
    return f"{FLEET_INBOX_PREFIX}verdicts/{hour}/{job}/{hashlib.sha256(body).hexdigest()[:24]}.jsonl"


def _body(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(dict(r), sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def log_verdicts(
    job: VerifiedJob,
    triggered: Sequence[Trigger],
    result: Mapping[str, Any],
    *,
    settings: Settings,
    clients: ClientFactory,
    clock: Callable[[], float],
    deadline: Deadline | None = None,
    applying: Mapping[str, Sequence[ActionSpec]] | None = None,
) -> dict[str, Any]:
    """Put the call's rows in the inbox (nothing without ``settings.fleet_bucket``); returns what happened,
    ``{"key": ...}``, ``{"skipped": ...}`` or ``{"failed": ...}``. Never raises an AWS error."""
    if not settings.fleet_bucket:
        return {"skipped": "no fleet dataset (SMX_FLEET_BUCKET unset)"}
    now = clock()
    rows = verdict_rows(job, triggered, result, settings=settings, now=now, applying=applying)
    if not rows:
        return {"skipped": "nothing to log"}
    if deadline is not None and not deadline.fits():
        log_json(logging.WARNING, job=job.name, verdict_log="skipped: no time left", rows=len(rows))
        return {"skipped": f"no time left for the verdict log ({deadline.left():.1f} s)"}
    key = inbox_key(job.name, rows, now=now)
    try:
        clients("s3").put_object(Bucket=settings.fleet_bucket, Key=key, Body=_body(rows),
                                 ContentType="application/x-ndjson")
    except (ClientError, BotoCoreError) as exc:
        log_json(logging.WARNING, job=job.name, verdict_log="failed", error=type(exc).__name__,
                 message=str(exc)[:500], rows=len(rows))
        return {"failed": f"{type(exc).__name__}: {str(exc)[:300]}", "rows": len(rows)}
    return {"key": key, "rows": len(rows)}
