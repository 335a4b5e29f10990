"""Helpers for the action-layer functional tests: the local stack (ledger, topic, queue) and jobs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smx_debug import local
from smx_debug.local import LocalAws
from smx_debug.local.server import LOCAL_ACCOUNT_ID

LAMBDAS = Path(__file__).resolve().parents[3] / "lambdas"


@dataclass
class Stack:
    aws: LocalAws
    table: str
    topic_arn: str
    queue_url: str

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "SMX_LEDGER_TABLE": self.table,
            "SMX_TOPIC_ARN": self.topic_arn,
            "SMX_MAX_ATTEMPTS": "3",
            "SMX_ACCOUNT": LOCAL_ACCOUNT_ID,
            **extra,
        }

    def messages(self) -> list[dict[str, Any]]:
        """Every SNS notification that reached the queue (SQS bodies are the SNS envelopes)."""
        sqs = client(self.aws, "sqs")
        out: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return out
            for message in batch:
                out.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])


def make_stack(local_aws: LocalAws) -> Stack:
    local.install(local_aws)
    local.reset_handlers()
    ddb = client(local_aws, "dynamodb")
    ddb.create_table(
        TableName="smx-ledger",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    sns, sqs = client(local_aws, "sns"), client(local_aws, "sqs")
    topic = sns.create_topic(Name="smx-notify")["TopicArn"]
    queue = sqs.create_queue(QueueName="smx-inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return Stack(local_aws, "smx-ledger", topic, queue)


_clients: dict[tuple[int, str], Any] = {}


def client(aws: LocalAws, service: str) -> Any:
    """Cached clients: building one parses the service model (SageMaker's takes ~0.5 s)."""
    key = (id(aws), service)
    if key not in _clients:
        _clients[key] = aws.client(service)
    return _clients[key]


def create_job(
    aws: LocalAws,
    name: str,
    tags: Mapping[str, str],
    *,
    status: str = "InProgress",
    rules: tuple[str, ...] = (),
) -> None:
    """A training job in the local AWS, InProgress, with its rules' evaluations InProgress."""
    client(aws, "sagemaker").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
            "TrainingInputMode": "File",
        },
        RoleArn="arn:aws:iam::123456789012:role/smx-training",
        OutputDataConfig={"S3OutputPath": "s3://smx-out/output"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )
    local.set_training_job_status(aws, name, status)
    if rules:
        local.set_rule_statuses(aws, name, debug={rule: "InProgress" for rule in rules})
