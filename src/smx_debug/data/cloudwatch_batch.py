"""Read many jobs' CloudWatch metrics in as few GetMetricData calls as its limits allow.

Every training job has 1-minute instance metrics in ``/aws/sagemaker/TrainingJobs`` per host (dimension
``Host`` = ``<job>/algo-<n>``): CPU, memory, disk, GPU and GPU memory utilization, with or without Debugger;
and, when it declares MetricDefinitions, its training metrics (dimension ``TrainingJobName``). One call takes up
to 500 queries (CloudWatch's limit) and one time range, so jobs are grouped by the range they need (a new job:
its whole window; a known job: the minutes since its cursor plus an overlap) and packed, whole jobs at a time,
into calls of at most 500 queries. GetMetricData is billed per metric requested, whatever the range.

A call that still fails after botocore's retries (throttling that does not stop, a denied request) fails only
the jobs in that call, each with a :class:`~smx_debug.data.job_errors.JobError` of the call's reason: they keep
their cursors and are read again by the next run, while the others go on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from smx_debug.data.cloudwatch import INSTANCE_METRICS as INSTANCE_METRIC_MAP
from smx_debug.data.cloudwatch import MAX_QUERIES, NAMESPACE, metric_data_results
from smx_debug.data.job_errors import JobError, job_error

INSTANCE_METRICS = tuple(INSTANCE_METRIC_MAP)  # the names the evaluation maps to frames (evaluate.cloudwatch)
TRAIN = "train"


@dataclass(frozen=True)
class MetricRead:
    """One job's read: ``[start, end)`` in epoch seconds (minute boundaries), its hosts and training metrics."""

    job: str
    start: int
    end: int
    hosts: int
    metrics: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return self.hosts * len(INSTANCE_METRICS) + len(self.metrics)


@dataclass
class ReadResult:
    """Per job, ``series key -> metric -> {epoch minute: value}``; failures by job; calls and metrics requested."""

    data: dict[str, dict[str, dict[str, dict[int, float]]]] = field(default_factory=dict)
    failed: dict[str, JobError] = field(default_factory=dict)
    calls: int = 0
    metrics_requested: int = 0
    datapoints: int = 0


def _queries(read: MetricRead) -> list[tuple[dict[str, Any], str, str]]:
    out = []
    for h in range(1, read.hosts + 1):
        for metric in INSTANCE_METRICS:
            dims = [{"Name": "Host", "Value": f"{read.job}/algo-{h}"}]
            out.append((_stat(metric, dims), f"host:algo-{h}", metric))
    for metric in read.metrics:
        out.append((_stat(metric, [{"Name": "TrainingJobName", "Value": read.job}]), TRAIN, metric))
    return out


def _stat(metric: str, dims: list[dict[str, str]]) -> dict[str, Any]:
    return {"Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dims}, "Period": 60, "Stat": "Average"}


def _pack(reads: Sequence[MetricRead]) -> list[list[MetricRead]]:
    """Whole jobs into calls of at most MAX_QUERIES queries (a job larger than that gets calls of its own)."""
    calls: list[list[MetricRead]] = []
    current: list[MetricRead] = []
    used = 0
    for read in reads:
        if current and used + read.size > MAX_QUERIES:
            calls.append(current)
            current, used = [], 0
        current.append(read)
        used += read.size
    if current:
        calls.append(current)
    return calls


def _call(cloudwatch: Any, group: list[MetricRead], result: ReadResult) -> None:
    queries: list[dict[str, Any]] = []
    where: list[tuple[str, str, str]] = []
    for read in group:
        for stat, series, metric in _queries(read):
            queries.append({"Id": f"q{len(queries)}", "MetricStat": stat, "ReturnData": True})
            where.append((read.job, series, metric))
    start = datetime.fromtimestamp(group[0].start, UTC)
    end = datetime.fromtimestamp(group[0].end, UTC)
    found: dict[str, dict[str, dict[str, dict[int, float]]]] = {r.job: {} for r in group}
    for i in range(0, len(queries), MAX_QUERIES):  # only a single job can exceed one call
        chunk = queries[i : i + MAX_QUERIES]
        result.calls += 1
        result.metrics_requested += len(chunk)
        for res in metric_data_results(cloudwatch, chunk, start, end):
            job, series, metric = where[int(res["Id"][1:])]
            points = found[job].setdefault(series, {}).setdefault(metric, {})
            for ts, value in zip(res.get("Timestamps", []), res.get("Values", []), strict=False):
                points[int(ts.timestamp()) // 60] = float(value)
                result.datapoints += 1
    result.data.update(found)


def read_metrics(cloudwatch: Any, reads: Iterable[MetricRead], *, workers: int = 1) -> ReadResult:
    """Read every job's new minutes, up to ``workers`` calls at a time; see the module docstring."""
    by_range: dict[tuple[int, int], list[MetricRead]] = {}
    for read in reads:
        if read.end > read.start:
            by_range.setdefault((read.start, read.end), []).append(read)
    calls = [call for _, group in sorted(by_range.items()) for call in _pack(group)]

    def one(call: list[MetricRead]) -> ReadResult:
        part = ReadResult()
        try:
            _call(cloudwatch, call, part)
        except (ClientError, BotoCoreError) as exc:
            error = job_error(exc, job=f"{len(call)} jobs", doing=f"GetMetricData for {len(call)} jobs")
            part.data = {}
            part.failed = {read.job: error for read in call}
        return part

    result = ReadResult()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for part in pool.map(one, calls):  # in call order, so results do not depend on timing
            result.data.update(part.data)
            result.failed.update(part.failed)
            result.calls += part.calls
            result.metrics_requested += part.metrics_requested
            result.datapoints += part.datapoints
    return result
