"""The CLI's boundary: every failure is one `error:` line and the exit status of its kind, never a traceback."""

from __future__ import annotations

import pytest

from smx_debug.cli import main


def test_cli_missing_path_that_is_not_a_job_name_is_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "evaluate", "/no/such/folder"]) == 3  # missing data
    assert capsys.readouterr().err == (
        "error: '/no/such/folder': no such file or folder, and not a training job name or s3:// prefix\n"
    )


def test_cli_no_aws_region_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    assert main(["rules", "evaluate", "some-training-job"]) == 4  # AWS
    assert capsys.readouterr().err == (
        "error: no AWS region configured: set AWS_DEFAULT_REGION (e.g. export AWS_DEFAULT_REGION=us-east-1) "
        "or `region` in ~/.aws/config\n"
    )


def test_cli_unreachable_aws_endpoint_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert main(["report", "some-training-job", "--out", "/tmp/never-written.html"]) == 4  # AWS
    err = capsys.readouterr().err
    assert err.startswith("error: AWS: Could not connect to the endpoint URL") and err.count("\n") == 1
