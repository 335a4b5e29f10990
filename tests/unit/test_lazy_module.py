"""smx_debug._lazy.lazy_module: a heavy third-party import declared at a module's top, run on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from smx_debug._lazy import lazy_module


def test_lazy_module_numpy_runs_only_on_first_attribute_access() -> None:
    code = (
        "import sys\n"
        "from smx_debug._lazy import lazy_module\n"
        "np = lazy_module('numpy')\n"
        "before = 'numpy._core' in sys.modules or 'numpy.core' in sys.modules\n"
        "total = int(np.asarray([1, 2, 3]).sum())\n"
        "after = 'numpy._core' in sys.modules or 'numpy.core' in sys.modules\n"
        "import numpy\n"
        "print(before, total, after, numpy is np)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "6", "True", "True"]


def test_lazy_module_of_smx_debug_refused() -> None:
    with pytest.raises(ValueError, match=r"smx_debug\.tensors"):
        lazy_module("smx_debug.tensors")


def test_lazy_module_missing_module_raises_module_not_found() -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_module_xyz"):
        lazy_module("no_such_module_xyz")


def test_lazy_module_not_yet_used_is_not_imported_and_used_is() -> None:
    code = (
        "from smx_debug._lazy import imported, lazy_module\n"
        "np = lazy_module('numpy')\n"
        "before = imported('numpy')\n"
        "np.zeros(1)\n"
        "print(before, imported('numpy'), imported('no_such_module_xyz'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "False"]
