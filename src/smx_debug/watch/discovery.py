"""Which training jobs a run evaluates: the running ones this deployment watches, with the rules each gets.

ListTrainingJobs (status InProgress, 100 a page, paginated) gives the running jobs. A job seen for the first
time, or whose facts are older than ``retag_minutes``, is read again: ListTags decides whether the deployment
watches it (:func:`smx_debug.contracts.is_watched`, by prefix or opt-in tag, as the event handlers decide) and
names its watch spec (``smx-debug:evaluator``); only a watched job is described (hosts, instance type, metric
definitions, profiler output, its own Debugger rules) and its spec read from the stack's bucket. Everything
read is kept in the job's cursor, so a steady-state run makes no per-job SageMaker call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from smx_debug.contracts import EVALUATOR_SPEC_PREFIX, EVALUATOR_TAG, RULE_FIELDS
from smx_debug.errors import ConfigError
from smx_debug.tags import tags_as_dict
from smx_debug.watch.cursor import Cursor
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.spec import WatchSpec

__all__ = ["job_facts", "list_running", "refresh"]


def list_running(sagemaker: Any) -> list[dict[str, Any]]:
    """Summaries (``TrainingJobName``, ``TrainingJobArn``, ...) of every InProgress training job."""
    out: list[dict[str, Any]] = []
    pages = sagemaker.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress", MaxResults=100)
    for page in pages:
        out.extend(s for s in page.get("TrainingJobSummaries", []) if s.get("TrainingJobStatus") == "InProgress")
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
    }


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update(tags_as_dict(page.get("Tags", [])))
    return tags


def _spec(s3: Any, settings: EvaluatorSettings, key: str, notes: list[str]) -> WatchSpec | None:
    """The spec the tag names, or None (with a note) when it cannot be used; None is tried again next time."""
    if not key.startswith(EVALUATOR_SPEC_PREFIX) or ".." in key:
        notes.append(f"tag {EVALUATOR_TAG}={key!r} is not a key under {EVALUATOR_SPEC_PREFIX}: ignored")
        return None
    if not settings.spec_bucket:
        notes.append(f"tag {EVALUATOR_TAG} names {key!r} but the deployment has no spec bucket: ignored")
        return None
    try:
        body = s3.get_object(Bucket=settings.spec_bucket, Key=key)["Body"].read()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code not in {"NoSuchKey", "404", "AccessDenied", "403"}:
            raise
        notes.append(f"watch spec s3://{settings.spec_bucket}/{key} cannot be read ({code}): job's own rules skipped")
        return None
    try:
        return WatchSpec.from_json(body, source=f"s3://{settings.spec_bucket}/{key}")
    except ConfigError as exc:
        notes.append(str(exc))
        return None


def refresh(
    summary: Mapping[str, Any],
    cursor: Cursor | None,
    settings: EvaluatorSettings,
    *,
    sagemaker: Any,
    s3: Any,
    now: float,
) -> tuple[Cursor, list[str]]:
    """The job's cursor with facts no older than ``retag_minutes`` (reading SageMaker and S3 only if needed)."""
    name = summary["TrainingJobName"]
    if cursor is not None and now - cursor.checked_at < settings.retag_minutes * 60:
        return cursor, []
    notes: list[str] = []
    tags = _tags(sagemaker, summary["TrainingJobArn"])
    watched = settings.watches(name, tags)
    if not watched:
        return Cursor(job=name, watched=False, checked_at=now), notes
    info = dict(cursor.info) if cursor is not None else {}
    if "hosts" not in info:
        info.update(job_facts(sagemaker.describe_training_job(TrainingJobName=name)))
    key = tags.get(EVALUATOR_TAG)
    if key != info.get("spec_key"):
        spec = _spec(s3, settings, key, notes) if key else WatchSpec()
        info["spec_key"] = key if spec is not None else None
        info["spec"] = (spec or WatchSpec()).to_json()
    own = WatchSpec.from_json(info.get("spec") or WatchSpec().to_json())
    rules = own.merged_with(settings.default_rules, skip=frozenset(info.get("debugger_rules", [])))
    info["rules"] = json.loads(rules.to_json())["rules"]
    base = cursor if cursor is not None and cursor.watched else Cursor(job=name, watched=True, checked_at=now)
    return base.with_changes(watched=True, checked_at=now, info=info), notes
