"""Helpers for the action-layer functional tests: the local stack (ledger, topic, queue) and jobs."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from notify_support import inbox, ledger_and_inbox

from smx_debug import local
from smx_debug.actions import Ledger, Runtime, Settings
from smx_debug.contracts import HANDLER_TAG, handler_entry
from smx_debug.local import LocalAws
from smx_debug.local.awslambda.invoke import reset_handlers
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

    def runtime(self, ledger: Ledger, **settings: Any) -> Runtime:
        """The action handlers' runtime on this stack: ``ledger``, and Settings with the stack's table, topic and
        region, the local account and actor ``test``, and ``settings``."""
        return Runtime(settings=Settings(ledger_table=self.table, topic_arn=self.topic_arn, region=self.aws.region,
                                         account=LOCAL_ACCOUNT_ID, actor="test", **settings),
                       clients=lambda s: client(self.aws, s), ledger=ledger)

    def state_machine(self) -> str:
        """A one-state Step Functions machine (``smx-retrain``) for the retrain action to start; its ARN."""
        role = client(self.aws, "iam").create_role(
            RoleName="smx-sfn", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )["Role"]["Arn"]
        definition = {"StartAt": "Init", "States": {"Init": {"Type": "Pass", "End": True}}}
        return str(client(self.aws, "stepfunctions").create_state_machine(
            name="smx-retrain", definition=json.dumps(definition), roleArn=role
        )["stateMachineArn"])

    def messages(self) -> list[dict[str, Any]]:
        """Every SNS notification that reached the queue (SQS bodies are the SNS envelopes)."""
        return inbox(self.aws, self.queue_url)


def make_stack(local_aws: LocalAws) -> Stack:
    local.install(local_aws)
    reset_handlers(local_aws)
    return Stack(local_aws, "smx-ledger", *ledger_and_inbox(local_aws, "smx-ledger"))


_clients: dict[tuple[int, str], Any] = {}


def client(aws: LocalAws, service: str) -> Any:
    """Cached clients: building one parses the service model (SageMaker's takes ~0.5 s)."""
    key = (id(aws), service)
    if key not in _clients:
        _clients[key] = aws.client(service)
    return _clients[key]


def handler_policy(stack: Stack) -> list[dict[str, Any]]:
    """What an action handler's role needs in this stack (the guard stack grants the same, scoped to
    watched jobs): read jobs, stop them, the ledger's items, the rule metric, the topic."""
    account = LOCAL_ACCOUNT_ID
    return [
        {"Effect": "Allow", "Action": ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags",
                                       "sagemaker:StopTrainingJob"],
         "Resource": f"arn:aws:sagemaker:us-west-2:{account}:training-job/*"},
        {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                                       "dynamodb:DeleteItem"],
         "Resource": f"arn:aws:dynamodb:us-west-2:{account}:table/{stack.table}"},
        {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
         "Condition": {"StringEquals": {"cloudwatch:namespace": "SmxDebug"}}},
        {"Effect": "Allow", "Action": "sns:Publish", "Resource": stack.topic_arn},
    ]


def deploy_function(stack: Stack, name: str, handler: str, env: Mapping[str, str], *,
                    invoked_by: tuple[str, str] | None = None) -> str:
    """A function as the infrastructure deploys one: a role Lambda may assume with :func:`handler_policy`,
    the handler tag, and (``invoked_by=(service principal, source ARN)``) the permission to invoke it."""
    iam, lam = client(stack.aws, "iam"), client(stack.aws, "lambda")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"Service": "lambda.amazonaws.com"}}]}
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=f"{name}-role", PolicyName="handler", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": handler_policy(stack)}))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("handler.py", "def handler(event, context):\n    return None\n")
    arn = str(lam.create_function(
        FunctionName=name, Runtime="python3.12", Role=role, Handler=handler_entry(handler)[1],
        Code={"ZipFile": buf.getvalue()}, Environment={"Variables": dict(env)}, Tags={HANDLER_TAG: handler},
        Timeout=60,  # infra/components/functions.py's default (Lambda's own, 3 s, leaves no time for a call)
    )["FunctionArn"])
    if invoked_by is not None:
        principal, source = invoked_by
        lam.add_permission(FunctionName=name, StatementId=f"{principal.split('.')[0]}-invokes",
                           Action="lambda:InvokeFunction", Principal=principal, SourceArn=source)
    return arn


def create_job(
    aws: LocalAws,
    name: str,
    tags: Mapping[str, str],
    *,
    status: str = "InProgress",
    rules: tuple[str, ...] = (),
) -> None:
    """A training job in the local AWS, InProgress, with its rules' evaluations InProgress."""
    local.create_training_job(aws, name, tags)
    local.set_training_job_status(aws, name, status)
    if rules:
        local.set_rule_statuses(aws, name, debug={rule: "InProgress" for rule in rules})
