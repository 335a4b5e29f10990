"""smx_debug.local.iam.principals.as_principal: clients that run as a person's role session whose identity policy is given
(the notebook user's, docs/permissions.md), every call authorized before it reaches moto, denied as AWS denies it."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from local_support import client, create_job

from smx_debug.local import LocalAws, execution_role, iam
from smx_debug.local.server import LOCAL_ACCOUNT_ID
from smx_debug.permissions import notebook_policy

REGION = "us-west-2"
BUCKET = "guard-out"
ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/SageMakerExecution-notebook"
USER = f"arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/notebook-user/notebook"
JOBS = f"arn:aws:sagemaker:{REGION}:{LOCAL_ACCOUNT_ID}:training-job/"


@pytest.fixture
def user(local_aws: LocalAws) -> iam.LocalPrincipal:
    """The notebook user of docs/permissions.md: jobs named ``team-a-*``, the bucket ``guard-out``, the role above."""
    execution_role(local_aws, ROLE.rsplit("/", 1)[1])
    client(local_aws, "s3").create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    client(local_aws, "s3").put_object(Bucket=BUCKET, Key="debugger/x.json", Body=b"{}")
    policy = notebook_policy(bucket=BUCKET, role_arn=ROLE, job_prefix="team-a-")
    return iam.as_principal(local_aws, policy, name="notebook-user", session_name="notebook")


def _training_job(name: str, role: str = ROLE) -> dict[str, Any]:
    return {"TrainingJobName": name, "RoleArn": role,
            "AlgorithmSpecification": {"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                       "TrainingInputMode": "File"},
            "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/model"},
            "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600}, "Tags": [{"Key": "team", "Value": "a"}]}


def test_as_principal_calls_within_the_policy_are_allowed_and_recorded_as_the_user(
    local_aws: LocalAws, user: iam.LocalPrincipal
) -> None:
    sagemaker, s3 = user.client("sagemaker"), user.client("s3")
    sagemaker.create_training_job(**_training_job("team-a-1"))
    assert sagemaker.describe_training_job(TrainingJobName="team-a-1")["RoleArn"] == ROLE
    assert s3.get_object(Bucket=BUCKET, Key="debugger/x.json")["Body"].read() == b"{}"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="debugger/")["Contents"]] == [
        "debugger/x.json"]
    made = user.records()
    assert {(r.caller, r.user, r.allowed) for r in made} == {("notebook-user", True, True)}
    by_action = {r.action: iam.statement_label(r.statement) for r in made}
    assert by_action == {"sagemaker:CreateTrainingJob": "TrainingJobs", "sagemaker:AddTags": "TrainingJobs",
                         "iam:PassRole": "PassExecutionRole", "sagemaker:DescribeTrainingJob": "TrainingJobs",
                         "s3:GetObject": "Objects", "s3:ListBucket": "Bucket"}


# (call outside the notebook user's policy, botocore's error code, HTTP status, the action denied, its resource)
OUTSIDE = [
    (lambda sm, s3: sm.describe_training_job(TrainingJobName="team-b-1"), "AccessDeniedException", 400,
     "sagemaker:DescribeTrainingJob", f"{JOBS}team-b-1"),
    (lambda sm, s3: sm.stop_training_job(TrainingJobName="team-a-1"), "AccessDeniedException", 400,
     "sagemaker:StopTrainingJob", f"{JOBS}team-a-1"),
    (lambda sm, s3: sm.create_training_job(**_training_job("team-a-2", role=f"{ROLE}-admin")),
     "AccessDeniedException", 400, "iam:PassRole", f"{ROLE}-admin"),
    (lambda sm, s3: s3.put_object(Bucket=BUCKET, Key="debugger/y.json", Body=b"{}"), "AccessDenied", 403,
     "s3:PutObject", f"arn:aws:s3:::{BUCKET}/debugger/y.json"),
]


@pytest.mark.iam_denials
@pytest.mark.parametrize(("call", "code", "status", "action", "resource"), OUTSIDE,
                         ids=[o[3] for o in OUTSIDE])
def test_as_principal_call_outside_the_policy_is_denied_as_aws_denies_it(
    local_aws: LocalAws, user: iam.LocalPrincipal, call: Any, code: str, status: int, action: str, resource: str
) -> None:
    create_job(local_aws, "team-a-1")
    create_job(local_aws, "team-b-1")
    with pytest.raises(ClientError) as denied:
        call(user.client("sagemaker"), user.client("s3"))
    error = denied.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)
    assert error["Error"]["Message"] == (
        f"User: {USER} is not authorized to perform: {action} on resource: {resource} because no identity-based "
        f"policy allows the {action} action")
    assert [(r.caller, r.action, r.resource) for r in iam.ledger(local_aws).denials()] == [("notebook-user", action, resource)]
    assert "team-a-2" not in {j["TrainingJobName"] for j in client(local_aws, "sagemaker").list_training_jobs()[
        "TrainingJobSummaries"]}


@pytest.mark.iam_denials
def test_as_principal_pass_role_to_another_service_is_denied_by_iam_passed_to_service(
    local_aws: LocalAws, user: iam.LocalPrincipal
) -> None:
    """The policy's PassRole holds only for sagemaker.amazonaws.com: the same role passed elsewhere is refused."""
    job = f"{JOBS}team-a-3"
    for service, allowed in (("sagemaker.amazonaws.com", True), ("lambda.amazonaws.com", False)):
        decision = iam.decide(iam.Request(user.caller.principal, "iam:PassRole", ROLE, {
            **user.caller.context(), "iam:PassedToService": service, "iam:AssociatedResourceArn": job}),
            identity=iam.identity_statements(local_aws, user.caller.role_arn))
        assert decision.allowed is allowed, service


