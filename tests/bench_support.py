"""A benchmark of bench/ as a module, for the tests that run a small version of it (bench/ is not a package:
a benchmark runs as a script)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def bench_module(name: str) -> ModuleType:
    """bench/<name>.py, loaded once and kept in ``sys.modules`` as ``name`` (dataclasses resolve annotations
    through sys.modules while the file executes)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
