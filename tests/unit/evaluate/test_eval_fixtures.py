"""Our rules against real Debugger output (tests/data/third_party, see INDEX.md).

The ProfilerReport fixture comes from a CPU-only single-node PyTorch job where nothing triggered; its
system metrics are not in the repository, so we generate CPU-only data matching what the report
records (1 node, 4 cores, 1183 system snapshots between job_start and job_end, 18 TRAIN steps whose
first/last start times are the recorded ones, one dataloader event of 2.92659 s) and compare:

* shape: the same keys for every rule, ``RuleParameters`` encoded identically (one difference,
  LoadBalancing's threshold, explained below);
* rules whose output depends only on what we could reproduce must match the whole JSON: the GPU rules
  (no GPU data: Datapoints 0, Details {}), BatchSize, StepOutlier, MaxInitializationTime, Dataloader;
* CPUBottleneck/IOBottleneck: same Details and verdict; Datapoints differ (1185 recorded vs our 1183)
  because smdebug counts a new snapshot whenever any event, of any dimension, is more than 20 ms from
  the previous snapshot's first event, so records written by other agent threads (network, memory)
  add a couple; our generated snapshots are clean;
* OverallSystemUsage: same metric and node keys; the values depend on the missing metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from smx_debug.data.frames import series_frame
from smx_debug.data.system import system_metrics
from smx_debug.evaluate import JobData, LoadReport, evaluate, load_path
from smx_debug.rules.params import PROFILER_RULES

REPORTS = Path("f3bolarinwa+AWS-Sagemaker---deep_learning_model_tuning_and_deployment/ProfilerReport/"
               "profiler-output/profiler-reports")
RESOURCES = Path("awslabs+sagemaker-debugger/tests/profiler/resources")


@pytest.fixture(scope="module")
def recorded(data_dir) -> dict[str, dict]:
    folder = data_dir / "third_party" / REPORTS
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}


@pytest.fixture(scope="module")
def ours(recorded) -> dict[str, dict]:
    mi = recorded["MaxInitializationTime"]["Details"]
    start, end = mi["job_start"], mi["job_end"]
    ts = np.linspace(start, end, 1183)
    rng = np.random.default_rng(0)
    parts = [series_frame("algo-1", f"cpu{i}", "CPUUtilization", rng.uniform(40, 100, 1183), timestamps_s=ts)
             for i in range(4)]
    parts.append(series_frame("algo-1", "cpu0", "I/OWaitPercentage", rng.uniform(0, 5, 1183), timestamps_s=ts))
    parts.append(series_frame("algo-1", "MemoryUsedPercent", "MemoryUtilization", rng.uniform(3, 47, 1183),
                              timestamps_s=ts, type="memory"))
    parts.append(series_frame("algo-1", "ReceiveBytesPerSecond", "Algorithm", rng.uniform(0, 1e8, 1183),
                              timestamps_s=ts, type="network"))
    first_us, last_us = mi["step_num"]["first"], mi["step_num"]["last"]
    starts_us = np.linspace(first_us, last_us, 18).round().astype(np.int64)
    steps = pd.DataFrame({
        "node": "algo-1", "rank": 0, "mode": np.where(np.arange(18) % 3 == 2, "EVAL", "TRAIN"),
        "step": np.arange(18, dtype=np.int64), "start": pd.to_datetime(starts_us * 1000, utc=True),
        "end": pd.to_datetime((starts_us + 20_000_000) * 1000, utc=True), "duration": 20.0,
    })
    dl_start = int(start * 1e9) + 10**9
    loader = pd.DataFrame({"node": "algo-1", "pid": 81, "start": pd.to_datetime([dl_start], utc=True),
                           "end": pd.to_datetime([dl_start + 2_926_590_000], utc=True)})
    data = JobData(system=pd.concat(parts, ignore_index=True), steps=steps, dataloader=loader,
                   dataloader_info={"pin_memory": False, "num_workers": 0})
    return {name: r.to_debugger_json() for name, r in evaluate(data, PROFILER_RULES).items()}


def test_fixture_has_every_profiler_rule_we_evaluate(recorded):
    assert set(PROFILER_RULES) <= set(recorded)  # plus OverallFrameworkMetrics, a report-only rule


@pytest.mark.parametrize("rule", PROFILER_RULES)
def test_shape_and_parameters_match_debugger(recorded, ours, rule):
    assert list(ours[rule]) == list(recorded[rule])
    if rule == "LoadBalancing":
        # The catalog (smdebug_rulesconfig) defaults threshold to 0.5; ProfilerReport ran smdebug's rule class,
        # whose own default is 0.2. Same encoding, different default.
        assert (ours[rule]["RuleParameters"], recorded[rule]["RuleParameters"]) == (
            "threshold:0.5\npatience:1000", "threshold:0.2\npatience:1000")
    else:
        assert ours[rule]["RuleParameters"] == recorded[rule]["RuleParameters"]


@pytest.mark.parametrize(
    "rule", ["LowGPUUtilization", "GPUMemoryIncrease", "BatchSize", "StepOutlier", "MaxInitializationTime", "Dataloader"]
)
def test_comparable_rules_match_debugger_exactly(recorded, ours, rule):
    mine, theirs = dict(ours[rule]), dict(recorded[rule])
    if rule == "LoadBalancing":
        mine.pop("RuleParameters"), theirs.pop("RuleParameters")
    assert mine == theirs


def test_load_balancing_cpu_only_matches_but_for_default(recorded, ours):
    mine = {k: v for k, v in ours["LoadBalancing"].items() if k != "RuleParameters"}
    assert mine == {k: v for k, v in recorded["LoadBalancing"].items() if k != "RuleParameters"}


@pytest.mark.parametrize("rule", ["CPUBottleneck", "IOBottleneck"])
def test_bottleneck_rules_agree_except_snapshot_count(recorded, ours, rule):
    assert {k: v for k, v in ours[rule].items() if k != "Datapoints"} == {
        k: v for k, v in recorded[rule].items() if k != "Datapoints"}
    assert (ours[rule]["Datapoints"], recorded[rule]["Datapoints"]) == (1183, 1185)


def test_overall_system_usage_same_metrics_and_nodes(recorded, ours):
    mine, theirs = ours["OverallSystemUsage"], recorded["OverallSystemUsage"]
    assert {k: sorted(v) for k, v in mine["Details"].items()} == {k: sorted(v) for k, v in theirs["Details"].items()}
    assert (mine["RuleTriggered"], mine["Datapoints"]) == (theirs["RuleTriggered"], theirs["Datapoints"])


def test_real_32_core_capture_overall_cpu_is_mean_over_cores(data_dir):
    folder = data_dir / "third_party" / RESOURCES / "test_traces/system/incremental"
    files = [folder / "1591748100.algo-1.json", folder / "1591748160.algo-1.json"]
    expected = []
    for f in files:  # computed independently from the raw JSON lines
        vals = [json.loads(line)["Value"] for line in f.read_text().splitlines() if line.strip()]
        expected.append(sum(vals) / len(vals))
    data = JobData(system=system_metrics(folder.parents[1], start=1591748100))  # the folder's 2 files of 3
    assert data.system.attrs["files"] == 2
    res = evaluate(data, ["OverallSystemUsage", "CPUBottleneck"])
    cpu = res["OverallSystemUsage"].details["CPU"]["algo-1"]
    assert (cpu["max"], cpu["min"]) == (round(max(expected), 2), round(min(expected), 2))
    assert res["CPUBottleneck"].datapoints == 2  # one snapshot per file


def test_real_corrupt_last_line_is_skipped_and_counted(data_dir):
    report = LoadReport()
    data = load_path(data_dir / "third_party" / RESOURCES / "1591160699.algo-1.json.corrupt", report)
    assert len(data.system) == 13  # hand-made file: 14 lines, the last truncated
    assert report.skipped == {"malformed lines (system metrics)": 1}


def test_real_sagemaker_metrics_file_splits_metric_and_mode(data_dir):
    data = load_path(data_dir / "third_party" / "awslabs+sagemaker-debugger" / "10272.json")
    assert data.scalars[["metric", "mode", "step"]].to_dict("records") == [
        {"metric": "batch", "mode": "TRAIN", "step": 0}, {"metric": "loss", "mode": "TRAIN", "step": 0},
        {"metric": "batch", "mode": "TRAIN", "step": 9}, {"metric": "loss", "mode": "TRAIN", "step": 9},
    ]


def test_real_metrics_file_scalar_rules_run(data_dir):
    data = load_path(data_dir / "third_party" / "awslabs+sagemaker-debugger" / "41850.json")
    counts = data.scalars.groupby(["metric", "mode"]).size().to_dict()
    assert (counts[("loss", "TRAIN")], counts[("loss", "EVAL")]) == (1518, 716)
    res = evaluate(data, ["LossNotDecreasing", "StalledTrainingRule"])
    assert res["LossNotDecreasing"].details["loss"]["mode"] == "EVAL"  # EVAL first, as Debugger
    assert res["StalledTrainingRule"].rule_triggered == 0  # metrics every few seconds


def test_real_python_timeline_steps_are_read(data_dir):
    path = data_dir / "third_party" / RESOURCES / (
        "merge_traces/framework/pevents/2020071317/1594662624718694_905-b88ab1bb8259_pythontimeline.json")
    events = json.loads(path.read_text())
    t0 = next(e["args"]["start_time_since_epoch_in_micros"] for e in events if e.get("name") == "process_name"
              and "start_time_since_epoch_in_micros" in e.get("args", {}))
    expected = [(int(e["args"]["step_num"]), (t0 + e["ts"]) * 1000, e["dur"] / 1e6) for e in events
                if e.get("ph") == "X" and e["name"].startswith("Step:ModeKeys.")]
    steps = load_path(path).steps
    got = list(zip(steps["step"].tolist(), steps["start"].astype("int64").tolist(), steps["duration"].tolist(),
                   strict=True))
    assert sorted(got) == sorted(expected)
    assert set(steps["node"]) == {"b88ab1bb8259"}
