"""One evaluator run: find the watched running jobs, read their new minutes, evaluate their rules, act.

The scheduled Lambda calls :func:`run_once` every minute (``lambdas/evaluator/handler.py``); the demo, the tests
and the benchmark call it in process on the local AWS. A run:

1. takes the run lease (below): if another run holds it, this one does nothing;
2. lists the running training jobs and decides which are watched (:mod:`smx_debug.watch.discovery`: prefixes, and
   the opt-in tag through one Search);
3. above ``jobs_per_invocation`` watched jobs, with a shard sender, sends them in shards to be evaluated in
   parallel by the shard queue's invocations (:mod:`smx_debug.watch.fanout`) and ends; otherwise it evaluates them
   itself (:func:`evaluate_jobs`, as each shard does):
4. claims each job's lease (below) and loads the cursors of the jobs it won (:mod:`smx_debug.watch.cursor`);
5. refreshes what it knows about new or stale watched jobs;
6. reads each job's minutes since its cursor, all jobs batched (:mod:`smx_debug.data.cloudwatch_batch`), and merges
   them into the job's window;
7. evaluates each rule configuration on its last ``window`` minutes (the same rule code as ``smx-debug rules
   evaluate``, keyed by configuration name) and hands every newly triggered configuration to the responder,
   which acts through the same path as a Debugger rule event (ledger, metric, message, exactly-once stop);
8. appends each evaluated job's new minutes to the fleet dataset (:mod:`smx_debug.watch.fleet_sink`);
9. saves the cursors and releases the job leases;
10. with a fleet bucket, appends the last minutes of the watched jobs that ended (:mod:`smx_debug.watch.ended`:
    those after its last run on them, or all of a job no run saw), once per job, under their job leases;
11. releases the run lease and puts the job errors (``EvaluatorJobErrors`` by reason).

Each job is isolated (:mod:`smx_debug.watch.isolation`): what fails for one job (access denied, throttling
past the retries, poisoned data, a bad watch spec, an action that failed) is recorded for that job, which keeps
its cursor and is tried again next run; the run goes on for the others and the invocation succeeds. Only what
breaks the whole run fails it: the running jobs cannot be listed, the cursors cannot be read or written, the
job errors cannot be put. A job without data is reported, never stopped.

Each run ends inside its Lambda timeout (:mod:`smx_debug.watch.budget`): given the invocation's deadline, it
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
Lambda killed blocks the next one for at most that long): the run lease (:data:`RUN_LEASE_KEY`; no job name can be
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
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.actions.deadline import Deadline
from smx_debug.contracts import EVALUATOR_TAG, RuleKind, condition_met_details, job_lease_key
from smx_debug.data.cloudwatch_batch import MetricRead, ReadResult, read_metrics
from smx_debug.data.job_errors import AWS_ERROR, BAD_DATA, OUT_OF_TIME, JobError, job_error, reason_of
from smx_debug.errors import SmxDebugError
from smx_debug.rules.watch_spec import WatchedRule
from smx_debug.tags import watched_actions
from smx_debug.watch.budget import RunBudget
from smx_debug.watch.cursor import Cursor, CursorStore
from smx_debug.watch.discovery import Refreshed, list_running, refresh, search_opted_in
from smx_debug.watch.ended import ENDED, append_ended
from smx_debug.watch.fleet_sink import append_minutes
from smx_debug.watch.isolation import publish_job_errors
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.tensors import evaluate_tensors, tensor_rules
from smx_debug.watch.trigger import JobOutcome, Trigger

_DEVICE_WINDOW = 10  # minutes of profiler output read per run: the longest device-rule window

__all__ = [
    "RUN_LEASE_KEY",
    "Clients",
    "JobOutcome",
    "Responder",
    "RunReport",
    "ShardSender",
    "Trigger",
    "WatchedJob",
    "evaluate_jobs",
    "run_once",
    "watched_jobs",
]

RUN_LEASE_KEY = "#evaluator-run"  # the run lease's item in the cursor table


@dataclass(frozen=True)
class Clients:
    """The AWS clients a run uses (injected; the handler builds them once per cold start)."""

    sagemaker: Any
    cloudwatch: Any
    dynamodb: Any
    s3: Any


@dataclass(frozen=True)
class WatchedJob:
    """A watched running job as a run hands it to an evaluation (its own, or a shard's): its name and ARN, and
    its tags when the run has them from Search (None: read them with ListTags if its facts are stale)."""

    name: str
    arn: str
    tags: Mapping[str, str] | None = None

    @classmethod
    def of(cls, summary: Mapping[str, Any], tags: Mapping[str, str] | None, *,
           opt_in_tag: str | None = None) -> WatchedJob:
        """From a ListTrainingJobs summary; only the tags the evaluation reads are kept: its watch spec's key, and
        the opt-in tag ``opt_in_tag`` (a shard decides again with :func:`watched_jobs` whether the job is watched)."""
        keep = {EVALUATOR_TAG, opt_in_tag}
        kept = None if tags is None else {k: v for k, v in tags.items() if k in keep}
        return cls(name=str(summary["TrainingJobName"]), arn=str(summary["TrainingJobArn"]), tags=kept)

    @property
    def summary(self) -> dict[str, str]:
        return {"TrainingJobName": self.name, "TrainingJobArn": self.arn}


# Sends the watched jobs in shards to be evaluated elsewhere (smx_debug.watch.fanout); returns the shards sent.
ShardSender = Callable[[Sequence[WatchedJob], float], int]


class Responder(Protocol):
    """Acts on a job's new triggers through the action path, starting no call that would not fit ``deadline``
    (the invocation's, less the run's margin: :meth:`smx_debug.watch.budget.RunBudget.for_actions`); returns a
    JSON-able summary. What it raises is recorded for that job, whose triggers are tried again next run."""

    def __call__(self, job: str, triggers: Sequence[Trigger], *, deadline: Deadline | None = None
                 ) -> Mapping[str, Any]: ...


@dataclass
class RunReport:
    """A run's summary: jobs seen, evaluated, failed and triggered, and what it asked AWS for.

    ``errors`` are the run's own problems that did not fail it (the opt-in Search, the lease release);
    ``skipped`` says why the run did nothing (another run held the lease).
    """

    now: float
    running: int = 0
    watched: int = 0
    outcomes: dict[str, JobOutcome] = field(default_factory=dict)
    metrics_requested: int = 0
    datapoints: int = 0
    get_metric_data_calls: int = 0
    errors: list[JobError] = field(default_factory=list)
    skipped: str | None = None
    shards: int = 0

    @property
    def triggers(self) -> list[Trigger]:
        return [t for o in self.outcomes.values() for t in o.triggers]

    def out_of_time(self, jobs: Iterable[str], why: str) -> None:
        """Fail each of ``jobs`` ``out-of-time`` (its outcome made when the run had none yet): not started, so its
        cursor is kept and it goes first next run (:mod:`smx_debug.watch.budget`)."""
        for job in jobs:
            self.outcomes.setdefault(job, JobOutcome(job=job)).fail(JobError(OUT_OF_TIME, why))

    def error_counts(self) -> dict[str, int]:
        """This run's errors by reason: each job counted once per reason, plus the run's own."""
        reasons = [r for o in self.outcomes.values() for r in dict.fromkeys(e.reason for e in o.errors)]
        return dict(Counter(reasons + [e.reason for e in self.errors]))

    def summary(self) -> dict[str, Any]:
        """JSON-able, for the Lambda's log line and return value."""
        return {
            "running": self.running,
            "watched": self.watched,
            "evaluated": sum(o.status == "evaluated" for o in self.outcomes.values()),
            "failed": {j: [e.reason for e in o.errors] for j, o in self.outcomes.items() if o.status == "failed"},
            "job_errors": self.error_counts(),
            "triggers": [{"job": t.job, "rule": t.name, "step": t.step} for t in self.triggers],
            "problems": {j: o.notes for j, o in self.outcomes.items() if o.notes},
            "metrics_requested": self.metrics_requested,
            "get_metric_data_calls": self.get_metric_data_calls,
            "held": sorted(j for j, o in self.outcomes.items() if o.status == "held"),
            "ended": sorted(j for j, o in self.outcomes.items() if o.status == ENDED),
            "errors": [e.message for e in self.errors],
            "skipped": self.skipped,
            "shards": self.shards,
        }


def _kind(rule: str) -> RuleKind:
    from smx_debug.rules.catalog import get_rule

    return get_rule(rule).kind


def _merge(cursor: Cursor, new: Mapping[str, Mapping[str, Mapping[int, float]]], keep_from: int) -> Cursor:
    data = {s: {m: dict(p) for m, p in ms.items()} for s, ms in cursor.data.items()}
    for series, metrics in new.items():
        for metric, points in metrics.items():
            data.setdefault(series, {}).setdefault(metric, {}).update(points)
    trimmed = {
        s: {m: {t: v for t, v in p.items() if t >= keep_from} for m, p in ms.items()} for s, ms in data.items()
    }
    trimmed = {s: {m: p for m, p in ms.items() if p} for s, ms in trimmed.items()}
    return cursor.with_changes(data={s: ms for s, ms in trimmed.items() if ms})


def _window(frame: Any, lo: int, last: int) -> Any:
    """Rows of a profiler frame in minutes ``lo..last`` (epoch minutes, inclusive)."""
    ns = frame["timestamp"].astype("int64").to_numpy()
    keep = (ns >= lo * 60_000_000_000) & (ns < (last + 1) * 60_000_000_000)
    return frame[keep].reset_index(drop=True)


@cache
def _empty_frames() -> tuple[Any, Any, Any, Any]:
    """Empty system, scalars, steps and dataloader frames, built once (the rules only read them)."""
    from smx_debug.data.frames import empty_dataloader, empty_scalars, empty_steps, empty_system

    return empty_system(), empty_scalars(), empty_steps(), empty_dataloader()


def _keep_minutes(cursor: Cursor, settings: EvaluatorSettings) -> int:
    """Minutes of data the job's cursor keeps: the deployment's window, or a longer rule window."""
    windows = [WatchedRule(r["name"], r["rule"], r.get("parameters", {})).window_minutes for r in cursor.info.get("rules", [])]
    return max([settings.window_minutes, *windows])


def _evaluate(cursor: Cursor, last: int, now: float, profiler: Any = None) -> tuple[list[Trigger], list[str]]:
    """Evaluate the job's rules on its window; returns new triggers and notes."""
    from smx_debug.data.frames import JobData
    from smx_debug.data.minute_frames import DEVICE_RULES, job_devices, scalar_frame, system_frame
    from smx_debug.evaluate.registry import REGISTRY
    from smx_debug.rules.configured import configured_rule

    info = cursor.info
    start_minute = int(info.get("start") or now) // 60
    triggers: list[Trigger] = []
    notes: list[str] = []
    frames: dict[tuple[bool, int], Any] = {}
    # profiler output shows every device; else the table's counts, or for a type it lacks what the sums need
    devices, device_note = job_devices(info.get("instance_type"), cursor.data)
    if device_note and profiler is None and any(item["rule"] in DEVICE_RULES for item in info.get("rules", [])):
        notes.append(device_note)
    for item in info.get("rules", []):
        rule = WatchedRule(name=item["name"], rule=item["rule"], parameters=item.get("parameters", {}))
        if rule.name in cursor.fired or rule.reads_tensors:  # tensor rules: smx_debug.watch.tensors
            continue
        lo = last - rule.window_minutes + 1
        if (rule.rule in DEVICE_RULES, lo) not in frames:  # one frame per kind and window, shared by rules
            empty = _empty_frames()
            frames[(rule.rule in DEVICE_RULES, lo)] = JobData(
                system=(_window(profiler, lo, last) if profiler is not None else system_frame(cursor.data, lo, last,
                                                                                             devices))
                if rule.rule in DEVICE_RULES else empty[0],
                scalars=empty[1] if rule.rule in DEVICE_RULES else scalar_frame(cursor.data, lo, last, start_minute),
                steps=empty[2], dataloader=empty[3], as_of_ns=int(now * 1e9),
            )
        data = frames[(rule.rule in DEVICE_RULES, lo)]
        params: dict[str, Any] = dict(rule.resolved())
        try:
            config = configured_rule(rule.rule, name=rule.name, overrides=params)
        except SmxDebugError as exc:
            notes.append(f"{rule.name}: {exc}")
            continue
        if "scan_interval_us" in config.parameters:  # one evaluation over the whole window
            config = config.with_overrides({"scan_interval_us": rule.window_minutes * 60_000_000})
        result = REGISTRY[rule.rule](data, config.params)
        if result.triggered:
            step = result.trigger_step if rule.rule not in DEVICE_RULES else last - start_minute
            triggers.append(Trigger(
                job=cursor.job, name=rule.name, rule=rule.rule, kind=_kind(rule.rule), step=step,
                message=result.message,
                status_details=condition_met_details(rule.name, step, f" (smx-debug evaluator: {result.message})"),
            ))
    return triggers, notes


def _watched(
    settings: EvaluatorSettings, clients: Clients, store: CursorStore, names: Sequence[str], report: RunReport,
) -> tuple[list[str], dict[str, dict[str, str]] | None]:
    """The watched running jobs and the opt-in candidates' tags (None when Search failed)."""
    opted: dict[str, dict[str, str]] | None = {}
    if settings.opt_in_tag:
        try:
            opted = search_opted_in(clients.sagemaker, settings.opt_in_tag)
        except (ClientError, BotoCoreError) as exc:
            error = job_error(exc, job="(opted-in jobs)", doing="Search for opted-in running jobs")
            report.errors.append(JobError(error.reason, f"{error.message}; jobs whose tags were last read opted "
                                                        f"in, at most {2 * settings.retag_minutes} minutes ago, "
                                                        "stay watched"))
            opted = None
    tags = {n: None if opted is None else opted.get(n, {}) for n in names}
    return watched_jobs(settings, store, tags, now=report.now), opted


def watched_jobs(
    settings: EvaluatorSettings, store: CursorStore, tags: Mapping[str, Mapping[str, str] | None], *, now: float,
) -> list[str]:
    """Which of the jobs ``tags`` names (job -> its tags as Search read them, None: unknown) the deployment
    watches: the watch rule (:func:`smx_debug.tags.watched_actions`) on the name and tags, for a run and a shard
    alike. A job whose tags are unknown (Search failed) and whose name no prefix watches stays watched while its
    tags were last read opted in recently: a watched job's tags are read again every ``retag_minutes``, so its
    cursor (read from ``store`` for those jobs only) is never older than that + 1.
    """
    unknown = [n for n, t in tags.items() if t is None and not _is_watched(settings, n, {})]
    cursors = store.load(unknown) if unknown else {}
    recent = 2 * settings.retag_minutes * 60
    return [n for n, t in tags.items() if _is_watched(settings, n, t or {})
            or (n in cursors and now - cursors[n].checked_at < recent)]


def _is_watched(settings: EvaluatorSettings, job: str, tags: Mapping[str, str]) -> bool:
    return watched_actions(job, tags, prefixes=settings.watch_prefixes, opt_in_tag=settings.opt_in_tag) is not None


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
    (:mod:`smx_debug.watch.budget`)."""
    from smx_debug.actions.ledger import Ledger

    now = clock() if now is None else now
    report = RunReport(now=now)
    lease = Ledger(clients.dynamodb, settings.cursor_table, clock=lambda: now, lease_seconds=settings.lease_seconds,
                   retention_seconds=86_400)
    if not lease.claim(RUN_LEASE_KEY, {"run_at": now}):
        report.skipped = ("another evaluator run holds the run lease: this run did nothing; the next one resumes "
                          "from the saved cursors")
        return report
    try:
        store = CursorStore(settings.cursor_table, clients.dynamodb, clock=lambda: now)
        running = {s["TrainingJobName"]: s for s in list_running(clients.sagemaker)}
        report.running = len(running)
        names, opted = _watched(settings, clients, store, list(running), report)
        report.watched = len(names)
        jobs = [WatchedJob.of(running[n], opted.get(n) if opted is not None else None, opt_in_tag=settings.opt_in_tag)
                for n in names]
        if shards is not None and len(jobs) > settings.jobs_per_invocation:
            report.shards = shards(jobs, now)  # evaluated in parallel by the shards' invocations
        else:
            evaluate_jobs(settings, clients, responder, report, jobs, deadline=deadline)
        append_ended(settings, clients, report, deadline=deadline)  # the watched jobs that ended: their last minutes
    finally:
        try:
            lease.release(RUN_LEASE_KEY)
        except (ClientError, BotoCoreError) as exc:
            report.errors.append(JobError(reason_of(exc, AWS_ERROR), f"releasing the run lease failed ({exc}); it "
                                                                      f"expires after {settings.lease_seconds} s"))
    publish_job_errors(clients.cloudwatch, settings.metric_namespace, report.error_counts(), now=now)
    return report


def evaluate_jobs(
    settings: EvaluatorSettings, clients: Clients, responder: Responder, report: RunReport,
    jobs: Sequence[WatchedJob], *, deadline: Deadline | None = None,
) -> None:
    """Evaluate ``jobs`` (the whole run's, or one shard's) into ``report``, each under its job lease.

    A job whose lease another evaluation holds is left to it (status ``held``). A job the invocation has no time
    left for (``deadline``, :mod:`smx_debug.watch.budget`) is not started: it fails ``out-of-time`` and keeps its
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
        report.outcomes[job.name] = JobOutcome(job=job.name, status="evaluating" if job.name in held else "held")
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
    summaries = {j.name: j.summary for j in jobs}
    tags_of = {j.name: j.tags for j in jobs}
    names = [j.name for j in jobs]

    def fresh(name: str) -> Refreshed | JobError:
        late = budget.short_of_call()
        if late is not None:
            return JobError(OUT_OF_TIME, late)
        try:
            return refresh(summaries[name], cursors.get(name), settings, tags=tags_of[name],
                           sagemaker=clients.sagemaker, s3=clients.s3, now=now)
        except Exception as exc:  # isolation: one job's failure is that job's (smx_debug.watch.isolation)
            return job_error(exc, job=name, doing="discovery (ListTags, DescribeTrainingJob)")

    # New or stale jobs cost ListTags (+ DescribeTrainingJob): overlap those calls; clients are thread-safe.
    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        refreshed = list(pool.map(fresh, names))
    watched: list[Cursor] = []
    for name, found in zip(names, refreshed, strict=True):
        outcome = report.outcomes[name]
        if isinstance(found, JobError):
            outcome.fail(found)
            continue
        outcome.notes.extend(found.notes)
        if found.spec_error is not None:
            outcome.record(found.spec_error)
        if found.cursor is not cursors.get(name):
            changed[name] = found.cursor  # its facts; its data and ``through`` move once it is evaluated
        watched.append(found.cursor)
    late = budget.short_of_call()
    if late is not None:  # no time for the CloudWatch read: every job keeps its cursor (and its new facts)
        report.out_of_time([c.job for c in watched], late)
        return

    end = (int(now) - settings.settle_seconds) // 60 * 60  # complete, settled minutes only
    reads = []
    for cursor in watched:
        floor = end - _keep_minutes(cursor, settings) * 60
        start = floor if cursor.through is None else max(floor, cursor.through - settings.overlap_minutes * 60)
        job_start = cursor.info.get("start")
        if job_start:
            start = max(start, int(job_start) // 60 * 60)
        reads.append(MetricRead(
            job=cursor.job, start=min(start, end), end=end, hosts=int(cursor.info.get("hosts", 1)),
            metrics=tuple(cursor.info.get("metrics", [])),
        ))
    result: ReadResult = read_metrics(clients.cloudwatch, reads, workers=settings.workers)
    report.metrics_requested, report.datapoints = result.metrics_requested, result.datapoints
    report.get_metric_data_calls = result.calls

    # Debugger profiler output (per core, per GPU) for the jobs that write it: their device rules' window only.
    with_profiler = [(c.job, str(c.info["profiler_s3"])) for c in watched
                     if c.info.get("profiler_s3") and c.job not in result.failed]
    profiler: dict[str, Any] = {}
    if with_profiler and budget.short_of_call() is not None:
        for job, _ in with_profiler:
            report.outcomes[job].notes.append("profiler output not read (out of time): judged on CloudWatch's host "
                                              "averages")
        with_profiler = []
    if with_profiler:
        from smx_debug.watch.profiler import profiler_frames

        profiler, profiler_errors = profiler_frames(
            with_profiler, s3=clients.s3, start_s=end - _DEVICE_WINDOW * 60, end_s=end, workers=settings.workers)
        for job, error in profiler_errors.items():
            report.outcomes[job].record(error)  # CloudWatch's host averages are used instead
        for job, frame in profiler.items():
            skipped = frame.attrs.get("skipped_by_reason") or {}
            if skipped:  # damaged lines are not errors: the reader skipped and counted them
                reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(skipped.items()))
                report.outcomes[job].notes.append(
                    f"profiler output: {sum(skipped.values())} damaged lines skipped ({reasons})")
    for cursor in _order(watched, seed=int(now)):
        outcome = report.outcomes[cursor.job]
        if cursor.job in result.failed:
            outcome.fail(result.failed[cursor.job])
            continue
        late = budget.short_of_job(calls=bool(tensor_rules(cursor)) and bool(cursor.info.get("tensors_s3")))
        if late is not None:  # keeps its cursor; goes first next run
            outcome.fail(JobError(OUT_OF_TIME, late))
            continue
        with budget.step():
            _evaluate_one(cursor, settings, clients, responder, outcome, result, profiler, changed, budget,
                          end=end, now=now)
    if settings.fleet_bucket and budget.short_of_call() is not None:
        report.errors.append(JobError(OUT_OF_TIME, "fleet append left to the next run (out of time); the jobs' "
                                                   "fleet cursors keep the minutes to append"))
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
    cursor: Cursor, settings: EvaluatorSettings, clients: Clients, responder: Responder, outcome: JobOutcome,
    result: ReadResult, profiler: Mapping[str, Any], changed: dict[str, Cursor], budget: RunBudget, *,
    end: int, now: float,
) -> None:
    """One job's step: its rules and tensors, then its new triggers handed to the responder within the budget."""
    try:
        cursor, triggers = _evaluate_job(cursor, settings, outcome, result, profiler.get(cursor.job), end=end,
                                         now=now)
        cursor, tensor_triggers = evaluate_tensors(cursor, outcome, s3=clients.s3, now=now)
        triggers += tensor_triggers
    except Exception as exc:  # isolation: data that breaks the evaluation fails this job only
        outcome.fail(job_error(exc, job=cursor.job, doing="evaluating its rules", otherwise=BAD_DATA))
        return
    if triggers:
        try:
            outcome.response = responder(cursor.job, triggers, deadline=budget.for_actions())
        except Exception as exc:  # isolation: acted on again next run (the ledger acts once)
            outcome.fail(job_error(exc, job=cursor.job, doing=f"acting on {[t.name for t in triggers]}"))
            return
        outcome.triggers = triggers
        cursor = cursor.with_changes(fired={**cursor.fired, **{t.name: t.step for t in triggers}})
    changed[cursor.job] = cursor


def _evaluate_job(
    cursor: Cursor, settings: EvaluatorSettings, outcome: JobOutcome, result: ReadResult, profiler: Any, *,
    end: int, now: float,
) -> tuple[Cursor, list[Trigger]]:
    """The job's cursor with its new minutes merged and ``through`` moved to ``end``, and its new triggers."""
    last = end // 60 - 1
    keep_from = last - _keep_minutes(cursor, settings) + 1
    cursor = _merge(cursor, result.data.get(cursor.job, {}), keep_from=keep_from).with_changes(through=end)
    if not any(s.startswith("host:") for s in cursor.data) and profiler is None:
        running_for = now - float(cursor.info.get("start") or now)
        if running_for >= settings.missing_after_minutes * 60:
            outcome.notes.append(
                f"no CloudWatch instance metrics for {cursor.job} in the last {settings.window_minutes} minutes "
                f"(namespace /aws/sagemaker/TrainingJobs, dimension Host={cursor.job}/algo-1): not evaluated, "
                "not stopped"
            )
            outcome.status = "no data"
            return cursor, []
    triggers, notes = _evaluate(cursor, last, now, profiler)
    outcome.status = "evaluated"
    outcome.notes.extend(notes)
    return cursor, triggers
