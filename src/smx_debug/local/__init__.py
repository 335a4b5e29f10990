"""The embedded local AWS used by the tests, the examples and ``make demo``."""

from __future__ import annotations

from smx_debug.local.deploy import DeployedStack, EmulatedResource, deploy_stack, publish_assets
from smx_debug.local.server import DEFAULT_REGION, LOCAL_ACCOUNT_ID, LocalAws

__all__ = [
    "DEFAULT_REGION",
    "LOCAL_ACCOUNT_ID",
    "DeployedStack",
    "EmulatedResource",
    "LocalAws",
    "deploy_stack",
    "publish_assets",
]
