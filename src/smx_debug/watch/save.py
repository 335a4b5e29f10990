"""The evaluator's save step, after each job's evaluation and actions: its new minutes to the fleet dataset,
the ended jobs' last minutes, and the run's job errors (the cursors themselves are saved by
:meth:`smx_debug.watch.state.CursorStore.save`, with the job leases released in the same calls).

Running jobs. After a run evaluated and acted on its jobs, each one's minutes since the last append go to the stack's fleet
dataset (``system_minutes``, :mod:`smx_debug.fleet`), from what the run already read, at no extra read: the
job's Debugger profiler output when it writes some (per core and GPU, ``source`` ``debugger``), else its
CloudWatch host minutes from its cursor (divided per device, ``source`` ``cloudwatch``). The job's cursor
remembers the last minute appended (``fleet_through``); each append starts at that minute again (it may have been
partial, or CloudWatch published late) and merges by the table's key, so nothing is doubled, and an append that
failed is made up by the next run from the cursor's window.

Inside each job's isolation, and after its actions: a failure to append is recorded for that job (a note, one
count in ``EvaluatorJobErrors`` by its reason) and never stops or undoes an evaluation or an action. The
evaluator is the only writer of its watched jobs' minutes (the fleet collector leaves them to it), and a job is
evaluated by one evaluation at a time (its job lease), so no two writers ever rewrite one file. Once a job has ended,
its last minutes are appended through this sink by :func:`append_ended` (under the same lease), which marks
its cursor ``FLEET_COMPLETE``: nothing more is appended for it.

Ended jobs. While a watched job runs, each evaluator run appends its new minutes (:func:`append_minutes`). But
a run lists running jobs only, so without this module two spans were never appended: the minutes between the
last run on a job and its end (the settle delay, about two minutes), and every minute of a watched job that
ended before any run saw it (a short job, one that ended between two runs, one that Debugger's rules stopped at
once). With a fleet bucket, each scheduled run (not the shards) therefore also, after its running jobs:

1. finds the watched jobs that ended in the last ``ended_lookback_minutes`` (:func:`find_ended`: one SageMaker
   ``Search`` per name prefix and one for the opt-in tag, whose results carry each job's description and tags: no
   per-job call, and no call about a job the deployment does not watch);
2. leaves those whose last minute has not settled yet (the next run takes them) and those whose cursor says their
   minutes are complete (:data:`FLEET_COMPLETE`; one BatchGetItem per 100 jobs);
3. takes each remaining job's lease, as every evaluation does, so a shard still holding the job cannot write its
   minutes at the same time (a job held is left to the next run);
4. reads the job's minutes from its cursor's ``fleet_through`` (the minute appended last, read again), or from
   the job's start for a job no run saw (its facts from Search's result), through its end, at most
   ``ended_minutes_per_run`` a run (a long job no run saw is caught up over several runs, each well inside the
   function's timeout): its Debugger profiler output when it writes some, else its CloudWatch host metrics (the
   same sources, and the same sink, as while it ran);
5. saves its cursor, marked ``FLEET_COMPLETE`` once its end is reached: later runs, and a shard that still carried
   the job, append nothing more. A cursor of a job no run saw holds only its facts and that mark (it expires a week
   later, as any cursor).

So the evaluator stays the only writer of its watched jobs' minutes, through their end (the fleet collector
leaves them to it, running or ended), and every minute is appended once: appends merge by the table's key. Each
job is isolated: what fails for one (a read, an append) is recorded for it (``EvaluatorJobErrors`` by reason), its
cursor is not marked, and the next run tries again while the job is within the lookback; only the Search failing
is the run's own error (reported, never failing the run).

Job errors. A job's failure becomes a :class:`~smx_debug.data.job_errors.JobError` of that job (reasons in
``contracts.JOB_ERROR_REASONS``); :func:`publish_job_errors` puts one run's counts in ``EvaluatorJobErrors``
(dimension ``Reason``), and the job's cursor is not written, so the next run tries it again from where it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.actions.runtime import Deadline
from smx_debug.contracts import JOB_ENDED_STATUSES, JOB_ERRORS_METRIC, REASON_DIMENSION, job_lease_key
from smx_debug.data.cloudwatch_batch import MetricRead, read_metrics
from smx_debug.data.job_errors import BAD_DATA, JobError, job_error
from smx_debug.data.minute_frames import device_counts, system_frame
from smx_debug.tags import tags_as_dict, watched_actions
from smx_debug.watch.discover import SEARCH_PAGE, job_facts
from smx_debug.watch.read import profiler_frames
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import ENDED, Clients, Cursor, CursorStore, RunBudget, RunOutcome, RunReport

if TYPE_CHECKING:
    from smx_debug.fleet.append import Source

FLEET_THROUGH = "fleet_through"  # cursor info: the last epoch minute appended to the fleet dataset
FLEET_COMPLETE = "fleet_complete"  # cursor info: the job ended and its minutes through its end are appended


def _frame(cursor: Cursor, profiler: Any, lo: int, last: int) -> tuple[Any, Source, tuple[int, int] | None] | str:
    """The job's minutes ``lo..last`` as a system frame, its source and (CloudWatch's) its device counts; or why
    there are none."""
    if profiler is not None:
        ns = profiler["timestamp"].astype("int64").to_numpy()
        keep = (ns >= lo * 60_000_000_000) & (ns < (last + 1) * 60_000_000_000)
        return profiler[keep].reset_index(drop=True), "debugger", None
    devices = device_counts(cursor.info.get("instance_type"))
    if devices is None:
        return (f"fleet dataset: instance type {cursor.info.get('instance_type')!r} has no vCPU/GPU counts in the "
                "table, so its host sums cannot be divided per device; its minutes are not appended")
    return system_frame(cursor.data, lo, last, devices), "cloudwatch", devices


def append_minutes(
    settings: EvaluatorSettings, s3: Any, report: RunReport, cursors: Sequence[Cursor],
    profiler: Mapping[str, Any], *, last: int | Mapping[str, int],
) -> dict[str, Cursor]:
    """Append each job's minutes through ``last`` (epoch minute; or each job's, by name); returns the cursors
    whose ``fleet_through`` moved. A job whose minutes are complete (``FLEET_COMPLETE``: it ended and
    :func:`append_ended` appended its last ones) gets nothing more. Failures are recorded in the jobs'
    outcomes of ``report``."""
    from smx_debug.fleet.append import (  # local: pydantic, with a bucket
        append_system_minutes,
        cloudwatch_devices,
    )
    from smx_debug.fleet.s3_boto import stack_root  # local: the fleet code loads only with a fleet bucket

    cursors = [c for c in cursors if not c.info.get(FLEET_COMPLETE)]
    if not settings.fleet_bucket or not cursors:
        return {}
    root = stack_root(settings.fleet_bucket, s3)

    def one(cursor: Cursor) -> tuple[Cursor, Cursor | str | BaseException | None]:
        upto = last if isinstance(last, int) else last[cursor.job]
        through = cursor.info.get(FLEET_THROUGH)
        lo = int(through) if isinstance(through, int) else upto - settings.window_minutes + 1
        try:
            found = _frame(cursor, profiler.get(cursor.job), lo, upto)
            if isinstance(found, str):
                return cursor, found
            frame, source, counts = found
            if not len(frame):
                return cursor, None
            append_system_minutes(root, cursor.job, frame, source=source,
                                  devices=cloudwatch_devices(*counts) if counts is not None else None)
        except Exception as exc:  # isolation: this job's append only, after its evaluation and actions
            return cursor, exc
        return cursor, cursor.with_changes(info={**cursor.info, FLEET_THROUGH: upto})

    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        done = list(pool.map(one, cursors))
    moved: dict[str, Cursor] = {}
    for cursor, result in done:
        outcome = report.outcomes[cursor.job]
        if isinstance(result, Cursor):
            moved[cursor.job] = result
        elif isinstance(result, str):
            outcome.notes.append(result)
        elif isinstance(result, BaseException):
            outcome.record(job_error(result, job=cursor.job, doing="appending its minutes to the fleet dataset",
                                     otherwise=BAD_DATA))
    return moved


def find_ended(settings: EvaluatorSettings, sagemaker: Any, since: float) -> dict[str, Mapping[str, Any]]:
    """The descriptions (with ``Tags``) of the watched jobs that ended after ``since`` (epoch seconds).

    Only watched jobs are asked about, with SageMaker ``Search`` (one call per page; its results carry each job's
    description and tags): per name prefix, the jobs whose name contains it (Search has no prefix operator: the
    prefix is checked here), and for the opt-in tag the jobs that carry it, as
    :func:`~smx_debug.watch.discover.search_opted_in` asks about running ones; each ended after ``since``.
    """
    after = {"Name": "TrainingEndTime", "Operator": "GreaterThan",
             "Value": datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    queries = [{"Name": "TrainingJobName", "Operator": "Contains", "Value": p} for p in settings.watch_prefixes]
    if settings.opt_in_tag:
        queries.append({"Name": f"Tags.{settings.opt_in_tag}", "Operator": "Exists"})
    found: dict[str, Mapping[str, Any]] = {}
    for which in queries:
        pages = sagemaker.get_paginator("search").paginate(
            Resource="TrainingJob", SearchExpression={"Filters": [after, which]},
            PaginationConfig={"PageSize": SEARCH_PAGE})
        for page in pages:
            for result in page.get("Results", []):
                job = result.get("TrainingJob") or {}
                name = str(job.get("TrainingJobName", ""))
                watched = watched_actions(name, tags_as_dict(job.get("Tags") or []), prefixes=settings.watch_prefixes,
                                          opt_in_tag=settings.opt_in_tag) is not None
                if (watched and job.get("TrainingJobStatus") in JOB_ENDED_STATUSES
                        and isinstance(job.get("TrainingEndTime"), datetime)):
                    found[name] = job
    return found


def _last_minute(ended: datetime) -> int:
    """The epoch minute ``ended`` falls in (an end on a minute boundary: the minute before)."""
    return -(-int(ended.timestamp()) // 60) - 1


def append_ended(settings: EvaluatorSettings, clients: Clients, report: RunReport, *,
                 deadline: Deadline | None = None) -> None:
    """Append the last minutes of the watched jobs that ended (see the module docstring) into ``report``. Each
    step that calls AWS starts only while one call's worst case fits the invocation (``deadline``,
    :class:`smx_debug.watch.state.RunBudget`); the jobs not started fail ``out-of-time`` and are tried again next run."""
    budget = RunBudget(deadline)
    if not settings.fleet_bucket or budget.short_of_call() is not None:  # no time left: the next run looks
        return
    now = report.now
    settled = (int(now) - settings.settle_seconds) // 60  # minutes before this one are complete
    try:
        ended = find_ended(settings, clients.sagemaker, now - settings.ended_lookback_minutes * 60)
    except (ClientError, BotoCoreError) as exc:
        error = job_error(exc, job="(ended jobs)", doing="listing the watched training jobs that ended")
        report.errors.append(JobError(error.reason, f"{error.message}; their last minutes are appended by a later "
                                                    "run"))
        return
    lasts = {n: _last_minute(d["TrainingEndTime"]) for n, d in ended.items() if n not in report.outcomes}
    lasts = {n: last for n, last in lasts.items() if last < settled}  # the others: once their last minute settled
    if not lasts:
        return
    store = CursorStore(settings.cursor_table, clients.dynamodb, clock=lambda: now)
    known = store.load(lasts)
    pending = [n for n in sorted(lasts) if not (n in known and known[n].info.get(FLEET_COMPLETE))]
    if not pending:
        return
    late = budget.short_of_call()
    if late is not None:
        report.out_of_time(pending, late)
        return
    held = store.claim(pending, lease_seconds=settings.lease_seconds, workers=settings.workers)
    mine = [n for n in pending if n in held]
    for name in pending:
        if name not in held:
            report.outcomes[name] = RunOutcome(job=name, status="held", notes=[
                "ended; held by an evaluation still going (a shard): its last minutes are appended next run"])
    release = [job_lease_key(n) for n in mine]
    try:
        cursors = store.load(mine)  # after the claims: the last holder's writes are all in
        done = _append(settings, clients, report, {n: cursors.get(n) for n in mine},
                       {n: lasts[n] for n in mine}, ended, budget)
    except BaseException:
        with contextlib.suppress(ClientError, BotoCoreError, RuntimeError):  # else they expire after lease_seconds
            store.release(release)
        raise
    store.save(done, release=release)


def _append(settings: EvaluatorSettings, clients: Clients, report: RunReport, cursors: Mapping[str, Cursor | None],
            lasts: Mapping[str, int], descriptions: Mapping[str, Mapping[str, Any]], budget: RunBudget
            ) -> list[Cursor]:
    """Each job's minutes from its cursor (or its start) through its last minute, at most
    ``ended_minutes_per_run`` of them; the cursors to save of the jobs whose minutes were appended (marked
    complete when they reached the job's end)."""
    now = report.now
    tails: list[Cursor] = []
    firsts: dict[str, int] = {}
    uptos: dict[str, int] = {}
    for name in lasts:
        outcome = report.outcomes[name] = RunOutcome(job=name, status=ENDED)
        cursor = cursors[name]
        if cursor is None or "hosts" not in cursor.info:  # no run saw it: its facts from Search's description
            try:
                facts = job_facts(descriptions[name])
            except Exception as exc:  # isolation: this job's tail only (a description it cannot read)
                outcome.fail(job_error(exc, job=name, doing="reading its description", otherwise=BAD_DATA))
                continue
            cursor = Cursor(job=name, checked_at=now, info={**(cursor.info if cursor else {}), **facts})
        through = cursor.info.get(FLEET_THROUGH)
        start = cursor.info.get("start")
        first = int(through) if isinstance(through, int) else int(start or lasts[name] * 60) // 60
        firsts[name] = min(first, lasts[name])
        uptos[name] = min(lasts[name], firsts[name] + settings.ended_minutes_per_run - 1)  # the rest: next run
        tails.append(cursor)
    if _out_of_time(budget, report, tails):
        return []
    result = read_metrics(clients.cloudwatch, [
        MetricRead(job=c.job, start=firsts[c.job] * 60, end=(uptos[c.job] + 1) * 60, hosts=int(c.info.get("hosts", 1)))
        for c in tails], workers=settings.workers)
    profiled = [c for c in tails if c.info.get("profiler_s3")]
    profiler: dict[str, Any] = {}
    if profiled:
        def read(cursor: Cursor) -> tuple[str, Any, JobError | None]:
            frames, errors = profiler_frames([(cursor.job, str(cursor.info["profiler_s3"]))], s3=clients.s3,
                                             start_s=firsts[cursor.job] * 60, end_s=(uptos[cursor.job] + 1) * 60,
                                             workers=1)
            return cursor.job, frames.get(cursor.job), errors.get(cursor.job)

        with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
            for job, frame, error in pool.map(read, profiled):
                if error is not None:
                    report.outcomes[job].fail(error)  # tried again next run (never CloudWatch's averages instead)
                elif frame is not None:
                    profiler[job] = frame
    ready: list[Cursor] = []
    for cursor in tails:
        outcome = report.outcomes[cursor.job]
        if cursor.job in result.failed:
            outcome.fail(result.failed[cursor.job])
        if outcome.status == ENDED:
            ready.append(cursor.with_changes(data=result.data.get(cursor.job, {}),
                                             info={**cursor.info, FLEET_THROUGH: firsts[cursor.job]}))
    if _out_of_time(budget, report, ready):
        return []
    moved = append_minutes(settings, clients.s3, report, ready, profiler, last=uptos)
    done: list[Cursor] = []
    for cursor in ready:
        outcome = report.outcomes[cursor.job]
        if outcome.errors:  # the append failed: not marked, tried again next run
            outcome.status = "failed"
            continue
        final = moved.get(cursor.job, cursor)
        complete = uptos[cursor.job] == lasts[cursor.job]
        if not complete:
            outcome.notes.append(f"ended: its minutes appended through epoch minute {uptos[cursor.job]} of "
                                 f"{lasts[cursor.job]}, {settings.ended_minutes_per_run} a run; the rest next run")
        done.append(final.with_changes(data={}, info={**final.info, FLEET_THROUGH: uptos[cursor.job],
                                                       FLEET_COMPLETE: complete}))
    return done


def _out_of_time(budget: RunBudget, report: RunReport, cursors: list[Cursor]) -> bool:
    """True, each job failed ``out-of-time`` (its cursor unchanged, tried again next run), when one AWS call's
    worst case no longer fits the invocation."""
    late = budget.short_of_call()
    if late is None:
        return False
    report.out_of_time([c.job for c in cursors], late)
    return True


def publish_job_errors(cloudwatch: Any, namespace: str, counts: Mapping[str, int], *, now: float) -> int:
    """Put one run's job errors in ``namespace``: per reason (dimension ``Reason``) and in all (no dimension,
    the alarm's metric). Nothing is put for a run without errors. Returns the datapoints put."""
    total = sum(counts.values())
    if not total:
        return 0
    when = datetime.fromtimestamp(now, UTC)
    sets = [([], total), *(([{"Name": REASON_DIMENSION, "Value": r}], n) for r, n in sorted(counts.items()))]
    data = [{"MetricName": JOB_ERRORS_METRIC, "Dimensions": dims, "Value": float(n), "Unit": "Count", "Timestamp": when}
            for dims, n in sets]
    cloudwatch.put_metric_data(Namespace=namespace, MetricData=data)
    return len(data)
