"""smx_debug.local.iam on the local AWS: a deployed function's calls are authorized against its role before they
reach moto, a denial looks exactly like AWS's to botocore, and each delivery edge breaks without its grant."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from local_support import client, create_job

from smx_debug import local
from smx_debug.contracts import HANDLER_TAG
from smx_debug.errors import AccessDeniedError
from smx_debug.local import LocalAws, iam
from smx_debug.local.server import LOCAL_ACCOUNT_ID
from smx_debug.local.stepfunctions import tasks as sfn_lambda

REGION = "us-west-2"
LAMBDA_TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                        "Principal": {"Service": "lambda.amazonaws.com"}}]}



def _execute(aws: LocalAws, name: str, definition: dict[str, Any], role: str) -> dict[str, Any]:
    """Create state machine ``name`` and run it once to its end (30 s at most): DescribeExecution's answer."""
    sfn = client(aws, "stepfunctions")
    machine = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=role)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    deadline = time.monotonic() + 30
    while sfn.describe_execution(executionArn=execution)["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
    return dict(sfn.describe_execution(executionArn=execution))


def _role(aws: LocalAws, name: str, statements: list[dict[str, Any]], trust: dict[str, Any] = LAMBDA_TRUST) -> str:
    arn = str(client(aws, "iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"])
    if statements:
        client(aws, "iam").put_role_policy(RoleName=name, PolicyName="p", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": statements}))
    return arn


def _function(aws: LocalAws, name: str, statements: list[dict[str, Any]], handler: str = "notify") -> str:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return str(client(aws, "lambda").create_function(
        FunctionName=name, Runtime="python3.12", Role=_role(aws, f"{name}-role", statements),
        Handler="handler.handler", Code={"ZipFile": buf.getvalue()}, Tags={HANDLER_TAG: handler},
        Timeout=60)["FunctionArn"])


@pytest.fixture
def fn(local_aws: LocalAws) -> Iterator[str]:
    """A deployed function whose role may only describe jobs named ``allowed-*``."""
    iam.install()
    yield _function(local_aws, "narrow", [{"Effect": "Allow", "Action": "sagemaker:DescribeTrainingJob",
                                           "Resource": f"arn:aws:sagemaker:{REGION}:{LOCAL_ACCOUNT_ID}:"
                                                       "training-job/allowed-*"}])


def _as_function(aws: LocalAws, name: str, service: str) -> Any:
    with iam.as_function(aws, name):
        return boto3.session.Session(region_name=REGION).client(service, endpoint_url=aws.endpoint_url)


def test_iam_call_within_the_role_policy_is_allowed_and_recorded_with_its_statement(local_aws: LocalAws,
                                                                                    fn: str) -> None:
    create_job(local_aws, "allowed-1")
    sagemaker = _as_function(local_aws, "narrow", "sagemaker")
    assert sagemaker.describe_training_job(TrainingJobName="allowed-1")["TrainingJobName"] == "allowed-1"
    (record,) = iam.ledger(local_aws).records()
    assert (record.caller, record.action, record.allowed, record.policy) == (
        "notify", "sagemaker:DescribeTrainingJob", True, "identity-based")
    assert record.statement is not None and record.statement["Resource"].endswith("training-job/allowed-*")


@pytest.mark.iam_denials
def test_iam_call_outside_the_role_policy_is_denied_as_aws_denies_it(local_aws: LocalAws, fn: str) -> None:
    create_job(local_aws, "other-1")
    sagemaker = _as_function(local_aws, "narrow", "sagemaker")
    with pytest.raises(ClientError) as denied:
        sagemaker.describe_training_job(TrainingJobName="other-1")
    error = denied.value.response
    role = client(local_aws, "iam").get_role(RoleName="narrow-role")["Role"]["RoleName"]
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("AccessDeniedException", 400)
    assert error["Error"]["Message"] == (
        f"User: arn:aws:sts::{LOCAL_ACCOUNT_ID}:assumed-role/{role}/narrow is not authorized to perform: "
        f"sagemaker:DescribeTrainingJob on resource: arn:aws:sagemaker:{REGION}:{LOCAL_ACCOUNT_ID}:training-job/"
        "other-1 because no identity-based policy allows the sagemaker:DescribeTrainingJob action")
    assert error["ResponseMetadata"]["RetryAttempts"] == 0  # AccessDenied is not retried
    assert [r.allowed for r in iam.ledger(local_aws).denials()] == [False]


# (service, call, botocore's error code, HTTP status): one per protocol the functions use
DENIED_CALLS = [
    ("sagemaker", lambda c: c.list_training_jobs(), "AccessDeniedException", 400),  # json 1.1
    ("dynamodb", lambda c: c.get_item(TableName="t", Key={"pk": {"S": "k"}}), "AccessDeniedException", 400),
    ("cloudwatch", lambda c: c.get_metric_data(
        MetricDataQueries=[{"Id": "m", "Expression": "SEARCH('x', 'Sum', 60)"}],
        StartTime=0, EndTime=60), "AccessDenied", 403),  # the protocol botocore resolves, query-compatible
    ("s3", lambda c: c.get_object(Bucket="b", Key="k"), "AccessDenied", 403),  # rest-xml
    ("s3", lambda c: c.head_object(Bucket="b", Key="k"), "403", 403),  # HEAD: no body
    ("sns", lambda c: c.publish(TopicArn=f"arn:aws:sns:{REGION}:{LOCAL_ACCOUNT_ID}:t", Message="m"),
     "AuthorizationError", 403),  # query
    ("sqs", lambda c: c.send_message(QueueUrl=f"https://sqs.{REGION}.amazonaws.com/{LOCAL_ACCOUNT_ID}/q",
                                     MessageBody="m"), "AccessDenied", 403),  # json, query-compatible
    ("lambda", lambda c: c.invoke(FunctionName="narrow"), "AccessDeniedException", 403),  # rest-json
    ("stepfunctions", lambda c: c.start_execution(
        stateMachineArn=f"arn:aws:states:{REGION}:{LOCAL_ACCOUNT_ID}:stateMachine:m"), "AccessDeniedException", 400),
]


@pytest.mark.iam_denials
@pytest.mark.parametrize(("service", "call", "code", "status"), DENIED_CALLS,
                         ids=[f"{d[0]}-{i}" for i, d in enumerate(DENIED_CALLS)])
def test_iam_denial_is_parsed_by_botocore_with_the_services_code_and_status(
    local_aws: LocalAws, fn: str, service: str, call: Any, code: str, status: int
) -> None:
    with pytest.raises(ClientError) as denied:
        call(_as_function(local_aws, "narrow", service))
    error = denied.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status)
    if status != 403 or code != "403":
        assert "is not authorized to perform" in error["Error"]["Message"]
    assert len(iam.ledger(local_aws).denials()) == 1


@pytest.mark.iam_denials
def test_iam_request_signed_with_a_function_key_but_not_authorized_is_refused_by_the_server(
    local_aws: LocalAws, fn: str
) -> None:
    """A client built with the function's key but without the plugin (so never authorized) gets nothing."""
    key = iam.function_environment(local_aws, "narrow")
    assert key is not None
    bare = boto3.session.Session(region_name=REGION, aws_access_key_id=key["AWS_ACCESS_KEY_ID"],
                                 aws_secret_access_key="x").client("sagemaker", endpoint_url=local_aws.endpoint_url)
    with pytest.raises(ClientError) as refused:
        bare.list_training_jobs()
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "not authorized by the local IAM" in iam.ledger(local_aws).denials()[0].message


@pytest.mark.iam_denials
def test_iam_publish_to_a_topic_whose_key_policy_does_not_delegate_is_denied(local_aws: LocalAws) -> None:
    """An encrypted target: the role's policy allows sns:Publish and kms, but the key policy names another
    principal only, so SNS's GenerateDataKey for the caller is denied."""
    iam.install()
    kms = client(local_aws, "kms")
    key = kms.create_key(Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/admin"}, "Action": "kms:*",
         "Resource": "*"}]}))["KeyMetadata"]["Arn"]
    topic = client(local_aws, "sns").create_topic(Name="sealed", Attributes={"KmsMasterKeyId": key})["TopicArn"]
    _function(local_aws, "publisher", [{"Effect": "Allow", "Action": "sns:Publish", "Resource": topic},
                                       {"Effect": "Allow", "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                                        "Resource": key}])
    sns = _as_function(local_aws, "publisher", "sns")
    with pytest.raises(ClientError) as denied:
        sns.publish(TopicArn=topic, Message="m")
    assert denied.value.response["Error"]["Code"] == "AuthorizationError"
    (record,) = iam.ledger(local_aws).denials()
    assert (record.action, record.resource, record.policy) == ("kms:GenerateDataKey", key, "key")


# ------------------------------------------------------------------------------------------- edges
@pytest.mark.iam_denials
def test_iam_alarm_to_a_topic_whose_policy_omits_cloudwatch_notifies_nobody(local_aws: LocalAws) -> None:
    iam.install()
    sns, cloudwatch = client(local_aws, "sns"), client(local_aws, "cloudwatch")
    topic = sns.create_topic(Name="closed")["TopicArn"]
    sns.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": LOCAL_ACCOUNT_ID},
                                                "Action": "sns:Publish", "Resource": topic}]}))
    inbox = local.subscribe_queue(local_aws, topic, "closed-inbox")
    cloudwatch.put_metric_alarm(AlarmName="a", Namespace="N", MetricName="M", Statistic="Sum", Period=60,
                                EvaluationPeriods=1, Threshold=1.0, TreatMissingData="breaching",
                                ComparisonOperator="GreaterThanOrEqualToThreshold", AlarmActions=[topic])
    (transition,) = local.evaluate_alarms(local_aws)
    assert transition.new_state == "ALARM" and transition.notified == ()
    assert "Messages" not in client(local_aws, "sqs").receive_message(QueueUrl=inbox)
    assert [(r.caller, r.action) for r in iam.ledger(local_aws).denials()] == [("cloudwatch.amazonaws.com", "sns:Publish")]


