"""smx-debug's own rules of the recommended profile, on batches built by hand: each fires on the fault its module
names and stays quiet on the healthy case its Debugger counterpart gets wrong (issue 30)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from smx_debug.evaluate import configured_rule
from smx_debug.evaluate.result import RuleResult
from smx_debug.evaluate.tensor_data import TensorBatch
from smx_debug.evaluate.tensor_eval import TENSOR_REGISTRY
from smx_debug.rules.registry import find, rule_defs
from smx_debug.tensors.arrays import TensorValues

OWN = ("SmxAllZero", "SmxClassImbalance", "SmxDeadReluShare", "SmxLossPlateau", "SmxOverfitMeans", "SmxSaturatedShare",
       "SmxStalledWeights", "SmxVanishingWeightGradient", "SmxWeightGrowth", "SmxWeightScale")


def batch(steps: Mapping[int, Mapping[str, Any]], collections: Mapping[str, Sequence[str]] | None = None, *,
          mode: str = "TRAIN") -> TensorBatch:
    """A batch holding ``{step: {tensor: value}}``; ``collections``: collection -> its tensor names."""
    names = sorted({n for tensors in steps.values() for n in tensors})
    arrays = {}
    for name in names:
        at = [s for s in sorted(steps) if name in steps[s]]
        arrays[name] = TensorValues.of(name, at, [mode] * len(at), at, [""] * len(at),
                                       [np.asarray(steps[s][name]) for s in at])
    preds = {c: (lambda members: lambda n: n in members)(set(m)) for c, m in (collections or {}).items()}
    return TensorBatch(arrays=arrays, names=tuple(names), collections=preds)


def judge(rule: str, batches: Sequence[TensorBatch], **overrides: Any) -> RuleResult:
    config = configured_rule(rule, overrides=overrides or None)
    impl = TENSOR_REGISTRY[rule]
    state = impl.start(config.params)
    for b in batches:
        impl.update(state, b, config.params, impl.select(config.params, b.names, b.collections))
    return impl.result(state, config.params)


WEIGHTS = {"weights": ["fc.weight"], "gradients": ["gradient/fc.weight", "gradient/fc.bias"],
           "labels": ["labels"], "predictions": ["predictions"]}


def test_own_rules_are_registered_as_family_smx() -> None:
    assert {d.name for d in rule_defs(family="smx")} >= set(OWN)
    for name in OWN:
        rule = find(name)
        assert rule is not None and rule.evaluates_on == ("tensors",), name


def test_weight_growth_finite_growth_fires_at_the_step_it_grew() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 8)) * 0.1
    got = judge("SmxWeightGrowth", [batch({0: {"fc.weight": w}, 500: {"fc.weight": w * 1.2},
                                           1000: {"fc.weight": w * 1.2 * 50}}, WEIGHTS)])
    assert (got.triggered, got.trigger_step) == (True, 1000)
    assert "grew 50x" in got.message


def test_weight_growth_healthy_growth_stays_quiet() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 8)) * 0.1
    got = judge("SmxWeightGrowth", [batch({s: {"fc.weight": w * (1 + s / 1000)} for s in (0, 500, 1000, 1500)},
                                          WEIGHTS)])
    assert not got.triggered and got.datapoints == 3


def test_weight_growth_nan_gradient_fires() -> None:
    got = judge("SmxWeightGrowth", [batch({0: {"gradient/fc.weight": np.ones((2, 2))},
                                           500: {"gradient/fc.weight": np.array([[np.nan, 1.0], [1.0, 1.0]])}},
                                          WEIGHTS)])
    assert (got.triggered, got.trigger_step) == (True, 500)


def test_weight_growth_keeps_the_last_norm_across_batches() -> None:
    w = np.full((4, 4), 0.1)
    got = judge("SmxWeightGrowth", [batch({0: {"fc.weight": w}}, WEIGHTS), batch({500: {"fc.weight": w * 50}},
                                                                                 WEIGHTS)])
    assert (got.triggered, got.trigger_step) == (True, 500)


def test_vanishing_weight_gradient_zero_bias_gradient_stays_quiet() -> None:
    # a Linear bias followed by BatchNorm: zero gradient by construction; VanishingGradient fires on it
    steps = {s: {"gradient/fc.bias": np.zeros(8), "gradient/fc.weight": np.full((8, 8), 1e-3)} for s in (0, 500)}
    assert judge("VanishingGradient", [batch(steps, WEIGHTS)]).triggered
    got = judge("SmxVanishingWeightGradient", [batch(steps, WEIGHTS)])
    assert not got.triggered and got.datapoints == 2


def test_vanishing_weight_gradient_tiny_weight_gradient_fires() -> None:
    got = judge("SmxVanishingWeightGradient", [batch({0: {"gradient/fc.weight": np.full((8, 8), 1e-12)}}, WEIGHTS)])
    assert got.triggered


def test_saturated_share_seventy_percent_beyond_range_fires_where_debuggers_rule_does_not() -> None:
    # 70% of the inputs beyond +-9.5, but every unit in range for some samples (issue 30's measured case)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(256, 32))
    x = np.where(rng.random((256, 32)) < 0.7, np.sign(x) * 12.0, x * 0.5)
    b = [batch({0: {"1_tanh_input_0": x}})]
    assert not judge("SaturatedActivation", b).triggered
    assert judge("SmxSaturatedShare", b).triggered


def test_saturated_share_healthy_tanh_inputs_stay_quiet() -> None:
    x = np.random.default_rng(2).normal(size=(256, 32)) * 1.5
    got = judge("SmxSaturatedShare", [batch({0: {"1_tanh_input_0": x}})])
    assert not got.triggered and got.datapoints == 1


def test_dead_relu_share_dead_layer_fires_and_half_zero_layer_stays_quiet() -> None:
    x = np.random.default_rng(3).normal(size=(128, 64))
    assert judge("SmxDeadReluShare", [batch({0: {"1_relu_output_0": np.zeros((128, 64))}})]).triggered
    healthy = judge("SmxDeadReluShare", [batch({0: {"1_relu_output_0": np.maximum(x, 0)}})])
    assert not healthy.triggered and healthy.datapoints == 1


def test_stalled_weights_frozen_weight_fires_at_the_second_equal_save() -> None:
    w = np.random.default_rng(4).normal(size=(8, 8))
    got = judge("SmxStalledWeights", [batch({0: {"fc.weight": w}, 500: {"fc.weight": w + 0.01},
                                             1000: {"fc.weight": w + 0.01}}, WEIGHTS)])
    assert (got.triggered, got.trigger_step) == (True, 1000)


def test_stalled_weights_frozen_from_the_first_save_is_not_judged() -> None:
    # a fine-tuned model's backbone, frozen on purpose from step 0, beside a head that learns
    rng = np.random.default_rng(8)
    backbone, head = rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    steps = {s: {"backbone.weight": backbone, "head.weight": head + s * 1e-3} for s in (0, 500, 1000, 1500)}
    got = judge("SmxStalledWeights", [batch(steps, {"weights": ["backbone.weight", "head.weight"]})])
    assert not got.triggered and got.datapoints == 3  # the head's three changes; the backbone is never judged


def test_stalled_weights_training_weights_and_eval_records_stay_quiet() -> None:
    w = np.random.default_rng(5).normal(size=(8, 8))
    train = judge("SmxStalledWeights", [batch({s: {"fc.weight": w + s * 1e-4} for s in (0, 500, 1000)}, WEIGHTS)])
    assert not train.triggered and train.datapoints == 2
    evaluated = judge("SmxStalledWeights", [batch({s: {"fc.weight": w} for s in (0, 500)}, WEIGHTS, mode="EVAL")])
    assert evaluated.datapoints == 0  # nothing learns in EVAL


def test_all_zero_skips_predictions_labels_and_bias_gradients() -> None:
    steps = {0: {"predictions": np.zeros(64, np.int64), "labels": np.zeros(64, np.int64),
                 "gradient/fc.bias": np.zeros(8), "gradient/fc.weight": np.ones((8, 8)), "fc.weight": np.ones((8, 8))}}
    coll = {**WEIGHTS}
    assert judge("AllZero", [batch(steps, coll)]).triggered  # Debugger's: the untrained model's predictions
    got = judge("SmxAllZero", [batch(steps, coll)])
    assert not got.triggered and got.datapoints == 2


def test_all_zero_zero_weight_gradient_fires() -> None:
    got = judge("SmxAllZero", [batch({0: {"gradient/fc.weight": np.zeros((8, 8))}}, WEIGHTS)])
    assert got.triggered


@pytest.mark.parametrize("name", ["model.emb.weight", "EmbBag_0.emb.weight", "transformer.wte.weight",
                                  "encoder.embed_tokens.weight"])
def test_weight_scale_embedding_tables_at_their_n01_default_stay_quiet(name: str) -> None:
    # nn.Embedding and nn.EmbeddingBag start N(0, 1): a lookup table, not a matrix applied to a fan-in
    table = np.random.default_rng(9).normal(size=(200, 16))
    got = judge("SmxWeightScale", [batch({0: {name: table}}, {"weights": [name]})])
    assert not got.triggered


def test_weight_scale_normal_one_init_fires_and_default_init_stays_quiet() -> None:
    rng = np.random.default_rng(6)
    assert judge("SmxWeightScale", [batch({0: {"fc.weight": rng.normal(size=(64, 64))}}, WEIGHTS)]).triggered
    bound = 1 / np.sqrt(64)  # PyTorch's Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (x sqrt(1/3) ... scale 0.58)
    got = judge("SmxWeightScale", [batch({0: {"fc.weight": rng.uniform(-bound, bound, size=(64, 64))}}, WEIGHTS)])
    assert not got.triggered and got.datapoints == 1


def _means(train: Sequence[float], val: Sequence[float] | None = None) -> list[TensorBatch]:
    steps: dict[int, dict[str, Any]] = {}
    for k, v in enumerate(train):
        steps.setdefault(1000 * (k + 1), {})["scalar/train_loss_mean"] = np.float32(v)
    for k, v in enumerate(val or ()):
        steps.setdefault(1000 * (k + 1), {})["scalar/val_loss_mean"] = np.float32(v)
    return [batch({s: t}) for s, t in sorted(steps.items())]


def test_loss_plateau_abrupt_stop_fires_and_falling_means_stay_quiet() -> None:
    # saved every 1000 steps: windows of 500 steps are one interval each
    flat = judge("SmxLossPlateau", _means([1.0, 0.8, 0.7, 0.7, 0.7]))
    assert (flat.triggered, flat.trigger_step) == (True, 4000)
    falling = judge("SmxLossPlateau", _means([1.0, 0.8, 0.7, 0.65, 0.62]))
    assert not falling.triggered and falling.datapoints == 3


def test_loss_plateau_converged_run_tapering_to_a_floor_stays_quiet() -> None:
    # a run converging: each interval's decrease a third of the one before, then flat with noise at its floor
    # (the old definition, "fell by less than 0.5% over 2 intervals", fired here: 3 of 7 converged healthy runs)
    floor = [0.1 + 0.9 * (1 / 3) ** k for k in range(8)] + [0.1003, 0.0998, 0.1002, 0.1001]
    got = judge("SmxLossPlateau", _means(floor))
    assert not got.triggered


def test_loss_plateau_window_steps_average_intervals_against_noise() -> None:
    # saved every 100 steps: a window of 500 steps averages 5 intervals; alternating noise of +-3% cancels
    means = [1.0 - 0.02 * k + (0.03 if k % 2 else -0.03) for k in range(30)]
    got = judge("SmxLossPlateau", [batch({100 * (k + 1): {"scalar/train_loss_mean": np.float32(v)}})
                                   for k, v in enumerate(means)])
    assert not got.triggered and got.datapoints > 0


def test_overfit_means_rising_validation_fires_after_patience_passes() -> None:
    rising = judge("SmxOverfitMeans", _means([0.5, 0.3, 0.2, 0.1], [1.0, 0.6, 0.7, 0.72]))
    assert (rising.triggered, rising.trigger_step) == (True, 4000)
    once = judge("SmxOverfitMeans", _means([0.5, 0.3, 0.2, 0.1], [1.0, 0.6, 0.7, 0.61]))
    assert not once.triggered  # one pass over the rise is noise (patience 2)


def test_overfit_means_gap_without_a_rise_stays_quiet() -> None:
    # a model that generalises: its training loss tends to zero, its validation loss stays at its best
    # (the old gap-ratio definition fired here: 4 of 7 healthy runs of the independent check)
    got = judge("SmxOverfitMeans", _means([0.5, 0.2, 0.05, 0.01], [0.62, 0.6, 0.61, 0.6]))
    assert not got.triggered and got.datapoints == 3


@pytest.mark.parametrize("rule", OWN)
def test_own_rule_without_data_says_so(rule: str) -> None:
    got = judge(rule, [batch({0: {"unrelated": np.ones(3)}})])
    assert not got.triggered and got.datapoints == 0


def test_stalled_weights_snapshot_keeps_no_samples_and_restores_the_verdict(tmp_path: Any) -> None:
    from smx_debug.evaluate.tensor_eval import TensorEvaluator
    from smx_debug.evaluate.tensor_state import load
    from smx_debug.tensors import Collection, TrialWriter, create_trial

    rng = np.random.default_rng(7)
    weights = [rng.normal(size=(64, 64)).astype(np.float32) for _ in range(40)]
    trial = tmp_path / "trial"
    with TrialWriter(str(trial)) as writer:
        writer.write_collections([Collection(name="weights", tensor_names=tuple(f"l{i}.weight" for i in range(40)))])
        for step, delta in ((0, 0.0), (500, 0.05), (1000, 0.05)):  # frozen from step 500 on
            writer.write_step(step, mode="TRAIN", tensors={f"l{i}.weight": w + np.float32(delta)
                                                           for i, w in enumerate(weights)})
        writer.training_end()
    first = TensorEvaluator(create_trial(str(trial)), ["SmxStalledWeights"])
    first.refresh(until=501)
    blob = first.snapshot(budget=256 * 1024)
    snap = load(blob)
    assert snap.states["SmxStalledWeights"].last == {} and len(snap.history) == 40  # samples read again, not kept
    assert len(blob) < 16 * 1024
    again = TensorEvaluator.restore(create_trial(str(trial)), ["SmxStalledWeights"], snap)
    got = again.refresh()["SmxStalledWeights"]
    assert (got.triggered, got.trigger_step) == (True, 1000)


def test_own_rules_each_has_a_row_in_the_recommended_profile_docs() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[4] / "docs" / "rules.md").read_text(encoding="utf-8")
    section = docs.split("## Recommended profile", 1)[1]
    rows = {line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `Smx")}
    assert rows == {d.name for d in rule_defs(family="smx")}  # what it departs from, its default, the measurement


def _labels(per_save: Sequence[Any], predictions: bool = True) -> list[TensorBatch]:
    steps = {}
    for k, y in enumerate(per_save):
        y = np.asarray(y, np.int64)
        steps[500 * k] = {"labels": y, **({"predictions": np.zeros_like(y)} if predictions else {})}
    return [batch({s: t}, {"labels": ["labels"], "predictions": ["predictions"]}) for s, t in sorted(steps.items())]


def test_recommended_profile_untrained_model_on_balanced_labels_is_not_flagged() -> None:
    # an untrained classifier predicts class 0 for every sample: a model state, not a fault of the data
    from smx_debug.rules.registry import profile_rules

    rng = np.random.default_rng(10)
    batches = _labels([rng.integers(0, 4, 512) for _ in range(3)])
    fired = {r for r in profile_rules("recommended") if r in TENSOR_REGISTRY and judge(r, batches).triggered}
    assert fired == set()


def test_class_imbalance_labels_of_one_class_at_90_percent_fire_at_the_first_judged_save() -> None:
    rng = np.random.default_rng(11)
    skewed = [np.where(rng.random(512) < 0.9, 0, rng.integers(1, 4, 512)) for _ in range(3)]
    got = judge("SmxClassImbalance", _labels(skewed))
    assert (got.triggered, got.trigger_step) == (True, 0)


def test_class_imbalance_many_balanced_classes_wait_for_samples_per_class() -> None:
    # 100 balanced classes: 512 labels give counts from 0 to ~15 (a ratio above 10 by chance); 30 per class is 3000
    rng = np.random.default_rng(12)
    got = judge("SmxClassImbalance", _labels([rng.integers(0, 100, 512) for _ in range(8)], predictions=False))
    assert not got.triggered and got.datapoints == 3  # judged from the 6th save (3072 labels) on, quiet
