"""The evaluator appends each evaluated job's new minutes to the fleet dataset, inside the job's isolation: its
CloudWatch minutes or its Debugger profiler output, every minute once, and a failed append never stops an action."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from botocore.exceptions import ClientError
from profiler_support import put_profiler_output
from watch_support import (
    BUCKET,
    T0,
    TABLE,
    Recorder,
    WatchedJobsOnly,
    at,
    clients,
    create_job,
    end_job,
    profiled_job,
    publish,
    settings,
    with_clients,
)

from smx_debug.actions.runtime import Deadline
from smx_debug.contracts import MANAGED_TAG, job_lease_key
from smx_debug.fleet.s3_boto import stack_root
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.simulate import Simulation, SimulationSpec
from smx_debug.watch import run_once
from smx_debug.watch.state import CursorStore

CPU = Scenario(kind="cpu_bottleneck", onset=10)
KEY = ["job", "node", "minute", "source", "name", "dimension"]


def _minutes(aws: LocalAws) -> pd.DataFrame:
    root = stack_root(BUCKET, aws.client("s3"))
    frames = []
    for info in root.files("system_minutes"):
        with root.filesystem.open_input_file(info.path) as f:
            frames.append(pq.read_table(f).to_pandas())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=KEY)


def _minute_numbers(frame: pd.DataFrame, job: str) -> list[int]:
    picked = frame[frame["job"] == job]["minute"].drop_duplicates().sort_values()
    return [int((m - T0.replace(tzinfo=None)).total_seconds() // 60) for m in picked]


def test_fleet_sink_appends_each_minute_once_with_host_averages(aws: LocalAws) -> None:
    create_job(aws, "guarded-a", hosts=2)  # ml.g4dn.2xlarge: 8 vCPUs, 1 GPU
    publish(aws, "guarded-a", 0, 20, CPU, hosts=2)
    config = settings(fleet_bucket=BUCKET)
    for m in range(8, 13):
        run_once(config, clients(aws), Recorder(), now=at(m) + 5)
    rows = _minutes(aws)
    # the first run (at minute 8, minute 6 settled) appends minutes 0-6; each later run one more, up to minute 10
    assert _minute_numbers(rows, "guarded-a") == list(range(0, 11))
    assert not rows.duplicated(KEY).any() and set(rows["source"]) == {"cloudwatch"}
    gpu = rows[rows["dimension"] == "GPUUtilization"]
    assert len(gpu) == 2 * 11 and set(gpu["devices"]) == {1}
    assert set(rows[rows["dimension"] == "CPUUtilization"]["devices"]) == {8}
    assert gpu["value_avg"].max() <= 100  # divided per GPU, not CloudWatch's host sum


def test_fleet_sink_profiler_job_appends_its_per_device_minutes(aws: LocalAws) -> None:
    profiled_job(aws, "guarded-profiled", ProfilingIntervalInMilliseconds=500)
    publish(aws, "guarded-profiled", 0, 20, Scenario(vcpus=32, gpus=4))
    sim = Simulation(SimulationSpec(scenario="healthy", job_start=T0, duration_s=20 * 60, nodes=1, cpus=32, gpus=4,
                                    interval_ms=5000, seed=3, initialization_s=0))
    put_profiler_output(aws, BUCKET, "guarded-profiled", sim, sim.minutes()[:14])
    for m in (12, 13):
        run_once(settings(fleet_bucket=BUCKET), clients(aws), Recorder(), now=at(m) + 5)
    rows = _minutes(aws)
    assert set(rows["source"]) == {"debugger"} and set(rows["devices"]) == {1}
    assert sorted(rows[rows["dimension"] == "GPUUtilization"]["name"].unique()) == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert _minute_numbers(rows, "guarded-profiled") == list(range(1, 12))  # the device window, then one more


class _NoWrites:
    """An S3 client whose PutObject of the fleet dataset fails (as when the bucket refuses for a while)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def put_object(self, **kwargs: Any) -> Any:
        if "smx-debug/fleet/" in kwargs["Key"]:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "slow down"}}, "PutObject")
        return self._real.put_object(**kwargs)


