"""Resolving job names, s3:// URIs and local paths to the job's profiler output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.reports import LocalSource, S3Source, job_paths, open_source
from smx_debug.reports.sources import split_s3_uri

DESC = {
    "TrainingJobName": "job-1",
    "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/job-1",
    "TrainingJobStatus": "InProgress",
    "SecondaryStatus": "Training",
    "ModelArtifacts": {"S3ModelArtifacts": ""},
    "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
    "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    "CreationTime": "2026-01-01T00:00:00Z",
    "ProfilerConfig": {"S3OutputPath": "s3://bucket/profiler/"},
    "DebugHookConfig": {"S3OutputPath": "s3://bucket/debug"},
}


def _sm(desc: dict[str, Any]) -> tuple[Any, Stubber]:
    sm = boto3.client("sagemaker", region_name="us-west-2")
    stub = Stubber(sm)
    stub.add_response("describe_training_job", desc, {"TrainingJobName": desc["TrainingJobName"]})
    return sm, stub


def test_job_paths_from_describe_training_job() -> None:
    sm, stub = _sm(DESC)
    with stub:
        paths = job_paths("job-1", sagemaker_client=sm)
    assert (paths.debugger, paths.profiler, paths.rule_output) == (
        "s3://bucket/debug/job-1/debug-output/",
        "s3://bucket/profiler/job-1/profiler-output/",
        "s3://bucket/profiler/job-1/rule-output/",
    )


def test_open_source_job_name_resolves_to_profiler_prefix() -> None:
    sm, stub = _sm(DESC)
    with stub:
        src = open_source("job-1", sagemaker_client=sm, s3_client=boto3.client("s3", region_name="us-west-2"))
    assert isinstance(src, S3Source)
    assert src.uri == "s3://bucket/profiler/job-1/profiler-output/"


def test_open_source_job_without_profiler_raises_not_found() -> None:
    desc = {k: v for k, v in DESC.items() if k not in ("ProfilerConfig", "DebugHookConfig")}
    sm, stub = _sm(desc)
    with stub, pytest.raises(NotFoundError, match="profiling was off"):
        open_source("job-1", sagemaker_client=sm)


def test_open_source_local_job_folder_descends_into_profiler_output(tmp_path: Path) -> None:
    (tmp_path / "profiler-output" / "system").mkdir(parents=True)
    src = open_source(tmp_path)
    assert isinstance(src, LocalSource)
    assert src.root == tmp_path / "profiler-output"
    assert open_source(tmp_path, output="rule").uri == str(tmp_path)  # type: ignore[union-attr]


@pytest.mark.parametrize(("value", "field"), [("", "job_or_path"), (42, "job_or_path")])
def test_open_source_bad_argument_raises_config_error(value: object, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        open_source(value)  # type: ignore[arg-type]
    assert exc.value.field == field


@pytest.mark.parametrize("uri", ["s3://", "s3:///key", "http://bucket/key"])
def test_split_s3_uri_rejects_malformed(uri: str) -> None:
    with pytest.raises(ConfigError, match="not an S3 URI"):
        split_s3_uri(uri)
