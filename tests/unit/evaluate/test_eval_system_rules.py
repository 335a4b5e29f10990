"""System rules on constructed series whose answers are worked out by hand.

Unless a test says otherwise, series have one value per second from t=0, so the scan boundaries
(every 60 s) see 60, 120, ... values, and "more than patience=1000 values" first holds at boundary 17.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from smx_debug.evaluate import evaluate_rule


def test_low_gpu_utilization_constant_low_fires_from_boundary_17(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 30.0)))
    r = evaluate_rule("LowGPUUtilization", data)
    assert r.to_debugger_json() == {
        "RuleTriggered": 4, "Violations": 4, "Details": {"algo-1": {"gpu0": {"gpu_95": 30.0, "gpu_5": 30.0}}},
        "Datapoints": 1200, "RuleParameters": "threshold_p95:70\nthreshold_p5:10\nwindow:500\npatience:1000",
    }
    assert r.trigger_step == 17


def test_low_gpu_utilization_fluctuating_fires(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.tile([0.0, 100.0], 600)))
    r = evaluate_rule("LowGPUUtilization", data)
    assert (r.rule_triggered, r.details) == (4, {"algo-1": {"gpu0": {"gpu_95": 100.0, "gpu_5": 0.0}}})
    assert "fluctuating" in r.message


def test_low_gpu_utilization_busy_gpu_does_not_fire(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 90.0)))
    assert evaluate_rule("LowGPUUtilization", data).to_debugger_json()["RuleTriggered"] == 0


def test_low_gpu_utilization_gap_counts_values_not_time(frames):
    # 600 values, a 20-minute gap, 600 more: the 1001st value arrives at t=2200 s -> boundaries 2220..2400.
    ts = np.concatenate([np.arange(600), 1800 + np.arange(600)])
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 5.0), timestamps_s=ts))
    r = evaluate_rule("LowGPUUtilization", data)
    assert (r.rule_triggered, r.trigger_step) == (4, 37)


def test_low_gpu_utilization_node_without_gpus_is_absent_from_details(frames):
    data = frames.data(
        frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 20.0)),
        frames.series("algo-2", "cpu0", "CPUUtilization", np.full(1200, 20.0)),
    )
    assert list(evaluate_rule("LowGPUUtilization", data).details) == ["algo-1"]


def test_low_gpu_utilization_what_if_threshold_silences_it(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 30.0)))
    r = evaluate_rule("LowGPUUtilization", data, {"threshold_p95": 20, "threshold_p5": 5})
    assert (r.rule_triggered, r.rule_parameters) == (0, "threshold_p95:20\nthreshold_p5:5\nwindow:500\npatience:1000")


@pytest.mark.parametrize(
    "rule", ["LowGPUUtilization", "GPUMemoryIncrease", "LoadBalancing", "BatchSize"]
)
def test_gpu_rules_cpu_only_job_do_not_fire(frames, rule):
    data = frames.data(*(frames.series("algo-1", f"cpu{i}", "CPUUtilization", np.full(1200, 20.0)) for i in range(4)))
    out = evaluate_rule(rule, data).to_debugger_json()
    assert (out["RuleTriggered"], out["Violations"], out["Details"]) == (0, 0, {})


def test_gpu_memory_increase_jump_fires_once_in_its_scan_interval(frames):
    # 40% for 1100 s then 60%: the 10-value moving average rises by 2 points per value for 10 values
    # (t=1100..1109 s, all in scan interval 19 = [1080, 1140)).
    values = np.concatenate([np.full(1100, 40.0), np.full(100, 60.0)])
    data = frames.data(frames.series("algo-1", "gpu0", "GPUMemoryUtilization", values))
    r = evaluate_rule("GPUMemoryIncrease", data, {"increase": 1})
    assert r.to_debugger_json() == {
        "RuleTriggered": 1, "Violations": 1,
        "Details": {"algo-1": {"gpu0": {"increase": 2.0, "memory": 60.0, "violations": 10}}},
        "Datapoints": 1200, "RuleParameters": "increase:1\npatience:1000\nwindow:10",
    }
    assert r.trigger_step == 19
    assert evaluate_rule("GPUMemoryIncrease", data).rule_triggered == 0  # default increase 5 > 2


def test_gpu_memory_increase_before_patience_does_not_fire(frames):
    values = np.concatenate([np.full(500, 40.0), np.full(700, 90.0)])
    data = frames.data(frames.series("algo-1", "gpu0", "GPUMemoryUtilization", values))
    assert evaluate_rule("GPUMemoryIncrease", data).rule_triggered == 0


@pytest.mark.parametrize(("gpus", "expected"), [(1, 4), (2, 8)])
def test_batch_size_everything_low_fires_per_gpu_and_boundary(frames, gpus, expected):
    parts = [frames.series("algo-1", f"cpu{i}", "CPUUtilization", np.full(1200, 20.0)) for i in range(4)]
    for g in range(gpus):
        parts.append(frames.series("algo-1", f"gpu{g}", "GPUUtilization", np.full(1200, 20.0)))
        parts.append(frames.series("algo-1", f"gpu{g}", "GPUMemoryUtilization", np.full(1200, 20.0)))
    r = evaluate_rule("BatchSize", frames.data(*parts))
    stats = {"p25": 20.0, "p50": 20.0, "p75": 20.0, "p95": 20.0, "upper": 20.0, "lower": 20.0}
    assert (r.rule_triggered, r.violations, r.datapoints, r.trigger_step) == (expected, expected, 1200, 17)
    assert r.details["algo-1"]["cpu"] == stats
    assert r.details["algo-1"]["gpu0_memory"] == stats


def test_batch_size_busy_cpu_does_not_fire(frames):
    parts = [frames.series("algo-1", "cpu0", "CPUUtilization", np.full(1200, 95.0)),
             frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 20.0)),
             frames.series("algo-1", "gpu0", "GPUMemoryUtilization", np.full(1200, 20.0))]
    assert evaluate_rule("BatchSize", frames.data(*parts)).rule_triggered == 0


def test_load_balancing_disjoint_histograms_fire_with_distance_sqrt_ln2(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 90.0)),
                       frames.series("algo-1", "gpu1", "GPUUtilization", np.full(1200, 10.0)))
    r = evaluate_rule("LoadBalancing", data)
    assert (r.rule_triggered, r.trigger_step) == (4, 17)
    assert r.details["algo-1"]["distances"] == {"gpu0": {"gpu1": pytest.approx(math.sqrt(math.log(2)))}}
    hist = [0] * 50
    hist[45] = 1200
    assert r.details["algo-1"]["workloads"]["gpu0"] == hist


@pytest.mark.parametrize("names", [["gpu0"], ["gpu0", "gpu1"]])
def test_load_balancing_single_or_identical_gpus_do_not_fire(frames, names):
    data = frames.data(*(frames.series("algo-1", n, "GPUUtilization", np.full(1200, 50.0)) for n in names))
    assert evaluate_rule("LoadBalancing", data).rule_triggered == 0


def _bottleneck_job(frames, dimension):
    # 1200 snapshots; from t=600 s the GPU is at 5% while cpu0 (or I/O wait) is at 95%.
    low = np.arange(1200) >= 600
    jitter = [0.0, 0.004, 0.008]  # the agent's threads write a few ms apart
    t = np.arange(1200.0)
    return frames.data(
        frames.series("algo-1", "gpu0", "GPUUtilization", np.where(low, 5.0, 80.0), timestamps_s=t + jitter[0]),
        frames.series("algo-1", "cpu0", dimension, np.where(low, 95.0, 50.0), timestamps_s=t + jitter[1]),
        frames.series("algo-1", "cpu1", "CPUUtilization", np.full(1200, 50.0), timestamps_s=t + jitter[2]),
    )


@pytest.mark.parametrize(
    ("rule", "dimension", "params"),
    [
        ("CPUBottleneck", "CPUUtilization", "threshold:40\ncpu_threshold:90\ngpu_threshold:10\npatience:1000"),
        ("IOBottleneck", "I/OWaitPercentage", "threshold:40\nio_threshold:50\ngpu_threshold:10\npatience:1000"),
    ],
)
def test_bottleneck_half_the_time_fires_only_below_half(frames, rule, dimension, params):
    data = _bottleneck_job(frames, dimension)
    # 600 of 1200 snapshots are bottlenecks: 50% is not above the default threshold 50.
    default = evaluate_rule(rule, data)
    assert (default.rule_triggered, default.violations, default.datapoints) == (0, 600, 1200)
    # At 40%: boundary k sees 60k snapshots of which 60k-600 bottlenecks; > 40% from k=17 (420/1020).
    r = evaluate_rule(rule, data, {"threshold": 40})
    assert (r.rule_triggered, r.trigger_step, r.details["low_gpu_utilization"]) == (4, 17, 600)
    assert len(r.details["bottlenecks"]) == 600
    assert r.details["bottlenecks"][repr(600.0)] == {"GPUs": 1, "CPUs": 1}
    assert r.rule_parameters == params


def test_overall_system_usage_divides_sums_by_device_count(frames):
    data = frames.data(frames.series("algo-1", "cpu0", "CPUUtilization", np.full(10, 10.0)),
                       frames.series("algo-1", "cpu1", "CPUUtilization", np.full(10, 30.0)))
    r = evaluate_rule("OverallSystemUsage", data)
    flat = {"max": 20.0, "p99": 20.0, "p95": 20.0, "p50": 20.0, "min": 20.0}
    assert r.to_debugger_json() == {
        "RuleTriggered": 0, "Violations": 0,
        "Details": {"Network": {}, "GPU": {}, "CPU": {"algo-1": flat}, "CPU memory": {}, "GPU memory": {}, "I/O": {}},
        "Datapoints": 10, "RuleParameters": "",
    }


@pytest.mark.parametrize("rule", ["CPUBottleneck", "IOBottleneck"])
def test_bottleneck_cpu_only_busy_job_does_not_fire(frames, rule):
    data = frames.data(frames.series("algo-1", "cpu0", "CPUUtilization", np.full(1200, 99.0)),
                       frames.series("algo-1", "cpu0", "I/OWaitPercentage", np.full(1200, 99.0)))
    out = evaluate_rule(rule, data, {"patience": 10}).to_debugger_json()
    assert (out["RuleTriggered"], out["Violations"], out["Details"], out["Datapoints"]) == (
        0, 0, {"low_gpu_utilization": 0, "bottlenecks": {}}, 1200)
