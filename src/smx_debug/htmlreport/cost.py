"""Cost of a training job, the cost of its idle GPUs, and a right-sizing suggestion."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from smx_debug.errors import UnknownNameError
from smx_debug.instances import instance_table
from smx_debug.pricing import training_cost

if TYPE_CHECKING:
    from smx_debug.data.frames import JobData

# GPUs of the suggestion are sized so the observed p95 load would fill them to this fraction.
TARGET_GPU_UTILIZATION = 0.8


class InstanceSpec(BaseModel):
    """One instance type of the price table (``price`` None: no source gave one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_type: str
    price: float | None
    vcpus: int
    gpus: int
    gpu_model: str | None
    gpu_memory_gib: float | None = None


class RightSizing(BaseModel):
    """A suggested configuration with its estimated cost at the same duration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_type: str
    instance_count: int
    gpus_needed: int
    cost: float
    saving_percent: float
    reason: str


class CostEstimate(BaseModel):
    """The cost section of the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    instance_type: str
    instance_count: int
    price_per_hour: float | None  # None: the table has no price for the type and none was passed
    price_source: str
    duration_s: float
    cost: float | None
    gpu_utilization_mean: float | None
    idle_gpu_cost: float | None
    suggestion: RightSizing | None


def price_table() -> dict[str, Any]:
    """The bundled price table (with its ``source`` and ``as_of`` date): :func:`smx_debug.instances.instance_table`."""
    return instance_table()


def instance_spec(instance_type: str) -> InstanceSpec:
    """Look an instance type up (``ml.`` prefix optional)."""
    key = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    row = price_table()["instances"].get(key)
    if row is None:
        names = list(price_table()["instances"])
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; pass --price"
        raise UnknownNameError(f"instance type {instance_type!r} is not in the price table{hint}",
                               name=instance_type, suggestion=close[0] if close else None)
    return InstanceSpec(instance_type=key, price=row["price"], vcpus=row["vcpus"], gpus=row["gpus"],
                        gpu_model=row["gpu_model"], gpu_memory_gib=row.get("gpu_memory_gib"))


def _per_gpu_memory(spec: InstanceSpec) -> float | None:
    return spec.gpu_memory_gib / spec.gpus if spec.gpu_memory_gib is not None and spec.gpus else None


def right_size(
    instance_type: str, instance_count: int, gpu_p95: Sequence[float], duration_s: float,
    *, price_per_hour: float | None = None, target: float = TARGET_GPU_UTILIZATION,
) -> RightSizing | None:
    """The cheapest configuration of the same GPU (model and memory) whose GPUs carry the observed p95 load.

    The load is the sum over all GPUs of their p95 utilization; the suggestion has enough GPUs to run
    it at ``target`` utilization. None when nothing cheaper fits, the job has no GPUs or its price is unknown;
    types without a known price are never suggested.
    """
    spec = instance_spec(instance_type)
    price = price_per_hour if price_per_hour is not None else spec.price
    if not spec.gpus or not gpu_p95 or price is None:
        return None
    load = sum(max(0.0, float(u)) for u in gpu_p95) / 100.0
    needed = max(1, math.ceil(load / target - 1e-9))
    current = training_cost(instance_count, price, duration_s)
    best: tuple[float, int, InstanceSpec] | None = None
    for name in price_table()["instances"]:
        cand = instance_spec(name)
        if (cand.gpu_model != spec.gpu_model or not cand.gpus or cand.price is None
                or _per_gpu_memory(cand) != _per_gpu_memory(spec)):
            continue
        count = math.ceil(needed / cand.gpus)
        cost = training_cost(count, cand.price, duration_s)  # cand.price checked above
        if best is None or (cost, count) < (best[0], best[1]):
            best = (cost, count, cand)
    if best is None or best[0] >= current - 1e-9:
        return None
    cost, count, cand = best
    return RightSizing(
        instance_type=cand.instance_type, instance_count=count, gpus_needed=needed, cost=cost,
        saving_percent=100.0 * (1 - cost / current) if current else 0.0,
        reason=(f"the {instance_count * spec.gpus} GPUs carried a p95 load of {load:.2f} GPUs; "
                f"{needed} GPU(s) run it at {target:.0%}"),
    )


def estimate_cost(
    instance_type: str, instance_count: int, duration_s: float, gpu_utilization: Sequence[float] = (),
    gpu_p95: Sequence[float] = (), *, price_per_hour: float | None = None,
) -> CostEstimate:
    """Job cost, idle-GPU cost (cost x share of GPU time unused) and a right-sizing suggestion.

    A type the table knows without a price (no source gave one) and no ``price_per_hour``: the costs are None and
    ``price_source`` says the price is unknown. A type the table does not know needs ``price_per_hour``.
    """
    table = price_table()
    try:
        spec: InstanceSpec | None = instance_spec(instance_type)
    except UnknownNameError:
        if price_per_hour is None:
            raise
        spec = None
    price = price_per_hour if price_per_hour is not None else spec.price if spec else None
    if price_per_hour is not None:
        source = "--price"
    elif price is None:
        source = (f"unknown: the bundled table (as of {table['as_of']}) has no price for {instance_type}; "
                  "pass --price")
    else:
        source = f"{table['source']} (as of {table['as_of']})"
    cost = training_cost(instance_count, price, duration_s) if price is not None else None
    mean = float(sum(gpu_utilization) / len(gpu_utilization)) if gpu_utilization else None
    idle = (cost * (1 - mean / 100.0) if cost is not None and mean is not None and spec is not None and spec.gpus
            else None)
    suggestion = (
        right_size(instance_type, instance_count, gpu_p95, duration_s, price_per_hour=price_per_hour)
        if spec is not None else None
    )
    return CostEstimate(
        instance_type=spec.instance_type if spec else instance_type, instance_count=instance_count,
        price_per_hour=price, price_source=source, duration_s=duration_s, cost=cost,
        gpu_utilization_mean=mean, idle_gpu_cost=idle, suggestion=suggestion,
    )


def _job_span(data: JobData, step_times: Mapping[int, int]) -> tuple[int, int] | None:
    """The system metrics' span, else (a job with tensors only) the saved steps' wall times, epoch ns."""
    if data.system_span_ns is not None:
        return data.system_span_ns
    if step_times:
        return min(step_times.values()), max(step_times.values())
    return None


def estimate_job_cost(
    data: JobData, instance_type: str, instance_count: int | None = None, *,
    step_times: Mapping[int, int] | None = None, price_per_hour: float | None = None,
) -> CostEstimate | None:
    """:func:`estimate_cost` of a job from its data: the duration of its span, each GPU's mean and p95
    utilization, ``instance_count`` or else the nodes seen (at least 1). ``step_times`` (saved step -> epoch ns)
    give the span of a job with tensors only; None when nothing gives one."""
    span = _job_span(data, step_times or {})
    if span is None:
        return None
    gpus = [s.values for s in data.series("GPUUtilization") if len(s.values)]
    util = [float(v.mean()) for v in gpus]
    p95 = [float(np.quantile(v, 0.95)) for v in gpus]
    count = instance_count or max(len(data.nodes), 1)
    return estimate_cost(instance_type, count, (span[1] - span[0]) / 1e9, util, p95, price_per_hour=price_per_hour)
