"""The reason CPUBottleneck and IOBottleneck give says what the verdict was and why, per threshold (issue 29, 7).

A what-if over thresholds shows the reason beside the verdict: it must name the scan that fired (with that scan's
share) or the largest share seen, against the threshold tried, so that different outcomes read differently.
"""

from __future__ import annotations

import numpy as np
import pytest

from smx_debug.evaluate import evaluate_rule


@pytest.fixture
def half_bottlenecked(frames):
    # 1200 snapshots; from t=600 s the GPU is at 5% while cpu0 (and its I/O wait) is at 95%.
    low = np.arange(1200) >= 600
    t = np.arange(1200.0)
    return frames.data(
        frames.series("algo-1", "gpu0", "GPUUtilization", np.where(low, 5.0, 80.0), timestamps_s=t),
        frames.series("algo-1", "cpu0", "CPUUtilization", np.where(low, 95.0, 50.0), timestamps_s=t + 0.004),
        frames.series("algo-1", "cpu0", "I/OWaitPercentage", np.where(low, 95.0, 5.0), timestamps_s=t + 0.004),
    )


@pytest.mark.parametrize(("rule", "what"), [("CPUBottleneck", "CPU"), ("IOBottleneck", "I/O wait")])
def test_bottleneck_reason_names_the_scan_that_fired_or_the_largest_share_per_threshold(half_bottlenecked, rule,
                                                                                         what):
    fired = evaluate_rule(rule, half_bottlenecked, {"threshold": 40, "patience": 1000})
    # boundary k sees 60k snapshots, 60k - 600 of them bottlenecks: > 40% first at k=17 (420 of 1020)
    assert fired.triggered and fired.message == (
        f"fired at scan 17: 420 of 1020 snapshots so far (41%) had GPU below 10% while {what} was above "
        f"{90 if rule == 'CPUBottleneck' else 50}%, more than the threshold 40%; "
        "over the whole job 600 of 1200 snapshots (50%)")
    quiet = evaluate_rule(rule, half_bottlenecked, {"threshold": 60, "patience": 1000})
    assert not quiet.triggered and quiet.message.startswith(
        "not fired: at most 50% of the snapshots so far had GPU below 10% while ")
    assert "never more than the threshold 60%" in quiet.message
    earlier = evaluate_rule(rule, half_bottlenecked, {"threshold": 30, "patience": 100})
    assert earlier.message.startswith("fired at scan 15: 300 of 900 snapshots so far (33%)")  # (60k - 600) / 60k
