"""Which training jobs a run evaluates: the running ones this deployment watches, with the rules each gets.

ListTrainingJobs (status InProgress, 100 a page, paginated) gives the running jobs. Which of them the
deployment watches (:func:`smx_debug.contracts.is_watched`, as the event handlers decide) is known without a
call per job, because the evaluator's role may call ListTags and DescribeTrainingJob on watched jobs only (a
real account refuses the others with AccessDenied): a name prefix decides from the name alone, and the opt-in
tag from one read-only query over all jobs, SageMaker ``Search`` over running training jobs that carry the tag
(:func:`search_opted_in`; 100 a page, its results carry their tags; its IAM action has no resource type). A
watched job met for the first time, or whose facts are older than ``retag_minutes``, is read again: its tags
(from the search, or ListTags for a job watched by prefix) name its watch spec (``smx-debug:evaluator``); it is
described once (hosts, instance type, metric definitions, profiler output, its own Debugger rules) and its spec
read from the stack's bucket. Everything read is kept in the job's cursor, so a steady-state run makes no
per-job SageMaker call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.contracts import EVALUATOR_SPEC_PREFIX, EVALUATOR_TAG, JOB_IN_PROGRESS, RULE_FIELDS
from smx_debug.data.job_errors import OUT_OF_TIME, WATCH_SPEC, JobError, job_error
from smx_debug.data.sources import describe_job, job_paths
from smx_debug.errors import ConfigError
from smx_debug.rules.watch_spec import WatchSpec
from smx_debug.tags import tags_as_dict, watched_actions
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import Clients, Cursor, CursorStore, RunBudget, RunReport

SEARCH_PAGE = 100  # Search's MaxResults limit (its default is 10)


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


def list_running(sagemaker: Any) -> list[dict[str, Any]]:
    """Summaries (``TrainingJobName``, ``TrainingJobArn``, ...) of every InProgress training job."""
    out: list[dict[str, Any]] = []
    pages = sagemaker.get_paginator("list_training_jobs").paginate(StatusEquals=JOB_IN_PROGRESS, MaxResults=100)
    for page in pages:
        out.extend(s for s in page.get("TrainingJobSummaries", []) if s.get("TrainingJobStatus") == JOB_IN_PROGRESS)
    return out


def search_request(tag_key: str) -> dict[str, Any]:
    """Search's arguments: running training jobs that carry ``tag_key`` (whatever its value)."""
    return {
        "Resource": "TrainingJob",
        "SearchExpression": {"Filters": [
            {"Name": "TrainingJobStatus", "Operator": "Equals", "Value": JOB_IN_PROGRESS},
            {"Name": f"Tags.{tag_key}", "Operator": "Exists"},
        ]},
    }


def search_opted_in(sagemaker: Any, tag_key: str) -> dict[str, dict[str, str]]:
    """The tags of every running job that carries ``tag_key``, by job name (Search, paginated).

    The tag's value is not filtered here: the opt-in rule (``true`` in any case) is
    :func:`smx_debug.contracts.is_opted_in`'s, applied by the caller to these tags.
    """
    out: dict[str, dict[str, str]] = {}
    pages = sagemaker.get_paginator("search").paginate(
        **search_request(tag_key), PaginationConfig={"PageSize": SEARCH_PAGE})
    for page in pages:
        for result in page.get("Results", []):
            job = result.get("TrainingJob") or {}
            if "TrainingJobName" in job:
                out[job["TrainingJobName"]] = tags_as_dict(job.get("Tags", []))
    return out


def _epoch(value: Any) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