def test_fleet_sink_failed_append_never_stops_an_action_and_is_made_up_next_run(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 20, CPU)
    config, recorder = settings(fleet_bucket=BUCKET), Recorder()
    for m in range(8, 13):
        run_once(config, clients(aws), recorder, now=at(m) + 5)
    failing = with_clients(aws, s3=_NoWrites(clients(aws).s3))
    for m in (13, 14):  # CPUBottleneck fires in one of these runs: the action is taken whatever the dataset does
        report = run_once(config, failing, recorder, now=at(m) + 5)
        outcome = report.outcomes["guarded-a"]
        assert outcome.status == "evaluated"
        assert [e.reason for e in outcome.errors] == ["aws-error"]
        assert "appending its minutes to the fleet dataset failed" in outcome.notes[-1]
    assert recorder.jobs() == ["guarded-a"]
    run_once(config, clients(aws), recorder, now=at(15) + 5)
    assert _minute_numbers(_minutes(aws), "guarded-a") == list(range(0, 14))  # the missed minutes made up


def test_fleet_sink_job_ended_after_the_last_run_appends_its_last_minutes_once(aws: LocalAws) -> None:
    create_job(aws, "guarded-a", hosts=2)
    publish(aws, "guarded-a", 0, 14, CPU, hosts=2)  # it ends 10 s into minute 14
    config, guard = settings(fleet_bucket=BUCKET), WatchedJobsOnly(aws)
    runs = with_clients(aws, sagemaker=guard.client)
    for m in range(8, 14):  # the last run that sees it running appends through minute 11
        run_once(config, runs, Recorder(), now=at(m) + 5)
    end_job(aws, "guarded-a", 14 + 10 / 60)
    for m in (15, 16, 17, 18):  # minute 14 has settled at 16: its remaining minutes, then nothing more
        report = run_once(config, runs, Recorder(), now=at(m) + 5)
        assert report.error_counts() == {}
    rows = _minutes(aws)
    assert _minute_numbers(rows, "guarded-a") == list(range(0, 15))
    assert not rows.duplicated(KEY).any() and len(rows) == 15 * 2 * 5  # 2 hosts x 5 metrics a minute, once
    assert guard.denied == []


def test_fleet_sink_watched_job_the_evaluator_never_saw_gets_all_its_minutes(aws: LocalAws) -> None:
    create_job(aws, "guarded-short", hosts=1)                   # watched by its name
    create_job(aws, "research-opted", tags={MANAGED_TAG: "true"})  # watched by its tag
    create_job(aws, "research-other")                           # not watched
    for name in ("guarded-short", "research-opted", "research-other"):
        publish(aws, name, 0, 5, CPU)
        end_job(aws, name, 5.5, status="Completed")  # over before the evaluator's first run
    config, guard = settings(fleet_bucket=BUCKET), WatchedJobsOnly(aws)
    ended = [run_once(config, with_clients(aws, sagemaker=guard.client), Recorder(), now=at(m) + 5).summary()["ended"]
             for m in (8, 9)]
    assert ended == [["guarded-short", "research-opted"], []]
    rows = _minutes(aws)
    assert _minute_numbers(rows, "guarded-short") == _minute_numbers(rows, "research-opted") == list(range(0, 6))
    assert not rows.duplicated(KEY).any() and guard.denied == []
    assert set(rows["job"]) == {"guarded-short", "research-opted"}  # unwatched jobs' minutes are the collector's


class _RefusesJob(_NoWrites):
    """An S3 client whose PutObject of one job's fleet files fails."""

    def __init__(self, real: Any, job: str) -> None:
        super().__init__(real)
        self._job = job

    def put_object(self, **kwargs: Any) -> Any:
        if f"/{self._job}.parquet" in kwargs["Key"]:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "slow down"}}, "PutObject")
        return self._real.put_object(**kwargs)


