"""Appending to the fleet dataset: profiler minutes, CloudWatch host minutes, the verdict log, job metadata.

Every function takes one job (the scheduled evaluator calls them job by job, each job's failure its own) and is
incremental and idempotent per (job, minute): rows are merged by the table's key (:mod:`smx_debug.fleet.write`),
so appending the same minutes again replaces them. :func:`append_profiler` reads through the one reader of
Debugger's system metrics (:class:`smx_debug.data.SystemMetricsReader`), from the job's last stored minute
on unless told otherwise; its skipped records (cut mid-write, damaged) are counted by reason in the report.
:func:`collect` does all four for many jobs, isolating each job's failure and counting it by reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, field_validator

from smx_debug._json import JsonTooDeepError
from smx_debug._json import loads as json_loads
from smx_debug._lazy import lazy_module
from smx_debug.actions.verdict_log import TRIGGER_EVENT
from smx_debug.contracts import (
    FLEET_TEAM_TAG,
    ISSUES_FOUND,
    RULE_FIELDS,
    SOURCE_DEBUGGER,
    SYSTEM_MINUTES_TABLE,
    TRAINING_JOBS_TABLE,
    TRIGGER_SOURCES,
    VERDICTS_TABLE,
    is_rule_configuration_name,
    is_training_job_name,
)
from smx_debug.data.cloudwatch import INSTANCE_METRICS, instance_metrics
from smx_debug.data.minute_frames import device_counts
from smx_debug.data.sources import describe_job, job_paths
from smx_debug.data.system import SystemMetricsReader
from smx_debug.errors import ConfigError, DataError, JobNotFoundError, NoDataYetError, SmxDebugError
from smx_debug.fleet.root import FleetRoot, check_job, open_root
from smx_debug.fleet.schema import arrow_schema
from smx_debug.fleet.write import WriteReport, read_file, write_rows
from smx_debug.instances import instance_row

if TYPE_CHECKING:
    import boto3
else:
    boto3 = lazy_module("boto3")  # a client only when none is handed in

Source = Literal["debugger", "cloudwatch"]


@dataclass
class AppendReport:
    """What appending did: rows per table, and problems by reason (records skipped, jobs that failed)."""

    rows: dict[str, int] = field(default_factory=dict)
    replaced: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    failed_jobs: dict[str, str] = field(default_factory=dict)

    def add(self, table: str, written: WriteReport) -> None:
        self.rows[table] = self.rows.get(table, 0) + written.rows_added
        self.replaced[table] = self.replaced.get(table, 0) + written.rows_replaced
        self.count_all(written.skipped)

    def count_all(self, counts: Mapping[str, int]) -> None:
        for reason, n in counts.items():
            if n:
                self.skipped[reason] = self.skipped.get(reason, 0) + int(n)

    def merge(self, other: AppendReport) -> None:
        for table, n in other.rows.items():
            self.rows[table] = self.rows.get(table, 0) + n
        for table, n in other.replaced.items():
            self.replaced[table] = self.replaced.get(table, 0) + n
        self.count_all(other.skipped)
        self.failed_jobs.update(other.failed_jobs)


def _root(root: FleetRoot | str | os.PathLike[str]) -> FleetRoot:
    return root if isinstance(root, FleetRoot) else open_root(root, create=True)


def _naive_utc(ts: pd.Series) -> pd.Series:
    ts = pd.to_datetime(ts, utc=True)
    return ts.dt.tz_localize(None).astype("datetime64[ms]")


def minutes_frame(system: pd.DataFrame, job: str, *, source: Source, devices: Mapping[str, int] | None = None
                  ) -> pd.DataFrame:
    """A long system frame (:data:`smx_debug.data.frames.SYSTEM_COLUMNS`) as ``system_minutes`` rows.

    ``devices`` maps a dimension to the devices one row stands for (CloudWatch's host averages: the GPUs or
    vCPUs averaged); Debugger's rows are per device (1).
    """
    cols = ["job", "node", "minute", "source", "type", "name", "dimension", "devices",
            "value_avg", "value_min", "value_max", "samples"]
    if system.empty:
        return pd.DataFrame({c: pd.Series([], dtype="object") for c in cols})
    frame = pd.DataFrame({
        "node": system["node"].astype("object"),
        "minute": pd.to_datetime(system["timestamp"], utc=True).dt.floor("min"),
        "type": system["type"].astype("object"),
        "name": system["name"].astype("object").where(system["name"].notna(), system["type"].astype("object")),
        "dimension": system["dimension"].astype("object"),
        "value": system["value"].astype("float64"),
    })
    grouped = frame.groupby(["node", "minute", "type", "name", "dimension"], sort=True, observed=True)["value"]
    out = grouped.agg(value_avg="mean", value_min="min", value_max="max", samples="count").reset_index()
    out.insert(0, "job", job)
    out.insert(3, "source", source)
    out["minute"] = _naive_utc(out["minute"])
    out["devices"] = out["dimension"].map(lambda d: (devices or {}).get(d, 1)).astype("int32")
    out["samples"] = out["samples"].astype("int64")
    return out[cols]


def append_system_minutes(root: FleetRoot | str | os.PathLike[str], job: str, system: pd.DataFrame, *,
                          source: Source, devices: Mapping[str, int] | None = None) -> AppendReport:
    """Append a long system frame of ``job`` (per-minute aggregates); the frame's skip counts are reported."""
    check_job(job)
    report = AppendReport()
    report.count_all(system.attrs.get("skipped_by_reason") or {})
    report.add(SYSTEM_MINUTES_TABLE, write_rows(_root(root), SYSTEM_MINUTES_TABLE,
                                            minutes_frame(system, job, source=source, devices=devices)))
    return report


