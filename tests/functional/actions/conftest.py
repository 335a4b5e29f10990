"""Fixtures for the action-layer functional tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from actions_support import Stack, make_stack

from smx_debug.local import LocalAws

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # infra.assets: what the stack ships in each Lambda asset


@pytest.fixture
def stack(local_aws: LocalAws) -> Stack:
    return make_stack(local_aws)
