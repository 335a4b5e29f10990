"""A mistyped job name from the Python API is a JobNotFoundError naming the job, never a botocore traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from smx_debug import data
from smx_debug.data.jobs import load_job
from smx_debug.data.sources import job_paths
from smx_debug.errors import JobNotFoundError, RegionError
from smx_debug.local import LocalAws

CALLS: dict[str, Callable[[Any], object]] = {
    "rule_summary": lambda sm: data.rule_summary("resnet-typo", sagemaker_client=sm),
    "wait_for_rules": lambda sm: data.wait_for_rules("resnet-typo", sagemaker_client=sm, progress=False),
    "system_metrics": lambda sm: data.system_metrics("resnet-typo", sagemaker_client=sm, progress=False),
    "framework_metrics": lambda sm: data.framework_metrics("resnet-typo", sagemaker_client=sm, progress=False),
    "profiler_report": lambda sm: data.profiler_report("resnet-typo", sagemaker_client=sm),
    "job_paths": lambda sm: job_paths("resnet-typo", sagemaker_client=sm),
    "load_job": lambda sm: load_job("resnet-typo", sagemaker_client=sm),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_api_mistyped_job_name_is_job_not_found(local_aws: LocalAws, call: str) -> None:
    with pytest.raises(JobNotFoundError) as exc:
        CALLS[call](local_aws.client("sagemaker"))
    assert exc.value.job_name == "resnet-typo"
    assert f"training job 'resnet-typo' not found in region {local_aws.region}" in str(exc.value)


def test_api_default_client_mistyped_job_name_is_job_not_found(local_aws: LocalAws) -> None:
    with local_aws.environment(), pytest.raises(JobNotFoundError):
        data.rule_summary("resnet-typo")


def test_api_no_region_is_region_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    with pytest.raises(RegionError, match="AWS_DEFAULT_REGION"):
        data.rule_summary("resnet-typo")