def last_minute(root: FleetRoot | str | os.PathLike[str], job: str, *, source: Source | None = None
                ) -> datetime | None:
    """The job's latest stored minute in ``system_minutes`` (UTC), None when it has none (the next append
    reads from there: that minute may have been partial)."""
    check_job(job)
    fr = _root(root)
    for hour in reversed(fr.hours(SYSTEM_MINUTES_TABLE)):
        try:
            table = read_file(fr, fr.file_path(SYSTEM_MINUTES_TABLE, job, hour), SYSTEM_MINUTES_TABLE)
        except DataError:
            continue
        if table is None or not table.num_rows:
            continue
        df = table.to_pandas()
        if source is not None:
            df = df[df["source"] == source]
        if len(df):
            return pd.Timestamp(df["minute"].max()).tz_localize(UTC).to_pydatetime()
    return None


def append_profiler(root: FleetRoot | str | os.PathLike[str], job: str, profiler: Any = None, *,
                    start: datetime | None = None, end: datetime | None = None, sagemaker_client: Any = None,
                    s3_client: Any = None, progress: bool | None = False) -> AppendReport:
    """Append the job's Debugger system metrics from ``profiler`` (the job's profiler output: a folder, an
    ``s3://`` prefix or a Source; default: the job's own, from DescribeTrainingJob). ``start`` defaults to the
    job's last stored minute, so each call reads only what is new (and the last, maybe partial, minute again).
    """
    fr = _root(root)
    if start is None:
        start = last_minute(fr, job, source="debugger")
    reader = SystemMetricsReader(job if profiler is None else profiler, start=start, end=end,
                                 sagemaker_client=sagemaker_client, s3_client=s3_client, progress=progress)
    return append_system_minutes(fr, job, reader.refresh(release=True), source="debugger")


def append_cloudwatch(root: FleetRoot | str | os.PathLike[str], job: str, start: datetime, end: datetime, *,
                      hosts: int, cpus: int, gpus: int, cloudwatch_client: Any = None) -> AppendReport:
    """Append the job's CloudWatch host metrics (``/aws/sagemaker/TrainingJobs``, 1-minute) for jobs without
    Debugger, as :func:`smx_debug.data.cloudwatch.instance_metrics` frames them (CPU and GPU divided by the counts,
    so each row is a host average standing for ``cpus`` or ``gpus`` devices)."""
    if cpus < 1 or gpus < 0:
        raise ConfigError(f"cpus ({cpus!r}) must be >= 1 and gpus ({gpus!r}) >= 0", field="cpus", value=cpus)
    frame = instance_metrics(job, start, end, hosts=hosts, cpus=cpus, gpus=gpus or None,
                             cloudwatch_client=cloudwatch_client)
    return append_system_minutes(root, job, frame, source="cloudwatch", devices=cloudwatch_devices(cpus, gpus))


def cloudwatch_devices(cpus: int, gpus: int) -> dict[str, int]:
    """The devices one CloudWatch host row stands for, by dimension: the host's vCPUs for CPU, its GPUs (at
    least 1) for GPU and GPU memory (the ``devices`` column of ``system_minutes``)."""
    per = {"vcpus": max(cpus, 1), "gpus": max(gpus, 1)}
    return {dim: per[kind] for _typ, _name, dim, kind in INSTANCE_METRICS.values() if kind is not None}


