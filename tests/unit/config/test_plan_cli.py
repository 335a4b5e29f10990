"""`smx-debug plan validate|render` and `smx-debug rules list|show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smx_debug.cli import main
from smx_debug.config import DebugPlan
from smx_debug.rules.registry import profile_rules

ROOT = Path(__file__).resolve().parents[3]
GUARD = ROOT / "examples" / "plans" / "exploding_gradient_guard.yaml"


def test_plan_validate_example_exits_0_with_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "validate", str(GUARD)]) == 0
    out, err = capsys.readouterr()
    assert out == f"ok: {GUARD}: 2 rules, 1 warning\n"
    assert err.startswith("warning: rules[0].actions[0] (stop_training): the job name is not known")


def test_plan_validate_bad_plan_exits_2_naming_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("region: us-west-2\ns3_output_path: s3://bucket/x\nhook: {save_interval: -1}\n")
    assert main(["plan", "validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: {path}: hook.save_interval: Input should be greater than 0 (got -1)\n")


def test_plan_render_request_prints_request_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "render", str(GUARD), "--job-name", "job-1"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == DebugPlan.from_file(GUARD).to_request_dict(job_name="job-1")
    assert err == ""


def test_plan_render_estimator_prints_sdk_requests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "render", str(GUARD), "--format", "estimator"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(out) == ["debugger_hook_config", "profiler_config", "rules", "tags"]
    assert [r["type"] for r in out["rules"]] == ["Rule", "Rule"]
    assert out["debugger_hook_config"]["request"] == DebugPlan.from_file(GUARD).to_request_dict(job_name="j")[
        "DebugHookConfig"
    ]


def test_rules_list_json_lists_32_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "list", "--output", "json"]) == 0
    rules = [r for r in json.loads(capsys.readouterr().out) if r["family"] == "debugger"]  # Debugger's built-ins
    assert (len(rules), sum(r["kind"] == "profiler" for r in rules)) == (32, 11)


def test_rules_show_prints_parameters_and_collections(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "show", "loss_not_decreasing"]) == 0
    out = capsys.readouterr().out
    assert "num_steps: int = 10" in out and "needs collection losses (save_interval=500)" in out


def test_rules_show_unknown_exits_2_with_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "show", "LowGPUUtilisation"]) == 2
    assert capsys.readouterr().err == "error: unknown rule 'LowGPUUtilisation'; did you mean 'LowGPUUtilization'?\n"


def test_rules_list_profile_recommended_lists_the_profile_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "list", "--profile", "recommended", "--output", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed] == list(profile_rules("recommended"))
    assert all(r["profiles"] == ["recommended"] for r in listed)
    assert main(["rules", "list", "--family", "smx"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "recommended" in lines["smx_overfit_means"] and "recommended" not in lines["smx_loss_plateau"]
