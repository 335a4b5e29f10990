"""CDK fixtures: a fresh app and stack per test, synthesized from cdk.json's context plus overrides."""

from __future__ import annotations

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


@pytest.fixture
def synth(tmp_path: Path) -> Synth:
    """``synth(**context)`` -> (Template, stack) of a new app; cdk-nag is off here (see test_infra_nag)."""

    def make(**context: Any) -> tuple[Template, GuardStack]:
        app = build_app(context, outdir=str(tmp_path / "cdk.out"), nag=False)
        stack = next(child for child in app.node.children if isinstance(child, GuardStack))
        return Template.from_stack(stack), stack

    return make


_CACHE: dict[str, tuple[Template, GuardStack]] = {}


@pytest.fixture(scope="session")
def synth_cached(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Like ``synth`` but one synthesis per distinct context for the whole session (do not mutate the stack)."""

    def make(**context: Any) -> tuple[Template, GuardStack]:
        key = json.dumps(context, sort_keys=True)
        if key not in _CACHE:
            outdir = tmp_path_factory.mktemp("cdk.out")
            app = build_app(context, outdir=str(outdir), nag=False)
            stack = next(child for child in app.node.children if isinstance(child, GuardStack))
            _CACHE[key] = (Template.from_stack(stack), stack)
        return _CACHE[key]

    return make
