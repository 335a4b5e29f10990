"""CDK fixtures: a fresh app and stack per test, synthesized from cdk.json's context plus overrides."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from aws_cdk.assertions import Template  # noqa: E402
from helpers_infra import Synth  # noqa: E402

from infra.cdk_app import build_app  # noqa: E402
from infra.stacks import GuardStack  # noqa: E402


@pytest.fixture(scope="session")
def synthesized_templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where every template a test synthesizes is recorded, for cfn-lint (test_infra_validators)."""
    return tmp_path_factory.mktemp("synthesized-templates")


def _record(directory: Path, context: dict[str, Any], template: Template) -> None:
    digest = hashlib.sha256(json.dumps(context, sort_keys=True, default=str).encode()).hexdigest()[:16]
    (directory / f"{digest}.template.json").write_text(json.dumps(template.to_json(), indent=1))


@pytest.fixture
def synth(tmp_path: Path, synthesized_templates: Path) -> Synth:
    """``synth(**context)`` -> (Template, stack) of a new app; cdk-nag is off here (see test_infra_nag)."""

    def make(**context: Any) -> tuple[Template, GuardStack]:
        app = build_app(context, outdir=str(tmp_path / "cdk.out"), nag=False)
        stack = next(child for child in app.node.children if isinstance(child, GuardStack))
        template = Template.from_stack(stack)
        _record(synthesized_templates, context, template)
        return template, stack

    return make


_CACHE: dict[str, tuple[Template, GuardStack]] = {}


@pytest.fixture(scope="session")
def synth_cached(tmp_path_factory: pytest.TempPathFactory, synthesized_templates: Path) -> Synth:
    """Like ``synth`` but one synthesis per distinct context for the whole session (do not mutate the stack)."""

    def make(**context: Any) -> tuple[Template, GuardStack]:
        key = json.dumps(context, sort_keys=True)
        if key not in _CACHE:
            outdir = tmp_path_factory.mktemp("cdk.out")
            app = build_app(context, outdir=str(outdir), nag=False)
            stack = next(child for child in app.node.children if isinstance(child, GuardStack))
            _CACHE[key] = (Template.from_stack(stack), stack)
            _record(synthesized_templates, context, _CACHE[key][0])
        return _CACHE[key]

    return make
