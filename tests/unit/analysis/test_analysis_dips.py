"""GPU-dip root cause and the training-loop analysis, on simulated jobs whose causes are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from smx_debug.analysis.dips import classify_event, dip_causes, gpu_dips
from smx_debug.analysis.loop import dataloader_share, slow_loading_steps, slowest_operators
from smx_debug.data.framework_trace import framework_metrics
from smx_debug.errors import ConfigError
from smx_debug.evaluate import load_path
from smx_debug.simulate import Simulation, SimulationSpec

SPEC = SimulationSpec(scenario="dataloader_stall", duration_s=600.0, onset_s=120.0, nodes=2, cpus=4, gpus=2,
                      stall_every=40, stall_s=1.5, checkpoint_every=500)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("stall")
    sim = Simulation(SPEC)
    sim.write_local(root / "profiler-output")
    return sim, load_path(root), framework_metrics(root, progress=False)


def test_gpu_dips_injected_dataloader_stall_is_ranked_first(job):
    sim, data, events = job
    dips = gpu_dips(data, events)
    causes = dip_causes(dips)
    assert causes.loc[0, "cause"] == "dataloader" and causes.loc[0, "cause_event"] == "DataLoaderIter.__next__"
    assert causes.loc[0, "gpu_seconds_lost"] > 5 * causes.loc[1:, "gpu_seconds_lost"].sum()
    assert set(causes["cause"]) <= {"dataloader", "checkpoint"}  # the second, smaller cause is found too
    assert "checkpoint" in set(causes["cause"])
    # every injected stall is found, on its node and step
    for node in range(SPEC.nodes):
        found = set(dips[(dips["node"] == f"algo-{node + 1}") & (dips["cause"] == "dataloader")]["step"].astype(int))
        assert set(sim.stall_steps(node).tolist()) <= found | {int(s) + 1 for s in found} | {int(s) - 1 for s in found}
        assert len(found) >= len(sim.stall_steps(node)) - 1
    # GPU time lost: ~ stall_s x 2 GPUs x (85 points busy) per stall
    stall_lost = dips[dips["cause"] == "dataloader"]["gpu_seconds_lost"]
    assert stall_lost.median() == pytest.approx(1.5 * 2 * 0.84, rel=0.25)
    assert dips["gpu_seconds_lost"].is_monotonic_decreasing


def test_gpu_dips_without_framework_trace_says_so(job):
    _, data, _ = job
    dips = gpu_dips(data, None)
    assert len(dips) and set(dips["cause"]) == {"no framework trace"}


def test_gpu_dips_healthy_job_has_none(tmp_path):
    Simulation(SimulationSpec(duration_s=300.0, cpus=2, gpus=2)).write_local(tmp_path / "profiler-output")
    assert gpu_dips(load_path(tmp_path), framework_metrics(tmp_path, progress=False)).empty


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.5])
def test_gpu_dips_bad_threshold_names_the_field(job, threshold):
    with pytest.raises(ConfigError, match="threshold"):
        gpu_dips(job[1], job[2], threshold=threshold)


@pytest.mark.parametrize(("name", "category"), [
    ("DataLoaderIter.__next__", "dataloader"), ("dataset::GetNext", "dataloader"), ("backward", "backward"),
    ("Forward-node-conv1", "forward"), ("NCCL AllReduce", "collective"), ("aten::matmul", "operator"),
])
def test_classify_event(name, category):
    assert classify_event(name) == category


def test_loop_analysis_dataloader_share_and_slow_steps(job):
    sim, data, events = job
    share = dataloader_share(events, data.steps)
    assert list(share["node"]) == ["algo-1", "algo-2"]
    start, dur = sim.steps(0)
    expected = (1.5 * len(sim.stall_steps(0)) + 0.004 * (len(start) - len(sim.stall_steps(0)))) / dur.sum()
    assert share.loc[0, "dataloader_percent"] == pytest.approx(100 * expected, rel=1e-3)
    slow = slow_loading_steps(events, data.steps)
    assert set(slow[slow["node"] == "algo-1"]["step"]) == set(sim.stall_steps(0).tolist())
    assert (slow["dataloader_s"] > slow["compute_s"]).all()


def test_loop_analysis_slowest_operators_by_total_time(job):
    ops = slowest_operators(job[2], top=3)
    assert list(ops["name"]) == ["backward", "forward", "DataLoaderIter.__next__"]
    assert ops.loc[2, "max_ms"] == pytest.approx(1500.0)
    assert np.isclose(slowest_operators(job[2])["share_percent"].sum(), 100.0)


def test_loop_analysis_empty_events_give_empty_frames():
    empty = pd.DataFrame(columns=["node", "phase", "name", "duration", "start"])
    assert slowest_operators(empty).empty


def test_gpu_dips_sustained_idle_is_one_dip_inside_steps(tmp_path):
    """A CPU bottleneck idles the GPUs for most of training: still a dip (against the busy level), and with
    only step events in the trace its cause is the step itself."""
    spec = SimulationSpec(scenario="cpu_bottleneck", duration_s=900.0, onset_s=200.0, cpus=4, gpus=2)
    Simulation(spec).write_local(tmp_path / "profiler-output")
    data, events = load_path(tmp_path), framework_metrics(tmp_path, progress=False)
    dips = gpu_dips(data, events)
    assert len(dips) >= 1
    top = dips.iloc[0]
    assert top["cause"] == "step (no finer framework events)" and top["cause_event"] == "Step:ModeKeys.TRAIN"
    assert top["duration_s"] > 0.9 * (900 - 30 - 200)  # from the onset to the end of the loop
    share = dataloader_share(events, data.steps)
    assert share["dataloader_percent"].isna().all()  # no dataloader events: unknown, not 0%
    assert slow_loading_steps(events, data.steps).empty
