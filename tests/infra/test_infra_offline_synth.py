"""What synthesizes without PyPI: the scheduled evaluator and the fleet collector share one dependency layer
(infra/evaluator_asset.py), fetched with pip on a cold cache. Here the cache is empty and pip's index refuses
connections, as on a machine without network."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.cdk_app import build_app
from smx_debug.errors import ConfigError


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty layer cache and a pip whose index is a closed local port (no retries)."""
    monkeypatch.setenv("SMX_DEBUG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    return tmp_path / "cdk.out"


def test_synth_offline_with_only_the_evaluator_off_fails_naming_every_switch_that_works(offline: Path) -> None:
    """The fleet collector, on by default, builds the layer too: the message must not say evaluator=false suffices."""
    with pytest.raises(ConfigError) as caught:
        build_app({"evaluator": False}, outdir=str(offline), nag=False)
    message = str(caught.value)
    assert "python -m infra.evaluator_asset" in message
    assert "-c evaluator=false -c fleet=false" in message and "-c local=true" in message
    assert "fleet collector" in message


@pytest.mark.parametrize("context", [{"evaluator": False, "fleet": False}, {"local": True}],
                         ids=["evaluator-and-fleet-off", "local"])
def test_synth_offline_with_the_documented_switches_synthesizes(offline: Path, context: dict[str, bool]) -> None:
    assembly = build_app(context, outdir=str(offline), nag=False).synth()
    assert [s.stack_name for s in assembly.stacks] == ["SmxDebugGuard"]
