"""Fixtures for the action-layer functional tests."""

from __future__ import annotations

import pytest
from actions_support import Stack, make_stack

from smx_debug.local import LocalAws


@pytest.fixture
def stack(local_aws: LocalAws) -> Stack:
    return make_stack(local_aws)
