"""Lazy package attributes: a package's ``__getattr__`` that imports a name's module on first use.

The packages load their heavy names lazily so that a Lambda, a training script or a plan imports only what it
uses (pandas, PyYAML, DuckDB, the reader stay out until asked for).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` for ``package``: ``modules[name]`` is the module that defines ``name``. The value is
    cached on the package, so each name is imported once."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
