"""Cost section: the published Horovod case, idle-GPU cost, right-sizing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from smx_debug.data.frames import series_frame
from smx_debug.errors import ConfigError, UnknownNameError
from smx_debug.evaluate import JobData
from smx_debug.htmlreport import estimate_cost, right_size
from smx_debug.htmlreport.cost import estimate_job_cost, instance_spec, price_table
from smx_debug.pricing import training_cost as job_cost


def test_horovod_case_figures_are_reproduced():
    # Published case: 3 x ml.p3.8xlarge for 503 s cost $6.16; 2 x ml.p3.2xlarge for 502 s cost $1.07; 83% less.
    before = job_cost(3, instance_spec("ml.p3.8xlarge").price, 503)
    after = job_cost(2, instance_spec("p3.2xlarge").price, 502)
    assert (round(before, 2), round(after, 2), round(100 * (1 - after / before))) == (6.16, 1.07, 83)


def test_right_size_horovod_like_load_suggests_two_p3_2xlarge():
    # 12 V100s each at p95 12%: a load of 1.44 GPUs, 2 GPUs at 80% -> 2 x ml.p3.2xlarge beats 1 x ml.p3.8xlarge
    s = right_size("ml.p3.8xlarge", 3, [12.0] * 12, 503)
    assert s is not None
    assert (s.instance_type, s.instance_count, s.gpus_needed, round(s.cost, 2), round(s.saving_percent)) == (
        "ml.p3.2xlarge", 2, 2, 1.07, 83)


@pytest.mark.parametrize(
    ("instance", "count", "p95"),
    [("ml.p3.2xlarge", 1, [95.0]), ("ml.p3.16xlarge", 1, [90.0] * 8), ("ml.m5.xlarge", 1, []), ("ml.p3.8xlarge", 1, [])],
)
def test_right_size_nothing_cheaper_returns_none(instance, count, p95):
    assert right_size(instance, count, p95, 3600) is None


def test_estimate_cost_idle_gpu_cost_is_unused_share_of_cost():
    c = estimate_cost("ml.p3.8xlarge", 3, 503, gpu_utilization=[25.0] * 12, gpu_p95=[30.0] * 12)
    cost = 3 * 14.688 * 503 / 3600  # 3 instances x $14.688/h x 503 s
    assert (round(c.cost, 6), round(c.idle_gpu_cost or 0, 6), c.gpu_utilization_mean) == (
        round(cost, 6), round(cost * 0.75, 6), 25.0)
    assert c.suggestion is not None and c.suggestion.instance_type == "ml.p3.2xlarge"
    assert c.price_source.endswith(f"(as of {price_table()['as_of']})")


def test_estimate_cost_price_override_and_unknown_type():
    c = estimate_cost("ml.trn1.32xlarge", 2, 1800, price_per_hour=21.5)
    assert (c.cost, c.price_source, c.idle_gpu_cost, c.suggestion) == (21.5, "--price", None, None)
    with pytest.raises(UnknownNameError) as info:
        estimate_cost("ml.p3.8xlarg", 1, 60)
    assert info.value.suggestion == "ml.p3.8xlarge"


@pytest.mark.parametrize(("count", "price", "duration"), [(0, 1.0, 60), (1, -1.0, 60), (1, 1.0, -5)])
def test_job_cost_bad_input_raises_config_error(count, price, duration):
    with pytest.raises(ConfigError):
        job_cost(count, price, duration)


def test_price_table_carries_source_and_date():
    table = price_table()
    assert {"source", "as_of", "instances"} <= set(table)
    assert all({"price", "vcpus", "gpus", "gpu_model", "trainium"} <= set(v) for v in table["instances"].values())


def test_estimate_cost_type_without_known_price_says_unknown_and_suggests_only_priced_types():
    c = estimate_cost("ml.p5.48xlarge", 2, 3600, gpu_utilization=[10.0] * 16, gpu_p95=[12.0] * 16)
    assert (c.price_per_hour, c.cost, c.idle_gpu_cost, c.suggestion) == (None, None, None, None)
    assert c.price_source.startswith("unknown") and "--price" in c.price_source
    # p4de (A100 80 GB) is never right-sized to p4d (A100 40 GB), whatever their prices
    assert right_size("ml.p4de.24xlarge", 1, [5.0] * 8, 3600, price_per_hour=40.0) is None


def _two_nodes() -> JobData:
    # two nodes of one GPU each for 600 s: algo-1 at 20% (p95 20%), algo-2 at 0..99% (mean 49.5%)
    system = pd.concat([
        series_frame("algo-1", "gpu0", "GPUUtilization", np.full(601, 20.0), start_s=1e9),
        series_frame("algo-2", "gpu0", "GPUUtilization", np.arange(601.0) % 100, start_s=1e9),
    ], ignore_index=True)
    return JobData(system=system)


def test_estimate_job_cost_derives_duration_utilization_and_count_from_the_data():
    data = _two_nodes()
    c = estimate_job_cost(data, "ml.p3.2xlarge", price_per_hour=3.6)
    util = [20.0, float((np.arange(601.0) % 100).mean())]
    p95 = [20.0, float(np.quantile(np.arange(601.0) % 100, 0.95))]
    assert c == estimate_cost("ml.p3.2xlarge", 2, 600.0, util, p95, price_per_hour=3.6)  # 2: the nodes seen
    assert (c.instance_count, c.duration_s, round(c.cost, 2)) == (2, 600.0, 1.2)
    assert estimate_job_cost(data, "ml.p3.2xlarge", 5).instance_count == 5  # the count given wins


def test_estimate_job_cost_span_of_saved_steps_or_none():
    steps = {0: 1_000_000_000_000, 10: 1_000_000_000_000 + 90 * 10**9}
    c = estimate_job_cost(JobData(), "ml.p3.2xlarge", 1, step_times=steps)
    assert c is not None and (c.duration_s, c.gpu_utilization_mean, c.instance_count) == (90.0, None, 1)
    assert estimate_job_cost(JobData(), "ml.p3.2xlarge") is None  # no metrics, no saved steps: no duration
    assert estimate_job_cost(_two_nodes(), "ml.p3.2xlarge", step_times=steps).duration_s == 600.0  # metrics first
