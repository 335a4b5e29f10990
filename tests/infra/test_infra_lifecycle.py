"""What `cdk destroy` leaves, from the template's deletion policies, equals docs/infra.md's table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers_infra import Synth

DOC = Path(__file__).resolve().parents[2] / "docs" / "infra.md"


def _documented() -> dict[str, str]:
    section = DOC.read_text().split("\n## What `cdk destroy` leaves", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    return {cells[0]: cells[1] for cells in ([c.strip() for c in r.strip("|").split("|")] for r in rows)}


def _name(logical: str, resource: dict[str, Any]) -> str | None:
    kind, props = resource["Type"], resource.get("Properties", {})
    if kind == "AWS::S3::Bucket":
        return "output bucket" if "LoggingConfiguration" in props else "access-log bucket"
    if kind == "AWS::DynamoDB::Table":
        return "ledger table" if logical.startswith("Ledger") else "evaluator cursor table"
    return {"AWS::KMS::Key": "KMS key", "AWS::SQS::Queue": "dead-letter queue", "AWS::SNS::Topic": "topics",
            "AWS::Logs::LogGroup": "log groups"}.get(kind)


def _fate(resource: dict[str, Any]) -> str:
    if resource.get("DeletionPolicy") == "Retain":
        return "kept"
    if resource["Type"] == "AWS::KMS::Key":
        return f"deleted after {resource['Properties']['PendingWindowInDays']} days"
    return "deleted"


@pytest.mark.parametrize("context", [{}, {"retraining": False, "evaluator": False}], ids=["defaults", "minimal"])
def test_destroy_leaves_what_the_doc_says(synth_cached: Synth, context: dict[str, Any]) -> None:
    template, _ = synth_cached(**context)
    documented = _documented()
    for logical, resource in template.to_json()["Resources"].items():
        name = _name(logical, resource)
        if name is None:
            assert resource.get("DeletionPolicy") != "Retain", f"{logical} is kept but not in the doc's table"
            continue
        assert documented[name] == _fate(resource), (logical, name)
