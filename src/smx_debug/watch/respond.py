"""The evaluator's responder: its triggers go through the action core, as a Debugger rule event's do.

For each job with new triggers, :func:`action_responder` asks SageMaker about the job
(:func:`smx_debug.actions.verify_job`: its real tags, status, account and region) and calls
:func:`smx_debug.actions.respond` with one :class:`smx_debug.actions.Trigger` per rule configuration, marked
``source=SOURCE_EVALUATOR`` so that messages say who decided. Same ledger keys, same metric, same messages and
the same exactly-once stop as the Debugger path: a rule reported by both is acted on once.

A job SageMaker refuses (it vanished, another account) is reported and nothing is done; an action failure
propagates to :func:`smx_debug.watch.run.run_once`, which finishes the run and then fails it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from smx_debug.contracts import SOURCE_EVALUATOR, Env
from smx_debug.errors import ConfigError
from smx_debug.watch.run import Responder, Trigger

__all__ = ["action_responder"]


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

    def responder(job: str, triggers: Sequence[Trigger]) -> Mapping[str, Any]:
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
            verified, found, settings=runtime.settings, ledger=runtime.ledger, clients=runtime.clients
        )
        return result

    return responder
