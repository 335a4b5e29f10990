"""Rule parity: our profiler rules against the last public implementations of Debugger's, on the same jobs.

Run ``python bench/parity.py`` (part of ``make bench``; ``tests/parity`` runs it under the ``parity`` marker).
Needs the side environment of ``bench/smdebug_env.sh`` (smdebug 1.0.34, numpy<2.3) and the reference rule
code in ``../shared/fixtures/awslabs+sagemaker-debugger/smdebug/profiler/analysis/rules/`` (override with
``SMX_PARITY_RULES``). That code is imported from there at run time by ``bench/parity_reference.py`` inside
the side env; none of it is copied into the project.

For each generated job (:mod:`smx_debug.simulate`) and each rule, both sides get the same explicit
parameters, and the table compares verdict, first triggering scan, RuleTriggered, Violations, Datapoints
and the Details keys. A difference is *explained* when ``bench/parity_explained.json`` lists it (rule, field,
scenario or ``*``) with the reason; docs/rules.md carries the same list. Exit status 1 on any unexplained
difference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from smx_debug.evaluate import JobData, evaluate_rule, load_path
from smx_debug.rules.params import resolve_params
from smx_debug.simulate import Simulation, SimulationSpec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIDE_PYTHON = HERE / ".venv-smdebug" / "bin" / "python"
RULES_DIR = Path(
    os.environ.get(
        "SMX_PARITY_RULES",
        ROOT.parent / "shared" / "fixtures" / "awslabs+sagemaker-debugger" / "smdebug" / "profiler" / "analysis" / "rules",
    )
)
EXPLAINED = HERE / "parity_explained.json"

RULES: tuple[str, ...] = (
    "BatchSize",
    "CPUBottleneck",
    "GPUMemoryIncrease",
    "IOBottleneck",
    "LoadBalancing",
    "LowGPUUtilization",
    "MaxInitializationTime",
    "StepOutlier",
)
FIELDS: tuple[str, ...] = ("verdict", "first_scan", "RuleTriggered", "Violations", "Datapoints", "details_keys")

_SMALL = {"duration_s": 2400.0, "cpus": 8, "gpus": 4, "interval_ms": 1000, "onset_s": 900.0}
SCENARIOS: dict[str, dict[str, Any]] = {
    "healthy": {"scenario": "healthy"},
    "cpu_bottleneck": {"scenario": "cpu_bottleneck"},
    "io_bottleneck": {"scenario": "io_bottleneck"},
    "idle_gpus": {"scenario": "low_gpu_utilization"},
    "fluctuating_gpus": {"scenario": "fluctuating_gpu"},
    "load_imbalance": {"scenario": "load_imbalance"},
    "gpu_memory_growth": {"scenario": "gpu_memory_increase"},
    "gpu_memory_jump": {"scenario": "gpu_memory_jump", "onset_s": 1300.0},  # after patience (1000 values)
    "step_outliers": {"scenario": "step_outlier"},
    "slow_initialization": {"scenario": "healthy", "initialization_s": 1500.0},
    "clock_offsets": {"scenario": "low_gpu_utilization", "nodes": 2, "clock_offset_s": 7.0},
    "unaligned_start": {"scenario": "gpu_memory_jump", "onset_s": 1300.0,
                        "job_start": datetime(2026, 1, 1, 0, 0, 23, tzinfo=UTC)},  # scans start at the minute
}


def missing_requirements() -> str | None:
    """Why the harness cannot run here, or None."""
    if not RULES_DIR.is_dir():
        return f"reference rules not found at {RULES_DIR} (set SMX_PARITY_RULES or provide ../shared/fixtures)"
    if not (SIDE_PYTHON.parents[1] / ".ready-v3").exists():  # the marker bench/smdebug_env.sh leaves when done
        return f"side environment missing or unfinished: run `bash bench/smdebug_env.sh` (expected {SIDE_PYTHON})"
    return None


@dataclass
class Row:
    scenario: str
    rule: str
    ours: dict[str, Any]
    ref: dict[str, Any]
    differences: dict[str, str] = field(default_factory=dict)  # field -> "explained: id" / "UNEXPLAINED"


def _write_job(name: str, root: Path) -> Path:
    spec = SimulationSpec(**{**_SMALL, **SCENARIOS[name]})
    out = root / name / "profiler-output"
    Simulation(spec).write_local(out)
    for sub in ("system", "framework"):  # the end-of-job marker smdebug's trial looks for
        (out / sub).mkdir(parents=True, exist_ok=True)
        (out / sub / "training_job_end.ts").write_text("")
    return out


def _last_file_minute_ns(job: Path) -> int:
    minutes = [int(p.name.split(".")[0]) for p in (job / "system").rglob("*.algo-*.json")]
    return max(minutes) * 10**9


def _as_reference_saw(data: JobData, cutoff_ns: int) -> JobData:
    """The data the 2020 rule loop reads: it stops once a scan starts at the newest file's minute (E1).

    Its last scan ends at that minute, so ours gets the system rows before it and the steps that end before it
    (a step still running then would add one more scan on our side).
    """
    cut = pd.Timestamp(cutoff_ns, tz="UTC")
    steps = data.steps[data.steps["end"] < cut] if not data.steps.empty else data.steps
    return JobData(system=data.system[data.system["timestamp"] < cut], steps=steps)


def _params(rule: str) -> dict[str, Any]:
    return {k: v for k, v in resolve_params(rule).items() if v is not None}


def _ours(data: JobData, rule: str) -> dict[str, Any]:
    r = evaluate_rule(rule, data, _params(rule))
    out = r.to_debugger_json()
    return {**out, "first_scan": r.trigger_step, "verdict": r.triggered}


def _reference(job: Path, rules: Sequence[str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({rule: _params(rule) for rule in rules}, f)
    try:
        proc = subprocess.run(
            [str(SIDE_PYTHON), str(HERE / "parity_reference.py"), str(RULES_DIR), str(job), f.name],
            capture_output=True, text=True, check=False, timeout=1800,
        )
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise RuntimeError(f"reference run failed on {job}:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    for entry in result.values():
        rep = entry["report"]
        entry.update(rep)
        entry["verdict"] = rep["RuleTriggered"] > 0
        entry["first_scan"] = None if entry["first_scan"] is None else entry["first_scan"] + 1  # 1-based as ours
    return result


def _value(side: dict[str, Any], name: str) -> Any:
    if name == "details_keys":
        return sorted(side.get("Details", {}))
    return side.get(name)


def load_explained(path: Path = EXPLAINED) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = json.loads(path.read_text())["explained"]
    return entries


def _explanation(explained: list[dict[str, str]], scenario: str, rule: str, name: str) -> str | None:
    for e in explained:
        if e["rule"] in (rule, "*") and e["field"] in (name, "*") and e["scenario"] in (scenario, "*"):
            return e["id"]
    return None


def compare(scenario: str, rule: str, ours: dict[str, Any], ref: dict[str, Any],
            explained: list[dict[str, str]]) -> Row:
    row = Row(scenario, rule, ours, ref)
    for name in FIELDS:
        if _value(ours, name) != _value(ref, name):
            eid = _explanation(explained, scenario, rule, name)
            row.differences[name] = f"explained {eid}" if eid else "UNEXPLAINED"
    return row


def run(scenarios: Sequence[str], rules: Sequence[str] = RULES) -> list[Row]:
    explained = load_explained()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="smx-parity-") as tmp:
        for name in scenarios:
            job = _write_job(name, Path(tmp))
            data = _as_reference_saw(load_path(job), _last_file_minute_ns(job))
            ref = _reference(job, rules)
            for rule in rules:
                if ref[rule].get("error"):
                    ref[rule]["RuleTriggered"] = ref[rule].get("RuleTriggered", 0)
                rows.append(compare(name, rule, _ours(data, rule), ref[rule], explained))
    return rows


def _cell(side: dict[str, Any], name: str) -> str:
    v = _value(side, name)
    if name == "details_keys":
        return str(len(v))
    return "-" if v is None else str(v)


def format_table(rows: list[Row]) -> str:
    head = f"{'scenario':<20} {'rule':<22} " + " ".join(f"{f:>17}" for f in FIELDS[:-1]) + "  details  status"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = []
        for name in FIELDS[:-1]:
            a, b = _cell(r.ours, name), _cell(r.ref, name)
            cells.append(f"{a if a == b else a + '|' + b:>17}")
        keys = "=" if "details_keys" not in r.differences else "≠"
        status = "ok" if not r.differences else ", ".join(f"{k}: {v}" for k, v in r.differences.items())
        lines.append(f"{r.scenario:<20} {r.rule:<22} " + " ".join(cells) + f"  {keys:^7}  {status}")
    unexplained = sum(v == "UNEXPLAINED" for r in rows for v in r.differences.values())
    explained_n = sum(v != "UNEXPLAINED" for r in rows for v in r.differences.values())
    lines.append(f"\n{len(rows)} rule/job pairs; cells show ours|reference where they differ; "
                 f"{explained_n} explained differences, {unexplained} unexplained")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three scenarios only")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="run only these")
    parser.add_argument("--rule", action="append", choices=RULES, help="run only these rules")
    args, _ = parser.parse_known_args(argv)
    why = missing_requirements()
    if why:
        print(f"parity: skipped: {why}")
        return 0
    names = args.scenario or (["healthy", "idle_gpus", "gpu_memory_jump"] if args.quick else list(SCENARIOS))
    rows = run(names, args.rule or RULES)
    print(format_table(rows))
    return 1 if any(v == "UNEXPLAINED" for r in rows for v in r.differences.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
