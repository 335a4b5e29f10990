"""The fleet collector: the stack's scheduled writer of the fleet dataset for every training job of the account.

A platform team asks about every job, watched or not. The collector (``lambdas/fleet_collector``, every
``fleet.collector_rate_minutes``) writes, into ``s3://<bucket>/smx-debug/fleet/``:

- **training_jobs**: one row per job, from one SageMaker ``Search`` over running jobs and one over jobs changed
  since its last run (each result carries the job's description and tags: no per-job call). A row is rewritten
  only when the job changed (status, times, billable seconds, tags, rule statuses);
- **system_minutes** from CloudWatch's ``/aws/sagemaker/TrainingJobs`` host metrics (1-minute, every job has
  them), for the jobs the deployment's evaluator does not append itself (unwatched jobs, or every job when the
  evaluator is off), batched into GetMetricData calls of 500 metrics (:func:`smx_debug.data.cloudwatch_batch.read_metrics`);
- **verdicts**: Debugger's rule triggers from the jobs' rule statuses, and the verdict log's lines that the action
  core put in the inbox (:mod:`smx_debug.actions.verdict_log`), compacted into the table and then deleted.

Each file of the dataset has one writer: the evaluator writes its watched jobs' system minutes, running or ended
(through their end: :mod:`smx_debug.watch.save`), the collector everything else, so no two functions ever rewrite
one file; an unwatched job that ended has its last minutes read by the run whose Search of changed jobs finds it. Appends merge by the table's key, so a rerun (a
redelivered schedule, a read overlapping the last one by ``overlap_minutes``) never doubles a row. Each job is
isolated: what fails for one job (a bad description, a damaged file) is counted by reason and the others go on;
an inbox object whose rows cannot be appended is kept for the next run. An object it cannot read whole (an inbox
object with damaged lines, whose good rows are appended; a state it cannot trust) is counted by reason and moved,
byte for byte, under :data:`QUARANTINE_PREFIX`, so no run meets it again and nothing is lost. Its state (what it
last read, each job's fingerprint) is one small object, :data:`smx_debug.contracts.FLEET_STATE_KEY`.

Runs do not overlap: the function's timeout plus the schedule's maximum event age is shorter than its period
(the stack checks it), and the schedule has no retries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug._json import loads as json_loads
from smx_debug.actions.runtime import client_factory, log_json
from smx_debug.contracts import (
    FLEET_INBOX_PREFIX,
    FLEET_PREFIX,
    FLEET_STATE_KEY,
    JOB_IN_PROGRESS,
    MANAGED_TAG,
    RULE_FIELDS,
    Env,
)
from smx_debug.data.cloudwatch_batch import MetricRead, read_metrics
from smx_debug.data.minute_frames import system_frame
from smx_debug.errors import ConfigError, SmxDebugError
from smx_debug.fleet.append import (
    AppendReport,
    Verdict,
    append_job,
    append_system_minutes,
    append_verdicts,
    cloudwatch_devices,
    debugger_verdicts,
    verdicts_from_lines,
)
from smx_debug.fleet.root import FleetRoot
from smx_debug.fleet.s3_boto import stack_root
from smx_debug.instances import instance_row
from smx_debug.tags import watch_rule_from_env, watched_actions

_log = logging.getLogger(__name__)
SEARCH_PAGE = 100  # Search's MaxResults limit
_DELETE_BATCH = 1000  # DeleteObjects' limit
# Objects a run cannot read whole (an inbox object with damaged lines, a state it cannot trust), kept byte for byte
# as <QUARANTINE_PREFIX><run time>/<original key>: inside the collector's grant, outside every table's location.
QUARANTINE_PREFIX: Final = f"{FLEET_PREFIX}_quarantine/"


@dataclass(frozen=True)
class CollectorSettings:
    """What the collector writes and for which jobs.

    Attributes:
        bucket: the stack's bucket (the dataset under FLEET_PREFIX, the inbox under FLEET_INBOX_PREFIX).
        watch_prefixes, opt_in_tag: the deployment's watch rule (:func:`smx_debug.contracts.is_watched`).
        evaluator_appends: the evaluator appends its watched jobs' system minutes: the collector leaves them.
        settle_seconds: how long after a minute ends before it is read (CloudWatch's publication delay).
        overlap_minutes: minutes read again each run (late datapoints).
        first_read_hours: how far back the first run (no state yet) reads a running job's minutes.
        max_inbox_objects: inbox objects compacted per run (the rest wait for the next).
        workers: concurrent appends and CloudWatch calls.
    """

    bucket: str
    watch_prefixes: tuple[str, ...] = ()
    opt_in_tag: str | None = MANAGED_TAG
    evaluator_appends: bool = False
    settle_seconds: int = 60
    overlap_minutes: int = 2
    first_read_hours: int = 3
    max_inbox_objects: int = 5000
    workers: int = 8

    def leaves_to_evaluator(self, job: str, tags: Mapping[str, str]) -> bool:
        """The evaluator appends this job's minutes itself (it is watched and the evaluator is on)."""
        return self.evaluator_appends and watched_actions(
            job, tags, prefixes=self.watch_prefixes, opt_in_tag=self.opt_in_tag) is not None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CollectorSettings:
        """Read the ``SMX_*`` variables the stack sets; a missing bucket fails the cold start naming it."""
        env = os.environ if environ is None else environ
        bucket = env.get(Env.FLEET_BUCKET, "")
        if not bucket:
            raise ConfigError(f"{Env.FLEET_BUCKET} is not set", field=Env.FLEET_BUCKET, value="")
        appends = env.get(Env.EVALUATOR_APPENDS, "false").strip().lower()
        if appends not in {"true", "false"}:
            raise ConfigError(f"{Env.EVALUATOR_APPENDS}: {appends!r} is not true or false",
                              field=Env.EVALUATOR_APPENDS, value=appends)
        prefixes, opt_in_tag = watch_rule_from_env(env)
        return cls(
            bucket=bucket,
            watch_prefixes=prefixes,
            opt_in_tag=opt_in_tag,
            evaluator_appends=appends == "true",
        )


@dataclass(frozen=True)
class CollectorClients:
    """The AWS clients a run uses (injected; the handler builds them once per cold start)."""

    sagemaker: Any
    cloudwatch: Any
    s3: Any


@dataclass
class CollectorReport:
    """What one run wrote: jobs seen, rows per table, inbox objects compacted, problems by reason."""

    now: float
    through: int | None = None
    jobs: int = 0
    running: int = 0
    metadata_written: int = 0
    minutes_jobs: int = 0
    left_to_evaluator: int = 0
    metrics_requested: int = 0
    get_metric_data_calls: int = 0
    inbox_objects: int = 0
    appended: AppendReport = field(default_factory=AppendReport)
    failed: dict[str, str] = field(default_factory=dict)
    quarantined: list[str] = field(default_factory=list)

    def fail(self, job: str, exc: BaseException, doing: str) -> None:
        reason = _reason(exc)
        self.failed[job] = f"{doing}: {reason}: {str(exc)[:300]}"
        self.appended.count_all({f"jobs failed ({reason})": 1})

    def summary(self) -> dict[str, Any]:
        """JSON-able, for the Lambda's log line and return value."""
        return {
            "jobs": self.jobs, "running": self.running, "through": self.through,
            "metadata_written": self.metadata_written, "minutes_jobs": self.minutes_jobs,
            "left_to_evaluator": self.left_to_evaluator, "inbox_objects": self.inbox_objects,
            "rows": dict(self.appended.rows), "replaced": dict(self.appended.replaced),
            "skipped": dict(self.appended.skipped), "failed": dict(self.failed),
            "metrics_requested": self.metrics_requested, "get_metric_data_calls": self.get_metric_data_calls,
            "quarantined": list(self.quarantined),
        }


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "ClientError")
    return type(exc).__name__


