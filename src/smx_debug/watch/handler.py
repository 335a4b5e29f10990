"""The evaluator's Lambda body, the pipeline's first step (event -> run): settings and clients once per cold
start, then one run per schedule event or the shards of a shard-queue event.

``lambdas/evaluator/handler.py`` calls :func:`handle_invocation` with either event the function receives:

- the schedule's (EventBridge): one run (:func:`smx_debug.watch.run.run_once`), which evaluates the watched jobs
  itself or, above ``jobs_per_invocation``, sends them in shards to the shard queue (:func:`queue_sender`);
- the shard queue's (SQS, through the event source mapping): each record is a shard to evaluate
  (:func:`handle_shards`), and the answer lists the records that failed (``batchItemFailures``), so SQS
  redelivers those only.

Both are bounded by the invocation's time: the handler passes Lambda's ``context`` down as a
:class:`~smx_debug.actions.runtime.Deadline` (one call's worst case with the clients' retries and timeouts), and a
job, or an action, that would not fit is left to the next run with its cursor kept (:mod:`smx_debug.watch.run`,
"time bound").

The schedule's event carries nothing the run needs: the run's "now" is the clock. One JSON line is logged with
the run's summary (jobs evaluated, failed by reason, triggers). A job's failure, an action's included, is that
job's: counted in ``EvaluatorJobErrors`` (the stack alarms on it) and tried again next run, never the
invocation's. What breaks the whole run (jobs or cursors cannot be read) propagates, so the invocation fails and
the function's error alarm sees it; the next scheduled run, a minute later, resumes from the saved cursors.
The run's triggers go through the action core (:mod:`smx_debug.watch.act`).

The fan-out. The evaluator's fan-out: above ``jobs_per_invocation`` watched jobs, shards evaluated in parallel through SQS.

One invocation evaluates a few hundred jobs inside its timeout (200 jobs x 4 hosts: 25-35 s). Above
``jobs_per_invocation`` (``cdk.json`` ``evaluator.jobs_per_invocation``), the scheduled run lists and decides
as always, then, instead of evaluating, sends the watched jobs in shards of at most that many to the stack's
shard queue (:func:`queue_sender`); the queue feeds the same function through a Lambda event source mapping
with batch size 1 and a **maximum concurrency** (``evaluator.max_concurrency``: AWS's own bounded fan-out,
which reserves nothing), and each invocation evaluates its shard (:func:`handle_shards`) with the per-job
isolation, cursors and exactly-once actions of a whole run.

- **No job evaluated twice at once.** Every evaluation, a shard's or a whole run's, first takes each job's lease
  (:func:`smx_debug.contracts.job_lease_key`, a conditional PutItem in the cursor table) and evaluates only the
  jobs it won; a job still held by a slow shard is left to it (``held``). Its cursor is read after the claim.
- **A slow or failing shard costs only its own jobs.** Shards are independent messages; one that is slow holds
  only its jobs' leases; one whose evaluation breaks (its cursors cannot be read) counts its jobs in
  ``EvaluatorJobErrors`` and is reported as a partial batch failure, so SQS redelivers only that message.
- **Inside the function's timeout.** A shard starts a job only while it fits in what is left of its invocation
  (:class:`smx_debug.watch.state.RunBudget`); a job it cut is counted ``out-of-time`` and keeps its cursor, and the message is
  not failed: SQS would redeliver it after the visibility timeout, stale by then and dropped, while the next run
  has already sent the job again (furthest behind, it goes first).
- **No backlog.** A shard older than the schedule's period (``SentTimestamp``) is dropped: the newer run already
  sent its jobs again. Jobs are shuffled into shards each run, so a queue that cannot keep up delays random jobs,
  never the same ones every run.
- **Only watched jobs.** Before reading a job or writing its cursor, a shard decides again whether the deployment
  watches each job it names, with the run's own decision (:func:`smx_debug.watch.discover.watched_jobs`, on the name
  and the tags the message carries); a job it does not watch (its opt-in tag removed since the run, a message the
  run never sent) is left alone and listed in the shard's ``unwatched``.
- A message that is not a shard (not JSON, nested too deep, a ``run`` that is not a finite number, a job named
  twice) is a partial batch failure too: after the queue's ``maxReceiveCount`` it lands in the stack's
  dead-letter queue, whose alarm tells people.

Shard message (JSON, at most SQS's 256 KiB): ``{"v": 1, "run": <the run's epoch seconds>, "jobs": [{"n": name,
"a": arn, "t": {evaluator tag: value, opt-in tag: value} or null}]}``; ``t`` is what Search told the run (null:
unknown).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from smx_debug import _json as bounded_json
from smx_debug.actions.runtime import Deadline, Runtime, log_json
from smx_debug.actions.settings import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_READ_TIMEOUT,
    call_budget_seconds,
)
from smx_debug.errors import AwsError, SmxDebugError
from smx_debug.watch.act import action_responder
from smx_debug.watch.discover import WatchedJob, watched_jobs
from smx_debug.watch.run import Responder, ShardSender, evaluate_jobs, run_once
from smx_debug.watch.save import publish_job_errors
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import Clients, CursorStore, RunReport


@dataclass(frozen=True)
class EvaluatorRuntime:
    """What one cold start builds: the evaluator's settings, the AWS clients, the responder, when the stack has a
    shard queue the sender of shards, and one AWS call's worst case with the clients' retries and timeouts
    (``call_seconds``: the unit of the invocation's time bound, :class:`smx_debug.watch.state.RunBudget`)."""

    settings: EvaluatorSettings
    clients: Clients
    responder: Responder
    shards: ShardSender | None = None
    call_seconds: float = call_budget_seconds(DEFAULT_MAX_ATTEMPTS, DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, context: Any = None) -> EvaluatorRuntime:
        actions = Runtime.from_env(environ, context=context)
        settings = EvaluatorSettings.from_env(environ, actions=actions.settings)  # the shared variables: once
        sender = None
        if settings.shard_queue_url:
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
    if runtime is None:
        runtime = EvaluatorRuntime.from_env(context=context)
    started = time.monotonic()
    deadline = Deadline.of(context, runtime.call_seconds)
    if _is_shard_event(event):
        answer = handle_shards(event, runtime.settings, runtime.clients, runtime.responder, deadline=deadline)
        log_json(logging.INFO, handler="evaluator", **answer, seconds=round(time.monotonic() - started, 3))
        return answer
    report = run_once(runtime.settings, runtime.clients, runtime.responder, shards=runtime.shards, deadline=deadline)
    summary = {"handler": "evaluator", **report.summary(), "seconds": round(time.monotonic() - started, 3)}
    log_json(logging.INFO, **summary)
    return summary


# ---------------------------------------------------------------------------------------------- the fan-out
SHARD_VERSION: Final = 1
MAX_MESSAGE_BYTES: Final = 262_144  # SQS: one message, and one SendMessageBatch in all
_BATCH: Final = 10  # SendMessageBatch entries
_log = logging.getLogger(__name__)


class MalformedShardError(SmxDebugError, ValueError):
    """Raised when an SQS message on the shard queue is not a shard this version can read."""


def split(jobs: Sequence[WatchedJob], size: int, *, seed: int) -> list[list[WatchedJob]]:
    """``jobs`` shuffled (``seed``: the run) into shards of at most ``size``, as even as can be."""
    order = list(jobs)
    random.Random(seed).shuffle(order)
    count = max(1, -(-len(order) // max(size, 1)))
    return [order[i::count] for i in range(count) if order[i::count]]


def encode_shard(jobs: Sequence[WatchedJob], run_at: float) -> str:
    return json.dumps({"v": SHARD_VERSION, "run": run_at,
                       "jobs": [{"n": j.name, "a": j.arn, "t": None if j.tags is None else dict(j.tags)}
                                for j in jobs]}, separators=(",", ":"))


def _run_time(run: object) -> float | None:
    """The shard's ``run`` as finite epoch seconds, else None (not a number, NaN, infinite, or past a float)."""
    if isinstance(run, bool) or not isinstance(run, int | float):
        return None
    try:
        value = float(run)
    except OverflowError:  # an integer of 400 digits
        return None
    return value if math.isfinite(value) else None


def decode_shard(body: str) -> tuple[float, list[WatchedJob]]:
    """The run's time and the jobs of one shard message; MalformedShardError says what is wrong."""
    try:
        data = bounded_json.loads(body)
    except (ValueError, TypeError) as exc:  # ValueError: also nested too deep (smx_debug._json)
        raise MalformedShardError(f"shard message is not JSON: {str(body)[:80]!r}") from exc
    if not isinstance(data, dict) or data.get("v") != SHARD_VERSION:
        raise MalformedShardError(f"shard message version {data.get('v') if isinstance(data, dict) else None!r} "
                                  f"is not {SHARD_VERSION}")
    run, items = _run_time(data.get("run")), data.get("jobs")
    if run is None or not isinstance(items, list) or not items:
        raise MalformedShardError(f"shard message needs a finite numeric run and a non-empty jobs list: "
                                  f"run {str(data.get('run'))[:40]!r}, {str(body)[:120]!r}")
    jobs: list[WatchedJob] = []
    for item in items:
        tags = item.get("t") if isinstance(item, dict) else None
        if (not isinstance(item, dict) or not isinstance(item.get("n"), str) or not isinstance(item.get("a"), str)
                or not (tags is None or (isinstance(tags, dict) and all(isinstance(v, str) for v in tags.values())))):
            raise MalformedShardError(f"shard message job {str(item)[:120]!r} is not {{n, a, t}}")
        jobs.append(WatchedJob(name=item["n"], arn=item["a"], tags=tags))
    twice = sorted(n for n, count in Counter(j.name for j in jobs).items() if count > 1)
    if twice:
        raise MalformedShardError(f"shard message names job(s) twice: {twice[:5]!r}")
    return run, jobs


def queue_sender(sqs: Any, queue_url: str, size: int) -> ShardSender:
    """A :data:`~smx_debug.watch.run.ShardSender` putting shards of at most ``size`` jobs on ``queue_url``
    (SendMessageBatch: 10 entries and 256 KiB a call; entries SQS refuses are sent once more, then the run fails
    naming them: their jobs are sent again by the next run)."""

    def send(jobs: Sequence[WatchedJob], now: float) -> int:
        bodies = [encode_shard(s, now) for s in split(jobs, size, seed=int(now))]
        batches: list[list[tuple[str, str]]] = [[]]
        used = 0
        for i, body in enumerate(bodies):
            if len(body.encode()) > MAX_MESSAGE_BYTES:
                raise AwsError(f"a shard of {size} jobs is {len(body.encode())} bytes, over SQS's {MAX_MESSAGE_BYTES}: "
                               "lower evaluator.jobs_per_invocation", code="MessageTooLong", operation="SendMessageBatch")
            if len(batches[-1]) == _BATCH or used + len(body.encode()) > MAX_MESSAGE_BYTES:
                batches.append([])
                used = 0
            batches[-1].append((str(i), body))
            used += len(body.encode())
        for batch in batches:
            pending = dict(batch)
            for _ in range(2):
                answer = sqs.send_message_batch(QueueUrl=queue_url, Entries=[{"Id": i, "MessageBody": b}
                                                                            for i, b in pending.items()])
                pending = {f["Id"]: pending[f["Id"]] for f in answer.get("Failed", []) if f.get("Id") in pending}
                if not pending:
                    break
            if pending:
                raise AwsError(f"SQS refused {len(pending)} shard message(s) twice ({queue_url}); their jobs are sent "
                               "again by the next run", code="SendMessageBatchFailed", operation="SendMessageBatch")
        return len(bodies)

    return send


def handle_shards(
    event: Mapping[str, Any], settings: EvaluatorSettings, clients: Clients, responder: Responder, *,
    clock: Callable[[], float] = time.time, deadline: Deadline | None = None,
) -> dict[str, Any]:
    """Evaluate each shard record of an SQS event (see the module docstring) within the invocation's
    ``deadline``; returns the partial batch failures (``batchItemFailures``) and each shard's summary. A job cut
    for time is the job's (``out-of-time``), not the message's. Raises only when job errors cannot be put."""
    failures: list[str] = []
    shards: list[dict[str, Any]] = []
    for record in event.get("Records") or []:
        message = str(record.get("messageId", ""))
        try:
            run_at, jobs = decode_shard(record.get("body"))
        except MalformedShardError as exc:
            _log.warning("evaluator: shard message %s rejected: %s", message, exc)
            failures.append(message)  # after maxReceiveCount, the dead-letter queue
            shards.append({"message": message, "rejected": str(exc)[:300]})
            continue
        now = clock()
        sent = float((record.get("attributes") or {}).get("SentTimestamp") or run_at * 1000) / 1000
        if now - sent > settings.rate_minutes * 60:
            shards.append({"message": message, "jobs": len(jobs), "stale": round(now - sent, 1)})
            continue  # the next run has sent these jobs again: dropped, not failed
        report = RunReport(now=now, running=len(jobs))
        unwatched: list[str] = []
        try:
            # The run's own decision, before any read of a job or write of its cursor: a job the deployment does
            # not watch (its opt-in tag removed since the run, or a message the run never sent) is left alone.
            store = CursorStore(settings.cursor_table, clients.dynamodb, clock=clock)  # reads only
            watched = set(watched_jobs(settings, store, {j.name: j.tags for j in jobs}, now=now))
            unwatched = [j.name for j in jobs if j.name not in watched]
            if unwatched:
                _log.warning("evaluator: shard message %s names %d job(s) this deployment does not watch, left "
                             "alone: %s", message, len(unwatched), unwatched[:10])
            jobs = [j for j in jobs if j.name in watched]
            report.watched = len(jobs)
            if jobs:
                evaluate_jobs(settings, clients, responder, report, jobs, deadline=deadline)
        except Exception as exc:  # what breaks this shard (its cursors): its jobs, not the others' shards
            report.fail_unfinished([j.name for j in jobs], exc, of=f"shard {message}",
                                   doing="evaluating the shard (its cursors)")
            failures.append(message)
        publish_job_errors(clients.cloudwatch, settings.metric_namespace, report.error_counts(), now=now)
        shards.append({"message": message, **report.summary(), "unwatched": unwatched})
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failures], "shards": shards}
