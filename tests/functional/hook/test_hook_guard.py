"""The in-process guard on the recommended-profile runs of tests/functional/evaluate/test_eval_profile_recommended.py
(their run builder, with ``in_process_guard`` added to their plan): a learning rate x100 at a known step (the onset:
the fault's injection, known without any rule; the run may end at a huge finite loss or in NaN, either is accepted)
is stopped within the first save interval after the onset, at the first save the evaluator flags, with the trial
closed and the verdict that ``smx-debug rules evaluate TRIAL --plan plan.yaml --json -`` gives on it; the same run
without the fault finishes every step; ``warn`` logs and goes on."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")


def _runs() -> ModuleType:
    """The recommended-profile run builder (``_run``, ``_global``, ``PLAN`` and the run's constants)."""
    path = Path(__file__).resolve().parents[1] / "evaluate" / "test_eval_profile_recommended.py"
    spec = importlib.util.spec_from_file_location("recommended_profile_runs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNS = _runs()


def _plan(tmp_path: Path, guard: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(RUNS.PLAN + f"in_process_guard: {guard}\n", encoding="utf-8")
    return path


def _evaluate(trial: Path, plan: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from smx_debug.cli import main

    capsys.readouterr()
    main(["rules", "evaluate", str(trial), "--plan", str(plan), "--json", "-"])
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _trigger_step(verdict: dict[str, Any]) -> int:
    """The first step at which a rule of the verdict fired (its reason says "at step N")."""
    steps = [int(m.group(1)) for r in verdict.values() if r["RuleTriggered"]
             for m in [re.search(r"at step (\d+)", r["reason"])] if m]
    assert steps, verdict
    return min(steps)


def test_guard_stop_exploding_run_raises_at_the_first_save_after_the_onset(tmp_path: Path, capsys) -> None:
    from smx_debug.hook import GuardStop
    from smx_debug.hook.guard import VERDICT_FILE
    from smx_debug.tensors import create_trial

    plan, trial_dir = _plan(tmp_path, "stop"), tmp_path / "trial"
    with pytest.raises(GuardStop) as info:
        RUNS._run(plan, trial_dir, lr_factor=100.0)
    stop = info.value
    onset = RUNS._global(RUNS.ONSET)
    # within the first save interval after the onset (the first weights saved after it are at ONSET + SAVE_INTERVAL)
    assert onset < stop.step <= RUNS._global(RUNS.ONSET + RUNS.SAVE_INTERVAL), stop
    # the trial is closed (end marker, collections) and ends with the save the guard stopped at
    trial = create_trial(str(trial_dir))
    assert trial.loaded_all_steps and trial.collections()
    assert max(trial.steps()) == stop.step
    # the verdict written beside the steps is what the evaluator gives on that trial, and it fired at that save
    assert stop.verdict_path == str(trial_dir / VERDICT_FILE)
    written = json.loads(Path(stop.verdict_path).read_text(encoding="utf-8"))
    evaluated = _evaluate(trial_dir, plan, capsys)
    assert written == stop.verdict == evaluated
    assert _trigger_step(evaluated) == stop.step
    assert set(stop.fired) == {name for name, r in evaluated.items() if r["RuleTriggered"]}


def test_guard_stop_same_run_without_the_fault_finishes_every_step(tmp_path: Path) -> None:
    import smx_debug.hook as smd
    from smx_debug.hook.guard import VERDICT_FILE
    from smx_debug.tensors import create_trial

    trial_dir = tmp_path / "trial"
    RUNS._run(_plan(tmp_path, "stop"), trial_dir, lr_factor=1.0)
    hook = smd.get_hook()
    assert hook is not None and hook.guard == "stop" and hook.stop_reason is None
    last_save = max(range(0, RUNS.STEPS, RUNS.SAVE_INTERVAL))
    assert max(create_trial(str(trial_dir)).steps(mode=smd.modes.TRAIN)) == last_save
    assert not (trial_dir / VERDICT_FILE).exists()


def test_guard_warn_exploding_run_logs_each_rule_once_and_finishes(tmp_path: Path, caplog) -> None:
    import smx_debug.hook as smd
    from smx_debug.tensors import create_trial

    trial_dir = tmp_path / "trial"
    with caplog.at_level(logging.WARNING, logger="smx_debug.hook"):
        RUNS._run(_plan(tmp_path, "warn"), trial_dir, lr_factor=100.0)
    fired = [m.group(1) for r in caplog.records for m in [re.match(r".*guard: rule (\S+) fired", r.getMessage())] if m]
    assert fired and len(fired) == len(set(fired)), fired
    hook = smd.get_hook()
    assert hook is not None and hook.stop_reason is None
    last_save = max(range(0, RUNS.STEPS, RUNS.SAVE_INTERVAL))
    assert max(create_trial(str(trial_dir)).steps(mode=smd.modes.TRAIN)) == last_save


def test_guard_stop_with_steps_from_framework_events_raises_nothing_and_sets_stop_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the Hugging Face and Lightning integrations drive it (follow_step_events, start_step on each batch): no
    exception into the framework's loop; the trial is closed, the verdict written and ``stop_reason`` set, which the
    integration turns into the framework's own stop; the steps the loop still runs save nothing."""
    import smx_debug.hook as smd
    from smx_debug.hook.guard import VERDICT_FILE
    from smx_debug.tensors import create_trial

    register = smd.Hook.register_module

    def driven_by_events(hook: smd.Hook, module: Any) -> None:  # what an integration's batch callback does
        register(hook, module)
        hook.follow_step_events()
        module.register_forward_pre_hook(lambda _module, _inputs: hook.start_step())

    monkeypatch.setattr(smd.Hook, "register_module", driven_by_events)
    trial_dir = tmp_path / "trial"
    RUNS._run(_plan(tmp_path, "stop"), trial_dir, lr_factor=100.0)  # runs every step: nothing raised
    hook = smd.get_hook()
    assert hook is not None and hook.stop_reason is not None and "in-process guard" in hook.stop_reason
    assert hook.write_failures == 0  # the steps after the stop wrote nothing to the closed trial
    trial = create_trial(str(trial_dir))
    assert trial.loaded_all_steps
    stopped_at = max(trial.steps())
    assert RUNS._global(RUNS.ONSET) < stopped_at <= RUNS._global(RUNS.ONSET + RUNS.SAVE_INTERVAL)
    assert (trial_dir / VERDICT_FILE).exists()
