"""Lambda's concurrency quota on the local AWS: reserved concurrency a new account refuses is refused.

A new account's Lambda quota is 10 concurrent executions, and Lambda keeps at least 10 of them unreserved, so
any ``ReservedConcurrentExecutions`` fails there (``cdk deploy`` of a function with reserved concurrency fails
on such accounts). moto enforces a quota only when ``MOTO_LAMBDA_CONCURRENCY_QUOTA`` is set, and then against
a minimum of 100. Here, at a new account's default quota:

- :func:`install` makes PutFunctionConcurrency refuse with Lambda's ``InvalidParameterValueException``;
- :func:`check_template` refuses a template's reserved concurrency before
  :func:`smx_debug.local.cloudformation.deploy.deploy_stack` creates it, as CloudFormation reports the function's failure.

This module needs moto, so it is not part of the Lambda assets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moto.awslambda.exceptions import InvalidParameterValueException
from moto.awslambda.models import LambdaBackend

from smx_debug.errors import AwsError
from smx_debug.local.patching import patch_once

ACCOUNT_CONCURRENT_EXECUTIONS = 10  # a new account's default ConcurrentExecutions quota
MINIMUM_UNRESERVED = 10  # what Lambda keeps unreserved at that quota
MESSAGE = ("Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution "
           f"below its minimum value of [{MINIMUM_UNRESERVED}].")


def _fits(reserved_total: int) -> bool:
    return ACCOUNT_CONCURRENT_EXECUTIONS - reserved_total >= MINIMUM_UNRESERVED


def install() -> None:
    """Make PutFunctionConcurrency refuse what a new account refuses (patched once per process). Idempotent."""
    def wrap(original: Any) -> Any:
        def put_function_concurrency(self: Any, function_name: str, reserved_concurrency: str) -> str:
            others = sum(int(fn.reserved_concurrency) for fn in self.list_functions()
                         if fn.reserved_concurrency and fn.function_name != function_name)
            if not _fits(others + int(reserved_concurrency)):
                raise InvalidParameterValueException(MESSAGE)
            return original(self, function_name, reserved_concurrency)  # type: ignore[no-any-return]

        return put_function_concurrency

    patch_once(LambdaBackend, "put_function_concurrency", wrap)


def check_template(resources: Mapping[str, Any], *, stack_name: str, reserved_now: int = 0) -> None:
    """Refuse a template whose functions' reserved concurrency, with ``reserved_now`` already reserved in the
    account, leaves less than the minimum unreserved.

    Raises:
        AwsError: code ``InvalidParameterValueException``, naming the function's logical id.
    """
    total = reserved_now
    for logical, spec in resources.items():
        if spec.get("Type") != "AWS::Lambda::Function":
            continue
        reserved = (spec.get("Properties") or {}).get("ReservedConcurrentExecutions")
        if reserved is None:
            continue
        total += int(reserved)
        if not _fits(total):
            raise AwsError(f"CreateStack {stack_name!r}: {logical} (AWS::Lambda::Function) CREATE_FAILED: {MESSAGE}",
                           code="InvalidParameterValueException", operation="CreateStack")
