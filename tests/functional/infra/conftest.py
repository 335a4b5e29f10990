"""The guard stack synthesized once per session (for the local AWS: ``local=true``), reused by the tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The configuration the deploy tests use; the end-to-end test relies on the prefix and the stop action.
DEPLOY_CONTEXT = {
    "watch_prefixes": ["guarded-"],
    "default_actions": ["notify", "stop"],
    "alarm_rules": ["VanishingGradient", "LossNotDecreasing"],
    "notification_emails": ["ml@example.com"],
    "local": True,
}


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly directory; the template is ``SmxDebugGuard.template.json`` in it."""
    from infra.cdk_app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    # cdk-nag runs in tests/infra; here only the template matters.
    build_app(dict(DEPLOY_CONTEXT), outdir=str(outdir), nag=False).synth()
    return outdir
