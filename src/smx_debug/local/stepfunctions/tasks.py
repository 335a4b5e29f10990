"""Step Functions' Lambda tasks on the local AWS: the deployed function's handler runs in-process (no Docker).

moto executes state machines (``execute_state_machine``) and its Lambda tasks call Lambda's Invoke, which
moto can only serve by running the function in Docker. :func:`install` makes Invoke of a function tagged
``smx-debug:handler`` run that handler's entry (``smx_debug.contracts.handler_entry``) in this process with the function's environment
(:func:`smx_debug.local.awslambda.invoke.invoke_handler`, as EventBridge and SNS deliveries already do). A handler's
exception becomes an ``Unhandled`` function error with Lambda's error payload, so the state machine's
Retry/Catch see what they would in AWS. Functions without the tag keep moto's behaviour. The invocation is
authorized first as Step Functions' (the state machine's role, :mod:`smx_debug.local.iam`), and the handler's
own calls as the function's role. The state machine's ``sns:publish`` tasks are authorized the same way.

moto's state machine interpreter calls services (Lambda, SNS) at ``localhost:$MOTO_PORT``; :func:`install`
makes its clients call the served LocalAws's port instead (the server listens on a free port, not moto's default
5000), without touching the process's ``MOTO_PORT``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import moto.awslambda.models as lambda_models
import moto.core.exceptions as moto_exceptions
import moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sns as sns_task
import moto.stepfunctions.parser.asl.utils.boto_client as sfn_boto_client
from botocore.exceptions import ClientError

from smx_debug.contracts import HANDLER_TAG
from smx_debug.local import install as install_local
from smx_debug.local.awslambda.invoke import Deliveries, Delivery, invoke_handler
from smx_debug.local.clients import client
from smx_debug.local.iam.authorize import authorize_role_edge
from smx_debug.local.patching import patch_once, served
from smx_debug.local.server import LocalAws


def _authorize_task(aws: LocalAws, function_arn: str) -> None:
    """Step Functions invokes a task's function with the state machine's role: the role must trust
    states.amazonaws.com and allow lambda:InvokeFunction on it (smx_debug.local.iam); else the task fails
    with Lambda's AccessDeniedException, as in AWS."""
    sfn = client(aws, "stepfunctions")
    for page in sfn.get_paginator("list_state_machines").paginate():
        for machine in page["stateMachines"]:
            described = sfn.describe_state_machine(stateMachineArn=machine["stateMachineArn"])
            if function_arn not in described["definition"]:
                continue
            outcome = authorize_role_edge(aws, "states.amazonaws.com", described["roleArn"],
                                              "lambda:InvokeFunction", function_arn,
                                              source_arn=machine["stateMachineArn"],
                                              edge=f"Step Functions {machine['name']} -> Lambda task")
            if not outcome.allowed:
                error = moto_exceptions.JsonRESTError("AccessDeniedException", outcome.message)
                error.code = 403
                raise error


def invocations(aws: LocalAws) -> list[Delivery]:
    """The Lambda tasks run in-process on ``aws`` since :func:`install` (in order)."""
    return aws.recorder(Deliveries).tasks()


def install(aws: LocalAws) -> None:
    """Route Invoke of tagged functions on ``aws`` to their handlers, in-process, and point moto's state machine
    clients at ``aws``'s port (idempotent; forgets ``aws``'s earlier task invocations)."""
    install_local(aws)
    aws.recorder(Deliveries).clear_tasks()
    patch_once(lambda_models.LambdaBackend, "invoke", _invoke)
    patch_once(sns_task.StateTaskServiceSns, "_eval_service_task", _authorized_sns_task)
    patch_once(sfn_boto_client, "moto_server_port", _served_port)


def _served_port(original: Callable[[], str]) -> Callable[[], str]:
    """moto's state machine clients call ``localhost:<this>``: the served LocalAws's port (else moto's own)."""

    def moto_server_port() -> str:
        aws = served()
        port = urlparse(aws.endpoint_url).port if aws is not None and aws.endpoint_url else None
        return str(port) if port is not None else original()

    return moto_server_port


def _invoke(original: Callable[..., Any]) -> Callable[..., Any]:
    """Invoke of a function tagged with a handler runs it in-process (moto would need Docker)."""

    def invoke(self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any,
               response_headers: Any) -> str | bytes | None:
        fn = self.get_function(function_name, qualifier)
        handler = (self.list_tags(fn.function_arn) or {}).get(HANDLER_TAG)
        aws = served()
        if aws is None or handler is None:
            return original(self, function_name, qualifier, body, headers, response_headers)  # type: ignore[no-any-return]
        _authorize_task(aws, fn.function_arn)
        event = json.loads(body) if body else {}
        ran = invoke_handler(aws, handler, event, dict(fn.environment_vars or {}), function_name=fn.function_name)
        aws.recorder(Deliveries).add(ran, sns=False)
        if ran.error is not None:
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps({"errorType": getattr(ran.error, "error_type", type(ran.error).__name__),
                                  "errorMessage": str(ran.error)[:1000]})
        else:
            payload = json.dumps(ran.result, default=str)
        response_headers["Content-Length"] = str(len(payload.encode()))
        return payload.encode()

    return invoke


def _authorized_sns_task(original: Any) -> Any:
    """An ``sns:publish`` task publishes with the state machine's role: its policies (and the topic's policy and
    key) must allow it (smx_debug.local.iam); else the task fails with SNS's AuthorizationError, as in AWS."""

    def eval_service_task(self: Any, env: Any, resource_runtime_part: Any, normalised_parameters: dict[str, Any],
                          *args: Any, **kwargs: Any) -> Any:
        machine = env.states.context_object.context_object_data["StateMachine"]["Id"]
        aws = served()
        if aws is not None:
            role = client(aws, "stepfunctions").describe_state_machine(stateMachineArn=machine)["roleArn"]
            outcome = authorize_role_edge(aws, "states.amazonaws.com", role, "sns:Publish",
                                              str(normalised_parameters.get("TopicArn")), source_arn=machine,
                                              edge=f"Step Functions {machine.rsplit(':', 1)[-1]} -> SNS task")
            if not outcome.allowed:
                raise ClientError({"Error": {"Code": "AuthorizationError", "Message": outcome.message},
                                   "ResponseMetadata": {"HTTPStatusCode": 403, "RequestId": "local", "HostId": "",
                                                        "HTTPHeaders": {}, "RetryAttempts": 0}}, "Publish")
        return original(self, env, resource_runtime_part, normalised_parameters, *args, **kwargs)

    return eval_service_task
