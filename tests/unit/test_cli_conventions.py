"""The CLI's conventions (aws-cli's): `--version`, global options anywhere, documented exit codes."""

from __future__ import annotations

import pytest

import smx_debug
from smx_debug.cli import main


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own exits (--version, --help, usage errors)
        return int(exc.code or 0)


def test_cli_version_prints_package_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--version"]) == 0
    assert capsys.readouterr().out == f"smx-debug {smx_debug.__version__}\n"


@pytest.mark.parametrize("argv", [
    pytest.param(["-v", "rules", "list"], id="before-the-command"),
    pytest.param(["rules", "-v", "list"], id="after-the-group"),
    pytest.param(["rules", "list", "-v"], id="after-the-subcommand"),
    pytest.param(["rules", "list", "--verbose", "--family", "debugger"], id="between-options"),
])
def test_cli_verbose_anywhere_is_accepted(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[bool] = []
    monkeypatch.setattr("smx_debug.cli.quiet_dependencies", _record(seen))
    assert _run(argv) == 0, capsys.readouterr().err
    assert seen == [True]


def test_cli_verbose_absent_stays_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    monkeypatch.setattr("smx_debug.cli.quiet_dependencies", _record(seen))
    assert _run(["rules", "list", "--family", "debugger"]) == 0
    assert seen == [False]


def _record(seen: list[bool]):  # type: ignore[no-untyped-def]
    import contextlib

    @contextlib.contextmanager
    def quiet(*, verbose: bool):  # type: ignore[no-untyped-def]
        seen.append(verbose)
        yield

    return quiet


def test_cli_rules_list_empty_family_is_no_rules_exit_0(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("smx_debug.rules.list_rules", lambda *a, **k: [])
    assert _run(["rules", "list", "--family", "smx"]) == 0
    assert capsys.readouterr().out == "(no rules)\n"


def test_cli_help_documents_every_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    from smx_debug.cli._exit import ExitStatus

    assert _run(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status:" in out
    for status in ExitStatus:
        assert f"  {int(status)}  " in out, (status, out)


def _raiser(exc: BaseException):  # type: ignore[no-untyped-def]
    def run(args):  # type: ignore[no-untyped-def]
        raise exc
    return run


def _client_error(code: str, operation: str = "DescribeTrainingJob"):  # type: ignore[no-untyped-def]
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": f"{code} says no"}}, operation)


def _failures() -> list[object]:
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError, NoRegionError

    from smx_debug import errors

    return [
        pytest.param(errors.ConfigError("plan.yaml: hook.save_interval: bad"), 2, id="config-error"),
        pytest.param(errors.UnknownNameError("unknown rule 'X'"), 2, id="unknown-name"),
        pytest.param(errors.NotFoundError("'/x': no such file or folder"), 3, id="not-found"),
        pytest.param(errors.JobNotFoundError("training job 'x' not found"), 3, id="job-not-found"),
        pytest.param(errors.NoDataYetError("'x': no profiler data"), 3, id="no-data-yet"),
        pytest.param(errors.DataError("'x': unusable"), 3, id="data-error"),
        pytest.param(FileNotFoundError(2, "No such file or directory", "/x"), 3, id="file-not-found"),
        pytest.param(errors.AccessDeniedError("not authorized to sagemaker:DescribeTrainingJob"), 4, id="access-denied"),
        pytest.param(errors.RegionError(), 4, id="region-error"),
        pytest.param(NoRegionError(), 4, id="no-region"),
        pytest.param(NoCredentialsError(), 4, id="no-credentials"),
        pytest.param(EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), 4, id="unreachable"),
        pytest.param(_client_error("ThrottlingException"), 4, id="client-error"),
        pytest.param(_client_error("AccessDeniedException"), 4, id="client-error-access-denied"),
    ]


@pytest.mark.parametrize(("exc", "status"), _failures())
def test_cli_failure_kind_has_its_exit_status(exc: BaseException, status: int, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("smx_debug.cli.rules._list", _raiser(exc))
    assert _run(["rules", "list"]) == status
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_cli_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["rules", "list", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: smx-debug") and "unrecognized arguments: --no-such-flag" in err


def test_cli_makes_aws_clients_in_one_factory_only() -> None:
    # the commands get their clients from smx_debug.cli._aws.Clients (one place for region, retries, endpoint)
    import ast
    from pathlib import Path

    import smx_debug.cli

    inline = []
    for path in sorted(Path(smx_debug.cli.__file__).parent.glob("*.py")):
        if path.name == "_aws.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in {"client", "resource", "Session"} and \
                    isinstance(node.value, ast.Name) and node.value.id == "boto3":
                inline.append(f"{path.name}:{node.lineno}")
    assert inline == []


def test_cli_aws_client_uses_standard_retries_and_the_global_options(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from smx_debug.cli._aws import Clients

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    sm = Clients(argparse.Namespace(region=None, endpoint_url=None)).client("sagemaker")
    assert (sm.meta.region_name, sm.meta.config.retries["mode"]) == ("eu-west-1", "standard")
    given = Clients(argparse.Namespace(region="ap-south-1", endpoint_url="http://127.0.0.1:5")).client("s3")
    assert (given.meta.region_name, given.meta.endpoint_url) == ("ap-south-1", "http://127.0.0.1:5")


def test_cli_aws_injected_clients_only_with_the_global_options() -> None:
    import argparse

    from smx_debug.cli._aws import Clients

    assert Clients(argparse.Namespace(region=None, endpoint_url=None)).injected("s3") == {}
    injected = Clients(argparse.Namespace(region="ap-south-1", endpoint_url=None)).injected("s3", "sagemaker")
    assert list(injected) == ["s3_client", "sagemaker_client"]
    assert injected["sagemaker_client"].meta.region_name == "ap-south-1"  # made on first use


@pytest.mark.parametrize("argv", [
    pytest.param(["rules", "list", "--fam", "smx"], id="subcommand-option"),
    pytest.param(["rules", "list", "--verb"], id="global-option"),
])
def test_cli_abbreviated_option_is_usage_error_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # an abbreviation would change meaning the day an option sharing its prefix is added: options are spelled out
    assert _run(argv) == 2
    assert f"unrecognized arguments: {argv[2]}" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["fleet", "--help"], ["rules", "list", "--bad"]])
def test_cli_parse_only_lines_load_no_heavy_library(argv: list[str]) -> None:
    # the parser (cli._parser) is light: --version, --help and usage errors never wait for pandas, the SDK or boto3
    import subprocess
    import sys

    code = ("import sys\nfrom smx_debug.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = ('pandas', 'numpy', 'pyarrow', 'duckdb', 'boto3', 'botocore', 'pydantic', 'sagemaker', 'yaml')\n"
            "from smx_debug._lazy import imported\n"
            "print(sorted(m for m in heavy if imported(m)), file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True).stderr
    assert err.strip().splitlines()[-1] == "[]"
