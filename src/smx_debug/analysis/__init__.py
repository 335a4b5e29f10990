"""Analyses of loaded data: GPU dips and their causes, the training loop, step statistics, trace export.
Its face for people is :mod:`smx_debug.reports`; nothing is exported here.
"""

from __future__ import annotations

__all__: list[str] = []
