"""The detection benchmark's quick subset (bench/detection_bench.py --quick): real PyTorch runs on the CPU recorded
by smx_debug.hook with a plan's default collections and save interval, judged by every tensor rule."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[3] / "bench" / "detection_bench.py"


def _bench() -> ModuleType:
    if "detection_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("detection_bench", BENCH)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["detection_bench"] = module  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(module)
    return sys.modules["detection_bench"]


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    bench = _bench()
    root = tmp_path_factory.mktemp("detection")
    return {spec.name: bench.run_one(spec, root, steps=bench.QUICK_STEPS, baselines=False)
            for spec in bench.runs(quick=True, seeds=1)}


def test_detection_exploding_gradients_caught_by_exploding_tensor_at_next_save(quick_runs):
    run = quick_runs["exploding_gradients-mlp_relu-s0"]
    assert run.fired["ExplodingTensor"][0] == 1500  # learning rate x1000 at step 1000, saved every 500 steps
    losses = [loss for loss, _ in run.validation]
    assert losses[3] > 10 * losses[2]  # the run did explode: its validation loss after the jump, against before


def test_detection_dead_relu_caught_by_dead_relu_at_step_0(quick_runs):
    run = quick_runs["dead_relu-mlp_relu-s0"]
    assert run.fired["DeadRelu"][0] == 0
    assert run.check_finite_step is None


@pytest.mark.parametrize("name", ["healthy-mlp_relu-s0", "healthy-mlp_tanh-s0"])
def test_detection_healthy_runs_quiet_for_the_fault_specific_rules(quick_runs, name):
    fired = set(quick_runs[name].fired)
    assert fired.isdisjoint({"ExplodingTensor", "DeadRelu", "VanishingGradient", "WeightUpdateRatio",
                             "UnchangedTensor", "AllZero", "PoorWeightInitialization"}), fired


@pytest.mark.parametrize("name", ["healthy-mlp_relu-s0", "healthy-mlp_tanh-s0"])
def test_detection_healthy_runs_are_healthy_by_their_own_validation_loss(quick_runs, name):
    """A healthy run must be healthy by a measure independent of the rules: its validation loss (the mean over the
    whole pass) ends within 5% of its best and its accuracy rose. A run that memorises its training set ends above
    its best validation loss: that is overfitting, and a rule that says so is right, not a false positive."""
    losses = [loss for loss, _ in quick_runs[name].validation]
    accuracy = [acc for _, acc in quick_runs[name].validation]
    assert len(losses) == 5  # before steps 0, 500, 1000, 1500 and after the last
    assert losses[-1] <= 1.05 * min(losses), losses
    assert accuracy[-1] > accuracy[0] + 0.3, accuracy


@pytest.mark.parametrize("name", ["healthy-mlp_relu-s0", "healthy-mlp_tanh-s0"])
def test_detection_loss_rules_on_smoothed_losses_stay_quiet_on_healthy_runs(quick_runs, name):
    """docs/rules.md: at its default threshold Overfit fires on healthy runs when it judges single batches (as the
    hook's defaults save them); on the means of each validation pass and training window it does not."""
    run = quick_runs[name]
    assert len(run.train_windows) == len(run.validation)
    assert all(math.isfinite(w) for w in run.train_windows[1:])
    assert "Overfit" in run.fired  # single batches
    assert run.smoothed == {}, run.smoothed  # pass and window means


def test_detection_loss_rules_on_smoothed_losses_see_the_explosion(quick_runs):
    """The smoothed trial holds data the rules judge: the exploding run's validation mean rises after step 1000."""
    assert quick_runs["exploding_gradients-mlp_relu-s0"].smoothed.get("LossNotDecreasing", [None])[0] == 1500
