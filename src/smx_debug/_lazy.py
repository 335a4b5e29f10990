"""Lazy package attributes: a package's ``__getattr__`` that imports a name's module on first use.

The packages load their heavy names lazily so that a Lambda, a training script or a plan imports only what it
uses (pandas, PyYAML, DuckDB, the reader stay out until asked for).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


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


def lazy_module(name: str) -> ModuleType:
    """A third-party module imported on its first attribute access (stdlib :class:`importlib.util.LazyLoader`).

    For the heavy libraries (numpy, pandas, pyarrow, DuckDB, boto3, PyYAML) a light module needs in a few
    functions: the dependency is declared once at the module's top, where a reader and the import graph see it,
    and costs nothing until used. Write ``if TYPE_CHECKING: import numpy as np`` / ``else: np = lazy_module("numpy")``
    so the type checker keeps the types. Not for smx_debug's own modules: their order is the layering's business,
    and an import hidden behind a proxy would hide an edge of the import graph. A module already imported is
    returned as it is."""
    if name.startswith("smx_debug"):
        raise ValueError(f"lazy_module is for third-party modules, not {name!r}")
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def imported(name: str) -> bool:
    """Whether module ``name`` has run: it is in ``sys.modules`` and is not a :func:`lazy_module` still waiting for
    its first use (the check of the tests that keep heavy libraries out of light paths)."""
    module = sys.modules.get(name)
    return module is not None and type(module).__name__ != "_LazyModule"
