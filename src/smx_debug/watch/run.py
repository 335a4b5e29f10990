"""One evaluator run: find the watched running jobs, read their new minutes, evaluate their rules, act.

The scheduled Lambda calls :func:`run_once` every minute (``lambdas/evaluator/handler.py``); the demo, the tests
and the benchmark call it in process on the local AWS. A run:

1. lists the running training jobs and loads their cursors (:mod:`smx_debug.watch.cursor`);
2. refreshes what it knows about new or stale jobs (:mod:`smx_debug.watch.discovery`);
3. reads each watched job's minutes since its cursor, all jobs batched (:mod:`smx_debug.watch.cloudwatch`),
   and merges them into the job's window;
4. evaluates each rule configuration on its last ``window`` minutes (the same rule code as ``smx-debug rules
   evaluate``, keyed by configuration name) and hands every newly triggered configuration to the responder,
   which acts through the same path as a Debugger rule event (ledger, metric, message, exactly-once stop);
5. saves the cursors.

A job whose data cannot be read is reported and keeps its cursor; a job without data is reported, never
stopped. A responder failure is re-raised at the end of the run, after the other jobs were handled and the
cursors saved, so the invocation fails visibly (the function's error alarm) and the trigger is tried again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.contracts import RuleKind
from smx_debug.errors import SmxDebugError
from smx_debug.watch.cloudwatch import MetricRead, ReadResult, read_metrics
from smx_debug.watch.cursor import Cursor, CursorStore
from smx_debug.watch.discovery import list_running, refresh
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.spec import WatchedRule

_DEVICE_WINDOW = 10  # minutes of profiler output read per run: the longest device-rule window

__all__ = ["Clients", "EvaluatorRunError", "JobOutcome", "Responder", "RunReport", "Trigger", "run_once"]


@dataclass(frozen=True)
class Clients:
    """The AWS clients a run uses (injected; the handler builds them once per cold start)."""

    sagemaker: Any
    cloudwatch: Any
    dynamodb: Any
    s3: Any


@dataclass(frozen=True)
class Trigger:
    """A rule configuration whose condition the evaluator found met, in the shape a Debugger status has."""

    job: str
    name: str  # RuleConfigurationName
    rule: str  # rule class
    kind: RuleKind
    step: int | None
    message: str
    status_details: str


class Responder(Protocol):
    """Acts on a job's new triggers through the action path; returns a JSON-able summary."""

    def __call__(self, job: str, triggers: Sequence[Trigger]) -> Mapping[str, Any]: ...


class EvaluatorRunError(SmxDebugError, RuntimeError):
    """Raised when a run finished but acting on some triggers failed (they are tried again next run)."""

    def __init__(self, message: str, report: RunReport) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class JobOutcome:
    """What a run did for one watched job."""

    job: str
    status: str  # evaluated | no data | read failed | skipped
    triggers: list[Trigger] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    response: Mapping[str, Any] | None = None


@dataclass
class RunReport:
    """A run's summary: jobs seen, evaluated and triggered, and what it asked AWS for."""

    now: float
    running: int = 0
    watched: int = 0
    outcomes: dict[str, JobOutcome] = field(default_factory=dict)
    metrics_requested: int = 0
    datapoints: int = 0
    get_metric_data_calls: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def triggers(self) -> list[Trigger]:
        return [t for o in self.outcomes.values() for t in o.triggers]

    def summary(self) -> dict[str, Any]:
        """JSON-able, for the Lambda's log line and return value."""
        return {
            "running": self.running,
            "watched": self.watched,
            "evaluated": sum(o.status == "evaluated" for o in self.outcomes.values()),
            "triggers": [{"job": t.job, "rule": t.name, "step": t.step} for t in self.triggers],
            "problems": {j: o.notes for j, o in self.outcomes.items() if o.notes},
            "metrics_requested": self.metrics_requested,
            "get_metric_data_calls": self.get_metric_data_calls,
            "errors": self.errors,
        }


def _kind(rule: str) -> RuleKind:
    from smx_debug.evaluate.catalog import PROFILER_RULES

    return "profiler" if rule in PROFILER_RULES else "debugger"


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
    from smx_debug.evaluate.data import empty_dataloader, empty_scalars, empty_steps, empty_system

    return empty_system(), empty_scalars(), empty_steps(), empty_dataloader()


def _keep_minutes(cursor: Cursor, settings: EvaluatorSettings) -> int:
    """Minutes of data the job's cursor keeps: the deployment's window, or a longer rule window."""
    windows = [WatchedRule(r["name"], r["rule"], r.get("parameters", {})).window_minutes for r in cursor.info.get("rules", [])]
    return max([settings.window_minutes, *windows])


