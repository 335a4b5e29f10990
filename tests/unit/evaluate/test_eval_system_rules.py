"""System rules on constructed series whose answers are worked out by hand.

Unless a test says otherwise, series have one value per second from t=0, so the scan boundaries
(every 60 s) see 60, 120, ... values, and "more than patience=1000 values" first holds at boundary 17.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from smx_debug.evaluate import evaluate_rule

_FLAT30 = {"gpu_max": 30.0, "gpu_95": 30.0, "gpu_5": 30.0, "p25": 30.0, "p50": 30.0, "p75": 30.0, "p95": 30.0,
           "upper": 30.0, "lower": 30.0}


def test_low_gpu_utilization_constant_low_fires_from_boundary_17(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 30.0)))
    r = evaluate_rule("LowGPUUtilization", data)
    # Debugger's Details: per GPU the box-plot statistics, and the start (us) of the last violating scan.
    assert r.to_debugger_json() == {
        "RuleTriggered": 4, "Violations": 4, "Details": {"algo-1": {"gpu0": _FLAT30}, "last_timestamp": 1_140_000_000},
        "Datapoints": 1200, "RuleParameters": "threshold_p95:70\nthreshold_p5:10\nwindow:500\npatience:1000",
    }
    assert r.trigger_step == 17


def test_low_gpu_utilization_counts_once_per_violating_gpu_per_scan(frames):
    # Issue 13: six low GPUs of eight count six times per scan (real Debugger output: 464 over ~240 scans, 2 GPUs).
    parts = [frames.series("algo-1", f"gpu{g}", "GPUUtilization", np.full(1200, 30.0 if g < 6 else 90.0))
             for g in range(8)]
    r = evaluate_rule("LowGPUUtilization", frames.data(*parts))
    assert (r.rule_triggered, r.violations, r.trigger_step) == (24, 24, 17)
    assert sorted(r.details["algo-1"]) == [f"gpu{g}" for g in range(6)]


def test_low_gpu_utilization_fluctuating_fires(frames):
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.tile([0.0, 100.0], 600)))
    r = evaluate_rule("LowGPUUtilization", data)
    assert (r.rule_triggered, r.details["algo-1"]["gpu0"]["gpu_95"], r.details["algo-1"]["gpu0"]["gpu_5"]) == (
        4, 100.0, 0.0)
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
    assert list(evaluate_rule("LowGPUUtilization", data).details) == ["algo-1", "last_timestamp"]


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


def test_gpu_memory_increase_jump_counts_each_violating_datapoint(frames):
    # 40% for 1100 s then 60%. Debugger's moving averages: mean(v[-10:]) - mean(v[-11:-2]); after the jump
    # they differ by 2, 4, 3.78, ..., 2.22 for 10 values (t=1100..1109 s, scan 19 = [1080, 1140)), each a violation.
    values = np.concatenate([np.full(1100, 40.0), np.full(100, 60.0)])
    data = frames.data(frames.series("algo-1", "gpu0", "GPUMemoryUtilization", values))
    r = evaluate_rule("GPUMemoryIncrease", data, {"increase": 1})
    out = r.to_debugger_json()
    gpu = out["Details"]["algo-1"]["gpu0"]
    assert (out["RuleTriggered"], out["Violations"], out["Datapoints"]) == (10, 10, 1200)
    assert gpu["increase"] == pytest.approx(20 - 160 / 9)  # the last violating datapoint (t=1109 s)
    assert {k: gpu[k] for k in ("gpu_max", "p05", "p25", "p50", "p75", "p95", "upper", "lower")} == {
        "gpu_max": 60.0, "p05": 40.0, "p25": 40.0, "p50": 40.0, "p75": 40.0, "p95": 40.0, "upper": 40.0, "lower": 40.0}
    assert out["Details"]["last_timestamp"] == 1_080_000_000
    assert out["RuleParameters"] == "increase:1\npatience:1000\nwindow:10"
    assert r.trigger_step == 19
    assert evaluate_rule("GPUMemoryIncrease", data).rule_triggered == 0  # default increase 5 > 4


def test_gpu_memory_increase_counts_per_gpu_datapoint(frames):
    # Two GPUs with the same jump: 20 violations (Debugger counts datapoints, not scans: real output 11,467).
    values = np.concatenate([np.full(1100, 40.0), np.full(100, 60.0)])
    data = frames.data(*(frames.series("algo-1", f"gpu{g}", "GPUMemoryUtilization", values) for g in range(2)))
    assert evaluate_rule("GPUMemoryIncrease", data, {"increase": 1}).rule_triggered == 20


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
    hist = [0] * 49  # Debugger's bins: np.arange(0, 100, 2)
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


def test_load_balancing_writes_workloads_even_when_it_does_not_fire(frames):
    # Real Debugger output (LoadBalancing.json, RuleTriggered 0) carries a 49-bin histogram per GPU per node.
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 50.0)),
                       frames.series("algo-2", "gpu0", "GPUUtilization", np.full(1200, 99.0)))
    r = evaluate_rule("LoadBalancing", data)
    hist = [0] * 49
    hist[25] = 1200
    assert r.rule_triggered == 0
    assert r.details == {"algo-1": {"workloads": {"gpu0": hist}}, "algo-2": {"workloads": {"gpu0": [0] * 49}}}


def test_scans_start_at_the_whole_minute_of_the_first_datapoint(frames):
    # Debugger's first scan starts at the first system file's timestamp, the full minute (files are named
    # <minute>.algo-1.json). Values from t=30 s: boundary k sees 60k - 30 values, > 1000 first at k=18.
    data = frames.data(frames.series("algo-1", "gpu0", "GPUUtilization", np.full(1200, 30.0), start_s=30.0))
    r = evaluate_rule("LowGPUUtilization", data)
    assert (r.trigger_step, r.details["last_timestamp"]) == (18, 1_200_000_000)
