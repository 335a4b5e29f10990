"""Reports against the local S3 (moto server): generated jobs, real ProfilerReport output, bad prefixes.

DescribeTrainingJob is stubbed (botocore Stubber with expected_params): moto's response lacks the
profiler rule statuses and ProfilerConfig round trip this needs; S3 is the real moto server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pandas as pd
import pytest
from botocore.stub import Stubber
from s3_support import RecordingS3
from sagemaker_answers import describe_training_job

from smx_debug.data.framework_trace import framework_metrics, step_durations
from smx_debug.data.profiler_output import profiler_report
from smx_debug.data.system import SystemMetricsReader, system_metrics
from smx_debug.errors import NotFoundError
from smx_debug.local import LocalAws
from smx_debug.simulate import Simulation, SimulationSpec

BUCKET = "smx-reports"
MIT = Path("third_party/f3bolarinwa+AWS-Sagemaker---deep_learning_model_tuning_and_deployment/ProfilerReport")
SPEC = SimulationSpec(nodes=2, cpus=8, gpus=2, duration_s=360.0, initialization_s=30.0, finalization_s=30.0,
                      interval_ms=500)


@pytest.fixture
def s3(local_aws: LocalAws) -> Any:
    client = local_aws.client("s3")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    return client


def _describe(job: str, profiler_path: str) -> dict[str, Any]:
    return describe_training_job(
        job, ResourceConfig={"InstanceType": "ml.p3.8xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        CreationTime=pd.Timestamp("2026-01-01T00:00:00Z").to_pydatetime(), ProfilerConfig={"S3OutputPath": profiler_path},
    )


def test_system_metrics_from_s3_equals_local_copy(s3: Any, tmp_path: Path) -> None:
    sim = Simulation(SPEC)
    res = sim.write_s3(BUCKET, "jobs/j1/profiler-output/", s3_client=s3)
    sim.write_local(tmp_path)
    remote = system_metrics(f"s3://{BUCKET}/jobs/j1", s3_client=s3)
    local = system_metrics(tmp_path)
    assert len(remote) == res.records
    pd.testing.assert_frame_equal(remote, local)
    pd.testing.assert_frame_equal(step_durations(framework_metrics(f"s3://{BUCKET}/jobs/j1/", s3_client=s3)),
                                  step_durations(framework_metrics(tmp_path)))


def test_system_metrics_by_job_name_downloads_only_window_and_node(s3: Any) -> None:
    Simulation(SPEC).write_s3(BUCKET, "out/j2/profiler-output/", s3_client=s3)
    sm = boto3.client("sagemaker", region_name="us-west-2")
    counting = RecordingS3(s3)
    t0 = SPEC.job_start.timestamp()
    with Stubber(sm) as stub:
        stub.add_response("describe_training_job", _describe("j2", f"s3://{BUCKET}/out"), {"TrainingJobName": "j2"})
        df = system_metrics("j2", start=t0 + 125, end=t0 + 170, nodes=["algo-1"], sagemaker_client=sm,
                            s3_client=counting)
    m = int(t0) + 120
    assert counting.gets == [f"out/j2/profiler-output/system/incremental/{pd.Timestamp(m, unit='s'):%Y%m%d%H}/{m}.algo-1.json"]
    secs = df["timestamp"].astype("int64") / 1e9
    assert (secs.min() >= t0 + 125, secs.max() < t0 + 170, set(df["node"])) == (True, True, {"algo-1"})


def test_system_metrics_reader_live_job_fetches_only_new_files(s3: Any) -> None:
    sim = Simulation(SPEC)
    minutes = sim.minutes()
    prefix = "live/j3/profiler-output/"
    sim.write_s3(BUCKET, prefix, minutes[:2], s3_client=s3, framework=False)
    counting = RecordingS3(s3)
    reader = SystemMetricsReader(f"s3://{BUCKET}/{prefix}", s3_client=counting)
    first = reader.refresh()
    assert len(counting.gets) == 4
    counting.gets.clear()
    res = sim.write_s3(BUCKET, prefix, [minutes[2]], s3_client=s3, framework=False)
    second = reader.refresh()
    assert sorted(counting.gets) == sorted(prefix + k for k in res.keys)
    assert len(second) == len(first) + res.records


def test_profiler_report_by_job_name_from_rule_output(s3: Any, data_dir: Path) -> None:
    root = data_dir / MIT
    for f in root.rglob("*"):
        if f.is_file():
            key = f"out/j4/rule-output/ProfilerReport-1700000000/{f.relative_to(root).as_posix()}"
            s3.put_object(Bucket=BUCKET, Key=key, Body=f.read_bytes())
    sm = boto3.client("sagemaker", region_name="us-west-2")
    with Stubber(sm) as stub:
        stub.add_response("describe_training_job", _describe("j4", f"s3://{BUCKET}/out/"), {"TrainingJobName": "j4"})
        report = profiler_report("j4", sagemaker_client=sm, s3_client=s3)
    local = profiler_report(root)
    pd.testing.assert_frame_equal(report.rules, local.rules)
    assert report.html == local.html
    assert report.folder == "ProfilerReport-1700000000/profiler-output/"


def test_system_metrics_missing_bucket_raises_not_found(local_aws: LocalAws) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        system_metrics("s3://no-such-bucket/jobs/x/", s3_client=local_aws.client("s3"))


def test_system_metrics_empty_prefix_raises_not_found(s3: Any) -> None:
    with pytest.raises(NotFoundError, match="no system metrics under s3://smx-reports/nothing/"):
        system_metrics(f"s3://{BUCKET}/nothing/", s3_client=s3)
