"""A job with Debugger's profiler on: the evaluator reads its per-core, per-GPU output from S3 (the one reader)."""

from __future__ import annotations

from profiler_support import put_profiler_output
from watch_support import BUCKET, T0, Recorder, at, clients, profiled_job, publish, settings

from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.simulate import Simulation, SimulationSpec
from smx_debug.watch import WatchSpec, run_once


def test_run_job_with_profiler_output_judges_per_device_data_from_s3(aws: LocalAws) -> None:
    profiled_job(aws, "guarded-profiled", ProfilingIntervalInMilliseconds=500)
    publish(aws, "guarded-profiled", 0, 20, Scenario(vcpus=32, gpus=4))  # CloudWatch's host averages: healthy
    sim = Simulation(SimulationSpec(scenario="cpu_bottleneck", onset_s=600, job_start=T0, duration_s=20 * 60,
                                    nodes=1, cpus=32, gpus=4, interval_ms=500, seed=3, initialization_s=0))
    put_profiler_output(aws, BUCKET, "guarded-profiled", sim, sim.minutes()[:16])
    recorder = Recorder()
    only_cpu = settings(default_rules=WatchSpec.from_json('[{"rule": "CPUBottleneck"}]'))
    fired_at = None
    for m in range(6, 16):
        report = run_once(only_cpu, clients(aws), recorder, now=at(m) + 5)
        assert report.outcomes["guarded-profiled"].notes == []
        if report.triggers and fired_at is None:
            fired_at = m
            message = report.triggers[0].details.split("(smx-debug evaluator: ", 1)[1]  # the rule's message
    assert fired_at is not None and fired_at - 10 <= 5
    snapshots = int(message.split(" of ")[1].split(" ")[0])
    assert snapshots > 60  # 500 ms snapshots, not 5 CloudWatch minutes
    assert recorder.jobs() == ["guarded-profiled"]


def test_run_profiler_output_missing_falls_back_to_cloudwatch(aws: LocalAws) -> None:
    profiled_job(aws, "guarded-profiled", ProfilingIntervalInMilliseconds=500)
    publish(aws, "guarded-profiled", 0, 20, Scenario(kind="cpu_bottleneck", onset=10, vcpus=32, gpus=4))
    recorder = Recorder()
    for m in range(8, 16):
        run_once(settings(), clients(aws), recorder, now=at(m) + 5)
    assert recorder.jobs() == ["guarded-profiled"]
