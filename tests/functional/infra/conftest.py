"""The guard stack synthesized once per session (for the local AWS: ``local=true``), reused by the tests, and
deployed in each test's local AWS (``deployed``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from smx_debug import local
from smx_debug.local import DeployedStack, LocalAws, deploy_stack

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STACK = "SmxDebugGuard"
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


@pytest.fixture
def deployed(local_aws: LocalAws, synthesized: Path) -> DeployedStack:
    """The guard stack deployed in the test's local AWS, with what the local AWS enforces installed (bucket policies
    with their conditions, the TLS-only deny) before the first put. Tests that deploy otherwise define their own."""
    stack = deploy_stack(local_aws, synthesized / f"{STACK}.template.json", stack_name=STACK)
    local.install(local_aws)
    return stack
