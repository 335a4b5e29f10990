"""RuleSummary.with_reasons: SageMaker's generic StatusDetails give way to our evaluation's full reason (issue 29, 7)."""

from __future__ import annotations

import pandas as pd

from smx_debug.contracts import condition_met_details
from smx_debug.data.rule_statuses import rule_summary
from smx_debug.evaluate import RuleResult

DESC = {
    "TrainingJobName": "j",
    "ProfilerRuleEvaluationStatuses": [
        {"RuleConfigurationName": "CPUBottleneck", "RuleEvaluationStatus": "IssuesFound",
         "StatusDetails": condition_met_details("CPUBottleneck", 11)},
        {"RuleConfigurationName": "StepOutlier", "RuleEvaluationStatus": "IssuesFound",
         "StatusDetails": condition_met_details("StepOutlier", 6)},
        {"RuleConfigurationName": "LowGPUUtilization-idle", "RuleEvaluationStatus": "NoIssuesFound"},
        {"RuleConfigurationName": "ProfilerReport", "RuleEvaluationStatus": "NoIssuesFound"},
    ],
}


def test_rule_summary_with_reasons_replaces_generic_details_with_our_reason_and_says_where_we_differ() -> None:
    results = {
        "CPUBottleneck": RuleResult(rule="CPUBottleneck", rule_triggered=3, message="fired at scan 11: 54% ..."),
        "StepOutlier": RuleResult(rule="StepOutlier", message="only 4 slow steps"),  # our evaluation did not fire
        "LowGPUUtilization-idle": RuleResult(rule="LowGPUUtilization", message=""),
    }
    summary = rule_summary("j", description=DESC)
    out = summary.with_reasons(results)
    details = dict(zip(out["rule"], out["details"], strict=True))
    assert details["CPUBottleneck"] == "fired at scan 11: 54% ..."
    assert details["StepOutlier"] == (condition_met_details("StepOutlier", 6).strip()
                                      + "; our evaluation of the data differs: only 4 slow steps")
    assert pd.isna(details["LowGPUUtilization-idle"]) and pd.isna(details["ProfilerReport"])  # no reason: as given
    assert out["step"].tolist() == summary["step"].tolist() and type(out) is type(summary)
    assert summary["details"].iloc[0].startswith("RuleEvaluationConditionMet")  # the original is left as it was