# -- state ---------------------------------------------------------------------------------------------------


def _load_state(s3: Any, bucket: str, *, end: int, report: CollectorReport) -> tuple[int | None, dict[str, str]]:
    """The last run's ``through`` and job fingerprints. A state that cannot be trusted (not JSON, ``through``
    not a minute up to ``end``, ``jobs`` not fingerprints by job) is quarantined, counted by reason, and what it
    no longer tells is read again as on a first run (the appends are idempotent); the run's end replaces it."""
    try:
        body = s3.get_object(Bucket=bucket, Key=FLEET_STATE_KEY)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in {"NoSuchKey", "404"}:
            return None, {}
        raise
    through, jobs, problems = _checked_state(body, end)
    if problems:
        reason = f"collector state quarantined ({'; '.join(problems)})"
        _log.warning("fleet collector: state s3://%s/%s: %s", bucket, FLEET_STATE_KEY, reason)
        _quarantine(s3, bucket, FLEET_STATE_KEY, body, report)
        report.appended.count_all({reason: 1})
    return through, jobs


def _checked_state(body: bytes, end: int) -> tuple[int | None, dict[str, str], list[str]]:
    """What of a state object can be trusted, and what cannot (its problems)."""
    try:
        state = json_loads(body)
    except ValueError:  # not UTF-8, not JSON, nested too deep
        return None, {}, ["not JSON"]
    if not isinstance(state, dict):
        return None, {}, ["not a JSON object"]
    problems: list[str] = []
    through, jobs = state.get("through"), state.get("jobs")
    if not (type(through) is int and 0 <= through <= end):  # bool is not a time; 10**20 is no epoch second
        through = None
        problems.append("through is not a minute up to now")
    if not (isinstance(jobs, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in jobs.items())):
        jobs = {}
        problems.append("jobs is not an object of fingerprints")
    return through, jobs, problems


