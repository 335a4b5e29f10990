"""What happened to the job, from DescribeTrainingJob (real responses in the fixtures) and the actions ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from botocore.stub import Stubber

from smx_debug.contracts import stop_key
from smx_debug.htmlreport import JobOutcome, fetch_outcome
from smx_debug.htmlreport.outcome import outcome_from_describe, outcome_from_ledger_item

ACK = Path(__file__).resolve().parents[2] / "data" / "third_party" / "aws-controllers-k8s+sagemaker-controller" / "pkg" \
    / "resource" / "training_job" / "testdata" / "sdkapi" / "describe"


def _ns(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)


def test_outcome_from_describe_stopping_job_real_response():
    desc = json.loads((ACK / "stopping_describe_debugger_variation.json").read_text())
    out = outcome_from_describe(desc)
    assert out.status == "Stopping" and out.stopped
    assert out.stop_ns == _ns("2021-10-13T05:49:11.155Z")  # no Stopping transition yet: LastModifiedTime
    assert out.max_runtime_s == 86400 and out.triggers == {}  # rules still InProgress


def test_outcome_from_describe_completed_job_is_not_stopped():
    out = outcome_from_describe(json.loads((ACK / "success_completed_describe.json").read_text()))
    assert out.status == "Completed" and not out.stopped and out.stop_ns is None


def test_outcome_from_describe_issues_found_times_and_stopping_transition():
    t = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    desc = {
        "TrainingJobStatus": "Stopped", "TrainingStartTime": datetime(2026, 1, 1, tzinfo=UTC),
        "SecondaryStatusTransitions": [{"Status": "Training", "StartTime": datetime(2026, 1, 1, tzinfo=UTC)},
                                       {"Status": "Stopping", "StartTime": datetime(2026, 1, 1, 0, 11, tzinfo=UTC)}],
        "ProfilerRuleEvaluationStatuses": [
            {"RuleConfigurationName": "CPU-strict", "RuleEvaluationStatus": "IssuesFound", "LastModifiedTime": t},
            {"RuleConfigurationName": "ProfilerReport", "RuleEvaluationStatus": "InProgress", "LastModifiedTime": t},
        ],
    }
    out = outcome_from_describe(desc)
    assert out.triggers == {"CPU-strict": int(t.timestamp() * 1e9)}
    assert out.stop_ns == int(datetime(2026, 1, 1, 0, 11, tzinfo=UTC).timestamp() * 1e9)


def test_outcome_from_ledger_item_dynamodb_typed_attributes():
    item = {"pk": {"S": stop_key("job-1")}, "state": {"S": "done"}, "done_at": {"N": "1767226260"},
            "actor": {"S": "SmxDebugGuard-StopTraining"}, "rule": {"S": "CPU-strict"}}
    out = outcome_from_ledger_item(JobOutcome(status="Stopped"), item)
    assert out.stop_ns == 1_767_226_260 * 10**9
    assert out.stopped_by == "SmxDebugGuard-StopTraining (ledger)" and out.stop_rule == "CPU-strict"
    assert outcome_from_ledger_item(out, None) is out


def test_fetch_outcome_reads_the_stop_key_of_the_job():
    import boto3

    sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    ddb = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    # moto drops the profiler fields of DescribeTrainingJob, so both calls are stubbed with their exact params.
    with Stubber(sm) as s1, Stubber(ddb) as s2:
        s1.add_response("describe_training_job", {
            "TrainingJobName": "job-1", "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/job-1",
            "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"}, "TrainingJobStatus": "Stopped",
            "SecondaryStatus": "Stopped", "AlgorithmSpecification": {"TrainingInputMode": "File"},
            "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "CreationTime": datetime(2026, 1, 1, tzinfo=UTC),
        }, {"TrainingJobName": "job-1"})
        s2.add_response("get_item", {"Item": {"pk": {"S": "job-1#stop"}, "done_at": {"N": "1767226000"},
                                              "actor": {"S": "stopper"}}},
                        {"TableName": "ledger", "Key": {"pk": {"S": stop_key("job-1")}}, "ConsistentRead": True})
        out = fetch_outcome("job-1", sagemaker_client=sm, dynamodb_client=ddb, ledger_table="ledger")
    assert out.stop_ns == 1_767_226_000 * 10**9 and out.stopped_by == "stopper (ledger)"
    assert out.max_runtime_s == 3600 and out.sources == ("DescribeTrainingJob", "ledger")


@pytest.mark.parametrize("status", ["Stopping", "Stopped"])
def test_outcome_stopped_by_status_alone(status):
    assert JobOutcome(status=status).stopped