def job_facts(description: Mapping[str, Any]) -> dict[str, Any]:
    """What the evaluator needs from DescribeTrainingJob, as plain JSON."""
    resources = description.get("ResourceConfig", {})
    groups = resources.get("InstanceGroups") or []
    hosts = int(resources.get("InstanceCount") or sum(int(g.get("InstanceCount", 0)) for g in groups) or 1)
    instance_type = resources.get("InstanceType") or (groups[0].get("InstanceType") if groups else None)
    algorithm = description.get("AlgorithmSpecification", {})
    profiler = description.get("ProfilerConfig") or {}
    own_rules = sorted(
        cfg["RuleConfigurationName"]
        for kind in RULE_FIELDS
        for cfg in description.get(RULE_FIELDS[kind][1], []) or []
        if "RuleConfigurationName" in cfg
    )
    return {
        "hosts": hosts,
        "instance_type": instance_type,
        "metrics": [m["Name"] for m in algorithm.get("MetricDefinitions", []) or [] if "Name" in m],
        "start": _epoch(description.get("TrainingStartTime")) or _epoch(description.get("CreationTime")),
        "profiler_s3": None if profiler.get("DisableProfiler") else profiler.get("S3OutputPath"),
        "debugger_rules": own_rules,
        # where its hook's tensors are (its trial, read by the tensor rules): <S3OutputPath>/<job>/debug-output/,
        # S3OutputPath from its DebugHookConfig, else from SMX_DEBUG_OUTPUT in its Environment
        "tensors_s3": job_paths(str(description.get("TrainingJobName", "")), description=dict(description)).debugger,
    }


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update(tags_as_dict(page.get("Tags", [])))
    return tags


def _spec(s3: Any, settings: EvaluatorSettings, key: str, job: str) -> tuple[WatchSpec | None, JobError | None]:
    """The spec the tag names, or None and why it cannot be used (the default rules apply; tried again)."""
    if not key.startswith(EVALUATOR_SPEC_PREFIX) or ".." in key:
        return None, JobError(WATCH_SPEC, f"tag {EVALUATOR_TAG}={key!r} is not a key under {EVALUATOR_SPEC_PREFIX}: "
                                          "ignored, the default rules apply")
    if not settings.spec_bucket:
        return None, JobError(WATCH_SPEC, f"tag {EVALUATOR_TAG} names {key!r} but the deployment has no spec bucket: "
                                          "ignored, the default rules apply")
    where = f"s3://{settings.spec_bucket}/{key}"
    try:
        body = s3.get_object(Bucket=settings.spec_bucket, Key=key)["Body"].read()
    except (ClientError, BotoCoreError) as exc:
        code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
        if code in {"NoSuchKey", "404"}:
            return None, JobError(WATCH_SPEC, f"watch spec {where} cannot be read ({code}): job's own rules skipped, "
                                              "the default rules apply")
        error = job_error(exc, job=job, doing=f"reading watch spec {where}")
        return None, JobError(error.reason, f"{error.message}; the default rules apply")
    try:
        return WatchSpec.from_json(body, source=where), None
    except ConfigError as exc:
        return None, JobError(WATCH_SPEC, f"{exc}; the default rules apply")


@dataclass
class Refreshed:
    """A watched job's cursor after discovery, with its notes and the watch spec's problem if it has one."""

    cursor: Cursor
    notes: list[str] = field(default_factory=list)
    spec_error: JobError | None = None
    description: Mapping[str, Any] | None = None  # DescribeTrainingJob's answer, when this run described the job


