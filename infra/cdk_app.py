"""The smx-debug CDK app: ``npx cdk synth`` (via cdk.json) or ``python infra/cdk_app.py``.

Reads the configuration from CDK context, validates it, and instantiates the guard stack. Needs no AWS
credentials and does no lookups: the stack is environment-agnostic unless CDK_DEFAULT_ACCOUNT/REGION
are set (as ``cdk deploy`` does). ``-c local=true`` synthesizes for the embedded local AWS (no bootstrap).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, sys.path[0] is infra/ (whose module names could shadow packages); use the repo root.
if sys.path and Path(sys.path[0] or ".").resolve() == ROOT / "infra":
    sys.path[0] = str(ROOT)
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# The Node 20 end-of-life banner jsii prints on every synth (20 lines on stderr, as the Makefile already silences
# it): the project pins Node 20 in its setup. A value you set yourself (a comma-separated list of majors) wins.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.config import GuardConfig, config_from_context  # noqa: E402
from infra.stacks import GuardStack  # noqa: E402
from smx_debug.errors import SmxDebugError  # noqa: E402

# Where `deploy_stack` uploads file assets for the local AWS (context local=true).
LOCAL_ASSETS_BUCKET = "smx-debug-local-assets-${AWS::AccountId}-${AWS::Region}"


def build_app(context: dict[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True) -> cdk.App:
    """The app with its stack; raises ConfigError/UnknownNameError for bad context.

    ``context`` overrides cdk.json's context (which the CDK CLI passes itself; run directly or from tests,
    we read it here so feature flags and defaults are the same).
    """
    base = {} if os.environ.get("CDK_CONTEXT_JSON") else cdk_json_context()
    app = cdk.App(context={**base, **(context or {})}, outdir=outdir)
    config = config_from_context(app.node.get_all_context())
    build_stack(app, config)
    if nag:
        # Acknowledgements also go into each resource's Metadata (cdk_nag.rules_to_suppress): an audit trail.
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
    return app


def cdk_json_context() -> dict[str, Any]:
    """The ``context`` object of the repository's cdk.json."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    return context


def build_stack(app: cdk.App, config: GuardConfig) -> GuardStack:
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    env = cdk.Environment(account=account, region=region) if account and region else None
    synthesizer: cdk.IStackSynthesizer | None = None
    if config.local:
        synthesizer = cdk.DefaultStackSynthesizer(
            generate_bootstrap_version_rule=False, file_assets_bucket_name=LOCAL_ASSETS_BUCKET
        )
    return GuardStack(app, config.stack_name, config=config, env=env, synthesizer=synthesizer)


def main() -> int:
    # Run directly (not by the CDK CLI, which sets CDK_OUTDIR), write where `cdk synth` would.
    outdir = None if os.environ.get("CDK_OUTDIR") else str(ROOT / "cdk.out")
    try:
        app = build_app(outdir=outdir)
    except SmxDebugError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
