"""smx_debug.local.sagemaker.search: SageMaker Search over training jobs as the API documents it (moto's is kinder).

Every call goes through boto3, so requests are validated and responses parsed with botocore's SageMaker model;
each answer is also checked against the model's output shape with ``ParamValidator``.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator
from local_support import client, create_job

from smx_debug.contracts import MANAGED_TAG
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import search, training_jobs

RUNNING_OPT_IN = {"Filters": [{"Name": f"Tags.{MANAGED_TAG}", "Operator": "Exists"},
                              {"Name": "TrainingJobStatus", "Operator": "Equals", "Value": "InProgress"}]}


@pytest.fixture
def aws(local_aws: LocalAws) -> LocalAws:
    training_jobs.install()
    search.install()
    return local_aws


def _job(aws: LocalAws, name: str, status: str = "InProgress", **tags: str) -> None:
    """A job with ``tags`` (``managed=`` stands for the opt-in tag) in ``status``."""
    create_job(aws, name, tags={MANAGED_TAG if k == "managed" else k: v for k, v in tags.items()})
    training_jobs.set_training_job_status(aws, name, status)


def _search(aws: LocalAws, **kwargs: Any) -> dict[str, Any]:
    sagemaker = client(aws, "sagemaker")
    answer: dict[str, Any] = sagemaker.search(Resource="TrainingJob", **kwargs)
    shape = sagemaker.meta.service_model.operation_model("Search").output_shape
    report = ParamValidator().validate({k: v for k, v in answer.items() if k != "ResponseMetadata"}, shape)
    assert not report.has_errors(), report.generate_report()
    return answer


def _names(answer: dict[str, Any]) -> list[str]:
    return sorted(r["TrainingJob"]["TrainingJobName"] for r in answer["Results"])


def test_search_tag_exists_and_status_filters_both_apply(aws: LocalAws) -> None:
    _job(aws, "team-a", managed="true")
    _job(aws, "team-b", "Completed", managed="true")
    _job(aws, "team-c")
    _job(aws, "team-d", managed="false")
    assert _names(_search(aws, SearchExpression=RUNNING_OPT_IN, MaxResults=100)) == ["team-a", "team-d"]


def test_search_result_is_the_training_job_shape_with_tags(aws: LocalAws) -> None:
    create_job(aws, "prof-1", tags={MANAGED_TAG: "True", "team": "b"},
               ProfilerConfig={"S3OutputPath": "s3://smx-out/debug"})
    training_jobs.set_training_job_status(aws, "prof-1", "InProgress")
    job = _search(aws, SearchExpression=RUNNING_OPT_IN)["Results"][0]["TrainingJob"]
    assert job["Tags"] == [{"Key": MANAGED_TAG, "Value": "True"}, {"Key": "team", "Value": "b"}]
    assert (job["TrainingJobName"], job["TrainingJobStatus"]) == ("prof-1", "InProgress")
    assert job["ProfilerConfig"]["S3OutputPath"] == "s3://smx-out/debug"  # as DescribeTrainingJob answers
    assert job["ResourceConfig"]["InstanceType"] == "ml.m5.xlarge"


def test_search_pages_ten_by_default_and_max_results_with_next_token(aws: LocalAws) -> None:
    for i in range(23):
        _job(aws, f"page-{i:02d}", managed="true")
    first = _search(aws, SearchExpression=RUNNING_OPT_IN)
    assert len(first["Results"]) == 10 and "NextToken" in first
    pages = client(aws, "sagemaker").get_paginator("search").paginate(
        Resource="TrainingJob", SearchExpression=RUNNING_OPT_IN, PaginationConfig={"PageSize": 10})
    sizes = [len(p["Results"]) for p in pages]
    assert sizes == [10, 10, 3]
    every = _search(aws, SearchExpression=RUNNING_OPT_IN, MaxResults=100, SortBy="TrainingJobName",
                    SortOrder="Ascending")
    assert [r["TrainingJob"]["TrainingJobName"] for r in every["Results"]] == [f"page-{i:02d}" for i in range(23)]
    assert "NextToken" not in every


def test_search_or_sub_expressions_in_and_contains(aws: LocalAws) -> None:
    _job(aws, "exp-1")
    _job(aws, "exp-2", team="x")
    _job(aws, "other-3", team="y")
    either = {"SubExpressions": [{"Filters": [{"Name": "TrainingJobName", "Operator": "Contains", "Value": "exp-1"}]},
                                 {"Filters": [{"Name": "Tags.team", "Operator": "In", "Value": "x,z"}]}],
              "Operator": "Or"}
    assert _names(_search(aws, SearchExpression=either)) == ["exp-1", "exp-2"]
    no_tag = {"Filters": [{"Name": "Tags.team", "Operator": "NotExists"}]}
    assert _names(_search(aws, SearchExpression=no_tag)) == ["exp-1"]
    nested = {"Filters": [{"Name": "ResourceConfig.InstanceCount", "Operator": "GreaterThanOrEqualTo", "Value": "1"},
                          {"Name": "Tags.team", "Value": "y"}]}  # no Operator: Equals
    assert _names(_search(aws, SearchExpression=nested)) == ["other-3"]


@pytest.mark.parametrize(("expression", "extra", "message"), [
    ({"Filters": [{"Name": "NoSuchField", "Operator": "Exists"}]}, {}, "Unknown property name: NoSuchField"),
    ({"Filters": [{"Name": "Tags.team", "Operator": "Exists", "Value": "x"}]}, {}, "takes no Value"),
    ({"Filters": [{"Name": "Tags.team", "Operator": "Equals"}]}, {}, "needs a Value"),
    ({"Filters": [{"Name": "TrainingJobName", "Operator": "GreaterThan", "Value": "a"}]}, {}, "text properties"),
    ({"Filters": [{"Name": "TrainingJobName", "Operator": "Contains", "Value": "a"},
                  {"Name": "RoleArn", "Operator": "Contains", "Value": "b"}]}, {}, "usage limit of 1"),
    ({"NestedFilters": [{"NestedPropertyName": "Metrics", "Filters": [{"Name": "Metrics.acc", "Value": "1"}]}]},
     {}, "NestedFilters"),
    ({}, {"NextToken": "bm90IGEgdG9rZW4="}, "NextToken is invalid"),
    # nested 3,000 deep: within NextToken's 8,192 characters, past the decoder's recursion limit
    ({}, {"NextToken": __import__("base64").urlsafe_b64encode(b"[" * 3000 + b"]" * 3000).decode()},
     "NextToken is invalid"),
])
def test_search_refuses_what_sagemaker_refuses(
    aws: LocalAws, expression: dict[str, Any], extra: dict[str, Any], message: str
) -> None:
    _job(aws, "exp-1", team="x")
    with pytest.raises(ClientError) as info:
        client(aws, "sagemaker").search(Resource="TrainingJob", SearchExpression=expression or RUNNING_OPT_IN,
                                        **extra)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    assert message in info.value.response["Error"]["Message"]
