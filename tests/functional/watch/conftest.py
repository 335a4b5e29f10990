"""Fixtures for the evaluator's functional tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from watch_support import make_table

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the `infra` package (the evaluator's asset builder)

from smx_debug.local import LocalAws  # noqa: E402


@pytest.fixture
def aws(local_aws: LocalAws) -> LocalAws:
    """The local AWS with the cursor table and the stack's bucket."""
    make_table(local_aws)
    return local_aws
