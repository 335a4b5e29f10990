"""The local AWS's GetMetricData (indexed, 500-query limit), bulk datapoints, throttling and job metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from smx_debug.errors import ConfigError
from smx_debug.local import LocalAws
from smx_debug.local.clients import client
from smx_debug.local.cloudwatch import metric_data
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.local.throttling import throttle

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIMS = [{"Name": "Host", "Value": "j/algo-1"}]


def _query(stat: str, qid: str = "a") -> dict[str, object]:
    return {"Id": qid, "MetricStat": {"Metric": {"Namespace": "N", "MetricName": "M", "Dimensions": DIMS},
                                      "Period": 60, "Stat": stat}}


@pytest.mark.parametrize(("stat", "expected"), [
    ("Average", [1.0, 2.5]), ("Sum", [1.0, 5.0]), ("Minimum", [1.0, 2.0]), ("Maximum", [1.0, 3.0]),
    ("SampleCount", [1.0, 2.0]),
])
def test_get_metric_data_aggregates_put_metric_data_and_bulk_datapoints_per_period(
    local_aws: LocalAws, stat: str, expected: list[float]
) -> None:
    metric_data.install()
    cw = local_aws.client("cloudwatch")
    cw.put_metric_data(Namespace="N", MetricData=[
        {"MetricName": "M", "Dimensions": DIMS, "Timestamp": T0 + timedelta(seconds=5), "Value": 1.0},
    ])
    metric_data.put_datapoints(local_aws, "N", "M", {"Host": "j/algo-1"},
                               [T0 + timedelta(seconds=65), T0 + timedelta(seconds=70)], [2.0, 3.0])
    metric_data.put_datapoints(local_aws, "N", "M", {"Host": "other"}, [T0 + timedelta(seconds=65)], [99.0])
    result = cw.get_metric_data(MetricDataQueries=[_query(stat)], StartTime=T0, EndTime=T0 + timedelta(minutes=5),
                                ScanBy="TimestampAscending")["MetricDataResults"][0]
    assert result["Values"] == expected
    assert [t.astimezone(UTC) for t in result["Timestamps"]] == [T0, T0 + timedelta(minutes=1)]


def test_get_metric_data_more_than_500_queries_is_a_validation_error(local_aws: LocalAws) -> None:
    metric_data.install()
    with pytest.raises(ClientError) as info:
        local_aws.client("cloudwatch").get_metric_data(
            MetricDataQueries=[_query("Average", f"q{i}") for i in range(501)],
            StartTime=T0, EndTime=T0 + timedelta(minutes=5),
        )
    assert info.value.response["Error"]["Code"] == "ValidationError"


def test_put_datapoints_rejects_naive_timestamps_and_length_mismatch(local_aws: LocalAws) -> None:
    with pytest.raises(ConfigError):
        metric_data.put_datapoints(local_aws, "N", "M", {}, [datetime(2026, 1, 1)], [1.0])
    with pytest.raises(ConfigError):
        metric_data.put_datapoints(local_aws, "N", "M", {}, [T0], [1.0, 2.0])


def test_throttle_fails_the_next_calls_with_throttling_then_lets_them_through(local_aws: LocalAws) -> None:
    metric_data.install()
    once = local_aws.client("cloudwatch", config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
    kwargs = {"MetricDataQueries": [_query("Average")], "StartTime": T0, "EndTime": T0 + timedelta(minutes=5)}
    with throttle("cloudwatch", "GetMetricData", times=1) as throttled:
        with pytest.raises(ClientError) as info:
            once.get_metric_data(**kwargs)
        once.get_metric_data(**kwargs)
    assert info.value.response["Error"]["Code"] == "Throttling"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert throttled.count == 1
    retried = local_aws.client("cloudwatch")  # standard retries absorb a short burst
    with throttle("cloudwatch", "GetMetricData", times=2):
        assert retried.get_metric_data(**kwargs)["ResponseMetadata"]["RetryAttempts"] == 2
    with pytest.raises(ConfigError), throttle("cloudwatch", "GetMetricData", times=0):
        pass


def test_throttle_jobs_only_throttles_calls_about_those_jobs(local_aws: LocalAws) -> None:
    from smx_debug import local

    local.install(local_aws)
    for name in ("hot-1", "cold-1"):
        client(local_aws, "sagemaker").create_training_job(
            TrainingJobName=name, RoleArn=local.execution_role(local_aws),
            AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                    "TrainingInputMode": "File"},
            OutputDataConfig={"S3OutputPath": "s3://b/o"}, StoppingCondition={"MaxRuntimeInSeconds": 60},
            ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5})
    once = local_aws.client("sagemaker", config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
    arn = once.describe_training_job(TrainingJobName="hot-1")["TrainingJobArn"]
    with throttle("sagemaker", "DescribeTrainingJob", times=100, jobs={"hot-1"}) as hot, \
            throttle("sagemaker", "ListTags", times=100, jobs={"hot-1"}):
        assert once.describe_training_job(TrainingJobName="cold-1")["TrainingJobName"] == "cold-1"
        with pytest.raises(ClientError, match="ThrottlingException"):
            once.describe_training_job(TrainingJobName="hot-1")
        with pytest.raises(ClientError, match="ThrottlingException"):
            once.list_tags(ResourceArn=arn)
    assert hot.count == 1


def test_scenario_cpu_bottleneck_from_onset_in_cloudwatch_units() -> None:
    import numpy as np

    values = Scenario(kind="cpu_bottleneck", onset=3, vcpus=8, gpus=4).instance(np.arange(6), host=1)
    assert (values["CPUUtilization"][:3] < 0.7 * 800).all() and (values["CPUUtilization"][3:] > 0.9 * 800).all()
    assert (values["GPUUtilization"][:3] > 0.5 * 400).all() and (values["GPUUtilization"][3:] < 0.1 * 400).all()
    with pytest.raises(ConfigError):
        Scenario(kind="meltdown")  # type: ignore[arg-type]
