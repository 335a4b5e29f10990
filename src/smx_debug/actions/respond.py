"""The action core: what happens when rules find issues in a verified training job.

:func:`respond` is the one entry point, whoever evaluated the rules: the Debugger-event path (parse the
EventBridge event -> :func:`~smx_debug.actions.verify.verify_job` -> :func:`respond`) and smx-debug's own
scheduled evaluator (issue 14) call it the same way. For a watched job it runs, per triggered rule and the
actions its tags (``smx-debug:on:<rule>``) and the deployment defaults ask for:

- ``metric``: ``RuleTriggered`` = 1 with :func:`smx_debug.contracts.metric_dimensions`, once per job and rule;
- ``stop``: StopTrainingJob, once per job, only while SageMaker shows it InProgress;
- ``retrain``: StartExecution of the retraining state machine, once per job (execution name from the job);
- ``notify``: one message per rule and topic, once.

Then it puts what it found and did in the verdict log's inbox (:mod:`smx_debug.actions.verdict_log`; the
fleet collector compacts it), whether or not an action failed; a failure to log is reported, never raised.

Every action goes through :func:`smx_debug.actions.once.once` (claim, act, complete). One action failing
(an AWS error left after retries, a foreign topic refusing us, a live claim held by another invocation)
does not stop the others: each failure is recorded and, after all ran, the first one is raised, so the
invocation fails and is retried (the actions already done are found in the ledger) or lands in the DLQ.
Imports only boto3 and the standard library.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.actions.ledger import DONE, LedgerLike
from smx_debug.actions.notify import rule_notification
from smx_debug.actions.once import once, stop_once
from smx_debug.actions.retrain import run_spec_from_job
from smx_debug.actions.runtime import ClientFactory, Deadline, log_json
from smx_debug.actions.settings import Settings
from smx_debug.actions.verdict_log import log_verdicts
from smx_debug.actions.verify import Trigger, VerifiedJob
from smx_debug.contracts import (
    JOB_IN_PROGRESS,
    METRIC_NAME,
    RETRAIN_RUN_TAG,
    Env,
    metric_dimensions,
    retrain_execution_name,
    retrain_key,
    rule_action_key,
    stop_key,
)
from smx_debug.errors import ConfigError
from smx_debug.tags import ActionSpec, decode_tags, watched_actions

ACTIONS = ("metric", "stop", "retrain", "notify")
_STOP, _RETRAIN = ActionSpec("stop"), ActionSpec("retrain")


class _Failures:
    def __init__(self) -> None:
        self.errors: list[tuple[str, BaseException]] = []

    def run(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            self.errors.append((what, exc))
            return {"failed": f"{type(exc).__name__}: {str(exc)[:300]}"}


def respond(
    job: VerifiedJob,
    triggered: Sequence[Trigger],
    *,
    settings: Settings,
    ledger: LedgerLike,
    clients: ClientFactory,
    actions: Collection[str] = ACTIONS,
    clock: Callable[[], float] = time.time,
    deadline: Deadline | None = None,
) -> dict[str, Any]:
    """Carry out the ``actions`` (a subset of :data:`ACTIONS`) that ``triggered`` rules ask for on ``job``.

    ``deadline``: the invocation's (:class:`~smx_debug.actions.runtime.Deadline`); an action that no longer fits
    fails with ``OutOfTimeError`` without claiming, so the redelivery does it.
    Returns a JSON-able summary. Raises the first action failure after every action ran (see module doc).
    """
    unknown = sorted(set(actions) - set(ACTIONS))
    if unknown:
        raise ConfigError(f"actions: {unknown} are not among {ACTIONS}", field="actions", value=unknown)
    result: dict[str, Any] = {"job": job.name, "triggered": [t.rule for t in triggered]}
    applying = watched_actions(job.name, job.tags, prefixes=settings.watch_prefixes, opt_in_tag=settings.opt_in_tag,
                               defaults=settings.default_actions, rules=[t.rule for t in triggered])
    if applying is None:
        return {**result, "skipped": "job not watched by this deployment"}
    if not triggered:
        return {**result, "skipped": "no rule found issues"}
    asked = [(t, applying[t.rule]) for t in triggered]
    failures = _Failures()
    if "metric" in actions:
        result["metrics"] = [
            failures.run(
                f"metric {t.rule}", functools.partial(_metric, job, t, settings, ledger, clients, clock, deadline)
            )
            for t in triggered
        ]
    # stop and retrain: once per job, for the first triggered rule that asks for it
    stopping, retraining = _first_asking(asked, _STOP), _first_asking(asked, _RETRAIN)
    if "stop" in actions:
        result["stop"] = _no_rule_asks("stop") if stopping is None else failures.run(
            "stop", lambda: _stop(job, stopping, settings, ledger, clients, deadline))
    if "retrain" in actions:
        result["retrain"] = _no_rule_asks("retrain") if retraining is None else failures.run(
            "retrain", lambda: _retrain(job, retraining, settings, ledger, clients, deadline))
    if "notify" in actions:
        result["notify"] = _notify(job, asked, settings, ledger, clients, failures, deadline)
    # After the actions, whatever they did (a failure to log never stops or undoes one): the verdict log.
    result["verdict_log"] = log_verdicts(job, triggered, result, settings=settings, clients=clients, clock=clock,
                                         deadline=deadline, applying=applying)
    if failures.errors:
        log_json(
            logging.ERROR,
            job=job.name,
            failed=[
                {"action": what, "error": type(e).__name__, "message": str(e)[:500]}
                for what, e in failures.errors
            ],
        )
        raise failures.errors[0][1]
    return result


def _metric(
    job: VerifiedJob,
    trigger: Trigger,
    settings: Settings,
    ledger: LedgerLike,
    clients: ClientFactory,
    clock: Callable[[], float],
    deadline: Deadline | None,
) -> dict[str, Any]:
    def act() -> dict[str, object]:
        datum = {"MetricName": METRIC_NAME, "Value": 1.0, "Unit": "Count", "Timestamp": clock()}
        clients("cloudwatch").put_metric_data(
            Namespace=settings.namespace,
            MetricData=[{**datum, "Dimensions": dims} for dims in metric_dimensions(job.name, trigger.rule)],
        )
        return {"outcome": "published", "actor": settings.actor, "step": trigger.step}

    key = rule_action_key(job.name, trigger.kind, trigger.rule, "metric")
    done = once(
        ledger,
        key,
        {"action": "metric", "job": job.name, "rule": trigger.rule, "source": trigger.source},
        act,
        repeatable=False,  # a datapoint put twice counts twice
        deadline=deadline,
    )
    return {"rule": trigger.rule, "published": done.acted}


def _no_rule_asks(action: str) -> dict[str, Any]:
    return {"skipped": f"no triggered rule asks for {action}"}


def _first_asking(
    asked: Sequence[tuple[Trigger, tuple[ActionSpec, ...]]], spec: ActionSpec
) -> Trigger | None:
    return next((t for t, specs in asked if spec in specs), None)


def _record(job: VerifiedJob, trigger: Trigger, settings: Settings) -> dict[str, object]:
    return {
        "rule": trigger.rule,
        "rule_kind": trigger.kind,
        "source": trigger.source,
        "step": trigger.step,
        "status_details": trigger.details,
        "actor": settings.actor,
    }


def _stop(job: VerifiedJob, trigger: Trigger, settings: Settings, ledger: LedgerLike, clients: ClientFactory,
          deadline: Deadline | None) -> dict[str, Any]:
    if job.status != JOB_IN_PROGRESS:
        # Already stopping, finished: nothing to do, and not an error.
        return {"rule": trigger.rule, "skipped": f"job status is {job.status}"}
    done = stop_once(clients("sagemaker"), ledger, job.name, _record(job, trigger, settings), deadline)
    if not done.acted:
        return {"rule": trigger.rule, "skipped": "already handled (ledger)", "duplicate": True}
    return {"rule": trigger.rule, "outcome": done.record.get("outcome"), "step": trigger.step}


def _retrain(job: VerifiedJob, trigger: Trigger, settings: Settings, ledger: LedgerLike, clients: ClientFactory,
             deadline: Deadline | None) -> dict[str, Any]:
    owner = job.tags.get(RETRAIN_RUN_TAG)
    if owner is not None:
        return {"rule": trigger.rule, "skipped": _owned_text(owner)}
    machine = settings.state_machine_arn
    if not machine:
        raise ConfigError(
            f"{Env.STATE_MACHINE_ARN}: not set, but rule {trigger.rule} of {job.name} asks for retrain",
            field=Env.STATE_MACHINE_ARN,
            value=None,
        )
    name = retrain_execution_name(job.name)
    sagemaker, states = clients("sagemaker"), clients("stepfunctions")

    def act() -> dict[str, object]:
        spec = run_spec_from_job(job, trigger, sagemaker, redact=settings.redact_keys)
        try:
            arn = states.start_execution(
                stateMachineArn=machine, name=name, input=json.dumps({"run_spec": spec}, sort_keys=True)
            )["executionArn"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            arn = f"{machine.replace(':stateMachine:', ':execution:')}:{name}"
        return {"outcome": "started", "execution_arn": arn, "execution_name": name}

    done = once(
        ledger,
        retrain_key(job.name),
        {"action": "retrain", "job": job.name, **_record(job, trigger, settings)},
        act,
        deadline=deadline,
    )
    if not done.acted:
        return {"rule": trigger.rule, "skipped": "already handled (ledger)", "duplicate": True}
    return {"rule": trigger.rule, "outcome": "started", "execution_name": name}


def _owned_text(workflow_run: str) -> str:
    return f"run of retraining workflow {workflow_run[:80]}, whose monitor stops it and plans the next run"


def _done_text(record: Mapping[str, str] | None, what: str) -> str | None:
    if record is None:
        return None
    if record.get("state") != DONE:
        return f"{what} in progress by {record.get('actor', 'smx-debug')}"
    return f"{what} by {record.get('actor', 'smx-debug')} (rule {record.get('rule', '?')}; {record.get('outcome', '')})"


def _action_text(job: VerifiedJob, specs: tuple[ActionSpec, ...], ledger: LedgerLike) -> str:
    parts: list[str] = []
    if _STOP in specs:
        parts.append(
            _done_text(ledger.get(stop_key(job.name)), "stop") or f"stop asked; job status is {job.status}"
        )
    owner = job.tags.get(RETRAIN_RUN_TAG)
    if _RETRAIN in specs and owner is not None:
        parts.append(f"retraining: {_owned_text(owner)}")
    elif _RETRAIN in specs:
        parts.append(
            _done_text(ledger.get(retrain_key(job.name)), "retraining workflow started") or "retraining asked"
        )
    parts.append("notification sent")
    return "; ".join(parts)


def _notify(
    job: VerifiedJob,
    asked: Sequence[tuple[Trigger, tuple[ActionSpec, ...]]],
    settings: Settings,
    ledger: LedgerLike,
    clients: ClientFactory,
    failures: _Failures,
    deadline: Deadline | None,
) -> dict[str, Any]:
    plan = decode_tags(job.tags).plan
    sent: list[dict[str, Any]] = []
    warnings: list[str] = []
    for trigger, specs in asked:
        for spec in specs:
            if spec.kind != "notify":
                continue
            topic = spec.target or settings.topic_arn
            if not topic:
                warnings.append(f"rule {trigger.rule}: notify without a topic (SMX_TOPIC_ARN)")
                continue

            def act(
                trigger: Trigger = trigger, specs: tuple[ActionSpec, ...] = specs, topic: str = topic
            ) -> dict[str, object]:
                note = rule_notification(
                    job, trigger, action_taken=_action_text(job, specs, ledger), plan=plan
                )
                return {
                    "outcome": "published",
                    "message_id": note.publish(clients("sns"), topic),
                    "topic": topic,
                }

            key = rule_action_key(job.name, trigger.kind, trigger.rule, f"notify:{topic}")
            record = {
                "action": "notify",
                "job": job.name,
                "rule": trigger.rule,
                "topic": topic,
                "actor": settings.actor,
            }
            done = failures.run(
                f"notify {trigger.rule} -> {topic}",
                functools.partial(once, ledger, key, record, act, repeatable=False, deadline=deadline),
            )
            if isinstance(done, dict):
                sent.append({"rule": trigger.rule, "topic": topic, **done})
            elif done.acted:
                sent.append(
                    {"rule": trigger.rule, "topic": topic, "message_id": done.record.get("message_id")}
                )
    return {"sent": sent, **({"warnings": warnings} if warnings else {})}
