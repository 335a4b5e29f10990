"""StepOutlier's own view, scan by scan, against the whole job's step statistics (issue 29, item 7).

A burst of slow steps after a run of fast ones fires the rule at the scan that first sees it, while the whole
job's statistics show no outlier: the slow steps that followed widened the spread. Both must be shown, and agree
with the rule's verdict.
"""

from __future__ import annotations

import numpy as np

from smx_debug.analysis.stats import step_statistics
from smx_debug.evaluate import JobData, evaluate_rule
from smx_debug.evaluate.step_rules import step_outlier_scans

# 400 steps of 0.25 s (0-100 s), then 420 of 1 s (100-520 s). Scan 2 ends at 120 s: 400 fast + 19 slow steps
# had ended; mean 0.284 s, std 0.156 s, limit 0.752 s: 19 outliers > 10, the rule fires. From scan 3 on the slow
# steps are more than a tenth of all and none is 3 std above the mean; over all 820 steps, none either.
DURATIONS = [0.25] * 400 + [1.0] * 420


def test_step_outlier_scans_burst_fires_early_scan_the_rule_names(frames) -> None:
    steps = frames.steps(DURATIONS)
    scans = step_outlier_scans(steps)
    fired = scans[scans["fires"]]
    assert fired[["scan", "steps", "outliers", "n_outliers"]].to_dict("records") == [
        {"scan": 2, "steps": 419, "outliers": 19, "n_outliers": 10}]
    d = np.array(DURATIONS[:419])
    assert np.isclose(fired["threshold"].iloc[0], d.mean() + 3 * d.std())
    r = evaluate_rule("StepOutlier", JobData(steps=steps))
    assert (r.trigger_step, r.rule_triggered, r.violations) == (2, 1, 19)


def test_step_outlier_message_names_the_scan_its_figures_and_the_whole_job(frames) -> None:
    r = evaluate_rule("StepOutlier", JobData(steps=frames.steps(DURATIONS)))
    assert r.message.startswith("fired at scan 2 (steps ended by 00:02:00 UTC): algo-1 TRAIN had 19 of 419 steps "
                                "slower than 0.752 s (mean 0.284 s + 3 x std 0.156 s), more than n_outliers 10")
    assert "over the whole job: algo-1 TRAIN 0 of 820 steps slower than" in r.message


def test_step_statistics_whole_job_shows_no_outlier_with_the_rules_population_std(frames) -> None:
    steps = frames.steps(DURATIONS)
    stats = step_statistics(steps).iloc[0]
    d = np.array(DURATIONS)
    assert stats["outliers"] == 0
    assert np.isclose(stats["threshold"], d.mean() + 3 * d.std())  # numpy's std, as StepOutlier (ddof 0)
