"""What the scheduled evaluator costs per watched job-hour, with the one cost function (:mod:`smx_debug.pricing`).

docs/evaluator.md quotes :func:`cost_per_job_hour`'s figures and the HTML report's cost section can call it with the
job's own host and metric counts. GetMetricData is billed per metric requested (every run requests each watched
metric once, whatever the time range), Lambda per GB-second of the run plus per request; a run's duration and its
request are shared by every job it evaluates, so the per-job share falls as more jobs are watched.
"""

from __future__ import annotations

from smx_debug.errors import ConfigError
from smx_debug.pricing import DEFAULT_EVALUATOR_PRICES, EvaluatorCost, EvaluatorPrices, evaluator_cost

__all__ = ["INSTANCE_METRICS_PER_HOST", "cost_per_job_hour"]

INSTANCE_METRICS_PER_HOST = 5  # CPU, memory, disk, GPU, GPU memory utilization (watch.cloudwatch.INSTANCE_METRICS)


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
