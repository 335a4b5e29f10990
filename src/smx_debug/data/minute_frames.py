"""A job's window of minute data as the evaluation frames (docs/CONTRACTS.md), one rule window at a time.

CloudWatch's CPUUtilization, GPUUtilization and GPUMemoryUtilization are sums over the host's vCPUs / GPUs
(100% per device); dividing by the device counts of the instance type makes them per-device averages, which
is what Debugger's thresholds mean. What CloudWatch cannot show: per-core and per-GPU values (a host's average
hides one idle GPU among busy ones) and step timings; Debugger's profiler output has them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from smx_debug.data.cloudwatch import INSTANCE_METRICS, training_metric
from smx_debug.data.frames import empty_scalars, empty_system
from smx_debug.instances import instance_row, vcpus_from_size

# Rules whose thresholds are per device: they need the instance type's vCPU and GPU counts.
DEVICE_RULES = frozenset({"CPUBottleneck", "LowGPUUtilization", "GPUMemoryIncrease"})


def device_counts(instance_type: str | None) -> tuple[int, int] | None:
    """(vCPUs, GPUs) of a SageMaker instance type, or None if the table does not know it."""
    entry = instance_row(instance_type)
    return (int(entry["vcpus"]), int(entry["gpus"])) if entry else None


def _fewest_devices(data: dict[str, dict[str, dict[int, float]]], metrics: tuple[str, ...]) -> tuple[int, float]:
    """The fewest devices the host sums of ``metrics`` can come from (each device at most 100%), and the largest
    sum: a sum of 700% needs at least 7 devices."""
    most = max((v for series, ms in data.items() if series.startswith("host:")
                for m in metrics for v in ms.get(m, {}).values()), default=0.0)
    return max(0, math.ceil(most / 100.0 - 1e-9)), most


def job_devices(
    instance_type: str | None, data: dict[str, dict[str, dict[int, float]]]
) -> tuple[tuple[int, int], str | None]:
    """(vCPUs, GPUs) to divide a job's host sums by, and a note when they are not the table's.

    A type the table does not know (newer than it) is judged on what is known without it, never skipped: vCPUs
    from the size in its name (``48xlarge``: 192), else the fewest the CPU sums need; GPUs the fewest the GPU sums
    need (a sum of 700% needs 7). Fewer GPUs than there are overstate each GPU's share, so LowGPUUtilization and
    CPUBottleneck fire later than with the true count, never sooner; GPUMemoryIncrease sees the increase
    overstated by the same ratio. Debugger's profiler output, where the job writes it, shows every device.
    """
    known = device_counts(instance_type)
    if known is not None:
        return known, None
    gpus, most_gpu = _fewest_devices(data, ("GPUUtilization", "GPUMemoryUtilization"))
    named = vcpus_from_size(instance_type)
    vcpus = named if named is not None else max(1, _fewest_devices(data, ("CPUUtilization",))[0])
    cpu_basis = "its size name" if named is not None else "the fewest its CPU sums need"
    return (vcpus, gpus), (
        f"instance type {instance_type!r} is not in the instance table: its host sums are divided by {vcpus} vCPUs "
        f"({cpu_basis}) and at least {gpus} GPUs (its GPU sums reach {most_gpu:.0f}%), so a GPU's share may be "
        "overstated; Debugger's profiler output would show every device")


def system_frame(
    data: dict[str, dict[str, dict[int, float]]], lo: int, hi: int, devices: tuple[int, int] | None
) -> pd.DataFrame:
    """Instance metrics of minutes ``lo..hi`` (epoch minutes, inclusive) as the long system frame."""
    minutes: list[np.ndarray] = []
    values: list[np.ndarray] = []
    labels: list[tuple[str, str, str, str, int]] = []
    for series, metrics in sorted(data.items()):
        if not series.startswith("host:"):
            continue
        node = series.split(":", 1)[1]
        for metric, points in sorted(metrics.items()):
            if metric not in INSTANCE_METRICS:
                continue
            typ, name, dim, per = INSTANCE_METRICS[metric]
            keep = sorted(t for t in points if lo <= t <= hi)
            if not keep:
                continue
            vals = np.fromiter((points[t] for t in keep), dtype=np.float64, count=len(keep))
            if per is not None:
                count = (devices[0] if per == "vcpus" else devices[1]) if devices else 1
                vals = vals / max(count, 1)
            minutes.append(np.asarray(keep, dtype=np.int64))
            values.append(vals)
            labels.append((node, typ, name, dim, len(keep)))
    if not minutes:
        return empty_system()
    counts = [n for *_, n in labels]
    out = pd.DataFrame({
        "timestamp": pd.to_datetime(np.concatenate(minutes) * 60_000_000_000, utc=True),
        **{col: np.repeat(np.array([lab[i] for lab in labels], dtype=object), counts)
           for i, col in enumerate(("node", "type", "name", "dimension"))},
        "value": np.concatenate(values),
    })
    return out.sort_values(["timestamp", "node"], kind="stable").reset_index(drop=True)


def scalar_frame(data: dict[str, dict[str, dict[int, float]]], lo: int, hi: int, start_minute: int) -> pd.DataFrame:
    """Training metrics of minutes ``lo..hi`` as the scalars frame; ``step`` is the minute since the job started.

    ``train:loss`` is metric ``loss`` in mode TRAIN, ``validation:loss`` mode EVAL, a name without a known
    prefix mode GLOBAL, as the scalar rules expect.
    """
    minutes: list[np.ndarray] = []
    values: list[np.ndarray] = []
    labels: list[tuple[str, str, int]] = []
    for name, points in sorted(data.get("train", {}).items()):
        keep = sorted(t for t in points if lo <= t <= hi)
        if not keep:
            continue
        metric, mode = training_metric(name)
        minutes.append(np.asarray(keep, dtype=np.int64))
        values.append(np.fromiter((points[t] for t in keep), dtype=np.float64, count=len(keep)))
        labels.append((metric, mode, len(keep)))
    if not minutes:
        return empty_scalars()
    counts = [n for *_, n in labels]
    at = np.concatenate(minutes)
    return pd.DataFrame({
        "metric": np.repeat(np.array([m for m, _, _ in labels], dtype=object), counts),
        "mode": np.repeat(np.array([m for _, m, _ in labels], dtype=object), counts),
        "step": at - start_minute,
        "timestamp": pd.to_datetime(at * 60_000_000_000, utc=True),
        "value": np.concatenate(values),
    })
