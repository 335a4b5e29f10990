"""JOB_OR_PATH and --job-name take SageMaker's TrainingJobName rule from its one owner (contracts): the whole string."""

from __future__ import annotations

import argparse

import pytest

from smx_debug.cli._args import job_name
from smx_debug.data.jobs import load_job
from smx_debug.errors import NotFoundError


class _NoCalls:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"a name SageMaker refuses must not reach SageMaker ({name})")


@pytest.mark.parametrize("name", ["abc\n", "job-1\n", "-abc", "a" * 64])
def test_job_name_argument_not_a_whole_training_job_name_is_a_usage_error(name: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a valid training job name"):
        job_name(name)


@pytest.mark.parametrize("name", ["abc\n", "job-1\n"])
def test_load_job_trailing_newline_is_no_job_name_and_no_call(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotFoundError, match="not a training job name"):
        load_job(name, sagemaker_client=_NoCalls(), s3_client=_NoCalls())


def test_job_name_argument_valid_name_is_kept() -> None:
    assert job_name("team-a-resnet-1") == "team-a-resnet-1"
