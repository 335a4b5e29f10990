"""One evaluator run: find the watched running jobs, read their new minutes, evaluate their rules, act.

The scheduled Lambda calls :func:`run_once` every minute (``lambdas/evaluator/handler.py``); the demo, the tests
and the benchmark call it in process on the local AWS. A run:

1. takes the run lease (below): if another run holds it, this one does nothing;
2. discover: lists the running training jobs and decides, once per job, which are watched
   (:mod:`smx_debug.watch.discover`: prefixes, and the opt-in tag through one Search);
3. above ``jobs_per_invocation`` watched jobs, with a shard sender, sends them in shards to be evaluated in
   parallel by the shard queue's invocations (:mod:`smx_debug.watch.handler`) and ends; otherwise it evaluates them
   itself (:func:`evaluate_jobs`, as each shard does):
4. lease: claims each job's lease (below) and loads the cursors of the jobs it won (:mod:`smx_debug.watch.state`:
   typed cursors, their rules decoded once);
5. discover: refreshes what it knows about new or stale watched jobs;
6. read: reads each job's minutes since its cursor, all jobs batched (:mod:`smx_debug.watch.read`);
7. evaluate: evaluates each rule configuration on its last ``window`` minutes (:mod:`smx_debug.watch.evaluate`)
   and act: hands every newly triggered configuration to the responder (:mod:`smx_debug.watch.act`), which acts
   through the same path as a Debugger rule event (ledger, metric, message, exactly-once stop);
8. save: appends each evaluated job's new minutes to the fleet dataset (:mod:`smx_debug.watch.save`);
9. saves the cursors and releases the job leases;
10. with a fleet bucket, appends the last minutes of the watched jobs that ended (:func:`smx_debug.watch.save.
    append_ended`: those after its last run on them, or all of a job no run saw), once per job, under their job
    leases;
11. releases the run lease and puts the job errors (``EvaluatorJobErrors`` by reason).

Each job is isolated: what fails for one job (access denied, throttling
past the retries, poisoned data, a bad watch spec, an action that failed) is recorded for that job, which keeps
its cursor and is tried again next run; the run goes on for the others and the invocation succeeds. Only what
breaks the whole run fails it: the running jobs cannot be listed, the cursors cannot be read or written, the
job errors cannot be put. A job without data is reported, never stopped.

Each run ends inside its Lambda timeout (:class:`smx_debug.watch.state.RunBudget`): given the invocation's deadline, it
keeps one AWS call's worst case (botocore's retries x timeouts, 24 s by default) for steps 9 and 11, which always
happen, starts a step that calls AWS for many jobs (4, 5, 6, 8 and 10) only while one call's worst case still fits
before that margin, a job's own step (7: its rules, tensors and actions) only while the longest job step measured in this run
still fits, and hands the action core the deadline less the margin, so a trigger found late is left unclaimed. A
job not started keeps its cursor, is counted under ``out-of-time`` and goes first next run (the jobs furthest
behind first, equals shuffled by the run); the jobs finished before it are saved, so runs converge.

Overlapping runs (one still going when the next schedule fires, a delayed or manual invoke, a slow shard) would
evaluate a job twice and act before either saved its cursor. Two leases of the cursor table prevent it, both
claimed with the action ledger's lease claim (:class:`smx_debug.actions.ledger.Ledger`: a conditional PutItem that
succeeds only when no claim is live), held ``lease_seconds`` (longer than the function's timeout, so an invocation
Lambda killed blocks the next one for at most that long): the run lease (:data:`smx_debug.watch.state.RUN_LEASE_KEY`; no job name can be
it: SageMaker names are letters, digits and hyphens) that a scheduled run takes first, and one lease per job
(:func:`smx_debug.contracts.job_lease_key`) that every evaluation, a run's or a shard's, takes before reading the
job's cursor; a job held by another evaluation is left to it. Leases rather than conditional cursor writes: with
conditions, the second evaluation would still evaluate and act before its writes were refused, and BatchWriteItem
takes no conditions.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.actions.runtime import Deadline
from smx_debug.actions.verify import Trigger
from smx_debug.contracts import job_lease_key
from smx_debug.data.cloudwatch_batch import ReadResult
from smx_debug.data.job_errors import BAD_DATA
from smx_debug.watch.discover import WatchedJob, discover, refresh_all
from smx_debug.watch.evaluate import evaluate_job, evaluate_tensors, tensor_rules
from smx_debug.watch.read import read_new_minutes
from smx_debug.watch.save import append_ended, append_minutes, publish_job_errors
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import Clients, Cursor, CursorStore, RunBudget, RunOutcome, RunReport

# Sends the watched jobs in shards to be evaluated elsewhere (smx_debug.watch.handler); returns the shards sent.
ShardSender = Callable[[Sequence[WatchedJob], float], int]


class Responder(Protocol):
    """Acts on a job's new triggers through the action path, starting no call that would not fit ``deadline``
    (the invocation's, less the run's margin: :meth:`smx_debug.watch.state.RunBudget.for_actions`); returns a
    JSON-able summary. What it raises is recorded for that job, whose triggers are tried again next run.
    ``description``: the job's DescribeTrainingJob answer when this run read it (a job met for the first time),
    so that the action path does not describe it again."""

    def __call__(self, job: str, triggers: Sequence[Trigger], *, deadline: Deadline | None = None,
                 description: Mapping[str, Any] | None = None) -> Mapping[str, Any]: ...


def run_once(
    settings: EvaluatorSettings,
    clients: Clients,
    responder: Responder,
    *,
    now: float | None = None,
    clock: Callable[[], float] = time.time,
    shards: ShardSender | None = None,
    deadline: Deadline | None = None,
) -> RunReport:
    """One scheduled run: every watched running job, evaluated here or, with ``shards`` and more than
    ``settings.jobs_per_invocation`` watched jobs, sent in shards to be evaluated in parallel (see the module
    docstring). ``deadline``: the invocation's (None: unbounded); work starts only while it fits
    (:class:`smx_debug.watch.state.RunBudget`)."""
    now = clock() if now is None else now
    report = RunReport(now=now)
    store = CursorStore(settings.cursor_table, clients.dynamodb, clock=lambda: now)
    if not store.claim_run(lease_seconds=settings.lease_seconds):
        report.skipped = ("another evaluator run holds the run lease: this run did nothing; the next one resumes "
                          "from the saved cursors")
        return report
    try:
        jobs = discover(settings, clients, store, report)
        if shards is not None and len(jobs) > settings.jobs_per_invocation:
            report.shards = shards(jobs, now)  # evaluated in parallel by the shards' invocations
        else:
            evaluate_jobs(settings, clients, responder, report, jobs, deadline=deadline)
        append_ended(settings, clients, report, deadline=deadline)  # the watched jobs that ended: their last minutes
    finally:
        try:
            store.release_run()
        except (ClientError, BotoCoreError) as exc:
            report.run_error(exc, f"releasing the run lease failed ({exc}); it expires after "
                                  f"{settings.lease_seconds} s")
    publish_job_errors(clients.cloudwatch, settings.metric_namespace, report.error_counts(), now=now)
    return report


def evaluate_jobs(
    settings: EvaluatorSettings, clients: Clients, responder: Responder, report: RunReport,
    jobs: Sequence[WatchedJob], *, deadline: Deadline | None = None,
) -> None:
    """Evaluate ``jobs`` (the whole run's, or one shard's) into ``report``, each under its job lease.

    A job whose lease another evaluation holds is left to it (status ``held``). A job the invocation has no time
    left for (``deadline``, :class:`smx_debug.watch.state.RunBudget`) is not started: it fails ``out-of-time`` and keeps its
    cursor. What breaks the whole evaluation (the cursors cannot be read or written) raises; the leases then
    expire after ``lease_seconds``.
    """
    now = report.now
    budget = RunBudget(deadline)
    late = budget.short_of_call()
    if late is not None:  # not even the job leases: nothing claimed, nothing to save
        report.out_of_time([j.name for j in jobs], late)
        return
    store = CursorStore(settings.cursor_table, clients.dynamodb, clock=lambda: now)
    held = store.claim([j.name for j in jobs], lease_seconds=settings.lease_seconds, workers=settings.workers)
    for job in jobs:
        report.outcomes[job.name] = RunOutcome(job=job.name, status="evaluating" if job.name in held else "held")
        if job.name not in held:
            report.outcomes[job.name].notes.append("held by another evaluation still going (a shard or run): left "
                                                   "to it, evaluated next run")
    mine = [j for j in jobs if j.name in held]
    release = [job_lease_key(n) for n in sorted(held)]
    try:
        cursors = store.load([j.name for j in mine])  # after the claims: the last holder's writes are all in
        changed: dict[str, Cursor] = {}
        _evaluate_all(settings, clients, responder, report, mine, cursors, changed, budget)
    except BaseException:
        with contextlib.suppress(ClientError, BotoCoreError, RuntimeError):  # else they expire after lease_seconds
            store.release(release)
        raise
    store.save(changed.values(), release=release)


def _evaluate_all(
    settings: EvaluatorSettings, clients: Clients, responder: Responder, report: RunReport,
    jobs: Sequence[WatchedJob], cursors: Mapping[str, Cursor], changed: dict[str, Cursor], budget: RunBudget,
) -> None:
    now = report.now
    watched, described = refresh_all(settings, clients, report, jobs, cursors, changed, budget)
    late = budget.short_of_call()
    if late is not None:  # no time for the CloudWatch read: every job keeps its cursor (and its new facts)
        report.out_of_time([c.job for c in watched], late)
        return
    end = (int(now) - settings.settle_seconds) // 60 * 60  # complete, settled minutes only
    result, profiler = read_new_minutes(settings, clients, report, watched, budget, end=end)
    for cursor in _order(watched, seed=int(now)):
        outcome = report.outcomes[cursor.job]
        if cursor.job in result.failed:
            outcome.fail(result.failed[cursor.job])
            continue
        late = budget.short_of_job(calls=bool(tensor_rules(cursor)) and bool(cursor.info.get("tensors_s3")))
        if late is not None:  # keeps its cursor; goes first next run
            report.out_of_time([cursor.job], late)
            continue
        with budget.step():
            _evaluate_one(cursor, settings, clients, responder, outcome, result, profiler, changed, budget,
                          end=end, now=now, description=described.get(cursor.job))
    if settings.fleet_bucket and budget.short_of_call() is not None:
        report.run_out_of_time("fleet append left to the next run (out of time); the jobs' fleet cursors keep the "
                               "minutes to append")
    elif settings.fleet_bucket:  # the evaluated jobs' new minutes, to the fleet dataset (never in an action's way)
        evaluated = [changed[j] for j, o in report.outcomes.items() if o.status == "evaluated" and j in changed]
        changed.update(append_minutes(settings, clients.s3, report, evaluated, profiler, last=end // 60 - 1))




def _order(cursors: Sequence[Cursor], *, seed: int) -> list[Cursor]:
    """The order of the jobs' steps: the furthest behind first (a job cut for time last run keeps its older
    ``through``), equals shuffled by the run (so a job that keeps running out of time does not starve the others)."""
    order = list(cursors)
    random.Random(seed).shuffle(order)
    return sorted(order, key=lambda c: -math.inf if c.through is None else float(c.through))


def _evaluate_one(
    cursor: Cursor, settings: EvaluatorSettings, clients: Clients, responder: Responder, outcome: RunOutcome,
    result: ReadResult, profiler: Mapping[str, Any], changed: dict[str, Cursor], budget: RunBudget, *,
    end: int, now: float, description: Mapping[str, Any] | None = None,
) -> None:
    """One job's step: its rules and tensors, then its new triggers handed to the responder within the budget."""
    try:
        cursor, triggers = evaluate_job(cursor, settings, outcome, result, profiler.get(cursor.job), end=end,
                                        now=now)
        cursor, tensor_triggers = evaluate_tensors(cursor, outcome, s3=clients.s3, now=now)
        triggers += tensor_triggers
    except Exception as exc:  # isolation: data that breaks the evaluation fails this job only
        outcome.fail_on(exc, doing="evaluating its rules", otherwise=BAD_DATA)
        return
    if triggers:
        try:
            outcome.response = responder(cursor.job, triggers, deadline=budget.for_actions(), description=description)
        except Exception as exc:  # isolation: acted on again next run (the ledger acts once)
            outcome.fail_on(exc, doing=f"acting on {[t.rule for t in triggers]}")
            return
        outcome.triggers = triggers
        cursor = cursor.with_changes(fired={**cursor.fired, **{t.rule: t.step for t in triggers}})
    changed[cursor.job] = cursor
