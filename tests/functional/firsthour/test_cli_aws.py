"""The CLI against the local AWS: a job without metrics says so (exit 3, missing data), a mistyped job name
is one line (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from smx_debug import local
from smx_debug.cli import main
from smx_debug.local import LocalAws


def _create_job(aws: LocalAws, name: str) -> None:
    local.create_training_job(aws, name)


def test_cli_cloudwatch_source_without_metrics_says_so_and_exits_3(local_aws: LocalAws,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _create_job(local_aws, "no-metrics-job")
    with local_aws.environment():
        code = main(["rules", "evaluate", "no-metrics-job", "--source", "cloudwatch"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("error: 'no-metrics-job': no profiler data to evaluate") and "CloudWatch" in err
    assert err.count("\n") == 1


def test_cli_mistyped_job_name_is_one_line_not_found(local_aws: LocalAws,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with local_aws.environment():
        code = main(["report", "resnet-typo", "--out", "/tmp/never.html"])
    err = capsys.readouterr().err
    assert code == 3
    assert err == (f"error: 'resnet-typo': no such file or folder in {Path.cwd()}, and as a training job name: "
                   "training job 'resnet-typo' not found in region us-west-2: check the name "
                   "(`aws sagemaker list-training-jobs --name-contains ...`) and the region (AWS_DEFAULT_REGION)\n")


def test_cli_region_and_endpoint_url_options_reach_the_account_anywhere_on_the_line(
        local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # no region and no endpoint in the environment: only the global options point the command at the local AWS
    _create_job(local_aws, "no-metrics-job")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    env = local_aws.environ()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", env["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", env["AWS_SECRET_ACCESS_KEY"])
    code = main(["--region", local_aws.region, "rules", "evaluate", "no-metrics-job", "--source", "cloudwatch",
                 "--endpoint-url", local_aws.endpoint_url])
    err = capsys.readouterr().err
    assert code == 3, err  # the job was found there; it has no metrics yet
    assert err.startswith("error: 'no-metrics-job': no profiler data to evaluate")
