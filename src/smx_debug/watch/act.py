"""The evaluator's act step: a job's new triggers handed to the action core, as a Debugger rule event's are.

:func:`action_responder` builds, once per cold start, the responder the run calls for each job with new
triggers: it asks SageMaker about the job (:func:`smx_debug.actions.verify.verify_job`: its real tags, status,
account and region) and calls :func:`smx_debug.actions.respond.respond` with the triggers the evaluation found
(:class:`smx_debug.actions.verify.Trigger`, ``source=SOURCE_EVALUATOR``: messages say who decided; built once, by
the evaluation, and handed on as they are). Same ledger keys, same metric, same messages and the same
exactly-once stop as the Debugger path: a rule reported by both is acted on once. A job SageMaker refuses (it
vanished, another account) is reported and nothing is done; an action failure propagates to the run
(:func:`smx_debug.watch.run.run_once`), which records it for that job and tries it again next run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from smx_debug.actions.respond import respond
from smx_debug.actions.runtime import Deadline, Runtime
from smx_debug.actions.verify import EventRefusedError, Trigger, verify_job
from smx_debug.contracts import Env
from smx_debug.errors import ConfigError
from smx_debug.watch.run import Responder


def action_responder(runtime: Runtime) -> Responder:
    """A responder acting through ``runtime`` (the action core's settings, clients and ledger)."""
    if not runtime.settings.account or not runtime.settings.region:
        # verify_job would refuse every job: a deployment error, so fail the cold start loudly instead.
        raise ConfigError(
            f"the evaluator cannot act: the deployment's account ({Env.ACCOUNT} or the function's ARN) or region "
            "(AWS_REGION) is unknown",
            field=Env.ACCOUNT if not runtime.settings.account else "AWS_REGION",
            value=runtime.settings.account or runtime.settings.region,
        )

    def responder(job: str, triggers: Sequence[Trigger], *, deadline: Deadline | None = None,
                  description: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        if deadline is not None:
            deadline.require(f"verify {job}")  # nothing started: the next run finds the triggers again
        try:
            verified = verify_job(
                runtime.clients("sagemaker"),
                job_name=job,
                deployment_account=runtime.settings.account,
                deployment_region=runtime.settings.region,
                description=description,  # read by this run's discover step: not described again
            )
        except EventRefusedError as exc:
            return {"job": job, "refused": str(exc)[:500]}
        result: Mapping[str, Any] = respond(
            verified, triggers, settings=runtime.settings, ledger=runtime.ledger, clients=runtime.clients,
            deadline=deadline,
        )
        return result

    return responder