@pytest.mark.iam_denials
def test_iam_sns_to_a_queue_without_its_grant_goes_to_the_subscription_dlq(local_aws: LocalAws) -> None:
    iam.install()
    local.install(local_aws)
    sns, sqs = client(local_aws, "sns"), client(local_aws, "sqs")
    topic = sns.create_topic(Name="t")["TopicArn"]
    closed = sqs.create_queue(QueueName="no-policy")["QueueUrl"]
    closed_arn = sqs.get_queue_attributes(QueueUrl=closed, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    dlq = local.subscribe_queue(local_aws, [], "dlq")  # its policy admits nothing yet
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "sqs:SendMessage",
         "Resource": dlq_arn, "Condition": {"ArnEquals": {"aws:SourceArn": topic}}}]})})
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=closed_arn,
                  Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn})})
    sns.publish(TopicArn=topic, Message="hello")
    assert "Messages" not in sqs.receive_message(QueueUrl=closed)
    (dead,) = sqs.receive_message(QueueUrl=dlq)["Messages"]
    assert json.loads(dead["Body"])["Message"] == "hello"
    assert [(r.caller, r.resource) for r in iam.ledger(local_aws).denials()] == [("sns.amazonaws.com", closed_arn)]


@pytest.mark.iam_denials
def test_iam_eventbridge_to_a_function_without_its_permission_is_refused_and_dead_lettered(
    local_aws: LocalAws
) -> None:
    local.install(local_aws)
    events, sqs = client(local_aws, "events"), client(local_aws, "sqs")
    fn = _function(local_aws, "target", [])
    rule = events.put_rule(Name="r", EventPattern=json.dumps({"source": ["aws.sagemaker"]}))["RuleArn"]
    dlq = sqs.create_queue(QueueName="rule-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
         "Resource": dlq_arn, "Condition": {"ArnEquals": {"aws:SourceArn": rule}}}]})})
    events.put_targets(Rule="r", Targets=[{"Id": "t", "Arn": fn, "DeadLetterConfig": {"Arn": dlq_arn}}])
    (refused,) = local.deliver_event(local_aws, {"source": "aws.sagemaker", "detail-type": "x", "detail": {}})
    assert isinstance(refused.error, AccessDeniedError)
    assert "events.amazonaws.com is not authorized to perform: lambda:InvokeFunction" in str(refused.error)
    assert len(sqs.receive_message(QueueUrl=dlq)["Messages"]) == 1

    client(local_aws, "lambda").add_permission(FunctionName="target", StatementId="events",
                                               Action="lambda:InvokeFunction", Principal="events.amazonaws.com",
                                               SourceArn=rule)
    iam.ledger(local_aws).reset()
    (delivered,) = local.deliver_event(local_aws, {"source": "aws.sagemaker", "detail-type": "x", "detail": {}},
                                       lambdas_dir=None)
    assert not isinstance(delivered.error, AccessDeniedError)


