"""torch stays an optional extra: nothing outside smx_debug.hook (and the framework integrations built on it,
smx_debug.integrations, which run inside a framework that has torch) imports it, and the hook says how to add it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "smx_debug"


def test_only_smx_debug_hook_imports_torch() -> None:
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "hook") or path.is_relative_to(SRC / "integrations"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "torch" or n.startswith("torch.") for n in names):
                offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_hook_import_without_torch_names_the_extra() -> None:
    code = "import sys; sys.modules['torch'] = None; import smx_debug.hook"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "smx_debug.hook needs PyTorch: pip install 'smx-debug[torch]'" in result.stderr


def test_tensors_and_local_training_run_import_without_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None; import smx_debug.tensors, smx_debug.local.sagemaker.training_run; "
            "print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "ok", result.stderr
