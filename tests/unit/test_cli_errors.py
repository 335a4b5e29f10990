"""The CLI's boundary: every failure is one `error:` line and the exit status of its kind, never a traceback."""

from __future__ import annotations

import pytest

from smx_debug.cli import main


def test_cli_missing_path_that_is_not_a_job_name_is_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "evaluate", "/no/such/folder"]) == 3  # missing data
    assert capsys.readouterr().err == (
        "error: '/no/such/folder': no such file or folder, and not a training job name or s3:// prefix\n"
    )


def test_cli_unreachable_aws_endpoint_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    assert main(["report", "some-training-job", "--out", "/tmp/never-written.html"]) == 4  # AWS
    err = capsys.readouterr().err
    assert err.startswith("error: 'some-training-job': no such file or folder in ") and err.count("\n") == 1
    assert ", and as a training job name: AWS: Could not connect to the endpoint URL" in err


def test_cli_missing_folder_taken_for_job_name_says_no_such_folder(
        monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    # `rules evaluate my-trial` in a folder without my-trial/: a valid job name, so it is also looked up as a job,
    # but the first thing the line says is that the folder is not there
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.chdir(tmp_path)
    assert main(["rules", "evaluate", "my-trial"]) == 4  # the job lookup could not run: AWS
    assert capsys.readouterr().err == (
        f"error: 'my-trial': no such file or folder in {tmp_path}, and as a training job name: no AWS region "
        "configured: set AWS_DEFAULT_REGION (e.g. export AWS_DEFAULT_REGION=us-east-1) or `region` in ~/.aws/config\n"
    )
