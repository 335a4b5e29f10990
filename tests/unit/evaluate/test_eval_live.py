"""LiveEvaluator: status transitions as data arrives minute by minute."""

from __future__ import annotations

import numpy as np
import pandas as pd

from smx_debug.evaluate import LiveEvaluator


def _job(frames) -> pd.DataFrame:
    low = np.arange(1200) >= 600  # from t=600 s: GPU 5%, cpu0 95%
    t = np.arange(1200.0)
    return frames.system(
        frames.series("algo-1", "gpu0", "GPUUtilization", np.where(low, 5.0, 80.0), timestamps_s=t),
        frames.series("algo-1", "cpu0", "CPUUtilization", np.where(low, 95.0, 50.0), timestamps_s=t + 0.004),
    )


def test_live_cpu_bottleneck_issues_found_at_scan_17_then_others_no_issues(frames):
    system = _job(frames)
    minute = (system["timestamp"].astype("int64") // 60_000_000_000).to_numpy()
    live = LiveEvaluator(rules=["CPUBottleneck", "GPUMemoryIncrease"], overrides={"CPUBottleneck": {"threshold": 40}})
    seen = []
    for m in range(20):  # one minute of data per update, as a rule job scans every 60 s
        for t in live.update(system[minute == m]):
            seen.append((m + 1, t.rule, t.previous, t.status, t.step, t.status_details))
    assert seen == [(17, "CPUBottleneck", "InProgress", "IssuesFound", 17,
                     "RuleEvaluationConditionMet: Evaluation of the rule CPUBottleneck at step 17 resulted in the "
                     "condition being met\n")]
    assert live.status == {"CPUBottleneck": "IssuesFound", "GPUMemoryIncrease": "InProgress"}
    done = live.finish()
    assert [(t.rule, t.previous, t.status, t.as_status()) for t in done] == [
        ("GPUMemoryIncrease", "InProgress", "NoIssuesFound",
         {"RuleConfigurationName": "GPUMemoryIncrease", "RuleEvaluationStatus": "NoIssuesFound"})]


def test_live_replace_mode_takes_whole_frames(frames):
    system = _job(frames)
    live = LiveEvaluator(rules=["CPUBottleneck"], overrides={"CPUBottleneck": {"threshold": 40}})
    assert live.update(system.iloc[:100], replace=True) == []
    out = live.update(system, replace=True)  # e.g. SystemMetricsReader.refresh() returns everything so far
    assert [(t.rule, t.status, t.step) for t in out] == [("CPUBottleneck", "IssuesFound", 17)]
    assert len(live.data.system) == len(system)


def test_live_one_rule_two_configuration_names_two_statuses(frames):
    from smx_debug.config import DebugPlan

    plan = DebugPlan.model_validate({
        "name": "p", "region": "us-west-2", "s3_output_path": "s3://bucket/out",
        "rules": [
            {"name": "CPUBottleneck", "configuration_name": "CPU-strict", "parameters": {"threshold": 40}},
            {"name": "CPUBottleneck", "configuration_name": "CPU-lax", "parameters": {"threshold": 100}},
        ],
    })
    configs, skipped = plan.evaluated_rules()
    live = LiveEvaluator(rules=configs)  # custom configuration names never raise
    assert (list(live.status), skipped) == (["CPU-strict", "CPU-lax"], [])
    fired = live.update(_job(frames))
    assert [(t.rule, t.result.rule, t.result.parameters["threshold"]) for t in fired] == [
        ("CPU-strict", "CPUBottleneck", 40)]
    assert "rule CPU-strict at step" in fired[0].status_details
    done = live.finish()
    assert [(t.rule, t.status, t.result.configuration_name) for t in done] == [
        ("CPU-lax", "NoIssuesFound", "CPU-lax")]
    assert live.status == {"CPU-strict": "IssuesFound", "CPU-lax": "NoIssuesFound"}