def _quarantine(s3: Any, bucket: str, key: str, body: bytes, report: CollectorReport) -> None:
    """Keep an object that cannot be read whole, byte for byte, under :data:`QUARANTINE_PREFIX` (``<run time>/<its
    key>``) so the next run does not meet it again and nothing the bucket held is lost. A refused PutObject
    raises: the run fails and the object stays where it was."""
    stamp = datetime.fromtimestamp(report.now, UTC).strftime("%Y%m%dT%H%M%SZ")
    s3.put_object(Bucket=bucket, Key=f"{QUARANTINE_PREFIX}{stamp}/{key}", Body=body)
    report.quarantined.append(key)


def _save_state(s3: Any, bucket: str, state: Mapping[str, Any]) -> None:
    s3.put_object(Bucket=bucket, Key=FLEET_STATE_KEY, Body=json.dumps(state, sort_keys=True).encode(),
                  ContentType="application/json")


# -- jobs ----------------------------------------------------------------------------------------------------


def _search(sagemaker: Any, filters: list[dict[str, str]]) -> list[dict[str, Any]]:
    pages = sagemaker.get_paginator("search").paginate(
        Resource="TrainingJob", SearchExpression={"Filters": filters}, SortBy="CreationTime", SortOrder="Ascending",
        PaginationConfig={"PageSize": SEARCH_PAGE})
    return [r["TrainingJob"] for page in pages for r in page.get("Results", []) if "TrainingJob" in r]


