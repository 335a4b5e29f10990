"""Independent validators on every synthesized configuration: cfn-lint (pip, pinned) on each template and
asl-validator (npm, pinned in package.json) on each state machine definition.

The explicit configurations below are always checked; the last test also lints every template any other
test of this session synthesized (conftest's ``synth``/``synth_cached`` record them). Neither tool is ever
skipped: both are installed by the project's own files (pyproject/constraints, package.json).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers_infra import Synth
from infra_delivery import Resolver

ROOT = Path(__file__).resolve().parents[2]
CFN_LINT = ROOT / ".venv" / "bin" / "cfn-lint"
ASL_VALIDATOR = ROOT / "node_modules" / ".bin" / "asl-validator"

CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "full": {"watch_prefixes": ["exp-", "prod-"], "notification_emails": ["ml@example.com"],
             "notification_sms": ["+15555550123"], "alarm_rules": ["VanishingGradient", "LossNotDecreasing"],
             "default_actions": ["notify", "stop"], "show_keys": ["epochs"]},
    "minimal": {"opt_in_tag": False, "watch_prefixes": "exp-", "retraining": False},
    "local": {"watch_prefixes": ["guarded-"], "default_actions": ["notify", "stop"], "local": True},
    "fast-polling": {"retraining": {"wait_seconds": 10, "max_runtime_seconds": 3600}},
    # what tests/functional/infra deploys (conftest's DEPLOY_CONTEXT, the retraining end-to-end test)
    "deploy": {"watch_prefixes": ["guarded-"], "default_actions": ["notify", "stop"],
               "alarm_rules": ["VanishingGradient", "LossNotDecreasing"], "notification_emails": ["ml@example.com"],
               "local": True},
    "retrain-e2e": {"watch_prefixes": ["guarded-"], "default_actions": ["notify"], "local": True, "evaluator": False,
                    "retraining": {"wait_seconds": 10, "max_runtime_seconds": 3600}},
}


def _tool(path: Path) -> str:
    found = str(path) if path.exists() else shutil.which(path.name)
    assert found, f"{path.name} is not installed: run `make install` (it is a pinned dev dependency)"
    return found


def cfn_lint(templates: list[Path]) -> subprocess.CompletedProcess[str]:
    # Run from the repository root so .cfnlintrc.yaml (the one place checks are ignored, with reasons) applies.
    return subprocess.run([_tool(CFN_LINT), *map(str, templates)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


def state_machine_definitions(template: dict[str, Any]) -> dict[str, str]:
    """logical id -> the definition with its tokens resolved to concrete ARNs (as deployed)."""
    resolve = Resolver(template["Resources"])
    return {logical: resolve(resource["Properties"]["DefinitionString"])
            for logical, resource in template["Resources"].items()
            if resource["Type"] == "AWS::StepFunctions::StateMachine"}


def asl_validate(definition: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "definition.asl.json"
    path.write_text(definition)
    return subprocess.run([_tool(ASL_VALIDATOR), "--json-path", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture(scope="module", params=sorted(CONFIGURATIONS))
def synthesized(request: pytest.FixtureRequest, synth_cached: Synth) -> dict[str, Any]:
    template, _ = synth_cached(**CONFIGURATIONS[request.param])
    return dict(template.to_json())


def test_asl_validator_accepts_every_state_machine(synthesized: dict[str, Any], tmp_path: Path) -> None:
    definitions = state_machine_definitions(synthesized)
    for logical, definition in definitions.items():
        result = asl_validate(definition, tmp_path)
        assert result.returncode == 0, f"{logical}: {result.stdout}{result.stderr}"


def test_asl_validator_is_live(tmp_path: Path) -> None:
    broken = {"StartAt": "Missing", "States": {"Only": {"Type": "Succeed"}}}
    result = asl_validate(json.dumps(broken), tmp_path)
    assert result.returncode != 0


def test_cfn_lint_is_live(tmp_path: Path) -> None:
    broken = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": "soon"}}}}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    result = cfn_lint([tmp_path / "broken.json"])
    assert result.returncode != 0 and "E3012" in result.stdout, result.stdout


def test_cfn_lint_clean_on_every_synthesized_configuration(synth_cached: Synth, synthesized_templates: Path) -> None:
    for context in CONFIGURATIONS.values():  # the explicit list, plus whatever this session synthesized
        synth_cached(**context)
    templates = sorted(synthesized_templates.glob("*.template.json"))
    assert len(templates) >= len(CONFIGURATIONS)
    result = cfn_lint(templates)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
