"""smx_debug.local.awslambda.event_sources: SQS -> Lambda mappings created and polled as Lambda does (batch size, maximum
concurrency, visibility timeout, partial batch failures, the dead-letter queue, the function role's edge)."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from local_support import client

from smx_debug.contracts import HANDLER_TAG
from smx_debug.errors import AccessDeniedError
from smx_debug.local import LocalAws, iam
from smx_debug.local.awslambda import event_sources

TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                 "Principal": {"Service": "lambda.amazonaws.com"}}]}
# A handler that fails the messages whose body starts with "fail" (partial batch failure) and raises on "crash".
HANDLER = '''
import time
def handler(event, context):
    bodies = [r["body"] for r in event["Records"]]
    if any(b.startswith("crash") for b in bodies):
        raise RuntimeError("crash")
    time.sleep(0.3)
    return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]
                                  if r["body"].startswith("fail")]}
'''


@pytest.fixture
def lambdas(tmp_path: Path) -> Path:
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "handler.py").write_text(HANDLER)
    return tmp_path


def _deploy(aws: LocalAws, *, visibility: int = 2, timeout: int = 1, concurrency: int | None = 2, batch: int = 2,
            may_poll: bool = True, max_receive: int = 2) -> tuple[str, str]:
    """A queue (with a dead-letter queue), a tagged function whose role may (or may not) poll it, the mapping."""
    event_sources.install()
    iam.install()
    sqs, lam, admin = client(aws, "sqs"), client(aws, "lambda"), client(aws, "iam")
    dlq = sqs.create_queue(QueueName="probe-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName="probe", Attributes={
        "VisibilityTimeout": str(visibility),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive})})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    role = admin.create_role(RoleName="probe-role", AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
    if may_poll:
        admin.put_role_policy(RoleName="probe-role", PolicyName="poll", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Resource": arn, "Action": [
                "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]}]}))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("handler.py", "")
    lam.create_function(FunctionName="probe", Runtime="python3.12", Role=role, Handler="handler.handler",
                        Code={"ZipFile": buf.getvalue()}, Timeout=timeout, Tags={HANDLER_TAG: "probe"})
    kwargs: dict[str, Any] = {"ScalingConfig": {"MaximumConcurrency": concurrency}} if concurrency else {}
    # as CloudFormation creates it: no client-side validation (botocore would refuse a concurrency of 1 itself)
    unchecked = aws.client("lambda", config=Config(parameter_validation=False))
    unchecked.create_event_source_mapping(EventSourceArn=arn, FunctionName="probe", BatchSize=batch,
                                          FunctionResponseTypes=["ReportBatchItemFailures"], **kwargs)
    return url, dlq


@pytest.mark.parametrize(("kwargs", "code", "message"), [
    ({"visibility": 30, "timeout": 60}, "InvalidParameterValueException",
     "Queue visibility timeout: 30 seconds is less than Function timeout: 60 seconds"),
    ({"concurrency": 1}, "ValidationException", "Member must have value greater than or equal to 2"),
    ({"concurrency": 1001}, "ValidationException", "Member must have value less than or equal to 1000"),
    ({"batch": 11}, "InvalidParameterValueException", "Maximum batch window in seconds must be greater than 0"),
])
def test_event_sources_mapping_aws_refuses_is_refused(local_aws: LocalAws, kwargs: dict[str, int], code: str,
                                                      message: str) -> None:
    with pytest.raises(ClientError) as refused:
        _deploy(local_aws, **kwargs)
    assert refused.value.response["Error"]["Code"] == code and message in refused.value.response["Error"]["Message"]


def test_event_sources_send_message_does_not_invoke_until_polled(local_aws: LocalAws, lambdas: Path) -> None:
    url, _ = _deploy(local_aws)
    client(local_aws, "sqs").send_message(QueueUrl=url, MessageBody="ok")
    attrs = client(local_aws, "sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attrs["Attributes"]["ApproximateNumberOfMessages"] == "1"  # moto would have delivered it already
    (done,) = event_sources.poll(local_aws, lambdas_dir=lambdas)
    assert done.error is None and done.failed_ids == ()


def test_event_sources_batches_run_at_most_maximum_concurrency_at_once(local_aws: LocalAws, lambdas: Path) -> None:
    url, _ = _deploy(local_aws, concurrency=2, batch=2)
    sqs = client(local_aws, "sqs")
    for i in range(8):
        sqs.send_message(QueueUrl=url, MessageBody=f"ok-{i}")
    done = event_sources.poll(local_aws, lambdas_dir=lambdas)
    assert sorted(len(d.message_ids) for d in done) and all(1 <= len(d.message_ids) <= 2 for d in done)
    assert sum(len(d.message_ids) for d in done) == 8
    assert event_sources.most_at_once(done) == 2  # in parallel, never more than the mapping's maximum concurrency
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None  # all deleted


def test_event_sources_partial_batch_failure_keeps_only_the_failed_until_the_dead_letter_queue(
        local_aws: LocalAws, lambdas: Path) -> None:
    url, dlq = _deploy(local_aws, visibility=1, timeout=1, batch=3, max_receive=2)
    sqs = client(local_aws, "sqs")
    for body in ("ok-1", "fail-2", "ok-3"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    first = event_sources.poll(local_aws, lambdas_dir=lambdas)
    assert [len(d.failed_ids) for d in first] == [1]
    for _ in range(2):  # visible again after the visibility timeout; received a 3rd time it goes to the DLQ
        time.sleep(1.2)
        again = event_sources.poll(local_aws, lambdas_dir=lambdas)
    assert again == []
    moved = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in moved] == ["fail-2"]


def test_event_sources_function_error_fails_the_whole_batch(local_aws: LocalAws, lambdas: Path) -> None:
    url, _ = _deploy(local_aws, batch=2)
    sqs = client(local_aws, "sqs")
    sqs.send_message(QueueUrl=url, MessageBody="ok-1")
    sqs.send_message(QueueUrl=url, MessageBody="crash-2")
    done = event_sources.poll(local_aws, lambdas_dir=lambdas)
    crashed = [d for d in done if d.error is not None]
    assert crashed and set(crashed[0].failed_ids) == set(crashed[0].message_ids)


@pytest.mark.iam_denials
def test_event_sources_role_without_receive_is_not_polled(local_aws: LocalAws, lambdas: Path) -> None:
    url, _ = _deploy(local_aws, may_poll=False)
    client(local_aws, "sqs").send_message(QueueUrl=url, MessageBody="ok")
    (denied,) = event_sources.poll(local_aws, lambdas_dir=lambdas)
    assert isinstance(denied.error, AccessDeniedError) and "sqs:ReceiveMessage" in str(denied.error)
    assert [r.action for r in iam.ledger(local_aws).denials()] == ["sqs:ReceiveMessage"]
