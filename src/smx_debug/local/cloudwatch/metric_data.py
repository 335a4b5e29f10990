"""GetMetricData at scale on the local AWS, and bulk datapoints written as SageMaker would write them.

moto implements GetMetricData by scanning every stored datapoint for every period of every query, which takes
minutes for the evaluator's benchmark (hundreds of thousands of datapoints, thousands of queries). This module
replaces moto's CloudWatch ``get_metric_data`` (through moto's public backend and response classes) with an
indexed one that returns the same result shape, and enforces CloudWatch's documented limit of 500
``MetricDataQueries`` per call (``ValidationError`` beyond it). Only ``MetricStat`` queries are served here;
a request with a metric-math ``Expression`` falls back to moto's own implementation.

Periods are aligned on ``StartTime`` as moto does, timestamps are returned per period that holds data, and
``Average``, ``Sum``, ``Minimum``, ``Maximum`` and ``SampleCount`` are supported.

:func:`put_datapoints` appends datapoints straight to moto's CloudWatch backend (no HTTP round trip per batch of
1000), so that a simulator can publish an hour of per-host instance metrics for 200 jobs in a second; the data
is then visible to ListMetrics, GetMetricStatistics and GetMetricData exactly like data sent by PutMetricData.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from moto.cloudwatch.exceptions import ValidationError
from moto.cloudwatch.models import MetricDatum, cloudwatch_backends
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.responses import ActionResult

from smx_debug.errors import ConfigError
from smx_debug.local.patching import patch_once
from smx_debug.local.server import LOCAL_ACCOUNT_ID, LocalAws

MAX_QUERIES = 500
_STATS = {"Average", "Sum", "Minimum", "Maximum", "SampleCount"}
_lock = threading.RLock()
# backend -> index state; moto keeps one backend per account and region for the process.
_indexes: dict[int, _Index] = {}

Key = tuple[str, str, frozenset[tuple[str, str]]]


class _Index:
    """Datapoints of one backend grouped by metric, indexed up to ``upto`` entries of ``metric_data``."""

    def __init__(self) -> None:
        self.upto = 0
        self.lists: dict[Key, tuple[list[float], list[float]]] = {}
        self.arrays: dict[Key, tuple[np.ndarray, np.ndarray]] = {}
        self.source: list[Any] | None = None

    def catch_up(self, data: list[Any]) -> None:
        if self.source is not data or len(data) < self.upto:  # the backend was reset
            self.upto, self.lists, self.arrays, self.source = 0, {}, {}, data
        for datum in data[self.upto :]:
            if not isinstance(datum, MetricDatum):
                continue
            key: Key = (datum.namespace, datum.name, frozenset((str(d.name), str(d.value)) for d in datum.dimensions))
            ts = datum.timestamp
            if ts.tzinfo is None:
                ts = ts.replace(tzinfo=UTC)
            pair = self.lists.setdefault(key, ([], []))
            pair[0].append(ts.timestamp())
            pair[1].append(float(datum.value))
            self.arrays.pop(key, None)
        self.upto = len(data)

    def series(self, key: Key) -> tuple[np.ndarray, np.ndarray]:
        if key not in self.arrays:
            ts, vals = self.lists.get(key, ([], []))
            t, v = np.asarray(ts, dtype=np.float64), np.asarray(vals, dtype=np.float64)
            order = np.argsort(t, kind="stable")
            self.arrays[key] = (t[order], v[order])
        return self.arrays[key]


def _index(backend: Any) -> _Index:
    with _lock:
        index = _indexes.setdefault(id(backend), _Index())
        index.catch_up(backend.metric_data)
        return index


def _aggregate(values: np.ndarray, bucket: np.ndarray, n: int, stat: str) -> tuple[np.ndarray, np.ndarray]:
    counts = np.bincount(bucket, minlength=n)
    has = counts > 0
    out: np.ndarray
    if stat == "SampleCount":
        out = counts.astype(np.float64)
    elif stat == "Sum":
        out = np.bincount(bucket, weights=values, minlength=n)
    elif stat == "Average":
        out = np.bincount(bucket, weights=values, minlength=n) / np.maximum(counts, 1)
    else:
        fill = np.inf if stat == "Minimum" else -np.inf
        out = np.full(n, fill)
        (np.minimum if stat == "Minimum" else np.maximum).at(out, bucket, values)
    return np.flatnonzero(has), out[has]


def _query(index: _Index, query: Mapping[str, Any], start: datetime, end: datetime, scan_by: str) -> dict[str, Any]:
    stat_spec = query["MetricStat"]
    metric = stat_spec["Metric"]
    stat = stat_spec["Stat"]
    if stat not in _STATS:
        raise ValidationError(f"The local AWS serves Stat in {sorted(_STATS)}, not {stat!r}.")
    period = int(stat_spec["Period"])
    key = (
        metric["Namespace"],
        metric["MetricName"],
        frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])),
    )
    ts, vals = index.series(key)
    t0, t1 = start.timestamp(), end.timestamp()
    lo, hi = np.searchsorted(ts, t0, side="left"), np.searchsorted(ts, t1, side="left")
    n = int((t1 - t0) // period) + 1
    bucket = ((ts[lo:hi] - t0) // period).astype(np.int64)
    which, out = _aggregate(vals[lo:hi], bucket, n, stat)
    stamps = [start + timedelta(seconds=int(b) * period) for b in which]
    values = [float(v) for v in out]
    if scan_by == "TimestampDescending":
        stamps.reverse()
        values.reverse()
    return {
        "id": query["Id"],
        "label": query.get("Label") or f"{metric['MetricName']} {stat}",
        "values": values,
        "timestamps": stamps,
        "status_code": "Complete",
    }


def _aware(value: datetime) -> datetime:
    return value.replace(microsecond=0, tzinfo=value.tzinfo or UTC)


def install() -> None:
    """Replace moto's CloudWatch GetMetricData with the indexed one (once per process). Idempotent."""
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def get_metric_data(self: Any) -> Any:
            params = self._get_params()
            queries = params.get("MetricDataQueries", [])
            if len(queries) > MAX_QUERIES:
                raise ValidationError(
                    f"The collection MetricDataQueries must not have a size greater than {MAX_QUERIES}."
                )
            if any("MetricStat" not in q for q in queries):
                return original(self)
            start, end = _aware(params["StartTime"]), _aware(params["EndTime"])
            if start >= end:
                raise ValidationError("The parameter EndTime must be greater than StartTime.")
            scan_by = params.get("ScanBy") or "TimestampDescending"
            index = _index(self.cloudwatch_backend)
            results = [_query(index, q, start, end, scan_by) for q in queries]
            return ActionResult(
                {"MetricDataResults": [r for r, q in zip(results, queries, strict=True) if q.get("ReturnData", True)]}
            )

        return get_metric_data

    patch_once(CloudWatchResponse, "get_metric_data", wrap)


def put_datapoints(
    aws: LocalAws,
    namespace: str,
    metric_name: str,
    dimensions: Mapping[str, str],
    timestamps: Sequence[datetime],
    values: Sequence[float],
    *,
    unit: str | None = None,
) -> int:
    """Append datapoints to the local CloudWatch as PutMetricData would; returns how many were written.

    Raises:
        ConfigError: ``timestamps`` and ``values`` differ in length, or a timestamp has no time zone.
    """
    if len(timestamps) != len(values):
        raise ConfigError(
            f"put_datapoints: {len(timestamps)} timestamps but {len(values)} values", field="values", value=len(values)
        )
    if any(t.tzinfo is None for t in timestamps):
        raise ConfigError("put_datapoints: timestamps must be time-zone aware (UTC)", field="timestamps", value=None)
    install()
    backend = cloudwatch_backends[LOCAL_ACCOUNT_ID][aws.region]
    dims = [{"Name": k, "Value": v} for k, v in dimensions.items()]
    batch = [
        MetricDatum(namespace, metric_name, float(v), dims, t, unit) for t, v in zip(timestamps, values, strict=True)
    ]
    with _lock:
        backend.metric_data.extend(batch)
    return len(batch)
