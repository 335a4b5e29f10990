"""The shared cost functions: training time and the scheduled evaluator's own bill."""

from __future__ import annotations

import pytest

from smx_debug.errors import ConfigError
from smx_debug.pricing import EvaluatorPrices, evaluator_cost, training_cost


def test_evaluator_cost_one_hour_each_minute_itemised():
    c = evaluator_cost(runs=60, metrics_per_run=40, duration_s_per_run=2.0, memory_mb=512)
    assert c.metrics_requested == 2400
    assert c.gb_seconds == pytest.approx(60.0)
    assert c.get_metric_data_usd == pytest.approx(0.024)
    assert c.lambda_compute_usd == pytest.approx(60 * 0.0000166667)
    assert c.lambda_requests_usd == pytest.approx(60 * 0.2e-6)
    assert c.total_usd == pytest.approx(0.024 + 60 * 0.0000166667 + 60 * 0.2e-6)


def test_evaluator_cost_arm64_and_custom_prices_are_used():
    prices = EvaluatorPrices(get_metric_data_per_1000_metrics=0.02, lambda_gb_second_arm64=0.00001)
    c = evaluator_cost(runs=10, metrics_per_run=100, duration_s_per_run=1.0, memory_mb=1024,
                       architecture="arm64", prices=prices)
    assert c.get_metric_data_usd == pytest.approx(0.02)
    assert c.lambda_compute_usd == pytest.approx(10 * 0.00001)


@pytest.mark.parametrize(("field", "kwargs"), [
    ("runs", {"runs": -1}), ("metrics_per_run", {"metrics_per_run": -5}),
    ("duration_s_per_run", {"duration_s_per_run": -0.1}), ("memory_mb", {"memory_mb": -128}),
    ("architecture", {"architecture": "sparc"}),
])
def test_evaluator_cost_bad_input_names_the_field(field, kwargs):
    args = {"runs": 1, "metrics_per_run": 1, "duration_s_per_run": 1.0, "memory_mb": 128, **kwargs}
    with pytest.raises(ConfigError) as err:
        evaluator_cost(**args)
    assert err.value.field == field


def test_training_cost_per_second_billing():
    assert training_cost(3, 14.688, 503) == pytest.approx(6.157, abs=1e-3)
    with pytest.raises(ConfigError):
        training_cost(0, 1.0, 1.0)


def test_request_cost_prices_each_service_per_request() -> None:
    from smx_debug.pricing import request_cost

    cost = request_cost(s3_put_list=2000, s3_get=10_000, dynamodb_write_units=1e6, dynamodb_read_units=2e6,
                        sqs_requests=5e5)
    assert (round(cost.s3_usd, 6), round(cost.dynamodb_usd, 6), round(cost.sqs_usd, 6)) == (0.014, 0.875, 0.2)
    assert round(cost.total_usd, 6) == 1.089


def test_request_cost_negative_count_names_the_field() -> None:
    import pytest

    from smx_debug.errors import ConfigError
    from smx_debug.pricing import request_cost

    with pytest.raises(ConfigError, match="sqs_requests"):
        request_cost(sqs_requests=-1)