def test_fleet_sink_ended_job_whose_append_fails_stops_no_other_and_is_retried(aws: LocalAws) -> None:
    for name in ("guarded-bad", "guarded-good"):
        create_job(aws, name)
        publish(aws, name, 0, 4, CPU)
        end_job(aws, name, 4.5)
    config = settings(fleet_bucket=BUCKET)
    report = run_once(config, with_clients(aws, s3=_RefusesJob(clients(aws).s3, "guarded-bad")), Recorder(),
                      now=at(7) + 5)
    summary = report.summary()
    assert (summary["ended"], list(summary["failed"]), summary["job_errors"]) == (
        ["guarded-good"], ["guarded-bad"], {"aws-error": 1})
    assert _minute_numbers(_minutes(aws), "guarded-bad") == []
    assert run_once(config, clients(aws), Recorder(), now=at(8) + 5).summary()["ended"] == ["guarded-bad"]
    rows = _minutes(aws)
    assert _minute_numbers(rows, "guarded-bad") == _minute_numbers(rows, "guarded-good") == list(range(0, 5))
    assert run_once(config, clients(aws), Recorder(), now=at(9) + 5).summary()["ended"] == []  # complete: once


def test_fleet_sink_long_job_the_evaluator_never_saw_is_caught_up_over_runs_once(aws: LocalAws) -> None:
    create_job(aws, "guarded-long", hosts=1)
    publish(aws, "guarded-long", 0, 29, CPU)
    end_job(aws, "guarded-long", 29.5)
    config = settings(fleet_bucket=BUCKET, ended_minutes_per_run=20)
    first = run_once(config, clients(aws), Recorder(), now=at(32) + 5)
    assert _minute_numbers(_minutes(aws), "guarded-long") == list(range(0, 20))
    assert "the rest next run" in first.outcomes["guarded-long"].notes[-1]
    for m in (33, 34):
        run_once(config, clients(aws), Recorder(), now=at(m) + 5)
    rows = _minutes(aws)
    assert _minute_numbers(rows, "guarded-long") == list(range(0, 30)) and not rows.duplicated(KEY).any()
    assert run_once(config, clients(aws), Recorder(), now=at(35) + 5).summary()["ended"] == []


def test_fleet_sink_ended_job_held_by_a_shard_is_left_to_the_next_run(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 4, CPU)
    end_job(aws, "guarded-a", 4.5)
    config = settings(fleet_bucket=BUCKET)
    shard = CursorStore(TABLE, clients(aws).dynamodb, clock=lambda: at(7))
    assert shard.claim(["guarded-a"], lease_seconds=config.lease_seconds) == {"guarded-a"}  # a slow shard's lease
    held = run_once(config, clients(aws), Recorder(), now=at(7) + 5).summary()
    assert (held["held"], held["ended"], _minute_numbers(_minutes(aws), "guarded-a")) == (["guarded-a"], [], [])
    shard.release([job_lease_key("guarded-a")])
    assert run_once(config, clients(aws), Recorder(), now=at(8) + 5).summary()["ended"] == ["guarded-a"]
    assert _minute_numbers(_minutes(aws), "guarded-a") == list(range(0, 5))


def test_fleet_sink_ended_job_with_no_time_left_is_not_started_and_next_run_appends_it(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 4, CPU)
    end_job(aws, "guarded-a", 4.5)
    config = settings(fleet_bucket=BUCKET)
    late = Deadline(lambda: 30_000.0, 24.0)  # 30 s left, 24 s kept for the finish: no time for one more call
    report = run_once(config, clients(aws), Recorder(), now=at(7) + 5, deadline=late)
    assert (report.summary()["ended"], report.error_counts(), _minute_numbers(_minutes(aws), "guarded-a")) == (
        [], {}, [])
    assert run_once(config, clients(aws), Recorder(), now=at(8) + 5).summary()["ended"] == ["guarded-a"]
    assert _minute_numbers(_minutes(aws), "guarded-a") == list(range(0, 5))
