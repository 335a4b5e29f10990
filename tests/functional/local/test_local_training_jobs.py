"""smx_debug.local.sagemaker.training_jobs: StopTrainingJob's lifecycle, job statuses and the profiler fields moto drops.

Every call goes through boto3, so requests and responses are checked against botocore's SageMaker model
(a field the model does not declare would not survive parsing).
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from local_support import client, create_job

from smx_debug.contracts import ENVIRONMENT_ENTRIES_MAX, ENVIRONMENT_VALUE_MAX
from smx_debug.errors import ConfigError, NotFoundError
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker import training_jobs


@pytest.fixture
def aws(local_aws: LocalAws) -> LocalAws:
    training_jobs.install()
    return local_aws


def _running(aws: LocalAws, name: str, **fields: object) -> None:
    create_job(aws, name, **fields)
    training_jobs.set_training_job_status(aws, name, "InProgress")


def test_stop_training_job_goes_stopping_then_stopped_and_counts_calls(aws: LocalAws) -> None:
    sagemaker = client(aws, "sagemaker")
    _running(aws, "ext-stop")
    sagemaker.stop_training_job(TrainingJobName="ext-stop")
    seen = [
        sagemaker.describe_training_job(TrainingJobName="ext-stop")["TrainingJobStatus"] for _ in range(3)
    ]
    assert seen == ["Stopping", "Stopped", "Stopped"]
    with pytest.raises(ClientError) as info:
        sagemaker.stop_training_job(TrainingJobName="ext-stop")
    assert info.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "The request was rejected because the training job is in status Stopped.",
    }
    assert training_jobs.stop_calls(aws, "ext-stop") == 2
    transitions = sagemaker.describe_training_job(TrainingJobName="ext-stop")["SecondaryStatusTransitions"]
    assert [t["Status"] for t in transitions] == ["Starting", "Training", "Stopping", "Stopped"]


def test_tick_moves_stopping_jobs_to_stopped(aws: LocalAws) -> None:
    _running(aws, "ext-tick")
    client(aws, "sagemaker").stop_training_job(TrainingJobName="ext-tick")
    assert training_jobs.tick(aws) == ["ext-tick"]
    assert (
        client(aws, "sagemaker").describe_training_job(TrainingJobName="ext-tick")["TrainingJobStatus"]
        == "Stopped"
    )


def test_stop_unknown_job_is_a_validation_error(aws: LocalAws) -> None:
    with pytest.raises(ClientError, match="Requested resource not found"):
        client(aws, "sagemaker").stop_training_job(TrainingJobName="ext-nope")
    with pytest.raises(NotFoundError, match="'ext-nope'"):
        training_jobs.stop_calls(aws, "ext-nope")


def test_set_training_job_status_pairs_the_secondary_status(aws: LocalAws) -> None:
    _running(aws, "ext-status")
    training_jobs.set_training_job_status(aws, "ext-status", "Failed")
    desc = client(aws, "sagemaker").describe_training_job(TrainingJobName="ext-status")
    assert (desc["TrainingJobStatus"], desc["SecondaryStatus"]) == ("Failed", "Failed")
    assert "TrainingEndTime" in desc


def test_set_training_job_status_rejects_unknown_status(aws: LocalAws) -> None:
    create_job(aws, "ext-bad")
    with pytest.raises(ConfigError, match="'Exploded'"):
        training_jobs.set_training_job_status(aws, "ext-bad", "Exploded")


def test_create_training_job_profiler_fields_are_kept_and_described(aws: LocalAws) -> None:
    """moto drops ProfilerConfig/ProfilerRuleConfigurations; they are kept as SageMaker does."""
    sagemaker = client(aws, "sagemaker")
    profiler = {"S3OutputPath": "s3://smx-out/debugger", "ProfilingIntervalInMilliseconds": 500}
    rules = [
        {
            "RuleConfigurationName": "CPUBottleneck",
            "RuleEvaluatorImage": "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest",
            "RuleParameters": {"rule_to_invoke": "CPUBottleneck", "threshold": "50"},
        }
    ]
    create_job(aws, "ext-profiler", ProfilerConfig=profiler, ProfilerRuleConfigurations=rules)
    desc = sagemaker.describe_training_job(TrainingJobName="ext-profiler")
    assert desc["ProfilerConfig"] == profiler
    assert desc["ProfilerRuleConfigurations"] == rules
    assert desc["ProfilingStatus"] == "Enabled"
    create_job(aws, "ext-no-profiler")
    assert "ProfilerConfig" not in sagemaker.describe_training_job(TrainingJobName="ext-no-profiler")


@pytest.mark.parametrize(("environment", "constraint"), [
    ({"V": "x" * (ENVIRONMENT_VALUE_MAX + 1)}, f"'environment.V' failed to satisfy constraint: Member must have "
                                               f"length less than or equal to {ENVIRONMENT_VALUE_MAX}"),
    ({f"V{i}": "1" for i in range(ENVIRONMENT_ENTRIES_MAX + 1)},
     f"'environment' failed to satisfy constraint: Member must have length less than or equal to "
     f"{ENVIRONMENT_ENTRIES_MAX}"),
])
def test_create_training_job_environment_over_sagemakers_limits_is_a_validation_error(
        aws: LocalAws, environment: dict[str, str], constraint: str) -> None:
    """botocore does not check these maximums before sending; SageMaker refuses the request."""
    with pytest.raises(ClientError) as info:
        create_job(aws, "ext-env", Environment=environment)
    assert info.value.response["Error"]["Code"] == "ValidationException"
    assert constraint in info.value.response["Error"]["Message"]
    create_job(aws, "ext-env", Environment={f"V{i}": "x" * ENVIRONMENT_VALUE_MAX for i in range(ENVIRONMENT_ENTRIES_MAX)})
