"""The scheduled evaluator's Lambda body: settings and clients once per cold start, one run per invocation.

``lambdas/evaluator/handler.py`` calls :func:`handle_invocation` with either event the function receives:

- the schedule's (EventBridge): one run (:func:`smx_debug.watch.run_once`), which evaluates the watched jobs
  itself or, above ``jobs_per_invocation``, sends them in shards to the shard queue;
- the shard queue's (SQS, through the event source mapping): each record is a shard to evaluate
  (:func:`smx_debug.watch.fanout.handle_shards`), and the answer lists the records that failed
  (``batchItemFailures``), so SQS redelivers those only.

Both are bounded by the invocation's time: the handler passes Lambda's ``context`` down as a
:class:`~smx_debug.actions.deadline.Deadline` (one call's worst case with the clients' retries and timeouts), and a
job, or an action, that would not fit is left to the next run with its cursor kept (:mod:`smx_debug.watch.budget`).

The schedule's event carries nothing the run needs: the run's "now" is the clock. One JSON line is logged with
the run's summary (jobs evaluated, failed by reason, triggers). A job's failure, an action's included, is that
job's: counted in ``EvaluatorJobErrors`` (the stack alarms on it) and tried again next run, never the
invocation's. What breaks the whole run (jobs or cursors cannot be read) propagates, so the invocation fails and
the function's error alarm sees it; the next scheduled run, a minute later, resumes from the saved cursors.

The run's triggers go through the action core, as a Debugger rule event's do (:func:`action_responder`): for
each job with new triggers it asks SageMaker about the job (:func:`smx_debug.actions.verify_job`: its real
tags, status, account and region) and calls :func:`smx_debug.actions.respond` with one
:class:`smx_debug.actions.Trigger` per rule configuration, marked ``source=SOURCE_EVALUATOR`` so that messages
say who decided. Same ledger keys, same metric, same messages and the same exactly-once stop as the Debugger
path: a rule reported by both is acted on once. A job SageMaker refuses (it vanished, another account) is
reported and nothing is done; an action failure propagates to :func:`smx_debug.watch.run.run_once`, which
finishes the run and then fails it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from smx_debug.actions.deadline import Deadline
from smx_debug.actions.settings import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_READ_TIMEOUT,
    call_budget_seconds,
)
from smx_debug.contracts import SOURCE_EVALUATOR, Env
from smx_debug.errors import ConfigError
from smx_debug.watch.run import Clients, Responder, ShardSender, Trigger, run_once
from smx_debug.watch.settings import EvaluatorSettings

__all__ = ["EvaluatorRuntime", "action_responder", "handle_invocation"]


@dataclass(frozen=True)
class EvaluatorRuntime:
    """What one cold start builds: the evaluator's settings, the AWS clients, the responder, when the stack has a
    shard queue the sender of shards, and one AWS call's worst case with the clients' retries and timeouts
    (``call_seconds``: the unit of the invocation's time bound, :mod:`smx_debug.watch.budget`)."""

    settings: EvaluatorSettings
    clients: Clients
    responder: Responder
    shards: ShardSender | None = None
    call_seconds: float = call_budget_seconds(DEFAULT_MAX_ATTEMPTS, DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, context: Any = None) -> EvaluatorRuntime:
        from smx_debug.actions import Runtime

        actions = Runtime.from_env(environ, context=context)
        settings = EvaluatorSettings.from_env(environ)
        sender = None
        if settings.shard_queue_url:
            from smx_debug.watch.fanout import queue_sender

            sender = queue_sender(actions.clients("sqs"), settings.shard_queue_url, settings.jobs_per_invocation)
        return cls(
            settings=settings,
            clients=Clients(
                sagemaker=actions.clients("sagemaker"),
                cloudwatch=actions.clients("cloudwatch"),
                dynamodb=actions.clients("dynamodb"),
                s3=actions.clients("s3"),
            ),
            responder=action_responder(actions),
            shards=sender,
            call_seconds=actions.settings.call_budget,
        )


def _is_shard_event(event: object) -> TypeGuard[dict[str, Any]]:
    records = event.get("Records") if isinstance(event, dict) else None
    return isinstance(records, list) and bool(records) and all(
        isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records)


def handle_invocation(event: object, context: Any = None, *, runtime: EvaluatorRuntime | None = None
                      ) -> dict[str, Any]:
    """One scheduled run, or the shards of an SQS event, within the invocation's time (``context``, Lambda's; None:
    unbounded); returns (and logs) the summary. ``runtime`` is the cold start's (the Lambda module keeps it);
    without one, it is built from the environment for this invocation."""
    from smx_debug.actions.runtime import log_json

    if runtime is None:
        runtime = EvaluatorRuntime.from_env(context=context)
    started = time.monotonic()
    deadline = Deadline.of(context, runtime.call_seconds)
    if _is_shard_event(event):
        from smx_debug.watch.fanout import handle_shards

        answer = handle_shards(event, runtime.settings, runtime.clients, runtime.responder, deadline=deadline)
        log_json(logging.INFO, handler="evaluator", **answer, seconds=round(time.monotonic() - started, 3))
        return answer
    report = run_once(runtime.settings, runtime.clients, runtime.responder, shards=runtime.shards, deadline=deadline)
    summary = {"handler": "evaluator", **report.summary(), "seconds": round(time.monotonic() - started, 3)}
    log_json(logging.INFO, **summary)
    return summary


def action_responder(runtime: Any) -> Responder:
    """A responder acting through ``runtime`` (an :class:`smx_debug.actions.Runtime`: settings, clients, ledger)."""
    from smx_debug.actions import EventRefusedError, respond, verify_job
    from smx_debug.actions import Trigger as ActionTrigger

    if not runtime.settings.account or not runtime.settings.region:
        # verify_job would refuse every job: a deployment error, so fail the cold start loudly instead.
        raise ConfigError(
            f"the evaluator cannot act: the deployment's account ({Env.ACCOUNT} or the function's ARN) or region "
            "(AWS_REGION) is unknown",
            field=Env.ACCOUNT if not runtime.settings.account else "AWS_REGION",
            value=runtime.settings.account or runtime.settings.region,
        )

    def responder(job: str, triggers: Sequence[Trigger], *, deadline: Deadline | None = None) -> Mapping[str, Any]:
        if deadline is not None:
            deadline.require(f"verify {job}")  # nothing started: the next run finds the triggers again
        try:
            verified = verify_job(
                runtime.clients("sagemaker"),
                job_name=job,
                deployment_account=runtime.settings.account,
                deployment_region=runtime.settings.region,
            )
        except EventRefusedError as exc:
            return {"job": job, "refused": str(exc)[:500]}
        found = [
            ActionTrigger(rule=t.name, kind=t.kind, step=t.step, source=SOURCE_EVALUATOR, details=t.status_details,
                          rule_type=t.rule)
            for t in triggers
        ]
        result: Mapping[str, Any] = respond(
            verified, found, settings=runtime.settings, ledger=runtime.ledger, clients=runtime.clients,
            deadline=deadline,
        )
        return result

    return responder
