"""Reductions: how smdebug names a saved reduction of a tensor, and the reductions themselves in numpy.

A hook that saves a reduction instead of (or beside) a tensor writes it as a tensor of its own named
``smdebug/reductions/[abs_]<reduction>/<name>``, with any ``:<digits>`` removed from the name, as smdebug 1.0.34's
``get_reduction_tensor_name`` does (``remove_colon_index=True``, what its PyTorch and MXNet hooks use).
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

import numpy as np

from smx_debug.errors import ConfigError

REDUCTIONS_PREFIX: Final = "smdebug/reductions/"
# smdebug's ALLOWED_REDUCTIONS and ALLOWED_NORMS, in its order.
REDUCTIONS: Final = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORMS: Final = ("l1", "l2")
_COLON_INDEX = re.compile(r":\d+")


class ReductionName(NamedTuple):
    """What a reduction tensor's name says: the tensor it reduces, the reduction and whether of ``abs``."""

    tensor: str
    reduction: str
    abs: bool


def _check(reduction: str) -> str:
    if reduction not in REDUCTIONS and reduction not in NORMS:
        raise ConfigError(
            f"reduction must be one of {', '.join(REDUCTIONS + NORMS)}, got {reduction!r}",
            field="reduction", value=reduction,
        )
    return reduction


def reduction_tensor_name(name: str, reduction: str, *, abs: bool = False) -> str:
    """The name a reduction of tensor ``name`` is saved under.

    >>> reduction_tensor_name("fc1.weight:0", "l2", abs=False)
    'smdebug/reductions/l2/fc1.weight'
    """
    body = _COLON_INDEX.sub("", f"{_check(reduction)}/{name}")
    return REDUCTIONS_PREFIX + ("abs_" + body if abs else body)


def parse_reduction_name(name: str) -> ReductionName | None:
    """The parts of a reduction tensor's name, or ``None`` when ``name`` is not one (or names no known reduction)."""
    if not name.startswith(REDUCTIONS_PREFIX):
        return None
    reduction, sep, tensor = name[len(REDUCTIONS_PREFIX):].partition("/")
    if not sep or not tensor:
        return None
    is_abs = reduction.startswith("abs_")
    if is_abs:
        reduction = reduction[4:]
    if reduction not in REDUCTIONS and reduction not in NORMS:
        return None
    return ReductionName(tensor, reduction, is_abs)


def compute_reduction(value: np.ndarray, reduction: str, *, abs: bool = False) -> np.ndarray:
    """One reduction of ``value``: smdebug's numpy definitions (``variance`` and ``std`` with ddof=0), except that
    norms are always the vector norm of all elements - what smdebug's hooks save (``torch.norm(t, p)``) - where
    smdebug's reader, given a 2-D value, takes the matrix norm (and fails above 2-D).

    Raises:
        ConfigError: for a reduction smdebug does not define.
    """
    _check(reduction)
    data = np.absolute(value) if abs else np.asarray(value)
    if reduction in NORMS:
        return np.asarray(np.linalg.norm(np.ravel(data), ord=1 if reduction == "l1" else 2))
    fns: dict[str, Any] = {"min": np.amin, "max": np.amax, "mean": np.mean, "std": np.std, "variance": np.var,
                           "sum": np.sum, "prod": np.prod}
    return np.asarray(fns[reduction](data))