@pytest.mark.iam_denials
def test_iam_schedule_to_a_function_without_its_permission_is_refused(local_aws: LocalAws) -> None:
    local.install(local_aws)
    events = client(local_aws, "events")
    fn = _function(local_aws, "scheduled", [], handler="evaluator")
    rule = events.put_rule(Name="every-minute", ScheduleExpression="rate(1 minute)")["RuleArn"]
    events.put_targets(Rule="every-minute", Targets=[{"Id": "t", "Arn": fn}])
    (refused,) = local.deliver_schedule(local_aws, handlers=["evaluator"])
    assert isinstance(refused.error, AccessDeniedError)
    assert [r.resource for r in iam.ledger(local_aws).denials()] == [fn]
    assert iam.ledger(local_aws).records()[0].operation == "EventBridge rule every-minute -> Lambda" and rule


@pytest.mark.iam_denials
def test_iam_step_functions_task_without_invoke_permission_fails_the_execution(local_aws: LocalAws) -> None:
    sfn_lambda.install(local_aws)
    fn = _function(local_aws, "task", [])
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"Service": "states.amazonaws.com"}}]}
    role = _role(local_aws, "machine-role", [{"Effect": "Allow", "Action": "sns:Publish", "Resource": "*"}], trust)
    definition = {"StartAt": "Call", "States": {"Call": {
        "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"FunctionName": fn},
        "End": True}}}
    assert _execute(local_aws, "m", definition, role)["status"] == "FAILED"
    assert sfn_lambda.invocations(local_aws) == []
    assert [(r.caller, r.action, r.resource) for r in iam.ledger(local_aws).denials()] == [
        ("states.amazonaws.com", "lambda:InvokeFunction", fn)]


