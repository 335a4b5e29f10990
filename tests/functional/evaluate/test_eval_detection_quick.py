"""The detection benchmark's quick subset (bench/detection_bench.py --quick): real PyTorch runs on the CPU recorded
by smx_debug.hook with a plan's default collections and save interval, judged by every tensor rule."""

from __future__ import annotations

import math
from types import ModuleType

import pytest
from bench_support import bench_module

pytest.importorskip("torch")


def _bench() -> ModuleType:
    return bench_module("detection_bench")


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    bench = _bench()
    root = tmp_path_factory.mktemp("detection")
    return {spec.name: bench.run_one(spec, root, steps=bench.QUICK_STEPS, baselines=False)
            for spec in bench.runs(quick=True, seeds=1)}


# A diverging run ends in a huge number or in NaN/inf: after the learning rate x1000 its weights grow about 10^4
# times a step and reach float32's limit (3.4e38) within five steps, so whether an output overflows (inf, then NaN
# for good) or the run ends at a huge finite loss is decided by the last bits of rounding, which differ between
# CPUs and math kernels, not by machine load (the run is on one thread, seeded). Tests accept both outcomes.
EXPLOSIONS = [math.nan, math.inf, 1e30]
LOSS_RULES_ON_EXPLOSIONS = ("LossNotDecreasing", "ExplodingTensor")


def _diverged(before: float, after: float) -> bool:
    return math.isnan(after) or after > 10 * before


def test_detection_exploding_gradients_caught_by_exploding_tensor_at_next_save(quick_runs):
    run = quick_runs["exploding_gradients-mlp_relu-s0"]
    assert run.fired["ExplodingTensor"][0] == 1500  # learning rate x1000 at step 1000, saved every 500 steps
    losses = [loss for loss, _ in run.validation]
    assert _diverged(losses[2], losses[3]), losses  # the run did explode: its validation loss after the jump


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


def _first_flag(fired: dict[str, list[int]], rule: str | None = None) -> int | None:
    """The first training step at which ``rule`` (default: any rule) fired."""
    return min((steps[0] for name, steps in fired.items() if steps and rule in (None, name)), default=None)


# The smoothed trial saves each window's mean training loss at the step that completes it (1499) and the next
# validation pass's mean at 1500: an explosion at step 1000 is flagged at one of the two, never before the jump.
FLAGGED_AT = (1499, 1500)


def test_detection_loss_rules_on_smoothed_losses_see_the_explosion(quick_runs, tmp_path):
    """The smoothed trial holds data the rules judge: the exploding run's losses rise after step 1000, or turn NaN,
    and are flagged at the next means (LossNotDecreasing on a rise, ExplodingTensor on NaN or inf)."""
    run = quick_runs["exploding_gradients-mlp_relu-s0"]
    fired = _bench().judge_smoothed(run.validation, run.train_windows, tmp_path / "smoothed",
                                    rules=LOSS_RULES_ON_EXPLOSIONS)
    assert _first_flag(fired) in FLAGGED_AT, (fired, run.validation, run.train_windows)


@pytest.mark.parametrize("after", EXPLOSIONS)
def test_detection_smoothed_losses_explosion_to_nan_or_huge_flagged_at_next_means(tmp_path, after):
    """Both outcomes of a divergence, built deterministically: the exploding run's pass means before the jump (as
    measured), then NaN, inf or a huge number. A NaN never fires LossNotDecreasing (a comparison with NaN is false);
    ExplodingTensor flags it, as it flags inf, and LossNotDecreasing flags the rise to a finite number."""
    validation = [(1.399, 0.227), (0.728, 0.721), (0.652, 0.756), (after, 0.134), (after, 0.134)]
    windows = [math.nan, 0.791, 0.686, after, after]
    fired = _bench().judge_smoothed(validation, windows, tmp_path / "smoothed", rules=LOSS_RULES_ON_EXPLOSIONS)
    assert _first_flag(fired) in FLAGGED_AT, fired
    by = "LossNotDecreasing" if math.isfinite(after) else "ExplodingTensor"
    assert _first_flag(fired, by) in FLAGGED_AT, fired


@pytest.mark.parametrize("after", EXPLOSIONS)
def test_detection_diverged_accepts_nan_inf_and_tenfold(after):
    assert _diverged(0.652, after)
    assert not _diverged(0.652, 0.640)
