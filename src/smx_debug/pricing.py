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

Architecture = Literal["x86_64", "arm64"]


@dataclass(frozen=True)
class EvaluatorPrices:
    """USD list prices used by :func:`evaluator_cost` (source and date in ``source``)."""

    get_metric_data_per_1000_metrics: float = 0.01
    lambda_gb_second_x86_64: float = 0.0000166667
    lambda_gb_second_arm64: float = 0.0000133334
    lambda_per_million_requests: float = 0.20
    s3_put_list_per_1000: float = 0.005  # PUT, COPY, POST, LIST (S3 Standard)
    s3_get_per_1000: float = 0.0004  # GET, SELECT and all other requests
    dynamodb_per_million_write_units: float = 0.625  # on-demand
    dynamodb_per_million_read_units: float = 0.125  # on-demand
    sqs_per_million_requests: float = 0.40  # standard queue, beyond the free tier
    source: str = "AWS CloudWatch, Lambda, S3, DynamoDB and SQS pricing pages, us-east-1, as of 2026-11-22"


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


@dataclass(frozen=True)
class RequestCost:
    """The per-request bill of the evaluator's state and outputs (USD): its cursors and leases in DynamoDB, the
    fleet dataset's appends in S3, its shards in SQS."""

    s3_usd: float
    dynamodb_usd: float
    sqs_usd: float

    @property
    def total_usd(self) -> float:
        return self.s3_usd + self.dynamodb_usd + self.sqs_usd


def request_cost(
    *,
    s3_put_list: float = 0,
    s3_get: float = 0,
    dynamodb_write_units: float = 0,
    dynamodb_read_units: float = 0,
    sqs_requests: float = 0,
    prices: EvaluatorPrices = DEFAULT_EVALUATOR_PRICES,
) -> RequestCost:
    """Cost of request counts: S3 PUT/LIST and GET requests, DynamoDB on-demand write and read units (1 KB
    written, 4 KB read consistently, per unit), SQS requests (each up to 64 KB)."""
    for name, value in (("s3_put_list", s3_put_list), ("s3_get", s3_get), ("dynamodb_write_units",
                        dynamodb_write_units), ("dynamodb_read_units", dynamodb_read_units),
                        ("sqs_requests", sqs_requests)):
        _non_negative(name, value)
    return RequestCost(
        s3_usd=s3_put_list / 1000 * prices.s3_put_list_per_1000 + s3_get / 1000 * prices.s3_get_per_1000,
        dynamodb_usd=dynamodb_write_units / 1e6 * prices.dynamodb_per_million_write_units
        + dynamodb_read_units / 1e6 * prices.dynamodb_per_million_read_units,
        sqs_usd=sqs_requests / 1e6 * prices.sqs_per_million_requests,
    )


def training_cost(instance_count: int, price_per_hour: float, duration_s: float) -> float:
    """Billed training cost in USD (per-second billing): count x price per instance-hour x hours."""
    if instance_count < 1:
        raise ConfigError(f"instance_count must be at least 1, got {instance_count!r}", field="instance_count",
                          value=instance_count)
    _non_negative("price_per_hour", price_per_hour)
    _non_negative("duration_s", duration_s)
    return instance_count * price_per_hour * duration_s / 3600.0


INSTANCE_METRICS_PER_HOST = 5  # CPU, memory, disk, GPU, GPU memory utilization (data.cloudwatch.INSTANCE_METRICS)


def cost_per_job_hour(
    *,
    hosts: int = 1,
    training_metrics: int = 2,
    rate_minutes: int = 1,
    run_seconds_per_job: float = 0.1,
    memory_mb: int = 1024,
    jobs_per_run: int = 1,
    prices: EvaluatorPrices = DEFAULT_EVALUATOR_PRICES,
) -> EvaluatorCost:
    """The evaluator's bill for one watched job running one hour (arm64, as the stack deploys it).

    GetMetricData is billed per metric requested (every run requests each watched metric once, whatever the time
    range), Lambda per GB-second of the run plus per request; a run's duration and its request are shared by every
    job it evaluates, so the per-job share falls as more jobs are watched (docs/evaluator.md quotes its figures).

    Args:
        hosts: the job's instance count (5 instance metrics each).
        training_metrics: its MetricDefinitions the rules read.
        rate_minutes: the schedule (cdk.json ``evaluator.rate_minutes``).
        run_seconds_per_job: the run's duration divided by the jobs it evaluates (bench/evaluator_bench.py).
        memory_mb: the function's memory (1024 in the stack).
        jobs_per_run: jobs sharing each invocation's request charge.

    Raises:
        ConfigError: a count or duration out of range, naming the argument.
    """
    for name, value in (("hosts", hosts), ("rate_minutes", rate_minutes), ("jobs_per_run", jobs_per_run)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"cost_per_job_hour: {name} must be a positive integer, got {value!r}",
                              field=name, value=value)
    if rate_minutes > 60:
        raise ConfigError(f"cost_per_job_hour: rate_minutes {rate_minutes} is over an hour", field="rate_minutes",
                          value=rate_minutes)
    runs = max(1, round(60 / rate_minutes))
    full = evaluator_cost(
        runs=runs,
        metrics_per_run=hosts * INSTANCE_METRICS_PER_HOST + training_metrics,
        duration_s_per_run=run_seconds_per_job,
        memory_mb=memory_mb,
        architecture="arm64",
        prices=prices,
    )
    # the request charge is per invocation, shared by the jobs of that invocation
    return EvaluatorCost(
        runs=full.runs, metrics_requested=full.metrics_requested, gb_seconds=full.gb_seconds,
        get_metric_data_usd=full.get_metric_data_usd, lambda_compute_usd=full.lambda_compute_usd,
        lambda_requests_usd=full.lambda_requests_usd / jobs_per_run,
    )
