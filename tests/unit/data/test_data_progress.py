"""Progress of the readers' long reads: tqdm on a terminal, after a second; nothing when stderr is piped."""

from __future__ import annotations

import io

import pytest
from tqdm import tqdm

from smx_debug.data.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_piped_writes_nothing() -> None:
    stream = io.StringIO()
    with progress_bar("system metrics s3://b/p", 3, file=stream) as bar:
        bar.update(3)
    assert stream.getvalue() == ""


def test_progress_bar_on_a_terminal_is_tqdm_after_one_second() -> None:
    with progress_bar("system metrics s3://b/p", 3, file=_Terminal()) as bar:
        assert isinstance(bar, tqdm) and not bar.disable
        assert (bar.delay, bar.total, bar.desc) == (1.0, 3, "system metrics s3://b/p")


@pytest.mark.parametrize(("enabled", "disabled"), [(False, True), (True, False)])
def test_progress_bar_enabled_overrides_the_terminal_check(enabled: bool, disabled: bool) -> None:
    with progress_bar("x", 1, enabled=enabled, file=io.StringIO() if enabled else _Terminal()) as bar:
        assert bar.disable is disabled


def test_readers_progress_is_on_by_default_for_the_cli(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # the CLI's reads (load_job -> load_source) ask for progress on a terminal, not progress=False
    from smx_debug.data import load as load_module
    from smx_debug.simulate import Simulation, SimulationSpec

    Simulation(SimulationSpec(duration_s=120.0, cpus=1, gpus=1, seed=1)).write_local(tmp_path / "job")
    seen: list[object] = []
    real = load_module.SystemMetricsReader

    def reader(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs.get("progress"))
        return real(*args, **kwargs)

    monkeypatch.setattr(load_module, "SystemMetricsReader", reader)
    from smx_debug.data.jobs import load_job

    load_job(str(tmp_path / "job"))
    assert seen == [None]
