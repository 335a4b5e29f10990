"""Per-job isolation in the evaluator: a run's job errors, counted by reason, published as a metric.

A job's failure becomes a :class:`~smx_debug.data.job_errors.JobError` of that job (reasons in
``contracts.JOB_ERROR_REASONS``); :func:`publish_job_errors` puts one run's counts in ``EvaluatorJobErrors``
(dimension ``Reason``), and the job's cursor is not written, so the next run tries it again from where it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from smx_debug.contracts import JOB_ERRORS_METRIC, REASON_DIMENSION

__all__ = ["publish_job_errors"]


def publish_job_errors(cloudwatch: Any, namespace: str, counts: Mapping[str, int], *, now: float) -> int:
    """Put one run's job errors in ``namespace``: per reason (dimension ``Reason``) and in all (no dimension,
    the alarm's metric). Nothing is put for a run without errors. Returns the datapoints put."""
    total = sum(counts.values())
    if not total:
        return 0
    when = datetime.fromtimestamp(now, UTC)
    sets = [([], total), *(([{"Name": REASON_DIMENSION, "Value": r}], n) for r, n in sorted(counts.items()))]
    data = [{"MetricName": JOB_ERRORS_METRIC, "Dimensions": dims, "Value": float(n), "Unit": "Count", "Timestamp": when}
            for dims, n in sets]
    cloudwatch.put_metric_data(Namespace=namespace, MetricData=data)
    return len(data)
