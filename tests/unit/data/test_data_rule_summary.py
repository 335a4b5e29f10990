"""Rule summaries from DescribeTrainingJob (real ACK responses), the team view and the wait helper.

moto's DescribeTrainingJob has no rule evaluation statuses, so these tests use botocore's Stubber with
expected_params for DescribeTrainingJob and ListTrainingJobs, or a small fake client.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pandas as pd
import pytest
from botocore.stub import Stubber

from smx_debug.contracts import details_step as parse_step
from smx_debug.contracts import rule_logs_url_from_arn
from smx_debug.data.rule_statuses import (
    RULE_COLUMNS,
    RuleSummary,
    rule_summary,
    rule_summary_many,
    wait_for_rules,
)
from smx_debug.errors import AwsError, ConfigError, NotFoundError

ACK = Path("third_party/aws-controllers-k8s+sagemaker-controller/pkg/resource/training_job/testdata/sdkapi/describe")
ARN = "arn:aws:sagemaker:us-west-2:072677473360:processing-job/smdebugger-demo-mnist-tens-vanishinggradient-1db16b4d"


def _boto3_shape(value: Any, key: str = "") -> Any:
    """The Go-SDK JSON of the ACK fixtures as boto3 returns it: no nulls, datetimes for *Time fields."""
    if isinstance(value, dict):
        return {k: _boto3_shape(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_boto3_shape(v) for v in value]
    if key.endswith("Time") and isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def _describe(data_dir: Path, name: str) -> dict[str, Any]:
    raw = json.loads((data_dir / ACK / name).read_text())
    desc = {k: v for k, v in _boto3_shape(raw).items() if k != "ResponseMetadata"}
    desc.setdefault("ModelArtifacts", {"S3ModelArtifacts": ""})  # required by the output shape, absent early
    return desc


def _client() -> Any:
    return boto3.client("sagemaker", region_name="us-west-2")


@pytest.mark.parametrize(
    ("details", "step"),
    [
        ("RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 resulted in the "
         "condition being met\n", 500),
        ("InternalServerError: An internal error occurred", None),
        (None, None),
        ("", None),
    ],
)
def test_parse_step_from_status_details(details: str | None, step: int | None) -> None:
    assert parse_step(details) == step


def test_rule_summary_logs_url_is_the_contracts_console_link() -> None:
    desc = {"TrainingJobName": "j", "DebugRuleEvaluationStatuses": [
        {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationJobArn": ARN, "RuleEvaluationStatus": "InProgress"}]}
    assert rule_summary("j", description=desc)["logs_url"].tolist() == [rule_logs_url_from_arn(ARN)]
    assert rule_logs_url_from_arn(ARN) is not None


LONG_REASON = ("RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization at step 5 resulted in the "
               "condition being met: GPU utilization p95 below 70% on algo-1 gpu0 for 12 of the last 15 minutes "
               "while the CPU stayed above 90%")


def test_rule_summary_shows_full_reason_and_blanks_not_nan() -> None:
    desc = {"TrainingJobName": "j",
            "ProfilerRuleConfigurations": [{"RuleConfigurationName": "ProfilerReport", "RuleEvaluatorImage": "i"}],
            "ProfilerRuleEvaluationStatuses": [
                {"RuleConfigurationName": "LowGPUUtilization", "RuleEvaluationStatus": "IssuesFound",
                 "StatusDetails": LONG_REASON + "\n", "RuleEvaluationJobArn": ARN}]}
    df = rule_summary("j", description=desc)
    assert isinstance(df, RuleSummary) and isinstance(df[["rule", "details"]], RuleSummary)
    text = repr(df[["rule", "status", "step", "details"]])
    assert LONG_REASON in text and "..." not in text
    assert "NaN" not in text and "<NA>" not in text and "None" not in text
    html = df._repr_html_()
    assert LONG_REASON.replace(">", "&gt;") in html and "white-space:pre-wrap" in html
    assert "NaN" not in html and "<NA>" not in html and "..." not in html
    assert LONG_REASON in df[["rule", "details"]].to_string()


def test_rule_summary_real_stopping_job_one_row_per_rule(data_dir: Path) -> None:
    desc = _describe(data_dir, "stopping_describe_debugger_variation.json")
    sm = _client()
    with Stubber(sm) as stub:
        stub.add_response("describe_training_job", desc, {"TrainingJobName": desc["TrainingJobName"]})
        df = rule_summary(desc["TrainingJobName"], sagemaker_client=sm)
    assert list(df.columns) == RULE_COLUMNS
    records = df.astype(object).where(df.notna(), None).to_dict("records")
    debug, profiler = (desc[f"{kind}RuleEvaluationStatuses"][0]["RuleEvaluationJobArn"] for kind in ("Debug", "Profiler"))
    both = {"job_name": "xgboost-training-debugger-jobsa", "status": "InProgress", "step": None, "details": None}
    assert records == [
        {**both, "rule": "LossNotDecreasing", "kind": "debugger", "last_modified": pd.Timestamp("2021-10-13T05:49:11.133Z"),
         "rule_job_arn": debug, "logs_url": rule_logs_url_from_arn(debug)},
        {**both, "rule": "ProfilerReport", "kind": "profiler", "last_modified": pd.Timestamp("2021-10-13T05:49:10.651Z"),
         "rule_job_arn": profiler, "logs_url": rule_logs_url_from_arn(profiler)},
    ]
    assert df.attrs["training_job_status"] == "Stopping"


def test_rule_summary_issue_found_parses_step_and_lists_configured_rules() -> None:
    desc = {
        "TrainingJobName": "job-a",
        "TrainingJobStatus": "InProgress",
        "DebugRuleConfigurations": [
            {"RuleConfigurationName": "VanishingGradient", "RuleEvaluatorImage": "img"},
            {"RuleConfigurationName": "Overfit", "RuleEvaluatorImage": "img"},
        ],
        "DebugRuleEvaluationStatuses": [
            {
                "RuleConfigurationName": "VanishingGradient",
                "RuleEvaluationJobArn": ARN,
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 "
                "resulted in the condition being met\n",
                "LastModifiedTime": datetime(2019, 12, 1, 23, 47, 32, 186000, tzinfo=UTC),
            }
        ],
    }
    df = rule_summary("job-a", description=desc)
    assert df[["rule", "status", "step"]].astype(object).where(df[["rule", "status", "step"]].notna(), None)\
        .to_dict("records") == [
        {"rule": "VanishingGradient", "status": "IssuesFound", "step": 500},
        {"rule": "Overfit", "status": None, "step": None},
    ]
    assert df["details"][0].endswith("condition being met")


def test_rule_summary_job_without_rules_is_empty(data_dir: Path) -> None:
    df = rule_summary("xgboost-training-job", description=_describe(data_dir, "success_completed_describe.json"))
    assert list(df.columns) == RULE_COLUMNS
    assert df.empty


def test_rule_summary_missing_job_raises_not_found() -> None:
    sm = _client()
    with Stubber(sm) as stub:
        stub.add_client_error("describe_training_job", "ValidationException", "Requested resource not found.",
                              expected_params={"TrainingJobName": "ghost"})
        with pytest.raises(NotFoundError, match="'ghost' not found"):
            rule_summary("ghost", sagemaker_client=sm)


def test_rule_summary_empty_name_raises_config_error() -> None:
    with pytest.raises(ConfigError) as exc:
        rule_summary("")
    assert exc.value.field == "job_name"


def test_rule_summary_many_filters_prefix_and_paginates(data_dir: Path) -> None:
    d1 = _describe(data_dir, "inprogress_describe_debugger_variation.json")
    d2 = _describe(data_dir, "stopping_describe_debugger_variation.json")
    created = datetime(2021, 10, 13, tzinfo=UTC)
    since = datetime(2021, 10, 1, tzinfo=UTC)

    def summary(name: str) -> dict[str, Any]:
        return {"TrainingJobName": name, "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:1:training-job/{name}",
                "CreationTime": created, "TrainingJobStatus": "InProgress"}

    sm = _client()
    params = {"SortBy": "CreationTime", "SortOrder": "Descending", "NameContains": "xgboost-training-debugger",
              "CreationTimeAfter": since}
    with Stubber(sm) as stub:
        stub.add_response("list_training_jobs",
                          {"TrainingJobSummaries": [summary(d1["TrainingJobName"]), summary("old-xgboost-training-debugger")],
                           "NextToken": "t1"}, params)
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": [summary(d2["TrainingJobName"])]},
                          {**params, "NextToken": "t1"})
        stub.add_response("describe_training_job", d1, {"TrainingJobName": d1["TrainingJobName"]})
        stub.add_response("describe_training_job", d2, {"TrainingJobName": d2["TrainingJobName"]})
        df = rule_summary_many("xgboost-training-debugger", since=since, sagemaker_client=sm, workers=1)
        stub.assert_no_pending_responses()
    assert df[["job_name", "rule", "kind", "job_status"]].to_dict("records") == [
        {"job_name": d1["TrainingJobName"], "rule": "LossNotDecreasing", "kind": "debugger", "job_status": "InProgress"},
        {"job_name": d1["TrainingJobName"], "rule": "ProfilerReport", "kind": "profiler", "job_status": "InProgress"},
        {"job_name": d2["TrainingJobName"], "rule": "LossNotDecreasing", "kind": "debugger", "job_status": "Stopping"},
        {"job_name": d2["TrainingJobName"], "rule": "ProfilerReport", "kind": "profiler", "job_status": "Stopping"},
    ]
    assert df.attrs["jobs"] == 2


class FakeSageMaker:
    """Returns the queued DescribeTrainingJob responses one after the other (the last one repeats)."""

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self.responses = responses
        self.calls = 0

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:
        self.calls += 1
        return self.responses[min(self.calls, len(self.responses)) - 1]


def _status(status: str) -> dict[str, Any]:
    return {"TrainingJobName": "j", "DebugRuleEvaluationStatuses": [
        {"RuleConfigurationName": "Overfit", "RuleEvaluationStatus": status,
         "LastModifiedTime": datetime(2026, 1, 1, tzinfo=UTC)}]}


def test_wait_for_rules_polls_until_settled_with_progress(capsys: pytest.CaptureFixture[str]) -> None:
    configured = {"TrainingJobName": "j",
                  "DebugRuleConfigurations": [{"RuleConfigurationName": "Overfit", "RuleEvaluatorImage": "i"}]}
    fake = FakeSageMaker([configured, _status("InProgress"), _status("InProgress"), _status("IssuesFound")])
    sleeps: list[float] = []
    df = wait_for_rules("j", poll_s=5, sagemaker_client=fake, progress=True, sleep=sleeps.append,
                        clock=lambda: 0.0)
    assert df["status"].tolist() == ["IssuesFound"]
    assert (fake.calls, sleeps) == (4, [5, 5, 5])
    err = capsys.readouterr().err  # tqdm's text bar, redrawn in place with \r
    frames = [f for f in err.replace("\n", "\r").split("\r") if f.strip()]
    assert [f for f in frames if "NotStarted: 1" in f] and [f for f in frames if "InProgress: 1" in f]
    assert "1/1" in frames[-1] and "IssuesFound: 1" in frames[-1] and frames[-1].startswith("j: 100%")


def test_wait_for_rules_quiet_off_a_terminal_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    wait_for_rules("j", sagemaker_client=FakeSageMaker([_status("NoIssuesFound")]), sleep=lambda s: None)
    assert capsys.readouterr().err == ""


def test_wait_for_rules_timeout_raises_aws_error() -> None:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    with pytest.raises(AwsError, match=r"not settled after 20 s \(InProgress: 1\)") as exc:
        wait_for_rules("j", poll_s=10, timeout_s=20, sagemaker_client=FakeSageMaker([_status("InProgress")]),
                       progress=False, sleep=sleep, clock=lambda: now[0])
    assert exc.value.code == "RulesNotSettled"


@pytest.mark.parametrize("field", ["poll_s", "timeout_s"])
def test_wait_for_rules_bad_interval_raises_config_error(field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        wait_for_rules("j", sagemaker_client=FakeSageMaker([]), **{field: 0})  # type: ignore[arg-type]
    assert exc.value.field == field
