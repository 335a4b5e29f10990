"""SDK v3 in the project's venv, which has v2: what can be checked without v3 itself.

The v3 objects are checked in v3's own side environment (tests/functional/plan/test_sdk_v3.py); here a fake stands
in for an installed v3 (``sagemaker.debugger`` gone, ``sagemaker.core.resources`` present), as v3 has them.
"""

from __future__ import annotations

import sys
import types
import warnings
from pathlib import Path

import pytest

from smx_debug import ConfigError, DebugPlan, SmxDebugWarning

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def sdk_v3(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SageMaker Python SDK v3 as an import sees it: no ``sagemaker.debugger``, a ``sagemaker.core``."""
    monkeypatch.setitem(sys.modules, "sagemaker.debugger", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "sagemaker.core.debugger", None)
    core = types.ModuleType("sagemaker.core")
    monkeypatch.setitem(sys.modules, "sagemaker.core", core)
    monkeypatch.setitem(sys.modules, "sagemaker.core.resources", types.ModuleType("sagemaker.core.resources"))


def _plan(**changes: object) -> DebugPlan:
    return DebugPlan(region="us-west-2", s3_output_path="s3://bucket/debug", **changes)  # type: ignore[arg-type]


def test_estimator_kwargs_under_sdk_v3_raises_naming_the_v3_methods(sdk_v3: None) -> None:
    with pytest.raises(ConfigError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", SmxDebugWarning)
        _plan(rules=[{"name": "exploding_tensor"}]).to_estimator_kwargs()
    message = str(info.value)
    assert "SDK v3" in message
    assert "to_model_trainer_kwargs" in message
    assert "to_training_job_kwargs" in message
    assert info.value.field == "sagemaker"