def refresh(
    summary: Mapping[str, Any],
    cursor: Cursor | None,
    settings: EvaluatorSettings,
    *,
    tags: Mapping[str, str] | None,
    sagemaker: Any,
    s3: Any,
    now: float,
) -> Refreshed:
    """A watched job's cursor with facts no older than ``retag_minutes`` (reading SageMaker and S3 only if needed).

    ``tags`` are the job's tags when the run already has them (from :func:`search_opted_in`), else None: then
    a stale or new job's tags are read with ListTags (a job watched by prefix, which the role may read).
    A spec that cannot be used is reported in ``spec_error``; the job gets the default rules and its spec is read
    again next run (its facts are not marked fresh). AWS errors of ListTags or DescribeTrainingJob propagate
    (DescribeTrainingJob's translated by :func:`~smx_debug.data.sources.describe_job`, raised from the AWS error):
    the run records them for this job only, by the AWS error's reason.
    """
    name = summary["TrainingJobName"]
    stale = cursor is None or now - cursor.checked_at >= settings.retag_minutes * 60
    key_changed = tags is not None and cursor is not None and tags.get(EVALUATOR_TAG) != cursor.info.get("spec_key")
    if cursor is not None and not stale and not key_changed:
        return Refreshed(cursor)
    if tags is None:
        tags = _tags(sagemaker, summary["TrainingJobArn"])
    info = dict(cursor.info) if cursor is not None else {}
    description = None
    if "hosts" not in info:
        description = describe_job(name, sagemaker)
        info.update(job_facts(description))
    key = tags.get(EVALUATOR_TAG)
    problem = None
    if key != info.get("spec_key") or info.get("spec") is None:
        spec, problem = _spec(s3, settings, key, name) if key else (WatchSpec(), None)
        own = spec or WatchSpec()  # decoded once, from S3; kept in the cursor as JSON for the runs after
        info["spec_key"] = key if spec is not None else None
        info["spec"] = own.to_json()
    else:  # the spec read by an earlier run, decoded once from the cursor
        own = WatchSpec.from_json(info["spec"], source=f"cursor of {name}")
    rules = own.merged_with(settings.default_rules, skip=frozenset(info.get("debugger_rules", []))).rules
    info["rules"] = [r.as_dict() for r in rules]
    checked = now if problem is None else (cursor.checked_at if cursor is not None else 0.0)  # retried next run
    base = cursor if cursor is not None else Cursor(job=name, checked_at=checked, rules=())
    return Refreshed(base.with_changes(checked_at=checked, info=info, rules=rules), spec_error=problem,
                     description=description)


def discover(settings: EvaluatorSettings, clients: Clients, store: CursorStore, report: RunReport) -> list[WatchedJob]:
    """The run's discover step: the running jobs (``report.running``) and, in their order, those the deployment
    watches (``report.watched``), each with the tags Search read (None when Search failed: read again if its
    facts are stale). The watched decision is made here, once per job and run (a shard makes it again for the
    jobs its message names: :func:`watched_jobs`)."""
    running = {s["TrainingJobName"]: s for s in list_running(clients.sagemaker)}
    report.running = len(running)
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
    tags = {n: None if opted is None else opted.get(n, {}) for n in running}
    names = watched_jobs(settings, store, tags, now=report.now)
    report.watched = len(names)
    return [WatchedJob.of(running[n], opted.get(n) if opted is not None else None, opt_in_tag=settings.opt_in_tag)
            for n in names]


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


def refresh_all(
    settings: EvaluatorSettings, clients: Clients, report: RunReport, jobs: Sequence[WatchedJob],
    cursors: Mapping[str, Cursor], changed: dict[str, Cursor], budget: RunBudget,
) -> tuple[list[Cursor], dict[str, Mapping[str, Any]]]:
    """The discover step's second half, for the jobs this evaluation holds: each job's cursor with fresh facts
    (:func:`refresh`; new or stale jobs' calls overlapped), those whose facts changed put in ``changed``, and the
    descriptions read (the act step verifies those jobs on them instead of describing them again). A job whose
    refresh fails, or that no longer has time for it, fails in ``report`` (isolation: that job only)."""
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
        except Exception as exc:  # isolation: one job's failure is that job's (smx_debug.watch.save, job errors)
            return job_error(exc, job=name, doing="discovery (ListTags, DescribeTrainingJob)")

    # New or stale jobs cost ListTags (+ DescribeTrainingJob): overlap those calls; clients are thread-safe.
    with ThreadPoolExecutor(max_workers=max(1, settings.workers)) as pool:
        refreshed = list(pool.map(fresh, names))
    watched: list[Cursor] = []
    described: dict[str, Mapping[str, Any]] = {}
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
        if found.description is not None:
            described[name] = found.description
    return watched, described
