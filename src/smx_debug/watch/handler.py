"""The scheduled evaluator's Lambda body: settings and clients once per cold start, one run per invocation.

``lambdas/evaluator/handler.py`` calls :func:`handle_scheduled`. The event (EventBridge Scheduler's or a
``rate()`` rule's) carries nothing the run needs: the run's "now" is the clock. One JSON line is logged with the
run's summary (jobs evaluated, failed by reason, triggers). A job's failure, an action's included, is that
job's: counted in ``EvaluatorJobErrors`` (the stack alarms on it) and tried again next run, never the
invocation's. What breaks the whole run (jobs or cursors cannot be read) propagates, so the invocation fails and
the function's error alarm sees it; the next scheduled run, a minute later, resumes from the saved cursors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from smx_debug.watch.respond import action_responder
from smx_debug.watch.run import Clients, Responder, run_once
from smx_debug.watch.settings import EvaluatorSettings

__all__ = ["EvaluatorRuntime", "handle_scheduled"]

@dataclass(frozen=True)
class EvaluatorRuntime:
    """What one cold start builds: the evaluator's settings, the AWS clients and the responder."""

    settings: EvaluatorSettings
    clients: Clients
    responder: Responder

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, context: Any = None) -> EvaluatorRuntime:
        from smx_debug.actions import Runtime

        actions = Runtime.from_env(environ, context=context)
        return cls(
            settings=EvaluatorSettings.from_env(environ),
            clients=Clients(
                sagemaker=actions.clients("sagemaker"),
                cloudwatch=actions.clients("cloudwatch"),
                dynamodb=actions.clients("dynamodb"),
                s3=actions.clients("s3"),
            ),
            responder=action_responder(actions),
        )


def handle_scheduled(event: object, context: Any = None, *, runtime: EvaluatorRuntime | None = None) -> dict[str, Any]:
    """Run the evaluator once; returns (and logs) the run's summary. ``runtime`` is the cold start's (the Lambda
    module keeps it); without one, it is built from the environment for this run."""
    from smx_debug.actions.runtime import log_json

    if runtime is None:
        runtime = EvaluatorRuntime.from_env(context=context)
    started = time.monotonic()
    report = run_once(runtime.settings, runtime.clients, runtime.responder)
    summary = {"handler": "evaluator", **report.summary(), "seconds": round(time.monotonic() - started, 3)}
    log_json(logging.INFO, **summary)
    return summary
