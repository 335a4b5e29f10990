"""Throttling from SageMaker and SNS is retried with backoff; a persistent failure surfaces as a Lambda error.

botocore.stub.Stubber answers before botocore's retry handler runs, so a stubbed ThrottlingException is
never retried and cannot show the retry. Instead a ``before-send`` hook answers the first N HTTP attempts
of one operation with a real throttling response; every other request reaches the local AWS. That is
the path a throttled request takes in AWS (standard retry mode, exponential backoff with jitter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from actions_support import Stack, client, create_job
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from smx_debug import local
from smx_debug.actions import Runtime, Settings, handle_notify, handle_retrain, handle_stop_training
from smx_debug.actions.ledger import Ledger
from smx_debug.actions.runtime import retry_config
from smx_debug.local import LocalAws
from smx_debug.local.server import LOCAL_ACCOUNT_ID

BODIES = {
    "json": (b'{"__type":"ThrottlingException","message":"Rate exceeded"}', "application/x-amz-json-1.1"),
    "query": (
        b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>"
        b"</Error><RequestId>1</RequestId></ErrorResponse>",
        "text/xml",
    ),
}


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


class Throttle:
    """Answer the first ``times`` attempts of ``operation`` with HTTP 400 throttling; count every attempt."""

    def __init__(self, operation: str, times: int) -> None:
        self.operation, self.times, self.attempts = operation, times, 0

    def attach(self, service_client: Any) -> None:
        service = service_client.meta.service_model
        body, content_type = BODIES[service.protocol]
        event = f"before-send.{service.service_id.hyphenize()}.{self.operation}"

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            self.attempts += 1
            if self.attempts > self.times:
                return None
            return AWSResponse(request.url, 400, {"Content-Type": content_type}, _Raw(body))

        service_client.meta.events.register(event, hook)


def _runtime(aws: LocalAws, stack: Stack, throttles: dict[str, Throttle], attempts: int = 3) -> Runtime:
    clients: dict[str, Any] = {}

    def factory(service: str) -> Any:
        if service not in throttles:
            return client(aws, service)  # shared, already built: parsing a service model takes a while
        if service not in clients:
            clients[service] = aws.client(service, config=retry_config(attempts))
            throttles[service].attach(clients[service])
        return clients[service]

    settings = Settings(
        ledger_table=stack.table,
        topic_arn=stack.topic_arn,
        region=aws.region,
        account=LOCAL_ACCOUNT_ID,
        max_attempts=attempts,
        actor="test",
    )
    return Runtime(settings=settings, clients=factory, ledger=Ledger(factory("dynamodb"), stack.table))


def _event(aws: LocalAws, job: str, tags: str) -> dict[str, Any]:
    create_job(
        aws,
        job,
        {"smx-debug:managed": "true", "smx-debug:on:ExplodingTensor": tags},
        rules=("ExplodingTensor",),
    )
    local.set_rule_statuses(aws, job, debug=[local.rule_status("ExplodingTensor", "IssuesFound", step=40)])
    return local.state_change_event(aws, job)


@pytest.mark.parametrize(
    ("service", "operation", "tags", "handler"),
    [
        ("sagemaker", "StopTrainingJob", "stop", handle_stop_training),
        ("sns", "Publish", "notify", handle_notify),
    ],
)
def test_handler_throttled_twice_is_retried_and_succeeds(
    stack: Stack, service: str, operation: str, tags: str, handler: Callable[[Any, Runtime], Any]
) -> None:
    aws = stack.aws
    event = _event(aws, "guard-throttled", tags)
    throttle = Throttle(operation, times=2)
    result = handler(event, _runtime(aws, stack, {service: throttle}))
    assert throttle.attempts == 3
    assert (result.get("stop") or {}).get("outcome") == "stopped" or len(result["notify"]["sent"]) == 1
    assert local.stop_calls(aws, "guard-throttled") == (1 if service == "sagemaker" else 0)
    assert len(stack.messages()) == (1 if service == "sns" else 0)


def test_stop_persistent_throttling_raises_releases_the_claim_and_a_retry_stops_once(stack: Stack) -> None:
    aws = stack.aws
    event = _event(aws, "guard-persistent", "stop")
    throttle = Throttle("StopTrainingJob", times=10**6)
    with pytest.raises(ClientError) as info:
        handle_stop_training(event, _runtime(aws, stack, {"sagemaker": throttle}))
    assert (info.value.response["Error"]["Code"], throttle.attempts) == ("ThrottlingException", 3)
    ddb = client(aws, "dynamodb")
    assert "Item" not in ddb.get_item(TableName=stack.table, Key={"pk": {"S": "guard-persistent#stop"}})
    # Lambda retries the event: now SageMaker answers and the job is stopped, once.
    assert handle_stop_training(event, _runtime(aws, stack, {}))["stop"]["outcome"] == "stopped"
    assert handle_stop_training(event, _runtime(aws, stack, {}))["stop"]["skipped"] == "job status is Stopping"
    assert local.stop_calls(aws, "guard-persistent") == 1


def test_retrain_monitor_throttled_keeps_monitoring_then_ends_after_repeated_errors(stack: Stack) -> None:
    aws = stack.aws
    state = handle_retrain(
        {"step": "init", "state": {"run_spec": {"request": {}, "job_name_prefix": "r"}}},
        _runtime(aws, stack, {}),
    )
    state.update(next_action="monitor")
    state["history"]["latest_job_name"] = "r-1"
    throttle = Throttle("DescribeTrainingJob", times=10**6)
    seen = []
    for _ in range(3):
        state = handle_retrain(
            {"step": "monitor", "state": state}, _runtime(aws, stack, {"sagemaker": throttle}, attempts=1)
        )
        seen.append((state["next_action"], state["history"]["num_errors"], state["error"]["code"]))
    assert seen == [
        ("monitor", 1, "ThrottlingException"),
        ("monitor", 2, "ThrottlingException"),
        ("end", 3, "ThrottlingException"),
    ]
