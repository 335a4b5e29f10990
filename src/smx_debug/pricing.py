"""What guarding a job costs and what it saves: training time and the evaluator's own AWS bill.

Standard library only, so the scheduled evaluator (a Lambda) and the report share one cost function.
Prices are US East (N. Virginia) list prices; pass :class:`EvaluatorPrices` to use others.

Example:
    >>> c = evaluator_cost(runs=60, metrics_per_run=40, duration_s_per_run=2.0, memory_mb=512)
    >>> round(c.total_usd, 6)
    0.025012
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from smx_debug.errors import ConfigError

__all__ = [
    "DEFAULT_EVALUATOR_PRICES",
    "EvaluatorCost",
    "EvaluatorPrices",
    "evaluator_cost",
    "training_cost",
]

Architecture = Literal["x86_64", "arm64"]


@dataclass(frozen=True)
class EvaluatorPrices:
    """USD list prices used by :func:`evaluator_cost` (source and date in ``source``)."""

    get_metric_data_per_1000_metrics: float = 0.01
    lambda_gb_second_x86_64: float = 0.0000166667
    lambda_gb_second_arm64: float = 0.0000133334
    lambda_per_million_requests: float = 0.20
    source: str = "AWS CloudWatch and Lambda pricing pages, us-east-1, as of 2026-11-22"


DEFAULT_EVALUATOR_PRICES: Final = EvaluatorPrices()


@dataclass(frozen=True)
class EvaluatorCost:
    """The evaluator's bill for ``runs`` scheduled evaluations, itemised (USD)."""

    runs: int
    metrics_requested: int
    gb_seconds: float
    get_metric_data_usd: float
    lambda_compute_usd: float
    lambda_requests_usd: float

    @property
    def total_usd(self) -> float:
        """GetMetricData + Lambda compute + Lambda requests."""
        return self.get_metric_data_usd + self.lambda_compute_usd + self.lambda_requests_usd


def _non_negative(field: str, value: float) -> None:
    if value < 0:
        raise ConfigError(f"{field} must not be negative, got {value!r}", field=field, value=value)


def evaluator_cost(
    *,
    runs: int,
    metrics_per_run: int,
    duration_s_per_run: float,
    memory_mb: int,
    architecture: Architecture = "x86_64",
    prices: EvaluatorPrices = DEFAULT_EVALUATOR_PRICES,
) -> EvaluatorCost:
    """Cost of ``runs`` evaluations: GetMetricData is billed per metric requested, Lambda per GB-second and request.

    Args:
        runs: number of evaluator invocations (e.g. one a minute for an hour: 60).
        metrics_per_run: metrics requested per invocation, summed over all GetMetricData calls (each
            ``MetricDataQueries`` entry that fetches a metric counts once, whatever its datapoints).
        duration_s_per_run: billed duration of one invocation, seconds.
        memory_mb: the function's configured memory.
        architecture: ``x86_64`` or ``arm64`` (Graviton is cheaper per GB-second).
    """
    for name, value in (("runs", runs), ("metrics_per_run", metrics_per_run),
                        ("duration_s_per_run", duration_s_per_run), ("memory_mb", memory_mb)):
        _non_negative(name, value)
    if architecture not in ("x86_64", "arm64"):
        raise ConfigError(f"architecture must be x86_64 or arm64, got {architecture!r}", field="architecture",
                          value=architecture)
    metrics = runs * metrics_per_run
    gb_s = runs * duration_s_per_run * memory_mb / 1024.0
    per_gb_s = prices.lambda_gb_second_arm64 if architecture == "arm64" else prices.lambda_gb_second_x86_64
    return EvaluatorCost(
        runs=runs,
        metrics_requested=metrics,
        gb_seconds=gb_s,
        get_metric_data_usd=metrics / 1000.0 * prices.get_metric_data_per_1000_metrics,
        lambda_compute_usd=gb_s * per_gb_s,
        lambda_requests_usd=runs / 1e6 * prices.lambda_per_million_requests,
    )


def training_cost(instance_count: int, price_per_hour: float, duration_s: float) -> float:
    """Billed training cost in USD (per-second billing): count x price per instance-hour x hours."""
    if instance_count < 1:
        raise ConfigError(f"instance_count must be at least 1, got {instance_count!r}", field="instance_count",
                          value=instance_count)
    _non_negative("price_per_hour", price_per_hour)
    _non_negative("duration_s", duration_s)
    return instance_count * price_per_hour * duration_s / 3600.0
