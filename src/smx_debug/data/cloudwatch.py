"""CloudWatch as a data source: the instance metrics every training job has, and its training metrics.

``/aws/sagemaker/TrainingJobs`` holds CPUUtilization, MemoryUtilization, DiskUtilization,
GPUUtilization and GPUMemoryUtilization per host (dimension ``Host`` = ``<job>/algo-<n>``, 1-minute),
with or without Debugger. They map to the system-metrics frame so the system rules can run on them.
CloudWatch's CPUUtilization/GPUUtilization are sums over cores/GPUs (100% per device), so we divide
by the device counts when given, which makes them comparable to Debugger's per-device values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

import boto3
import numpy as np
import pandas as pd
from botocore.config import Config
from botocore.exceptions import ClientError

from smx_debug.data.frames import empty_scalars, empty_system
from smx_debug.errors import AwsError, translate_client_error

NAMESPACE = "/aws/sagemaker/TrainingJobs"
MAX_QUERIES = 500  # GetMetricData takes at most 500 queries per call
# CloudWatch metric -> (Debugger type, name, dimension, the devices it sums over) in the system frame. CPU and GPU
# values become one per-device series ("cpu0", "gpu0") once divided by the device count: the rules read device
# series and skip node-level ("total") rows. The scheduled evaluator (smx_debug.watch) maps with the same table.
INSTANCE_METRICS: dict[str, tuple[str, str, str, str | None]] = {
    "CPUUtilization": ("cpu", "cpu0", "CPUUtilization", "vcpus"),
    "MemoryUtilization": ("memory", "MemoryUsedPercent", "MemoryUtilization", None),
    "DiskUtilization": ("disk", "DiskUtilization", "DiskUtilization", None),
    "GPUUtilization": ("gpu", "gpu0", "GPUUtilization", "gpus"),
    "GPUMemoryUtilization": ("gpu", "gpu0", "GPUMemoryUtilization", "gpus"),
}
_MODES = {"train": "TRAIN", "training": "TRAIN", "validation": "EVAL", "val": "EVAL", "test": "EVAL", "eval": "EVAL"}


def training_metric(name: str) -> tuple[str, str]:
    """A MetricDefinitions name as the scalars frame's (metric, mode): ``train:loss`` -> (loss, TRAIN),
    ``validation:loss`` -> (loss, EVAL), a name without a known prefix -> mode GLOBAL."""
    prefix, sep, base = name.partition(":")
    return (base or name), (_MODES.get(prefix.lower(), "GLOBAL") if sep else "GLOBAL")


def _client() -> Any:
    return boto3.client("cloudwatch", config=Config(retries={"mode": "standard"}))


def metric_data_results(
    client: Any, queries: list[dict[str, Any]], start: datetime, end: datetime
) -> Iterator[dict[str, Any]]:
    """One GetMetricData call (at most MAX_QUERIES queries), its pages' MetricDataResults in order.

    The package's one GetMetricData call: :func:`instance_metrics`, :func:`training_metrics` and
    :func:`smx_debug.data.cloudwatch_batch.read_metrics` read through it, each translating errors its own way
    (botocore's errors pass through unchanged).
    """
    if len(queries) > MAX_QUERIES:
        raise ValueError(f"GetMetricData takes at most {MAX_QUERIES} queries, got {len(queries)}")
    pages = client.get_paginator("get_metric_data").paginate(
        MetricDataQueries=queries, StartTime=start, EndTime=end, ScanBy="TimestampAscending"
    )
    for page in pages:
        yield from page.get("MetricDataResults", [])


def _query(queries: list[dict[str, Any]], start: datetime, end: datetime, client: Any) -> dict[str, tuple[list[Any], list[float]]]:
    out: dict[str, tuple[list[Any], list[float]]] = {q["Id"]: ([], []) for q in queries}
    try:
        for i in range(0, len(queries), MAX_QUERIES):
            for res in metric_data_results(client, queries[i : i + MAX_QUERIES], start, end):
                ts, vals = out[res["Id"]]
                ts.extend(res.get("Timestamps", []))
                vals.extend(res.get("Values", []))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        translated = translate_client_error(exc, operation="GetMetricData", where="CloudWatch metrics")
        if translated is not exc:  # access denied: names the call and the policy to fix
            raise translated from exc
        if code in {"InvalidParameterValue", "InvalidParameterCombination"}:
            raise AwsError(f"CloudWatch GetMetricData failed: {code}", code=code, operation="GetMetricData") from exc
        raise
    return out


def instance_metrics(
    job_name: str,
    start: datetime,
    end: datetime,
    *,
    hosts: int = 1,
    cpus: int | None = None,
    gpus: int | None = None,
    period: int = 60,
    cloudwatch_client: Any = None,
    client_factory: Callable[[], Any] = _client,
) -> pd.DataFrame:
    """The job's CloudWatch instance metrics as a system-metrics frame (one row per host, metric, minute).

    Args:
        job_name: training job name.
        start, end: time range.
        hosts: instance count (hosts ``algo-1`` .. ``algo-<hosts>``).
        cpus, gpus: devices per instance; CPU/GPU sums are divided by them when given.
        period: seconds per datapoint (CloudWatch keeps these at 1 minute).
    """
    client = cloudwatch_client or client_factory()
    queries, meta = [], {}
    for h in range(1, hosts + 1):
        for j, metric in enumerate(INSTANCE_METRICS):
            qid = f"m{h}_{j}"
            meta[qid] = (f"algo-{h}", metric)
            queries.append({
                "Id": qid,
                "MetricStat": {
                    "Metric": {"Namespace": NAMESPACE, "MetricName": metric,
                               "Dimensions": [{"Name": "Host", "Value": f"{job_name}/algo-{h}"}]},
                    "Period": period, "Stat": "Average",
                },
                "ReturnData": True,
            })
    data = _query(queries, start, end, client)
    frames = []
    for qid, (ts, vals) in data.items():
        if not ts:
            continue
        node, metric = meta[qid]
        typ, name, dim, per = INSTANCE_METRICS[metric]
        v = np.asarray(vals, dtype=np.float64)
        count = {"vcpus": cpus, "gpus": gpus}.get(per or "")
        if count:
            v = v / count
        frames.append(pd.DataFrame({
            "timestamp": pd.to_datetime(ts, utc=True), "node": node, "type": typ, "name": name, "dimension": dim,
            "value": v,
        }))
    if not frames:
        return empty_system()
    return pd.concat(frames, ignore_index=True).sort_values(["timestamp", "node"], kind="stable").reset_index(drop=True)


def training_metrics(
    job_name: str,
    metric_names: Iterable[str],
    start: datetime,
    end: datetime,
    *,
    period: int = 60,
    cloudwatch_client: Any = None,
    client_factory: Callable[[], Any] = _client,
) -> pd.DataFrame:
    """Training metrics (dimension ``TrainingJobName``) as a scalars frame.

    ``train:loss`` / ``validation:loss`` (SageMaker metric definitions) map to metric ``loss`` with
    mode TRAIN / EVAL; ``step`` is the datapoint's index, as CloudWatch has no step numbers.
    """
    client = cloudwatch_client or client_factory()
    names = list(metric_names)
    queries = [{
        "Id": f"t{i}",
        "MetricStat": {
            "Metric": {"Namespace": NAMESPACE, "MetricName": n,
                       "Dimensions": [{"Name": "TrainingJobName", "Value": job_name}]},
            "Period": period, "Stat": "Average",
        },
        "ReturnData": True,
    } for i, n in enumerate(names)]
    data = _query(queries, start, end, client) if queries else {}
    frames = []
    for i, n in enumerate(names):
        ts, vals = data.get(f"t{i}", ([], []))
        if not ts:
            continue
        metric, mode = training_metric(n)
        order = np.argsort(np.asarray(pd.to_datetime(ts, utc=True).asi8))
        frames.append(pd.DataFrame({
            "metric": metric, "mode": mode, "step": np.arange(len(ts), dtype=np.int64),
            "timestamp": pd.to_datetime(np.asarray(pd.to_datetime(ts, utc=True).asi8)[order], utc=True),
            "value": np.asarray(vals, dtype=np.float64)[order],
        }))
    if not frames:
        return empty_scalars()
    return pd.concat(frames, ignore_index=True)
