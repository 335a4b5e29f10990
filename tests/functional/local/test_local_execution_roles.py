"""smx_debug.local.sagemaker.execution_roles: CreateTrainingJob refuses an execution role SageMaker could not assume.

Every call goes through boto3 against the local server, so the error arrives as botocore parses SageMaker's
answer (a ClientError whose ``Error`` carries the code and message).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from local_support import client

from smx_debug import local
from smx_debug.local import LocalAws
from smx_debug.local.server import LOCAL_ACCOUNT_ID

ROLES = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role"


def _trust(service: str, **condition: Any) -> str:
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    if condition:
        statement["Condition"] = condition
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def _role(aws: LocalAws, name: str, trust: str, path: str = "/") -> str:
    return str(client(aws, "iam").create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=trust)["Role"]["Arn"])


def _create(aws: LocalAws, name: str, role_arn: str) -> None:
    client(aws, "sagemaker").create_training_job(
        TrainingJobName=name, RoleArn=role_arn,
        AlgorithmSpecification={"TrainingImage": f"{LOCAL_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://smx-out/output"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600})


def _refused(aws: LocalAws, name: str, role_arn: str) -> dict[str, Any]:
    with pytest.raises(ClientError) as info:
        _create(aws, name, role_arn)
    names = [j["TrainingJobName"] for j in client(aws, "sagemaker").list_training_jobs()["TrainingJobSummaries"]]
    assert name not in names  # nothing was created
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    return dict(info.value.response["Error"])


def _could_not_assume(role_arn: str) -> dict[str, str]:
    return {"Code": "ValidationException",
            "Message": f"Could not assume role {role_arn}. Please ensure that the role exists and allows principal "
                       "'sagemaker.amazonaws.com' to assume the role."}


def test_create_training_job_role_that_does_not_exist_is_refused_with_validation_exception(
        local_aws: LocalAws) -> None:
    assert _refused(local_aws, "role-missing", f"{ROLES}/SageMakerExecution-nobody") == _could_not_assume(
        f"{ROLES}/SageMakerExecution-nobody")


def test_create_training_job_role_trusting_another_service_is_refused_with_validation_exception(
        local_aws: LocalAws) -> None:
    arn = _role(local_aws, "SageMakerExecution-lambda", _trust("lambda.amazonaws.com"))
    assert _refused(local_aws, "role-lambda", arn) == _could_not_assume(arn)


def test_create_training_job_sagemaker_execution_role_is_accepted(local_aws: LocalAws) -> None:
    arn = _role(local_aws, "SageMakerExecution-ok", _trust("sagemaker.amazonaws.com"))
    _create(local_aws, "role-ok", arn)
    assert client(local_aws, "sagemaker").describe_training_job(TrainingJobName="role-ok")["RoleArn"] == arn


@pytest.mark.parametrize(("case", "trust", "path", "asked"), [
    ("named without its path", _trust("sagemaker.amazonaws.com"), "/service-role/", "{roles}/{name}"),
    ("another account's ARN", _trust("sagemaker.amazonaws.com"), "/", "arn:aws:iam::111122223333:role/{name}"),
    ("an explicit deny", json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"},
        {"Effect": "Deny", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:*"}]}),
     "/", "{arn}"),
    ("a condition on a key SageMaker does not supply",
     _trust("sagemaker.amazonaws.com", StringEquals={"aws:SourceAccount": LOCAL_ACCOUNT_ID}), "/", "{arn}"),
    ("trusting the account, not the service", json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:root"},
         "Action": "sts:AssumeRole"}]}), "/", "{arn}"),
])
def test_create_training_job_role_sagemaker_cannot_assume_is_refused(
        local_aws: LocalAws, case: str, trust: str, path: str, asked: str) -> None:
    name = "SageMakerExecution-case"
    arn = _role(local_aws, name, trust, path)
    role_arn = asked.format(roles=ROLES, name=name, arn=arn)
    assert _refused(local_aws, "role-case", role_arn) == _could_not_assume(role_arn), case


def test_execution_role_creates_a_role_sagemaker_may_assume_once(local_aws: LocalAws) -> None:
    arn = local.execution_role(local_aws)
    assert arn == f"{ROLES}/SageMakerExecution-local"
    assert local.execution_role(local_aws) == arn  # found, not created twice
    assert local.execution_role(local_aws, "SageMakerExecution-demo") == f"{ROLES}/SageMakerExecution-demo"
    trust = client(local_aws, "iam").get_role(RoleName="SageMakerExecution-local")["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"] == [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
                                   "Action": "sts:AssumeRole"}]
    local.create_training_job(local_aws, "role-default")  # the minimal request uses it
    assert client(local_aws, "sagemaker").describe_training_job(TrainingJobName="role-default")["RoleArn"] == arn
