"""Lambda's context object for in-process invocations on the local AWS, and the function's Timeout enforced.

AWS hands a handler ``context`` (``function_name``, ``invoked_function_arn``, ``memory_limit_in_mb``,
``aws_request_id``, ``get_remaining_time_in_millis()``) and ends an invocation at the function's ``Timeout``,
reporting ``<time> <request id> Task timed out after N.NN seconds`` as the invocation's error, of type
``Sandbox.Timedout`` (what a synchronous Invoke's caller and a Step Functions task see; AWS Lambda developer
guide, "Troubleshoot invocation issues", timeouts). The local delivery
(:mod:`smx_debug.local.awslambda.invoke`) runs handlers in process, where nothing can be killed mid-call: a deployed
function's handler gets a context built from its configuration, and one that returns after its Timeout fails
with that error and its result is dropped, so what AWS would cut off never passes locally. A handler called
without a deployed function (a plain callable target, a test of a handler) gets ``None``, as before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class LambdaTimeout(TimeoutError):
    """An invocation that ran past its function's Timeout."""

    error_type = "Sandbox.Timedout"


@dataclass(frozen=True)
class FunctionLimits:
    """What a deployed function's configuration says about its invocations."""

    name: str
    arn: str
    version: str
    timeout_s: int
    memory_mb: int

    def context(self) -> LambdaContext:
        """A new invocation's context: a fresh request id, the deadline ``timeout_s`` from now."""
        return LambdaContext(
            function_name=self.name, function_version=self.version, invoked_function_arn=self.arn,
            memory_limit_in_mb=str(self.memory_mb),  # a string, as the Python runtime reads it from the environment
            aws_request_id=str(uuid.uuid4()), log_group_name=f"/aws/lambda/{self.name}",
            log_stream_name=time.strftime("%Y/%m/%d/[$LATEST]") + uuid.uuid4().hex,
            deadline=time.monotonic() + self.timeout_s)


@dataclass(frozen=True)
class LambdaContext:
    """The fields and method of the Python runtime's context object that handlers use."""

    function_name: str
    function_version: str
    invoked_function_arn: str
    memory_limit_in_mb: str
    aws_request_id: str
    log_group_name: str
    log_stream_name: str
    deadline: float  # time.monotonic() at which the invocation times out

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def function_limits(config: Mapping[str, Any]) -> FunctionLimits:
    """A deployed function's limits, from its configuration (GetFunction's ``Configuration``)."""
    return FunctionLimits(name=str(config["FunctionName"]), arn=str(config["FunctionArn"]),
                          version=str(config.get("Version") or "$LATEST"), timeout_s=int(config.get("Timeout") or 3),
                          memory_mb=int(config.get("MemorySize") or 128))


def timed_out(context: LambdaContext, limits: FunctionLimits) -> LambdaTimeout | None:
    """Lambda's error for an invocation that ran past its Timeout, or None if it ended in time."""
    if time.monotonic() <= context.deadline:
        return None
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return LambdaTimeout(f"{at} {context.aws_request_id} Task timed out after {limits.timeout_s:.2f} seconds")
