"""Fixtures for the evaluator's functional tests."""

from __future__ import annotations

import pytest
from watch_support import make_table

from smx_debug.local import LocalAws


@pytest.fixture
def aws(local_aws: LocalAws) -> LocalAws:
    """The local AWS with the cursor table and the stack's bucket."""
    make_table(local_aws)
    return local_aws
