"""smx_debug.local.sagemaker.rule_statuses: rule evaluation statuses in DescribeTrainingJob, and the state-change event.

DescribeTrainingJob goes through boto3, so the statuses are checked against botocore's SageMaker model.
"""

from __future__ import annotations

import pytest
from local_support import client, create_job

from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import rule_statuses, training_jobs


def test_set_rule_statuses_shows_in_describe_and_in_the_state_change_event(local_aws: LocalAws) -> None:
    aws = local_aws
    create_job(aws, "ext-rules", {"smx-debug:managed": "true"})
    training_jobs.set_training_job_status(aws, "ext-rules", "InProgress")
    rule_statuses.set_rule_statuses(
        aws,
        "ext-rules",
        debug=[rule_statuses.rule_status("LossNotDecreasing", "IssuesFound", step=3000)],
        profiler={"ProfilerReport": "InProgress"},
    )
    described = client(aws, "sagemaker").describe_training_job(TrainingJobName="ext-rules")
    assert [s["RuleEvaluationStatus"] for s in described["DebugRuleEvaluationStatuses"]] == ["IssuesFound"]
    event = rule_statuses.state_change_event(aws, "ext-rules")
    assert {k: event[k] for k in ("source", "detail-type", "account", "region")} == {
        "source": "aws.sagemaker",
        "detail-type": "SageMaker Training Job State Change",
        "account": "123456789012",
        "region": "us-west-2",
    }
    detail = event["detail"]
    debug = detail["DebugRuleEvaluationStatuses"][0]
    assert isinstance(debug.pop("LastModifiedTime"), int)
    assert debug == {
        "RuleConfigurationName": "LossNotDecreasing",
        "RuleEvaluationJobArn": rule_statuses._rule_job_arn(aws, "ext-rules", "LossNotDecreasing"),
        "RuleEvaluationStatus": "IssuesFound",
        "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule LossNotDecreasing at step 3000 "
        "resulted in the condition being met\n",
    }
    assert [p["RuleEvaluationStatus"] for p in detail["ProfilerRuleEvaluationStatuses"]] == ["InProgress"]
    assert (detail["TrainingJobStatus"], detail["SecondaryStatus"], detail["Tags"]) == (
        "InProgress",
        "Training",
        {"smx-debug:managed": "true"},
    )


def test_set_rule_statuses_none_keeps_the_current_list(local_aws: LocalAws) -> None:
    create_job(local_aws, "ext-keep")
    rule_statuses.set_rule_statuses(local_aws, "ext-keep", debug={"VanishingGradient": "InProgress"})
    rule_statuses.set_rule_statuses(local_aws, "ext-keep", profiler={"ProfilerReport": "NoIssuesFound"})
    described = client(local_aws, "sagemaker").describe_training_job(TrainingJobName="ext-keep")
    assert [s["RuleConfigurationName"] for s in described["DebugRuleEvaluationStatuses"]] == ["VanishingGradient"]
    assert [s["RuleEvaluationStatus"] for s in described["ProfilerRuleEvaluationStatuses"]] == ["NoIssuesFound"]


def test_set_rule_statuses_rejects_an_entry_without_a_rule_name(local_aws: LocalAws) -> None:
    create_job(local_aws, "ext-noname")
    with pytest.raises(ConfigError, match="RuleConfigurationName is required"):
        rule_statuses.set_rule_statuses(local_aws, "ext-noname", debug=[{"RuleEvaluationStatus": "InProgress"}])
    with pytest.raises(NotFoundError, match="'ext-missing'"):
        rule_statuses.set_rule_statuses(local_aws, "ext-missing", debug={"R": "InProgress"})
