"""smx_debug.local.awslambda.concurrency: the local AWS refuses reserved concurrency a new account refuses (quota 10,
minimum unreserved 10), as Lambda and CloudFormation do."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from botocore.exceptions import ClientError
from local_support import client

from smx_debug.errors import AwsError
from smx_debug.local import LocalAws, deploy_stack

MESSAGE = ("Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution "
           "below its minimum value of [10].")
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                 "Principal": {"Service": "lambda.amazonaws.com"}}]}


def _template(reserved: int | None) -> dict[str, object]:
    function: dict[str, object] = {"Runtime": "python3.12", "Handler": "index.handler",
                                   "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                                   "Code": {"ZipFile": "def handler(event, context):\n    return None\n"}}
    if reserved is not None:
        function["ReservedConcurrentExecutions"] = reserved
    return {"Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": TRUST}},
        "Fn": {"Type": "AWS::Lambda::Function", "Properties": function},
    }}


def test_deploy_stack_reserved_concurrency_at_a_new_accounts_quota_is_refused(local_aws: LocalAws) -> None:
    with pytest.raises(AwsError) as refused:
        deploy_stack(local_aws, _template(1), stack_name="Reserved")
    assert refused.value.code == "InvalidParameterValueException"
    assert str(refused.value) == f"CreateStack 'Reserved': Fn (AWS::Lambda::Function) CREATE_FAILED: {MESSAGE}"


def test_deploy_stack_without_reserved_concurrency_deploys(local_aws: LocalAws) -> None:
    deployed = deploy_stack(local_aws, _template(None), stack_name="Unreserved")
    assert "Fn" in deployed.physical_ids


def test_put_function_concurrency_at_a_new_accounts_quota_is_refused_by_lambda(local_aws: LocalAws) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("index.py", "")
    iam, lam = client(local_aws, "iam"), client(local_aws, "lambda")
    role = iam.create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
    lam.create_function(FunctionName="f", Runtime="python3.12", Role=role, Handler="index.handler",
                        Code={"ZipFile": buf.getvalue()})
    with pytest.raises(ClientError) as refused:
        lam.put_function_concurrency(FunctionName="f", ReservedConcurrentExecutions=1)
    error = refused.value.response
    assert (error["Error"]["Code"], error["Error"]["Message"]) == ("InvalidParameterValueException", MESSAGE)
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