class Verdict(BaseModel):
    """One row of the verdict log: a rule trigger (``event='trigger'``, ``verdict='IssuesFound'``) or an
    action taken on it (``event='action'``, ``action`` stop/notify/metric/retrain, ``verdict`` its outcome)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    job: str
    rule: str
    rule_type: str | None = None
    event: Literal["trigger", "action"]
    verdict: str
    action: str | None = None
    source: str
    time: datetime
    detail: str | None = None

    @field_validator("job")
    @classmethod
    def _job(cls, value: str) -> str:
        if not is_training_job_name(value):  # it becomes a file path: never '..', a '/' or a NUL
            raise ValueError(f"job must be a SageMaker training job name (1-63 letters, digits and inner hyphens), "
                             f"got {value!r}")
        return value

    @field_validator("rule")
    @classmethod
    def _rule(cls, value: str) -> str:
        if not is_rule_configuration_name(value):
            raise ValueError(f"rule must be a SageMaker RuleConfigurationName (1-256 characters of one line of "
                             f"UTF-8 text), got {value[:300]!r}")
        return value

    @field_validator("rule_type", "verdict", "action", "detail")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (JSON's "\udc80"): Parquet stores UTF-8 only
                raise ValueError(f"must be UTF-8 text, got {value[:300]!r}") from None
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if value not in TRIGGER_SOURCES:
            raise ValueError(f"source must be one of {TRIGGER_SOURCES}, got {value!r}")
        return value

    @field_validator("time")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError(f"time must be timezone-aware (UTC), got {value!r}")
        return value


def append_verdicts(root: FleetRoot | str | os.PathLike[str], verdicts: Iterable[Verdict]) -> AppendReport:
    """Append rows to the verdict log (idempotent: the same job, rule, event, action and time is one row)."""
    rows = [v.model_dump() for v in verdicts]
    report = AppendReport()
    if not rows:
        return report
    df = pd.DataFrame(rows, columns=list(arrow_schema(VERDICTS_TABLE).names))
    df["time"] = _naive_utc(df["time"])
    report.add(VERDICTS_TABLE, write_rows(_root(root), VERDICTS_TABLE, df))
    return report


def verdicts_from_lines(body: bytes) -> tuple[list[Verdict], dict[str, int]]:
    """The verdict rows of one inbox object (JSON lines of the verdicts table's columns, as
    :mod:`smx_debug.actions.verdict_log` writes them), and the lines skipped by reason (cut mid-write, not UTF-8,
    not JSON, nested too deep, not a valid row: a job that is not a training job name, a rule that is not a
    RuleConfigurationName, text that is not UTF-8). One line's damage never costs another line."""
    rows: list[Verdict] = []
    skipped: dict[str, int] = {}
    lines = body.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data = json_loads(line.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not an object")
            data = {**data, "time": datetime.fromisoformat(str(data.get("time")))}
            rows.append(Verdict.model_validate(data))
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            reason = ("verdict lines cut mid-write" if i == len(lines) - 1 else
                      "verdict lines not UTF-8" if isinstance(exc, UnicodeDecodeError) else
                      "verdict lines nested too deep" if isinstance(exc, JsonTooDeepError) else
                      "verdict lines not JSON" if isinstance(exc, json.JSONDecodeError) else
                      "verdict lines not a valid row")
            skipped[reason] = skipped.get(reason, 0) + 1
    return rows, skipped


def _instance(desc: Mapping[str, Any]) -> tuple[str | None, int]:
    resources = desc.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    if resources.get("InstanceType"):
        return str(resources["InstanceType"]), int(resources.get("InstanceCount") or 1)
    if groups:
        return str(groups[0].get("InstanceType")), sum(int(g.get("InstanceCount") or 0) for g in groups)
    return None, 0


def job_row(desc: Mapping[str, Any], tags: Mapping[str, str], *, now: datetime | None = None) -> dict[str, Any]:
    """The ``training_jobs`` row of a DescribeTrainingJob response and the job's tags."""
    instance_type, count = _instance(desc)
    known = instance_row(instance_type)
    gpus = int(known["gpus"]) if known else None
    price = float(known["price"]) if known and known["price"] is not None else None  # None: no source priced it
    billable = desc.get("BillableTimeInSeconds")
    return {
        "job": str(desc["TrainingJobName"]), "instance_type": instance_type, "instance_count": count,
        "gpus_per_instance": gpus, "price_per_hour": price, "team": tags.get(FLEET_TEAM_TAG),
        "tags": json.dumps(dict(sorted(tags.items()))), "status": desc.get("TrainingJobStatus"),
        "start_time": desc.get("TrainingStartTime"), "end_time": desc.get("TrainingEndTime"),
        "billable_seconds": int(billable) if billable is not None else None,
        "updated": now or datetime.now(UTC),
    }


def append_job(root: FleetRoot | str | os.PathLike[str], desc: Mapping[str, Any], tags: Mapping[str, str], *,
               now: datetime | None = None) -> AppendReport:
    """Write the job's metadata row (replacing the previous one)."""
    check_job(desc.get("TrainingJobName"))
    df = pd.DataFrame([job_row(desc, tags, now=now)], columns=list(arrow_schema(TRAINING_JOBS_TABLE).names))
    for col in ("start_time", "end_time", "updated"):
        df[col] = _naive_utc(df[col]) if df[col].notna().any() else pd.Series([pd.NaT], dtype="datetime64[ms]")
    for col in ("instance_count", "gpus_per_instance"):
        df[col] = df[col].astype("Int32")
    df["billable_seconds"] = df["billable_seconds"].astype("Int64")
    df["price_per_hour"] = df["price_per_hour"].astype("Float64")
    report = AppendReport()
    report.add(TRAINING_JOBS_TABLE, write_rows(_root(root), TRAINING_JOBS_TABLE, df))
    return report


def debugger_verdicts(desc: Mapping[str, Any]) -> list[Verdict]:
    """The trigger rows of a job's Debugger rule statuses (DescribeTrainingJob or Search): one per IssuesFound
    configuration, at its ``LastModifiedTime`` (the time the action core logs for the same trigger)."""
    rows = []
    for status_field, config_field in RULE_FIELDS.values():
        types = {c.get("RuleConfigurationName"): (c.get("RuleParameters") or {}).get("rule_to_invoke")
                 for c in desc.get(config_field) or []}
        for status in desc.get(status_field) or []:
            if status.get("RuleEvaluationStatus") != ISSUES_FOUND or not status.get("LastModifiedTime"):
                continue
            when = status["LastModifiedTime"]
            rows.append(Verdict(job=str(desc["TrainingJobName"]), rule=str(status["RuleConfigurationName"]),
                                rule_type=types.get(status["RuleConfigurationName"]), event=TRIGGER_EVENT,
                                verdict=ISSUES_FOUND, source=SOURCE_DEBUGGER,
                                time=when if when.tzinfo else when.replace(tzinfo=UTC),
                                detail=status.get("StatusDetails") or None))
    return rows


def _tags(sagemaker: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def collect(root: FleetRoot | str | os.PathLike[str], jobs: Iterable[str], *, sagemaker_client: Any = None,
            s3_client: Any = None, cloudwatch_client: Any = None, now: datetime | None = None,
            client_factory: Callable[[str], Any] | None = None) -> AppendReport:
    """For each job: its metadata, its system minutes (Debugger's profiler output when it has some, else
    CloudWatch's host metrics) and Debugger's rule triggers. A job that fails is counted by reason in
    ``failed_jobs`` and ``skipped``; the others carry on."""
    make: Callable[[str], Any] = client_factory or (lambda service: boto3.client(service))  # type: ignore[call-overload]
    sm = sagemaker_client if sagemaker_client is not None else make("sagemaker")
    report = AppendReport()
    fr = _root(root)
    now = now or datetime.now(UTC)
    for job in jobs:
        try:
            report.merge(_collect_one(fr, job, sm, s3_client, cloudwatch_client, make, now))
        except (SmxDebugError, ClientError, BotoCoreError) as exc:
            reason = type(exc).__name__
            if isinstance(exc, ClientError):
                reason = str(exc.response.get("Error", {}).get("Code") or reason)
            report.failed_jobs[job] = f"{reason}: {str(exc)[:300]}"
            report.count_all({f"jobs failed ({reason})": 1})
    return report


def _collect_one(fr: FleetRoot, job: str, sm: Any, s3: Any, cw: Any, make: Callable[[str], Any], now: datetime
                 ) -> AppendReport:
    try:
        desc = describe_job(job, sm)  # a missing job: JobNotFoundError; a denied one: AccessDeniedError
    except ClientError as exc:  # left as is by describe_job: any other ValidationException is a bad name here too
        if exc.response.get("Error", {}).get("Code") == "ValidationException":
            raise JobNotFoundError(job) from exc
        raise
    tags = _tags(sm, desc["TrainingJobArn"])
    report = AppendReport()
    report.merge(append_job(fr, desc, tags, now=now))
    paths = job_paths(job, description=desc)
    profiled = False
    if paths.profiler:
        try:
            report.merge(append_profiler(fr, job, paths.profiler, s3_client=s3))
            profiled = True
        except NoDataYetError:
            profiled = False
    if not profiled and desc.get("TrainingStartTime"):
        row = job_row(desc, tags)
        counts = device_counts(row["instance_type"]) or (1, 0)
        start = desc["TrainingStartTime"]
        since = last_minute(fr, job, source="cloudwatch")
        report.merge(append_cloudwatch(
            fr, job, since or start, desc.get("TrainingEndTime") or now, hosts=max(int(row["instance_count"]), 1),
            cpus=counts[0], gpus=counts[1], cloudwatch_client=cw if cw is not None else make("cloudwatch")))
    report.merge(append_verdicts(fr, debugger_verdicts(desc)))
    return report


