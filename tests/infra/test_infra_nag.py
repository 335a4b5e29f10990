"""cdk-nag AwsSolutionsChecks on the whole app: zero unacknowledged findings, every acknowledgement reasoned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from infra.cdk_app import build_app
from infra.stacks import GuardStack

FULL = {
    "watch_prefixes": ["exp-", "prod-"],
    "notification_emails": ["ml@example.com"],
    "notification_sms": ["+15555550123"],
    "alarm_rules": ["VanishingGradient", "LossNotDecreasing"],
    "default_actions": ["notify", "stop"],
}


# The only rules we acknowledge (each finding separately, with its reason): see docs/infra.md.
ACKNOWLEDGED_RULES = {"AwsSolutions-IAM5"}


@pytest.mark.parametrize("context", [{}, FULL, {"opt_in_tag": False, "watch_prefixes": "exp-",
                                                "retraining": False}], ids=["defaults", "full", "minimal"])
def test_nag_aws_solutions_no_unacknowledged_findings(tmp_path: Path, context: dict[str, Any]) -> None:
    app = build_app(context, outdir=str(tmp_path))
    app.synth()  # raises ValidationFailed on any unacknowledged finding
    stack = next(c for c in app.node.children if isinstance(c, GuardStack))
    template = json.loads((tmp_path / stack.template_file).read_text())
    acknowledged = [
        rule
        for resource in template["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert acknowledged
    assert {rule["id"].split("[")[0] for rule in acknowledged} <= ACKNOWLEDGED_RULES
    for rule in acknowledged:
        assert len(rule["reason"]) > 20, rule


def test_nag_finds_an_unacknowledged_violation(tmp_path: Path) -> None:
    """The check is live: a bucket without access logs or TLS enforcement fails synthesis."""
    app = build_app({}, outdir=str(tmp_path))
    stack = next(c for c in app.node.children if isinstance(c, GuardStack))
    s3.Bucket(stack, "Careless")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    violations = {
        (v["ruleName"], c["constructPath"])
        for r in report["pluginReports"] for v in r["violations"] for c in v["violatingConstructs"]
    }
    assert violations == {("AwsSolutions-S1", "SmxDebugGuard/Careless/Resource"),
                          ("AwsSolutions-S10", "SmxDebugGuard/Careless/Resource")}


class _NoAcknowledgements:
    """A Validations view whose acknowledge does nothing (everything else passes through)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def acknowledge(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.mark.parametrize("context", [{}, FULL, {"opt_in_tag": False, "watch_prefixes": "exp-",
                                                "retraining": False}], ids=["defaults", "full", "minimal"])
def test_no_stale_acknowledgement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: dict[str, Any]) -> None:
    """Every acknowledgement answers a finding cdk-nag reports when nothing is acknowledged."""
    acked_dir, bare_dir = tmp_path / "acked", tmp_path / "bare"
    app = build_app(context, outdir=str(acked_dir))
    app.synth()
    stack = next(c for c in app.node.children if isinstance(c, GuardStack))
    template = json.loads((acked_dir / stack.template_file).read_text())
    paths = {stack.get_logical_id(c): c.node.path for c in stack.node.find_all() if isinstance(c, cdk.CfnElement)}
    acknowledged = {
        (rule["id"], "/".join(paths[logical].split("/")[:2]))
        for logical, resource in template["Resources"].items()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    }
    real_of = cdk.Validations.of
    monkeypatch.setattr(cdk.Validations, "of", staticmethod(lambda scope: _NoAcknowledgements(real_of(scope))))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        build_app(context, outdir=str(bare_dir)).synth()
    report = json.loads((bare_dir / "validation-report.json").read_text())
    found = {
        (v["ruleName"], "/".join(c["constructPath"].split("/")[:2]))
        for r in report["pluginReports"] for v in r["violations"] for c in v["violatingConstructs"]
    }
    assert acknowledged - found == set()
    assert found - acknowledged == set()  # and, acknowledged, nothing is left (as the first test shows)
