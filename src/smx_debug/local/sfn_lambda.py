"""Step Functions' Lambda tasks on the local AWS: the deployed function's handler runs in-process (no Docker).

moto executes state machines (``execute_state_machine``) and its Lambda tasks call Lambda's Invoke, which
moto can only serve by running the function in Docker. :func:`install` makes Invoke of a function tagged
``smx-debug:handler`` run that handler's entry (``smx_debug.contracts.handler_entry``) in this process with the function's environment
(:func:`smx_debug.local.delivery.invoke_handler`, as EventBridge and SNS deliveries already do). A handler's
exception becomes an ``Unhandled`` function error with Lambda's error payload, so the state machine's
Retry/Catch see what they would in AWS. Functions without the tag keep moto's behaviour. The invocation is
authorized first as Step Functions' (the state machine's role, :mod:`smx_debug.local.iam`), and the handler's
own calls as the function's role. The state machine's ``sns:publish`` tasks are authorized the same way.

moto's state machine interpreter calls services (Lambda, SNS) at ``localhost:$MOTO_PORT``; :func:`install`
points ``MOTO_PORT`` at this server's port (the server listens on a free port, not moto's default 5000).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any
from urllib.parse import urlparse

from smx_debug.contracts import HANDLER_TAG
from smx_debug.local import delivery, iam
from smx_debug.local import install as install_local
from smx_debug.local.clients import client
from smx_debug.local.patching import patch_once
from smx_debug.local.server import LocalAws

__all__ = ["install", "invocations"]


def _authorize_task(aws: LocalAws, function_arn: str) -> None:
    """Step Functions invokes a task's function with the state machine's role: the role must trust
    states.amazonaws.com and allow lambda:InvokeFunction on it (smx_debug.local.iam); else the task fails
    with Lambda's AccessDeniedException, as in AWS."""
    from moto.core.exceptions import JsonRESTError

    sfn = client(aws, "stepfunctions")
    for page in sfn.get_paginator("list_state_machines").paginate():
        for machine in page["stateMachines"]:
            described = sfn.describe_state_machine(stateMachineArn=machine["stateMachineArn"])
            if function_arn not in described["definition"]:
                continue
            outcome = iam.authorize_role_edge(aws, "states.amazonaws.com", described["roleArn"],
                                              "lambda:InvokeFunction", function_arn,
                                              source_arn=machine["stateMachineArn"],
                                              edge=f"Step Functions {machine['name']} -> Lambda task")
            if not outcome.allowed:
                error = JsonRESTError("AccessDeniedException", outcome.message)
                error.code = 403
                raise error

_lock = threading.Lock()
_active: LocalAws | None = None
_installed = False
_invocations: list[delivery.Delivery] = []


def invocations() -> list[delivery.Delivery]:
    """The Lambda invocations run in-process since :func:`install` (in order)."""
    with _lock:
        return list(_invocations)


def install(aws: LocalAws) -> None:
    """Route Invoke of tagged functions on ``aws`` to their handlers, in-process (idempotent)."""
    global _active, _installed
    install_local(aws)
    port = urlparse(aws.endpoint_url).port
    if port is not None:
        os.environ["MOTO_PORT"] = str(port)
    with _lock:
        _active = aws
        _invocations.clear()
        if _installed:
            return
        from moto.awslambda.models import LambdaBackend

        original = LambdaBackend.invoke

        def invoke(self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any,
                   response_headers: Any) -> str | bytes | None:
            fn = self.get_function(function_name, qualifier)
            handler = (self.list_tags(fn.function_arn) or {}).get(HANDLER_TAG)
            if _active is None or handler is None:
                return original(self, function_name, qualifier, body, headers, response_headers)
            _authorize_task(_active, fn.function_arn)
            event = json.loads(body) if body else {}
            ran = delivery.invoke_handler(_active, handler, event, dict(fn.environment_vars or {}),
                                          function_name=fn.function_name)
            with _lock:
                _invocations.append(ran)
            if ran.error is not None:
                response_headers["x-amz-function-error"] = "Unhandled"
                payload = json.dumps({"errorType": getattr(ran.error, "error_type", type(ran.error).__name__),
                                      "errorMessage": str(ran.error)[:1000]})
            else:
                payload = json.dumps(ran.result, default=str)
            response_headers["Content-Length"] = str(len(payload.encode()))
            return payload.encode()

        setattr(LambdaBackend, "invoke", invoke)  # noqa: B010 (moto would need Docker)
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sns import (
            StateTaskServiceSns,
        )

        patch_once(StateTaskServiceSns, "_eval_service_task", _authorized_sns_task)
        _installed = True


def _authorized_sns_task(original: Any) -> Any:
    """An ``sns:publish`` task publishes with the state machine's role: its policies (and the topic's policy and
    key) must allow it (smx_debug.local.iam); else the task fails with SNS's AuthorizationError, as in AWS."""
    from botocore.exceptions import ClientError

    def eval_service_task(self: Any, env: Any, resource_runtime_part: Any, normalised_parameters: dict[str, Any],
                          *args: Any, **kwargs: Any) -> Any:
        machine = env.states.context_object.context_object_data["StateMachine"]["Id"]
        if _active is not None:
            role = client(_active, "stepfunctions").describe_state_machine(stateMachineArn=machine)["roleArn"]
            outcome = iam.authorize_role_edge(_active, "states.amazonaws.com", role, "sns:Publish",
                                              str(normalised_parameters.get("TopicArn")), source_arn=machine,
                                              edge=f"Step Functions {machine.rsplit(':', 1)[-1]} -> SNS task")
            if not outcome.allowed:
                raise ClientError({"Error": {"Code": "AuthorizationError", "Message": outcome.message},
                                   "ResponseMetadata": {"HTTPStatusCode": 403, "RequestId": "local", "HostId": "",
                                                        "HTTPHeaders": {}, "RetryAttempts": 0}}, "Publish")
        return original(self, env, resource_runtime_part, normalised_parameters, *args, **kwargs)

    return eval_service_task
