"""Run the last public implementations of Debugger's profiler rules on one job folder (side env only).

Runs under bench/.venv-smdebug (smdebug 1.0.34), never under the project's venv. The rule code is imported
at run time from the fixtures folder given on the command line (awslabs/sagemaker-debugger @2222c547,
``smdebug/profiler/analysis/rules/``); nothing of it is copied into the project. Two shims, as the fixtures'
INDEX.md describes: the 2020 ``Rule.__init__(base_trial, other_trials=None, action_str="")`` signature, and
no sleeping while the trial polls for complete data (the job folder has its end marker).

Usage: python parity_reference.py RULES_DIR JOB_DIR PARAMS_JSON  -> one JSON object on stdout:
``{rule: {"report": {...}, "first_scan": int | null, "scans": int, "error": str | null}}``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import sys
import types
from typing import Any

import numpy as np


def _quiet() -> None:
    os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")
    logging.disable(logging.WARNING)


def _install_rules_package(rules_dir: str) -> None:
    """Make ``smdebug.profiler.analysis.rules`` resolve to the fixtures folder."""
    import smdebug.profiler.analysis as analysis

    spec = importlib.util.spec_from_file_location(
        "smdebug.profiler.analysis.rules",
        os.path.join(rules_dir, "__init__.py"),
        submodule_search_locations=[rules_dir],
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["smdebug.profiler.analysis.rules"] = module
    spec.loader.exec_module(module)
    analysis.rules = module  # type: ignore[attr-defined]


def _shim_rule_signature() -> None:
    """The 2020 rules call ``super().__init__(base_trial)``; smdebug 1.0.34 wants ``action_str`` too."""
    from smdebug.rules import rule as rule_module

    original = rule_module.Rule.__init__

    def init(self: Any, base_trial: Any, other_trials: Any = None, action_str: str = "") -> None:
        original(self, base_trial, action_str, other_trials=other_trials)

    rule_module.Rule.__init__ = init  # type: ignore[method-assign]


def _shim_no_sleep() -> None:
    from smdebug.trials import profiler_trial

    profiler_trial.time = types.SimpleNamespace(sleep=lambda _s: None, time=__import__("time").time)  # type: ignore[attr-defined]


_MODULES = {
    "BatchSize": "batch_size",
    "CPUBottleneck": "cpu_bottleneck",
    "Dataloader": "dataloader",
    "GPUMemoryIncrease": "gpu_memory_increase",
    "IOBottleneck": "io_bottleneck",
    "LoadBalancing": "load_balancing",
    "LowGPUUtilization": "low_gpu_utilization",
    "MaxInitializationTime": "max_initialization_time",
    "OverallSystemUsage": "overall_system_usage",
    "StepOutlier": "step_outlier",
}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


def run_rule(rule: str, job_dir: str, params: dict[str, Any], max_scans: int = 100_000) -> dict[str, Any]:
    from smdebug.exceptions import NoMoreProfilerData, RuleEvaluationConditionMet
    from smdebug.trials import create_trial

    module = importlib.import_module(f"smdebug.profiler.analysis.rules.{_MODULES[rule]}")
    trial = create_trial(job_dir, profiler=True, output_dir=os.path.join(job_dir, "..", "ref-out"))
    obj = getattr(module, rule)(trial, **params)
    first: int | None = None
    scans = 0
    error: str | None = None
    try:
        for step in range(max_scans):
            scans = step
            try:
                obj.invoke(step)
            except RuleEvaluationConditionMet:
                first = step if first is None else first
    except NoMoreProfilerData:
        pass
    except Exception as exc:  # a reference crash is a result to report, not a harness failure
        error = f"{type(exc).__name__}: {exc}"
    return {"report": _plain(obj.report), "first_scan": first, "scans": scans, "error": error}


def main(argv: list[str]) -> int:
    rules_dir, job_dir, params_path = argv[1:4]
    _quiet()
    _install_rules_package(rules_dir)
    _shim_rule_signature()
    _shim_no_sleep()
    with open(params_path) as f:
        params: dict[str, dict[str, Any]] = json.load(f)
    out = {rule: run_rule(rule, job_dir, p) for rule, p in params.items()}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