def _jobs(sagemaker: Any, changed_since: float) -> dict[str, dict[str, Any]]:
    """Every running job, and every job changed since ``changed_since`` (those that ended among them)."""
    since = datetime.fromtimestamp(changed_since, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    found: dict[str, dict[str, Any]] = {}
    for job in _search(sagemaker, [{"Name": "TrainingJobStatus", "Operator": "Equals", "Value": JOB_IN_PROGRESS}]):
        found[job["TrainingJobName"]] = job
    for job in _search(sagemaker, [{"Name": "LastModifiedTime", "Operator": "GreaterThan", "Value": since}]):
        found.setdefault(job["TrainingJobName"], job)
    return found


def _tags(job: Mapping[str, Any]) -> dict[str, str]:
    return {str(t["Key"]): str(t["Value"]) for t in job.get("Tags") or [] if "Key" in t and "Value" in t}


def _fingerprint(job: Mapping[str, Any]) -> str:
    """What changes a job's metadata row or its Debugger trigger rows."""
    statuses = [(s.get("RuleConfigurationName"), s.get("RuleEvaluationStatus"), str(s.get("LastModifiedTime")))
                for key, _ in RULE_FIELDS.values()
                for s in job.get(key) or []]
    parts = [job.get("TrainingJobStatus"), str(job.get("TrainingStartTime")), str(job.get("TrainingEndTime")),
             job.get("BillableTimeInSeconds"), sorted(_tags(job).items()), statuses]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def _epoch(value: Any) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


# -- the run -------------------------------------------------------------------------------------------------


def collect_fleet(settings: CollectorSettings, clients: CollectorClients, *, now: float | None = None,
                  clock: Callable[[], float] = time.time) -> CollectorReport:
    """One collector run (see the module docstring). What breaks the whole run (Search, the state) raises."""
    now = clock() if now is None else now
    report = CollectorReport(now=now)
    root = stack_root(settings.bucket, clients.s3)
    end = (int(now) - settings.settle_seconds) // 60 * 60
    through, known = _load_state(clients.s3, settings.bucket, end=end, report=report)
    floor = end - settings.first_read_hours * 3600
    read_from = floor if through is None else max(floor, through - settings.overlap_minutes * 60)
    jobs = _jobs(clients.sagemaker, changed_since=(through or floor) - settings.overlap_minutes * 60)
    report.jobs, report.running = len(jobs), sum(j.get("TrainingJobStatus") == JOB_IN_PROGRESS for j in jobs.values())

    _metadata(settings, root, jobs, known, report)
    _minutes(settings, clients, root, jobs, read_from, end, report)
    _compact_inbox(settings, clients.s3, root, report)

    running = {n for n, j in jobs.items() if j.get("TrainingJobStatus") == JOB_IN_PROGRESS}
    kept = {n: f for n, f in known.items() if n in running or n in jobs}  # ended jobs are dropped next run
    _save_state(clients.s3, settings.bucket, {"through": end, "jobs": {n: kept[n] for n in sorted(kept)}})
    report.through = end
    return report


def _each(settings: CollectorSettings, items: Iterable[Any], fn: Callable[[Any], Any]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        return list(pool.map(fn, items))


def _metadata(settings: CollectorSettings, root: FleetRoot, jobs: Mapping[str, Mapping[str, Any]],
              known: dict[str, str], report: CollectorReport) -> None:
    """The training_jobs row and Debugger's trigger rows of every job that changed since the last run."""
    changed = [n for n, j in sorted(jobs.items()) if known.get(n) != _fingerprint(j)]
    when = datetime.fromtimestamp(report.now, UTC)

    def one(name: str) -> tuple[str, AppendReport | BaseException]:
        job = jobs[name]
        try:
            out = append_job(root, job, _tags(job), now=when)
            out.merge(append_verdicts(root, debugger_verdicts(job)))
            return name, out
        except (SmxDebugError, ClientError, BotoCoreError, ValueError, KeyError, TypeError) as exc:
            return name, exc  # isolation: this job's metadata only

    for name, result in _each(settings, changed, one):
        if isinstance(result, BaseException):
            report.fail(name, result, "metadata")
            continue
        report.appended.merge(result)
        report.metadata_written += 1
        known[name] = _fingerprint(jobs[name])


def _minutes(settings: CollectorSettings, clients: CollectorClients, root: FleetRoot,
             jobs: Mapping[str, Mapping[str, Any]], read_from: int, end: int, report: CollectorReport) -> None:
    """CloudWatch host minutes ``[read_from, end)`` of the jobs the evaluator does not append itself."""
    reads: list[MetricRead] = []
    facts: dict[str, tuple[int, int]] = {}
    for name, job in sorted(jobs.items()):
        if settings.leaves_to_evaluator(name, _tags(job)):
            report.left_to_evaluator += 1
            continue
        started = _epoch(job.get("TrainingStartTime"))
        if started is None:
            continue  # not training yet: no instance metrics
        ended = _epoch(job.get("TrainingEndTime"))
        start = max(read_from, int(started) // 60 * 60)
        stop = end if ended is None else min(end, -(-int(ended) // 60) * 60)
        if stop <= start:
            continue
        resources = job.get("ResourceConfig") or {}
        groups = resources.get("InstanceGroups") or []
        hosts = int(resources.get("InstanceCount") or sum(int(g.get("InstanceCount", 0)) for g in groups) or 1)
        row = instance_row(resources.get("InstanceType") or (groups[0].get("InstanceType") if groups else None))
        facts[name] = (int(row["vcpus"]), int(row["gpus"])) if row else (1, 0)
        reads.append(MetricRead(job=name, start=start, end=stop, hosts=hosts))
    result = read_metrics(clients.cloudwatch, reads, workers=settings.workers)
    report.metrics_requested, report.get_metric_data_calls = result.metrics_requested, result.calls
    for name, error in result.failed.items():
        report.failed[name] = f"GetMetricData: {error.reason}: {error.message[:300]}"
        report.appended.count_all({f"jobs failed ({error.reason})": 1})

    def one(read: MetricRead) -> tuple[str, AppendReport | BaseException | None]:
        data = result.data.get(read.job)
        if not data:
            return read.job, None
        cpus, gpus = facts[read.job]
        try:
            frame = system_frame(data, read.start // 60, read.end // 60 - 1, (cpus, gpus))
            return read.job, append_system_minutes(root, read.job, frame, source="cloudwatch",
                                                   devices=cloudwatch_devices(cpus, gpus))
        except (SmxDebugError, ClientError, BotoCoreError, ValueError, KeyError) as exc:
            return read.job, exc

    for name, outcome in _each(settings, [r for r in reads if r.job not in result.failed], one):
        if isinstance(outcome, BaseException):
            report.fail(name, outcome, "system minutes")
        elif outcome is not None:
            report.appended.merge(outcome)
            report.minutes_jobs += 1


def _compact_inbox(settings: CollectorSettings, s3: Any, root: FleetRoot, report: CollectorReport) -> None:
    """The verdict log's lines -> the verdicts table; the objects whose rows were appended are deleted."""
    prefix = f"{FLEET_INBOX_PREFIX}verdicts/"
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.bucket, Prefix=prefix):
        keys.extend(o["Key"] for o in page.get("Contents") or [])
        if len(keys) >= settings.max_inbox_objects:
            break
    keys = sorted(keys)[: settings.max_inbox_objects]
    if not keys:
        return

    def read(key: str) -> tuple[str, bytes, list[Verdict], dict[str, int]] | None:
        try:
            body = s3.get_object(Bucket=settings.bucket, Key=key)["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            _log.warning("fleet collector: inbox object %s not read (%s); kept for the next run", key, exc)
            return None
        rows, skipped = verdicts_from_lines(body)  # each line on its own: a damaged one is counted, never raised
        return key, body, rows, skipped

    done: list[str] = []
    damaged: list[tuple[str, bytes]] = []
    rows: list[Verdict] = []
    skipped: Counter[str] = Counter()
    for found in _each(settings, keys, read):
        if found is None:
            continue
        key, body, got, bad = found
        done.append(key)
        rows.extend(got)
        skipped.update(bad)
        if bad:
            damaged.append((key, body))
    report.appended.count_all(skipped)
    report.appended.merge(append_verdicts(root, rows))  # raises if S3 refuses: the objects stay for the next run
    for key, body in damaged:  # its good rows are in the table; the object itself is kept whole, aside
        _quarantine(s3, settings.bucket, key, body, report)
    for i in range(0, len(done), _DELETE_BATCH):
        s3.delete_objects(Bucket=settings.bucket,
                          Delete={"Objects": [{"Key": k} for k in done[i : i + _DELETE_BATCH]], "Quiet": True})
    report.inbox_objects = len(done)


# -- the Lambda body -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectorRuntime:
    """What one cold start builds: the settings and the AWS clients."""

    settings: CollectorSettings
    clients: CollectorClients

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CollectorRuntime:
        env = os.environ if environ is None else environ
        make = client_factory(env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None)
        return cls(settings=CollectorSettings.from_env(env),
                   clients=CollectorClients(sagemaker=make("sagemaker"), cloudwatch=make("cloudwatch"),
                                            s3=make("s3")))


def handle_scheduled(event: object, context: Any = None, *, runtime: CollectorRuntime | None = None
                     ) -> dict[str, Any]:
    """One collector run; returns (and logs) its summary. ``runtime`` is the cold start's (the Lambda module keeps
    it)."""
    runtime = runtime or CollectorRuntime.from_env()
    started = time.monotonic()
    report = collect_fleet(runtime.settings, runtime.clients)
    summary = {"handler": "fleet_collector", **report.summary(), "seconds": round(time.monotonic() - started, 3)}
    log_json(logging.INFO, **summary)
    return summary
