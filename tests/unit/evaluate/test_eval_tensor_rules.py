"""The tensor rules on batches built by hand: each verdict, step and reason worked out from the definition in
docs/rules.md; the cases marked [2019-test] are the series of smdebug's own rule tests (awslabs/sagemaker-debugger
@61145df2, tests/analysis/rules/, data only)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from tensor_batches import batch, run, series, split

from smx_debug.errors import ConfigError
from smx_debug.evaluate import configured_rule
from smx_debug.evaluate.tensor_data import TensorBatch
from smx_debug.rules import get_rule
from smx_debug.rules.params import TENSOR_RULES, rule_defaults

RNG = np.random.default_rng(7)


def _grad(scale: float) -> np.ndarray:
    return RNG.normal(size=(8, 8)) * scale


def test_vanishing_gradient_mean_abs_below_threshold_fires_at_that_step_naming_tensor_and_value():
    g = series("gradient/fc.weight", [_grad(1e-2), _grad(1e-2), np.full((8, 8), 2e-8)], steps=[0, 10, 20])
    r = run("VanishingGradient", batch(g))
    assert (r.triggered, r.trigger_step, r.rule_triggered, r.violations, r.datapoints) == (True, 20, 1, 1, 3)
    assert r.message.startswith("gradient/fc.weight at step 20: mean absolute gradient 2e-08 < threshold 1e-07")


def test_vanishing_gradient_without_gradients_collection_says_which_collection_to_add():
    r = run("VanishingGradient", batch(series("fc.weight", [_grad(1)]), collections={"weights": "weight"}))
    assert (r.datapoints, r.triggered) == (0, False)
    assert "the trial has no collection 'gradients' (its collections: weights): add 'gradients'" in r.message


def test_vanishing_gradient_saved_reduction_only_is_read_from_the_reductions():
    red = pd.DataFrame({"step": [0, 5], "mode": "TRAIN", "mode_step": [0, 5], "worker": "worker_0",
                        "tensor": "gradient/w", "reduction": "abs_mean", "value": [1e-3, 1e-9]})
    b = TensorBatch(reductions=red, names=["gradient/w"], collections={"gradients": lambda n: "gradient" in n})
    assert run("VanishingGradient", b).trigger_step == 5


@pytest.mark.parametrize(("bad", "only_nan", "fires"), [
    (np.nan, False, True), (np.inf, False, True), (np.inf, True, False), (np.nan, True, True)])
def test_exploding_tensor_nonfinite_value_fires_unless_only_nan_and_infinite(bad, only_nan, fires):
    w = _grad(1)
    w[3, 4] = bad
    r = run("ExplodingTensor", batch(series("fc.weight", [_grad(1), w], steps=[0, 7])), only_nan=only_nan)
    assert (r.triggered, r.trigger_step) == (fires, 7 if fires else None)
    if fires:
        assert r.message.startswith("fc.weight at step 7: 1 NaN")


def test_exploding_tensor_saved_reductions_only_nan_mean_fires():
    red = pd.DataFrame({"step": [0, 1], "mode": "TRAIN", "mode_step": [0, 1], "worker": "worker_0",
                        "tensor": "w", "reduction": "mean", "value": [0.5, np.nan]})
    assert run("ExplodingTensor", TensorBatch(reductions=red, names=["w"])).trigger_step == 1


@pytest.mark.parametrize(("threshold", "fires_at"), [(100, 2), (50, 1)])
def test_all_zero_share_of_zeros_at_threshold_fires(threshold, fires_at):
    half = np.ones(10)
    half[:5] = 0
    r = run("AllZero", batch(series("relu_output", [np.ones(10), half, np.zeros(10)])), threshold=threshold)
    assert r.trigger_step == fires_at


def test_tensor_variance_default_thresholds_none_gives_no_data_naming_the_parameters():
    r = run("TensorVariance", batch(series("w", [_grad(1)])))
    assert (r.datapoints, r.triggered) == (0, False)
    assert "max_threshold and min_threshold are both unset" in r.message


def test_tensor_variance_above_max_threshold_fires():
    r = run("TensorVariance", batch(series("w", [_grad(1), _grad(10)], steps=[0, 3])), max_threshold=10.0)
    assert (r.trigger_step, r.violations) == (3, 1)


def _ones_trial() -> TensorBatch:
    """[2019-test] test_unchanged: foo_0..2 of ones at steps 0, 1, 2 and boo_0..2 at step 5."""
    shape = (10, 3, 2)
    tensors = [series(f"foo_{i}", [np.ones(shape)] * 3, steps=[0, 1, 2]) for i in range(3)]
    tensors += [series(f"boo_{i}", [np.ones(shape)], steps=[5]) for i in range(3)]
    return batch(*tensors)


def test_unchanged_tensor_three_equal_saved_steps_fires_at_the_third():
    r = run("UnchangedTensor", _ones_trial(), tensor_regex=".*")
    assert (r.trigger_step, r.rule_triggered, r.violations) == (2, 1, 3)


def test_unchanged_tensor_two_steps_only_does_not_fire():
    first, _ = split(_ones_trial(), 2)
    assert not run("UnchangedTensor", first, tensor_regex=".*").triggered


def test_unchanged_tensor_split_across_refreshes_same_verdict():
    whole = run("UnchangedTensor", _ones_trial(), tensor_regex=".*")
    parts = run("UnchangedTensor", *split(_ones_trial(), 2), tensor_regex=".*")
    assert (parts.trigger_step, parts.violations, parts.datapoints) == (
        whole.trigger_step, whole.violations, whole.datapoints)


def test_unchanged_tensor_eval_steps_of_frozen_weights_are_not_judged():
    w = _grad(1)
    s = series("fc.weight", [w, w, w, w], steps=[0, 1, 2, 3], mode=["TRAIN", "EVAL", "EVAL", "EVAL"])
    assert run("UnchangedTensor", batch(s)).datapoints == 0


@pytest.mark.parametrize(("step_scale", "fires"), [(0.0, True), (1e-2, False), (100.0, True)])
def test_weight_update_ratio_outside_thresholds_fires(step_scale, fires):
    w0 = _grad(1)
    w1 = w0 + step_scale * _grad(1)
    r = run("WeightUpdateRatio", batch(series("fc.weight", [w0, w1], steps=[0, 500])))
    assert (r.triggered, r.datapoints) == (fires, 1)


def test_weight_update_ratio_num_steps_skips_pairs_further_apart():
    w0 = _grad(1)
    r = run("WeightUpdateRatio", batch(series("fc.weight", [w0, w0], steps=[0, 500])), num_steps=100)
    assert (r.datapoints, r.triggered) == (0, False)


def _relu(dead_units: int, units: int = 10, batch_size: int = 64) -> np.ndarray:
    x = np.abs(RNG.normal(size=(batch_size, units))) + 0.1
    x[:, :dead_units] = 0
    return x


@pytest.mark.parametrize(("dead", "fires"), [(6, True), (5, False), (4, False)])
def test_dead_relu_more_than_threshold_layer_dead_units_fires(dead, fires):
    r = run("DeadRelu", batch(series("features.1_relu_output_0", [_relu(dead)])))
    assert r.triggered is fires
    if fires:
        assert "60% of its units are dead" in r.message


def test_dead_relu_unit_active_in_one_sample_of_64_counts_as_alive():
    x = _relu(10)
    x[0, :] = 1.0  # each unit active in 1/64 = 1.6% >= 1% of the samples
    assert not run("DeadRelu", batch(series("fc_relu_output_0", [x]))).triggered


@pytest.mark.parametrize(("name", "value", "fires"), [
    ("l1_tanh_input_0", 9.6, True), ("l1_tanh_input_0", 9.4, False),
    ("l1_sigmoid_input_0", 17.5, True), ("l1_sigmoid_input_0", -22.0, False), ("l1_sigmoid_input_0", -23.5, True)])
def test_saturated_activation_inputs_beyond_the_kinds_thresholds_fire(name, value, fires):
    x = np.full((32, 8), value)
    assert run("SaturatedActivation", batch(series(name, [x]))).triggered is fires


def test_poor_weight_initialization_variance_ratio_across_layers_fires():
    a = series("l1_relu_input_0", [RNG.normal(size=(32, 16))])
    b = series("l2_relu_input_0", [RNG.normal(size=(32, 16)) * 10])  # variance x100
    r = run("PoorWeightInitialization", batch(a, b))
    assert r.trigger_step == 0 and "largest/smallest variance across layers" in r.message


def test_poor_weight_initialization_identical_gradients_fire_and_only_first_steps_are_analysed():
    grads = [np.full((8, 8), 0.5)] * 3 + [np.full((8, 8), 0.5)]
    r = run("PoorWeightInitialization", batch(series("gradient/w", grads, steps=[0, 1, 2, 3])), steps=2)
    assert (r.rule_triggered, r.details["analysed_steps"]) == (2, [0, 1])
    assert "5th-95th percentile range of the gradients 0 < distribution_range 0.001" in r.message


def test_class_imbalance_ninety_nine_to_one_fires_after_samples_2019_test():
    """[2019-test] test_class_imbalance: 1000 labels, the last 10 are 1, saved at step 3."""
    labels = np.zeros(1000)
    labels[-10:] = 1
    r = run("ClassImbalance", batch(series("labels_0", [labels], steps=[3])), labels_regex="labels_0",
            predictions_regex="labels_0")
    assert (r.trigger_step, r.details["class_counts"]) == (3, {"0": 990, "1": 10})
    assert "largest/smallest class count 99 > threshold_imbalance 10" in r.message


def test_class_imbalance_not_before_samples_labels_were_seen():
    labels = [np.r_[np.zeros(95), np.ones(5)]] * 6  # 100 labels a step (19:1): 500 reached at step 4
    r = run("ClassImbalance", batch(series("labels", labels)))
    assert r.trigger_step == 4


def test_class_imbalance_mispredicted_class_fires():
    y = np.tile(np.arange(2), 300)
    p = np.where(y == 1, 0, 0)  # class 1 always wrong
    r = run("ClassImbalance", batch(series("labels", [y]), series("predictions", [p])))
    assert r.triggered and "1 of class 1's samples mispredicted > threshold_misprediction 0.7" in r.message


@pytest.mark.parametrize(("labels", "preds", "params", "fires"), [
    # [2019-test] test_confusion: identity; row 4 predicted as 7 (twice: both conditions, then max_off_diag only);
    # the default names.
    ("y", "y_hat", {"labels_collection": "labels", "predictions_collection": "preds"}, False),
    ("foo", "bar", {"category_no": 10, "labels": "foo", "predictions": "bar"}, True),
    ("foo", "bar", {"category_no": 10, "labels": "foo", "predictions": "bar", "min_diag": 0.0,
                    "max_off_diag": 0.01}, True),
    ("labels", "predictions", {}, False),
])
def test_confusion_2019_test_cases(labels, preds, params, fires):
    y = np.arange(10) if labels != "y" else RNG.integers(10, size=100)
    p = y.copy()
    if fires:
        p[4] = 7
    b = batch(series(labels, [y], steps=[1]), series(preds, [p], steps=[1]),
              collections={"labels": "^y$", "preds": "^y_hat$"})
    assert run("Confusion", b, **params).triggered is fires


def test_check_input_images_unnormalized_fires_when_500_images_seen_2019_test():
    """[2019-test] test_check_input_images: FashionMNIST (mean 0.286) without Normalize fires at step 7 (batches
    of 64: 512 images); normalized it never fires."""
    raw = [RNG.uniform(0, 0.572, size=(64, 1, 28, 28)) for _ in range(9)]
    r = run("CheckInputImages", batch(series("hybridsequential0_input_0", raw)))
    assert r.trigger_step == 7
    normalized = [(x - 0.286) / 0.352 for x in raw]
    assert not run("CheckInputImages", batch(series("hybridsequential0_input_0", normalized))).triggered


def test_nlp_sequence_ratio_padding_above_threshold_fires():
    seq = np.zeros((8, 20))
    seq[:, :6] = RNG.integers(1, 100, size=(8, 6))  # 70% padding
    r = run("NLPSequenceRatio", batch(series("embedding0_input_0", [seq])))
    assert r.triggered and "70% of its tokens are 0 (> 50%)" in r.message


def test_nlp_sequence_ratio_token_lists_of_different_lengths_raise_config_error():
    with pytest.raises(ConfigError, match="token_values '0,3' and token_thresholds_percent '50'"):
        run("NLPSequenceRatio", batch(series("embedding0_input_0", [np.zeros((2, 3))])), token_values="0,3")


def test_loss_not_decreasing_on_tensors_2019_test_series_fires_at_step_12():
    """[2019-test] test_loss_not_decreasing.test_default: losses saved every 4 steps."""
    losses = [np.array([v]) for v in (0.3, 0.33, 0.31, 0.30, 0.28)]
    r = run("LossNotDecreasing", batch(series("loss_0", losses, steps=[0, 4, 8, 12, 16])),
            tensor_regex="loss", use_losses_collection=False)
    assert (r.trigger_step, r.rule_triggered) == (12, 1)


def test_loss_not_decreasing_without_losses_says_what_to_add():
    r = run("LossNotDecreasing", batch(series("w", [np.ones(3)]), collections={}))
    assert r.datapoints == 0 and "add 'losses' to the plan's hook collections" in r.message


def test_overfit_on_tensors_eval_loss_pulling_away_fires_at_the_eval_step():
    values = [1.0, 0.5, 0.52, 0.4, 0.3, 0.6]
    merged = series("CrossEntropyLoss_output_0", [np.array([v]) for v in values], steps=range(6),
                    mode=["TRAIN", "TRAIN", "EVAL", "TRAIN", "TRAIN", "EVAL"])
    r = run("Overfit", batch(merged))
    assert r.trigger_step == 5  # 0.6 vs mean(0.4, 0.3) = 0.35: ratio 0.71 > 0.1; 0.52 vs 0.75 is fine


def test_stalled_training_gap_longer_than_threshold_fires_at_the_late_step():
    b = batch(series("w", [np.ones(2)] * 3, steps=[0, 10, 20]), wall_times={0: 1000.0, 10: 1100.0, 20: 3100.0})
    r = run("StalledTrainingRule", b)
    assert (r.trigger_step, r.rule_triggered) == (20, 1)
    live = batch(series("w", [np.ones(2)], steps=[0]), wall_times={0: 1000.0}, now=1000.0 + 1801)
    assert run("StalledTrainingRule", live).triggered


@pytest.mark.parametrize("rule", TENSOR_RULES)
def test_tensor_rule_defaults_come_from_the_rule_catalog(rule):
    assert rule_defaults(rule) == {p.name: p.default for p in get_rule(rule).parameters} | (
        {"diff_percent": 0.1} if rule == "LossNotDecreasing" else {})


@pytest.mark.parametrize("rule", ["TreeDepth", "FeatureImportanceOverweight", "CreateXgboostReport"])
def test_xgboost_rule_asked_for_raises_config_error_naming_it(rule):
    with pytest.raises(ConfigError, match=f"rule {rule} cannot be evaluated by smx-debug: .*no XGBoost hook"):
        configured_rule(rule)


def test_tensor_rules_on_diverged_values_are_quiet_no_numpy_warning():
    w = np.full((8, 8), np.inf)
    w[0, 0] = -np.inf
    w[1, 1] = np.nan
    b = batch(series("gradient/fc.weight", [w, w]), series("fc.weight", [w, w]), series("fc_relu_input_0", [w, w]),
              series("fc_relu_output_0", [w, w]), series("CrossEntropyLoss_output_0", [np.array([np.nan])] * 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = {rule: run(rule, b, **({"max_threshold": 1.0} if rule == "TensorVariance" else {}))
                   for rule in TENSOR_RULES}
    assert results["ExplodingTensor"].trigger_step == 0


def _plan(rules: list[dict[str, object]], framework: str = "pytorch"):  # type: ignore[no-untyped-def]
    from smx_debug import DebugPlan

    return DebugPlan.model_validate({"name": "p", "region": "us-west-2", "s3_output_path": "s3://plan-bucket/out",
                                     "framework": framework, "rules": rules})


def test_plan_tensor_rules_takes_tensor_rules_by_configuration_name_and_skips_profiler_rules():
    plan = _plan([{"name": "dead_relu", "configuration_name": "DeadRelu-strict",
                   "parameters": {"threshold_layer": 20.0}}, {"name": "CPUBottleneck"}])
    configs, skipped = plan.tensor_rules()
    assert [(c.name, c.rule, c.parameters["threshold_layer"]) for c in configs] == [("DeadRelu-strict", "DeadRelu", 20.0)]
    assert skipped == ["CPUBottleneck"]


def test_plan_tensor_rules_xgboost_rule_raises_config_error_naming_it():
    with pytest.raises(ConfigError, match="the plan's rule 'TreeDepth' \\(TreeDepth\\) cannot be evaluated by smx-debug"):
        _plan([{"name": "tree_depth"}, {"name": "all_zero"}], framework="xgboost").tensor_rules()
