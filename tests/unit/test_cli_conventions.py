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
