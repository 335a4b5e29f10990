"""The demo's tensor job without torch: one line saying how to add it, and nothing launched."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from smx_debug.local import LocalAws

ROOT = Path(__file__).resolve().parents[3]


def test_demo_tensor_job_without_torch_says_how_to_add_it(local_aws: LocalAws,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("example_demo_tensors", ROOT / "examples" / "demo_tensors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    lines: list[str] = []
    code = module.tensor_job(local_aws, "no-bucket", job="smx-demo-cnn-x", say=lambda *parts: lines.append(" ".join(parts)))
    assert code == 0
    assert lines == ["tensors tensor job skipped: torch is not installed (pip install 'smx-debug[torch]')"]
    assert local_aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