def _evaluate(cursor: Cursor, last: int, now: float, profiler: Any = None) -> tuple[list[Trigger], list[str]]:
    """Evaluate the job's rules on its window; returns new triggers and notes."""
    from smx_debug.evaluate.catalog import resolve_params
    from smx_debug.evaluate.data import JobData
    from smx_debug.evaluate.registry import REGISTRY
    from smx_debug.watch.frames import DEVICE_RULES, device_counts, scalar_frame, system_frame

    info = cursor.info
    devices = device_counts(info.get("instance_type"))
    start_minute = int(info.get("start") or now) // 60
    triggers: list[Trigger] = []
    notes: list[str] = []
    frames: dict[tuple[bool, int], Any] = {}
    for item in info.get("rules", []):
        rule = WatchedRule(name=item["name"], rule=item["rule"], parameters=item.get("parameters", {}))
        if rule.name in cursor.fired:
            continue
        if rule.rule in DEVICE_RULES and devices is None and profiler is None:
            notes.append(
                f"{rule.name}: instance type {info.get('instance_type')!r} has no vCPU/GPU counts in the table, "
                "so per-device utilization is unknown; rule skipped"
            )
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
            resolved = resolve_params(rule.rule, params)
        except SmxDebugError as exc:
            notes.append(f"{rule.name}: {exc}")
            continue
        if "scan_interval_us" in resolved:
            resolved["scan_interval_us"] = rule.window_minutes * 60_000_000  # one evaluation over the whole window
        result = REGISTRY[rule.rule](data, resolved)
        if result.triggered:
            step = result.trigger_step if rule.rule not in DEVICE_RULES else last - start_minute
            triggers.append(Trigger(
                job=cursor.job, name=rule.name, rule=rule.rule, kind=_kind(rule.rule), step=step,
                message=result.message,
                status_details=(
                    f"RuleEvaluationConditionMet: Evaluation of the rule {rule.name} at step {step} resulted in the "
                    f"condition being met (smx-debug evaluator: {result.message})"
                ),
            ))
    return triggers, notes


def run_once(
    settings: EvaluatorSettings,
    clients: Clients,
    responder: Responder,
    *,
    now: float | None = None,
    clock: Callable[[], float] = time.time,
) -> RunReport:
    """One evaluation of every watched running job (see the module docstring)."""
    now = clock() if now is None else now
    report = RunReport(now=now)
    store = CursorStore(settings.cursor_table, clients.dynamodb, clock=lambda: now)
    running = list_running(clients.sagemaker)
    report.running = len(running)
    cursors = store.load(s["TrainingJobName"] for s in running)
    changed: dict[str, Cursor] = {}
    watched: list[Cursor] = []

    def fresh(summary: Mapping[str, Any]) -> tuple[Cursor, list[str]]:
        old = cursors.get(summary["TrainingJobName"])
        return refresh(summary, old, settings, sagemaker=clients.sagemaker, s3=clients.s3, now=now)

    # New or stale jobs cost ListTags (+ DescribeTrainingJob): overlap those calls; clients are thread-safe.
    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        refreshed = list(pool.map(fresh, running))
    for summary, (cursor, notes) in zip(running, refreshed, strict=True):
        name = summary["TrainingJobName"]
        old = cursors.get(name)
        if cursor is not old:
            changed[name] = cursor
        if cursor.watched:
            watched.append(cursor)
            report.outcomes[name] = JobOutcome(job=name, status="skipped", notes=list(notes))
    report.watched = len(watched)

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

    failures: list[str] = []
    last = end // 60 - 1
    # Debugger profiler output (per core, per GPU) for the jobs that write it: their device rules' window only.
    with_profiler = [(c.job, str(c.info["profiler_s3"])) for c in watched
                     if c.info.get("profiler_s3") and c.job not in result.failed]
    profiler: dict[str, Any] = {}
    if with_profiler:
        from smx_debug.watch.profiler import profiler_frames

        profiler, profiler_notes = profiler_frames(
            with_profiler, s3=clients.s3, start_s=end - _DEVICE_WINDOW * 60, end_s=end, workers=settings.workers)
        for job, note in profiler_notes.items():
            report.outcomes[job].notes.append(note)
    for cursor in watched:
        outcome = report.outcomes[cursor.job]
        if cursor.job in result.failed:
            outcome.status = "read failed"
            outcome.notes.append(result.failed[cursor.job])
            continue
        keep_from = last - _keep_minutes(cursor, settings) + 1
        cursor = _merge(cursor, result.data.get(cursor.job, {}), keep_from=keep_from)
        cursor = cursor.with_changes(through=end)
        if not any(s.startswith("host:") for s in cursor.data) and cursor.job not in profiler:
            running_for = now - float(cursor.info.get("start") or now)
            if running_for >= settings.missing_after_minutes * 60:
                outcome.notes.append(
                    f"no CloudWatch instance metrics for {cursor.job} in the last {settings.window_minutes} minutes "
                    f"(namespace /aws/sagemaker/TrainingJobs, dimension Host={cursor.job}/algo-1): not evaluated, "
                    "not stopped"
                )
                outcome.status = "no data"
                changed[cursor.job] = cursor
                continue
        triggers, notes = _evaluate(cursor, last, now, profiler.get(cursor.job))
        outcome.status = "evaluated"
        outcome.notes.extend(notes)
        if triggers:
            try:
                outcome.response = responder(cursor.job, triggers)
            except (ClientError, BotoCoreError) as exc:
                failures.append(f"{cursor.job}: acting on {[t.name for t in triggers]} failed: {exc}")
                changed[cursor.job] = cursor
                continue
            outcome.triggers = triggers
            cursor = cursor.with_changes(fired={**cursor.fired, **{t.name: t.step for t in triggers}})
        changed[cursor.job] = cursor
    store.save(changed.values())
    report.errors = failures
    if failures:
        raise EvaluatorRunError("; ".join(failures), report)
    return report