def test_as_principal_sdk_session_launches_a_job_as_the_user(local_aws: LocalAws, user: iam.LocalPrincipal) -> None:
    from sagemaker.estimator import Estimator

    from smx_debug.local.sdk import sagemaker_session

    estimator = Estimator(image_uri="763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311",
                          role=ROLE, instance_type="ml.p3.2xlarge", instance_count=1, base_job_name="team-a-sdk",
                          output_path=f"s3://{BUCKET}/model",
                          sagemaker_session=sagemaker_session(local_aws, boto_session=user.session()))
    estimator.fit(wait=False)
    assert estimator.latest_training_job.name.startswith("team-a-sdk-")
    assert ("iam:PassRole", ROLE, True) in {(r.action, r.resource, r.allowed) for r in user.records()}
    assert {r.operation for r in user.records()} >= {"sagemaker:CreateTrainingJob"}


@pytest.mark.iam_denials
def test_as_principal_request_with_the_users_key_but_not_authorized_is_refused_by_the_server(
    local_aws: LocalAws, user: iam.LocalPrincipal
) -> None:
    """A client with the user's key but without the local IAM's hooks (so never authorized) gets nothing."""
    credentials = user.session().get_credentials()
    bare = boto3.session.Session(region_name=REGION, aws_access_key_id=credentials.access_key,
                                 aws_secret_access_key="x").client("sagemaker", endpoint_url=local_aws.endpoint_url)
    with pytest.raises(ClientError) as refused:
        bare.list_training_jobs()
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    (record,) = iam.ledger(local_aws).denials()
    assert record.user and "not authorized by the local IAM" in record.message


def test_as_principal_summary_counts_the_users_calls_apart_from_deployed_functions(
    local_aws: LocalAws, user: iam.LocalPrincipal
) -> None:
    sagemaker = user.client("sagemaker")
    sagemaker.create_training_job(**_training_job("team-a-4"))  # one call, three authorizations
    sagemaker.list_training_jobs()
    assert user.summary_line("the notebook user", "docs/permissions.md's policy") == (
        "[iam] 2 calls by the notebook user checked against docs/permissions.md's policy: 0 denied")
    assert iam.ledger(local_aws).summary_line() == (
        "[iam] 0 calls by deployed functions checked against their roles' policies: 0 denied")


def test_as_principal_again_replaces_the_policy(local_aws: LocalAws, user: iam.LocalPrincipal) -> None:
    policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sagemaker:ListTrainingJobs", "Resource": "*"}]}
    again = iam.as_principal(local_aws, policy, name="notebook-user", session_name="notebook")
    documents = client(local_aws, "iam").list_role_policies(RoleName="notebook-user")["PolicyNames"]
    stored = client(local_aws, "iam").get_role_policy(RoleName="notebook-user", PolicyName=documents[0])
    assert (len(documents), stored["PolicyDocument"]) == (1, policy)
    assert json.loads(json.dumps(iam.identity_statements(local_aws, again.caller.role_arn))) == policy["Statement"]


@pytest.mark.iam_denials
def test_as_principal_environment_makes_default_and_new_sessions_clients_the_users(
    local_aws: LocalAws, user: iam.LocalPrincipal
) -> None:
    """Code that makes its own clients (the reports' defaults, the CLI, ``sagemaker.Session()``) calls as the user."""
    create_job(local_aws, "team-b-2")
    with user.environment():
        for sagemaker in (boto3.client("sagemaker"), boto3.session.Session().client("sagemaker")):
            with pytest.raises(ClientError) as denied:
                sagemaker.describe_training_job(TrainingJobName="team-b-2")
            assert denied.value.response["Error"]["Code"] == "AccessDeniedException"
    assert [(r.caller, r.action) for r in iam.ledger(local_aws).denials()] == [("notebook-user", "sagemaker:DescribeTrainingJob")] * 2
    assert client(local_aws, "sagemaker").describe_training_job(TrainingJobName="team-b-2")  # the admin's again
