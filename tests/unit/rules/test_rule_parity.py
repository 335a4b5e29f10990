"""Parity with the last public implementations of Debugger's profiler rules (bench/parity.py).

Runs three generated jobs (``bench/parity.py --quick``; the full table is ``make bench``) through the 2020
rule code in the side environment and through ours, and fails on any difference not listed in
bench/parity_explained.json. Skipped, with the reason, without the side env or the shared fixtures.
Select with ``pytest -m parity``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"

pytestmark = [pytest.mark.parity, pytest.mark.slow]


def _parity() -> ModuleType:
    spec = importlib.util.spec_from_file_location("smx_parity", BENCH / "parity.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["smx_parity"] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def test_parity_every_accepted_difference_is_documented() -> None:
    parity = _parity()
    docs = (BENCH.parent / "docs" / "rules.md").read_text()
    for entry in parity.load_explained():
        assert f"| {entry['id']} |" in docs, entry


def test_parity_quick_scenarios_have_no_unexplained_difference() -> None:
    parity = _parity()
    why = parity.missing_requirements()
    if why:
        pytest.skip(why)
    rows = parity.run(["healthy", "idle_gpus", "gpu_memory_jump"])
    table = parity.format_table(rows)
    assert not [r for r in rows if "UNEXPLAINED" in r.differences.values()], table
    assert any(r.ref["RuleTriggered"] for r in rows)  # the jobs do exercise firing rules


def test_parity_skips_on_a_side_env_whose_build_did_not_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # bench/smdebug_env.sh creates the venv's python before pip runs; a failed install (no disk, no index) leaves
    # it behind without the ready marker, and the parity run must skip rather than fail on a broken smdebug.
    parity = _parity()
    python = tmp_path / ".venv-smdebug" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    monkeypatch.setattr(parity, "SIDE_PYTHON", python)
    monkeypatch.setattr(parity, "RULES_DIR", tmp_path)
    why = parity.missing_requirements()
    assert why is not None and "bash bench/smdebug_env.sh" in why
