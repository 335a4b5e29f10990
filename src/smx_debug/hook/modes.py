"""The modes a step belongs to, numbered as Debugger's tensor files store them (``smd.modes``)."""

from __future__ import annotations

from enum import Enum

__all__ = ["ModeKeys"]


class ModeKeys(Enum):
    """TRAIN, EVAL, PREDICT or GLOBAL; the values are the ``mode`` plugin entry of each saved tensor."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4
