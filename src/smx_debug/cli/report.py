"""`smx-debug report` commands (placeholder until its issue lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> Any:
    """Add this command group to ``subparsers``."""
    return None