@pytest.mark.iam_denials
def test_iam_sns_to_a_function_without_its_permission_runs_nothing(local_aws: LocalAws) -> None:
    local.install(local_aws)
    local.sns_lambda_deliveries(local_aws)
    sns = client(local_aws, "sns")
    topic = sns.create_topic(Name="to-fn")["TopicArn"]
    fn = _function(local_aws, "subscriber", [])
    sns.subscribe(TopicArn=topic, Protocol="lambda", Endpoint=fn)
    sns.publish(TopicArn=topic, Message="m")
    assert local.sns_lambda_deliveries(local_aws) == []
    assert [(r.caller, r.action, r.resource) for r in iam.ledger(local_aws).denials()] == [
        ("sns.amazonaws.com", "lambda:InvokeFunction", fn)]


@pytest.mark.iam_denials
def test_iam_alarm_to_an_encrypted_topic_whose_key_omits_cloudwatch_notifies_nobody(local_aws: LocalAws) -> None:
    """The topic's policy admits CloudWatch, but its key's policy does not: SNS cannot encrypt the message."""
    iam.install()
    key = client(local_aws, "kms").create_key(Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:root"}, "Action": "kms:*",
         "Resource": "*"}]}))["KeyMetadata"]["Arn"]
    sns = client(local_aws, "sns")
    topic = sns.create_topic(Name="sealed-alarms", Attributes={"KmsMasterKeyId": key})["TopicArn"]
    sns.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                                "Action": "sns:Publish", "Resource": topic}]}))
    client(local_aws, "cloudwatch").put_metric_alarm(
        AlarmName="b", Namespace="N", MetricName="M", Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1.0,
        TreatMissingData="breaching", ComparisonOperator="GreaterThanOrEqualToThreshold", AlarmActions=[topic])
    (transition,) = local.evaluate_alarms(local_aws)
    assert transition.notified == ()
    assert [(r.action, r.policy) for r in iam.ledger(local_aws).denials()] == [("kms:GenerateDataKey", "key")]


def test_iam_summary_line_counts_calls_not_authorizations(local_aws: LocalAws, fn: str) -> None:
    create_job(local_aws, "allowed-2")
    _as_function(local_aws, "narrow", "sagemaker").describe_training_job(TrainingJobName="allowed-2")
    iam.authorize_service(local_aws, "events.amazonaws.com", "lambda:InvokeFunction", fn,
                          source_arn=f"arn:aws:events:{REGION}:{LOCAL_ACCOUNT_ID}:rule/r")
    assert iam.ledger(local_aws).summary_line() == ("[iam] 1 calls by deployed functions checked against their roles' policies: "
                                  "0 denied")
    iam.ledger(local_aws).reset()  # the edge above was refused (no permission): not this test's subject


@pytest.mark.iam_denials
def test_iam_step_functions_sns_task_without_publish_permission_fails_the_task(local_aws: LocalAws) -> None:
    sfn_lambda.install(local_aws)
    topic = client(local_aws, "sns").create_topic(Name="from-machine")["TopicArn"]
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"Service": "states.amazonaws.com"}}]}
    role = _role(local_aws, "publisher-role", [{"Effect": "Allow", "Action": "sns:Publish",
                                                "Resource": f"{topic}-other"}], trust)
    definition = {"StartAt": "Tell", "States": {"Tell": {
        "Type": "Task", "Resource": "arn:aws:states:::sns:publish",
        "Parameters": {"TopicArn": topic, "Message": "m"}, "End": True}}}
    done = _execute(local_aws, "tell", definition, role)
    assert (done["status"], done.get("error")) == ("FAILED", "SNS.AuthorizationErrorException")
    assert [(r.caller, r.action, r.resource) for r in iam.ledger(local_aws).denials()] == [("states.amazonaws.com", "sns:Publish", topic)]
