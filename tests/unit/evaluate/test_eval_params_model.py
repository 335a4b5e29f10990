"""The built-in evaluators get their configuration's typed parameter model, validated once where the configuration
is built (never a dict re-cast on every batch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tensor_batches import batch, series

from smx_debug.errors import ConfigError
from smx_debug.evaluate import LiveEvaluator, configured_rule
from smx_debug.evaluate.registry import REGISTRY
from smx_debug.evaluate.tensor_eval import TENSOR_REGISTRY, TensorEvaluator
from smx_debug.rules.configured import ConfiguredRule


def test_configured_rule_str_number_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        ConfiguredRule(name="VG", rule="VanishingGradient", parameters={"threshold": "0.5"})
    assert (info.value.field, info.value.value) == ("VanishingGradient.threshold", "0.5")
    assert str(info.value) == "VanishingGradient.threshold: expected float, got str (got '0.5')"


def test_configured_rule_params_are_typed_and_keep_the_values_as_written() -> None:
    config = configured_rule("LowGPUUtilization", overrides={"threshold_p95": 90, "threshold_p5": 2.5})
    assert (config.params.threshold_p95, config.params.threshold_p5, config.params.window) == (90, 2.5, 500)
    assert type(config.params.threshold_p95) is int  # a float parameter written 90 is shown as 90, as before
    assert config.parameters == config.params.model_dump()


def test_live_evaluator_rule_gets_the_configured_model_on_every_update(frames: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    original = REGISTRY["CPUBottleneck"]

    def spy(data: Any, params: Any) -> Any:
        seen.append(params)
        return original(data, params)

    monkeypatch.setitem(REGISTRY, "CPUBottleneck", spy)
    config = configured_rule("CPUBottleneck", overrides={"threshold": 40})
    live = LiveEvaluator(rules=[config])
    system = frames.system(frames.series("algo-1", "cpu0", "CPUUtilization", np.full(120, 95.0),
                                         timestamps_s=np.arange(120.0)))
    for part in (system.iloc[:60], system.iloc[60:]):
        live.update(part)
    assert len(seen) == 2 and all(p is live.configs["CPUBottleneck"].params for p in seen)
    assert seen[0].threshold == 40 and seen[0].patience == 1000


def test_tensor_evaluator_rule_gets_the_configured_model_on_every_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = TENSOR_REGISTRY["VanishingGradient"]
    seen: list[Any] = []
    original = type(rule).update

    def spy(self: Any, state: Any, b: Any, params: Any, selection: Any) -> None:
        seen.append(params)
        original(self, state, b, params, selection)

    monkeypatch.setattr(type(rule), "update", spy)
    config = configured_rule("VanishingGradient", overrides={"threshold": 0.01})
    ev = TensorEvaluator(None, [config])
    for step in (0, 1):
        ev.update(batch(series("gradient/w", [np.full(3, 1e-3)], [step])))
    assert len(seen) == 2 and all(p is ev.configs[0].params for p in seen)
    result = ev.results()["VanishingGradient"]
    assert (result.rule_triggered, result.parameters) == (2, {"threshold": 0.01})


def test_configured_rule_none_for_a_parameter_with_a_default_is_refused_naming_it() -> None:
    # the command line's --set VanishingGradient.threshold=none: the evaluator used to fail on float(None)
    with pytest.raises(ConfigError) as info:
        configured_rule("VanishingGradient", overrides={"threshold": None})
    assert str(info.value) == "VanishingGradient.threshold: expected float, got NoneType (got None)"
    assert configured_rule("WeightUpdateRatio", overrides={"num_steps": None}).params.num_steps is None
