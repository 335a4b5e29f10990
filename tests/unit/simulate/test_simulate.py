"""The profiler-data generator: real layout and keys, determinism, streaming, scenarios."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pydantic
import pytest

from smx_debug.analysis.stats import step_outliers
from smx_debug.data.framework_trace import framework_metrics, step_durations
from smx_debug.data.system import system_metrics
from smx_debug.simulate import SCENARIOS, Simulation, SimulationSpec


def _spec(**kw: object) -> SimulationSpec:
    base: dict[str, object] = {"nodes": 2, "cpus": 4, "gpus": 2, "duration_s": 600.0, "initialization_s": 30.0,
                               "finalization_s": 30.0, "onset_s": 300.0, "interval_ms": 1000, "io_every": 5}
    base.update(kw)
    return SimulationSpec(**base)  # type: ignore[arg-type]


def test_simulation_layout_and_record_keys_match_real_files(tmp_path: Path) -> None:
    res = Simulation(_spec()).write_local(tmp_path)
    system = [k for k in res.keys if k.startswith("system/")]
    frames = [k for k in res.keys if k.startswith("framework/")]
    assert all(re.fullmatch(r"system/incremental/\d{10}/\d{10}\.algo-[12]\.json", k) for k in system)
    assert all(re.fullmatch(r"framework/pevents/\d{10}/\d{16}_\d+-algo-[12]_pythontimeline\.json", k) for k in frames)
    assert len(system) == 2 * 10
    first = (tmp_path / system[0]).read_text().splitlines()
    rec = json.loads(first[0])
    assert list(rec) == ["Type", "Name", "Dimension", "Value", "NodeId", "Timestamp"]
    names = {(r["Type"], r["Name"], r["Dimension"]) for r in map(json.loads, first)}
    assert {("cpu", "total", "CPUUtilization"), ("memory", "MemoryUsedPercent", "MemoryUtilization"),
            ("gpu", "gpu1", "GPUUtilization"), ("gpu", "gpu1", "GPUMemoryUtilization"), ("io", "nvme0n1", "IOPS"),
            ("network", "eth0", "TransmitBytesPerSecond")} <= names
    minute = int(system[0].rsplit("/", 1)[1].split(".")[0])
    assert all(minute <= json.loads(line)["Timestamp"] < minute + 60 for line in first)
    trace = json.loads((tmp_path / frames[0]).read_text())
    assert trace[0]["args"]["start_time_since_epoch_in_micros"] == int(_spec().job_start.timestamp() * 1e6)


def test_simulation_record_count_matches_spec() -> None:
    spec = _spec(nodes=1, duration_s=3600.0, cpus=96, gpus=8, interval_ms=500, io_every=10)
    sim = Simulation(spec)
    total = sum(sim.system_file(0, m)[2] for m in sim.minutes()[:2])
    assert total == round(spec.records_per_node_hour / 30)


def test_simulation_is_deterministic_and_streaming_equals_batch(tmp_path: Path) -> None:
    spec = _spec()
    a = {k: d for k, d, _ in Simulation(spec).iter_files()}
    sim = Simulation(spec)
    b = {}
    for minute in reversed(sim.minutes()):  # any order, minute by minute
        b.update({k: d for k, d, _ in sim.files_for_minute(minute)})
    assert a == b
    other = {k: d for k, d, _ in Simulation(spec.model_copy(update={"seed": 1})).iter_files()}
    system = sorted(k for k in a if k.startswith("system/"))
    assert sorted(k for k in other if k.startswith("system/")) == system
    assert [other[k] for k in system] != [a[k] for k in system]


@pytest.mark.parametrize(
    ("scenario", "dimension", "before", "after"),
    [
        ("healthy", "GPUUtilization", (70, 100), (70, 100)),
        ("cpu_bottleneck", "GPUUtilization", (70, 100), (0, 15)),
        ("cpu_bottleneck", "CPUUtilization", (20, 50), (85, 100)),
        ("io_bottleneck", "GPUUtilization", (70, 100), (0, 15)),
        ("low_gpu_utilization", "GPUUtilization", (70, 100), (0, 15)),
        ("gpu_memory_increase", "GPUMemoryUtilization", (50, 70), (55, 100)),
    ],
)
def test_simulation_scenario_changes_metrics_after_onset(
    tmp_path: Path, scenario: str, dimension: str, before: tuple[float, float], after: tuple[float, float]
) -> None:
    spec = _spec(scenario=scenario)
    Simulation(spec).write_local(tmp_path, framework=False)
    df = system_metrics(tmp_path)
    df = df[(df["dimension"] == dimension) & (df["name"] != "total")]
    t = (df["timestamp"] - spec.onset).dt.total_seconds()
    pre = df[(t < -10) & (t > -200)]["value"].mean()
    post = df[(t > 120) & (t < 240)]["value"].mean()
    assert before[0] <= pre <= before[1]
    assert after[0] <= post <= after[1]
    if scenario == "gpu_memory_increase":
        assert post > pre + 3


def test_simulation_step_outlier_scenario_outliers_only_after_onset(tmp_path: Path) -> None:
    spec = _spec(scenario="step_outlier", nodes=1, duration_s=1200.0, onset_s=600.0)
    Simulation(spec).write_local(tmp_path)
    out = step_outliers(step_durations(framework_metrics(tmp_path)))
    assert len(out) > 5
    assert (out["start"] >= spec.onset).all()


def test_simulation_healthy_has_no_step_outliers(tmp_path: Path) -> None:
    Simulation(_spec(nodes=1)).write_local(tmp_path)
    assert step_outliers(step_durations(framework_metrics(tmp_path))).empty


@pytest.mark.parametrize(
    "kw",
    [
        {"scenario": "meltdown"},
        {"nodes": 0},
        {"job_start": datetime(2026, 1, 1)},
        {"initialization_s": 400.0, "finalization_s": 300.0},
        {"cpus": "96"},
        {"colour": "red"},
    ],
)
def test_simulation_spec_rejects_bad_values(kw: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        _spec(**kw)


def test_simulation_spec_onset_and_scenarios() -> None:
    spec = _spec(onset_s=90.0, job_start=datetime(2026, 3, 1, tzinfo=UTC))
    assert spec.onset == datetime(2026, 3, 1, 0, 1, 30, tzinfo=UTC)
    assert SCENARIOS == ("healthy", "cpu_bottleneck", "io_bottleneck", "low_gpu_utilization",
                         "gpu_memory_increase", "step_outlier", "fluctuating_gpu", "load_imbalance",
                         "gpu_memory_jump", "dataloader_stall")
    assert np.isclose(spec.records_per_node_hour, (4 + 2 + 4 + 1) * 3600)


def test_simulation_dataloader_stall_steps_lengthen_steps_and_idle_the_gpus(tmp_path) -> None:
    from smx_debug.data.framework_trace import framework_metrics

    spec = _spec(scenario="dataloader_stall", duration_s=600.0, onset_s=120.0, stall_every=40, stall_s=1.5)
    sim = Simulation(spec)
    start, dur = sim.steps(0)
    stalls, ckpts = sim.stall_steps(0), sim.checkpoint_steps(0)
    assert stalls[0] == np.searchsorted(start, 120.0) or start[stalls[0]] >= 120.0
    assert np.all(np.diff(stalls) == 40) and ckpts[0] == 499
    assert np.all(dur[stalls] > 1.5) and np.median(dur) < 0.3
    idle = sim._gpu_idle(0, start[stalls] + 0.5)
    assert idle.all() and not sim._gpu_idle(0, start[stalls[:3] + 5] + 0.1).any()
    sim.write_local(tmp_path / "profiler-output")
    events = framework_metrics(tmp_path, nodes="algo-1", progress=False)
    loads = events[events["name"] == "DataLoaderIter.__next__"]
    assert len(loads) == len(start) and (loads["duration"] > 1.0).sum() == len(stalls)
    assert (events["name"] == "save_checkpoint").sum() == len(ckpts[ckpts < len(start)])
