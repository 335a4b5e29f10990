"""Step, initialization, dataloader and scalar rules on constructed data with hand-worked answers."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from smx_debug.evaluate import JobData, evaluate_rule
from smx_debug.rules.params import rule_defaults


def test_step_outlier_eleven_slow_steps_fire_once_at_the_last_scan(frames):
    # 200 steps of 1 s then 11 of 10 s (ending at 210..310 s). All 211: mean 1.469, std 2.0, limit 7.47 s,
    # 11 outliers > n_outliers 10. At boundary 5 (300 s) only 9 slow steps had ended: not yet.
    data = JobData(steps=frames.steps([1.0] * 200 + [10.0] * 11))
    r = evaluate_rule("StepOutlier", data)
    assert (r.rule_triggered, r.violations, r.datapoints, r.trigger_step) == (1, 11, 211, 6)
    d = r.details["step_details"]["algo-1"]
    assert (d["number_of_outliers"], d["phase"], d["stddev"], d["step_numbers"]) == (
        11, "Step:ModeKeys.TRAIN", 2.0, list(range(200, 211)))
    assert r.rule_parameters == "threshold:3\nmode:None\nn_outliers:10\nstddev:3"
    assert evaluate_rule("StepOutlier", data, {"n_outliers": 11}).rule_triggered == 0


def test_step_outlier_fewer_than_100_steps_is_not_judged(frames):
    data = JobData(steps=frames.steps([1.0] * 85 + [50.0] * 15))
    assert evaluate_rule("StepOutlier", data).to_debugger_json()["Details"] == {"step_details": {}}
    assert evaluate_rule("StepOutlier", data).rule_triggered == 0


def test_step_outlier_mode_filter_skips_other_phases(frames):
    data = JobData(steps=frames.steps([1.0] * 200 + [10.0] * 11, mode="EVAL"))
    assert evaluate_rule("StepOutlier", data, {"mode": "TRAIN"}).datapoints == 0


@pytest.mark.parametrize(
    ("first_step_s", "expected", "first"),
    [(1500.0, 3, 22), (300.0, 0, None), (None, 9, 22)],
)
def test_max_initialization_time_counts_scans_waiting_past_threshold(frames, first_step_s, expected, first):
    # System data for 30 min, scans every minute, threshold 20 min. Like Debugger, a scan fires when its START
    # is more than 20 min after the job's start (scan 22 = [1260, 1320)) and no step was seen by its end.
    system = frames.system(frames.series("algo-1", "cpu0", "CPUUtilization", np.full(1800, 50.0)))
    steps = frames.steps([1.0] * 5, start_s=first_step_s) if first_step_s is not None else None
    data = JobData(system=system, steps=steps) if steps is not None else JobData(system=system)
    r = evaluate_rule("MaxInitializationTime", data)
    assert (r.rule_triggered, r.trigger_step) == (expected, first)
    assert r.details["job_start"] == 0.0 and r.details["job_end"] == 1799.0


def test_dataloader_one_worker_for_four_cores_is_too_few(frames):
    system = frames.system(*(frames.series("algo-1", f"cpu{i}", "CPUUtilization", np.full(60, 50.0)) for i in range(4)))
    starts = np.arange(20) * 10**9
    loader = pd.DataFrame({"node": "algo-1", "pid": 7, "start": pd.to_datetime(starts, utc=True),
                           "end": pd.to_datetime(starts + 5 * 10**8, utc=True)})
    r = evaluate_rule("Dataloader", JobData(system=system, dataloader=loader, dataloader_info={"num_workers": 0}))
    assert (r.rule_triggered, r.violations, r.datapoints) == (1, 1, 20)
    assert {k: r.details[k] for k in ("num_workers", "cores", "dataloaders")} == {
        "num_workers": 0, "cores": 4, "dataloaders": 1}
    assert r.details["dataloading_time"]["p50"] == 0.5


def test_loss_not_decreasing_flat_loss_fires_at_every_check(frames):
    data = JobData(scalars=frames.scalars("loss", "TRAIN", [1.0] * 101))
    r = evaluate_rule("LossNotDecreasing", data)
    assert (r.rule_triggered, r.trigger_step) == (10, 10)  # checks at steps 10, 20, ..., 100
    assert r.details["loss"]["not_decreasing_steps"] == list(range(10, 101, 10))


def test_loss_not_decreasing_next_check_is_first_saved_step_num_steps_after_last_check(frames):
    # smdebug's own 2019 test series (tests/analysis/rules/test_loss_not_decreasing.py, awslabs/sagemaker-debugger
    # @473575432fb9): loss saved every 4 steps. With num_steps=10 the checks are at steps 12 and 24 (the guide:
    # "at step 21 ... compared with step 9; the next step at which loss is checked is step 33"), so the jump
    # to 0.42 at step 24 is checked and found.
    steps = [0, 4, 8, 12, 16, 20, 24]
    values = [0.3, 0.33, 0.31, 0.30, 0.28, 0.2, 0.42]
    r = evaluate_rule("LossNotDecreasing", JobData(scalars=frames.scalars("loss", "TRAIN", values, steps=steps)))
    assert r.details["loss"]["checks"] == 2
    assert r.details["loss"]["not_decreasing_steps"] == [12, 24]
    assert r.details["loss"]["increases"] == [24]


def test_loss_not_decreasing_saved_every_3_steps_checks_12_24_36(frames):
    steps = list(range(0, 46, 3))  # saved every 3 steps
    r = evaluate_rule("LossNotDecreasing", JobData(scalars=frames.scalars("loss", "TRAIN", [1.0] * len(steps),
                                                                          steps=steps)), {"num_steps": 10})
    assert r.details["loss"]["not_decreasing_steps"] == [12, 24, 36]


def test_loss_not_decreasing_falling_loss_does_not_fire(frames):
    data = JobData(scalars=frames.scalars("loss", "TRAIN", list(0.99 ** np.arange(101))))
    assert evaluate_rule("LossNotDecreasing", data).rule_triggered == 0


def test_loss_not_decreasing_prefers_eval_mode(frames):
    sc = pd.concat([frames.scalars("loss", "TRAIN", [1.0] * 21), frames.scalars("loss", "EVAL", [3.0, 2.0, 1.0])])
    r = evaluate_rule("LossNotDecreasing", JobData(scalars=sc), {"num_steps": 1})
    assert (r.rule_triggered, r.details["loss"]["mode"]) == (0, "EVAL")


@pytest.mark.parametrize(("patience", "fires"), [(1, 2), (2, 1)])
def test_overfit_ratio_above_threshold_for_patience_evaluations(frames, patience, fires):
    # training loss 1.0 every second; validation 1.05, 1.2, 1.3 after 10, 20, 30 s -> ratios 0.05, 0.2, 0.3
    train = frames.scalars("loss", "TRAIN", [1.0] * 30)
    evl = frames.scalars("loss", "EVAL", [1.05, 1.2, 1.3], steps=[1, 2, 3], start_s=10.5, interval_s=10.0)
    r = evaluate_rule("Overfit", JobData(scalars=pd.concat([train, evl])), {"patience": patience})
    assert (r.rule_triggered, r.trigger_step) == (fires, 2 if patience == 1 else 3)
    assert r.details["loss"]["max_ratio"] == pytest.approx(0.3)


def test_overtraining_default_delta_is_the_guides_and_steady_decrease_does_not_fire(frames):
    # Issue 13: the current guide's delta is 0.01. A loss falling 0.015 per saved step improves by more
    # than 0.01 every step, so it never stalls; with delta 0.1 it "stalled" every 7 steps.
    assert rule_defaults("Overtraining")["delta"] == 0.01
    data = JobData(scalars=frames.scalars("loss", "TRAIN", list(5.0 - 0.015 * np.arange(200))))
    assert evaluate_rule("Overtraining", data).rule_triggered == 0


def test_overtraining_plateau_fires_after_patience_train_steps(frames):
    data = JobData(scalars=frames.scalars("loss", "TRAIN", [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]))
    r = evaluate_rule("Overtraining", data, {"delta": 0.01})
    assert (r.rule_triggered, r.trigger_step) == (2, 6)  # runs without improvement 5 and 6 steps long


def test_overtraining_improvements_below_delta_do_not_count(frames):
    # 1.0, 0.995, 0.99, 0.985...: the best moves only when it drops by more than 0.01 (at 0.985, 0.97, ...)
    values = list(1.0 - 0.005 * np.arange(12))
    r = evaluate_rule("Overtraining", JobData(scalars=frames.scalars("loss", "TRAIN", values)), {"patience_train": 3, "delta": 0.01})
    assert r.rule_triggered == 0
    r2 = evaluate_rule("Overtraining", JobData(scalars=frames.scalars("loss", "TRAIN", values)), {"patience_train": 2, "delta": 0.01})
    assert r2.rule_triggered == 4  # steps 2, 5, 8, 11 end a run of two non-improving steps


def test_stalled_training_gap_and_live_silence(frames):
    ts_a = frames.scalars("loss", "TRAIN", [1.0] * 5, interval_s=60.0)
    ts_b = frames.scalars("loss", "TRAIN", [1.0] * 5, start_s=240 + 2000, interval_s=60.0)
    sc = pd.concat([ts_a, ts_b])
    r = evaluate_rule("StalledTrainingRule", JobData(scalars=sc))
    assert r.to_debugger_json()["RuleTriggered"] == 1
    assert r.details["longest_gap_s"] == 2000.0
    later = pd.Timestamp(2240 + 240 + 1801, unit="s", tz="UTC").value
    assert evaluate_rule("StalledTrainingRule", JobData(scalars=sc, as_of_ns=later)).rule_triggered == 2


def test_scalar_rules_without_losses_report_no_data(frames):
    data = JobData(scalars=frames.scalars("accuracy", "TRAIN", [0.5] * 20))
    for rule in ("LossNotDecreasing", "Overfit", "Overtraining"):
        assert evaluate_rule(rule, data).to_debugger_json()["Datapoints"] == 0


@pytest.mark.parametrize("rule", ["LossNotDecreasing", "Overfit", "Overtraining"])
def test_scalar_rules_nan_losses_are_quiet_no_numpy_warning(frames, rule):
    # A diverged run's losses are NaN: the verdict must come without numpy RuntimeWarnings on stderr.
    nan = [float("nan")] * 12
    data = JobData(scalars=pd.concat([frames.scalars("loss", "TRAIN", nan),
                                      frames.scalars("loss", "EVAL", nan[:4], start_s=0.5, interval_s=3.0)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = evaluate_rule(rule, data)
    assert not r.triggered
