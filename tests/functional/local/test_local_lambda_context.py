"""smx_debug.local.awslambda.lambda_context: a deployed function's handler gets Lambda's context object, and a handler that
runs past the function's Timeout fails as on AWS ("Task timed out after N seconds"), never kinder."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from local_support import client

from smx_debug.contracts import HANDLER_TAG
from smx_debug.local import LocalAws
from smx_debug.local.awslambda import invoke as delivery

HANDLER = '''
import time

def notify(event, context):
    if context is None:
        return {"context": None}
    left = context.get_remaining_time_in_millis()
    time.sleep(event.get("sleep", 0))
    return {"left": left, "name": context.function_name, "arn": context.invoked_function_arn,
            "memory": context.memory_limit_in_mb, "request": context.aws_request_id,
            "left_after": context.get_remaining_time_in_millis()}

stop_training = notify
'''
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}


@pytest.fixture
def lambdas(tmp_path: Path, local_aws: LocalAws) -> Path:
    (tmp_path / "actions").mkdir()
    (tmp_path / "actions" / "handler.py").write_text(HANDLER)
    delivery.reset_handlers(local_aws)
    return tmp_path


def _deploy(aws: LocalAws, name: str, timeout: int) -> str:
    role = client(aws, "iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument=json.dumps(TRUST))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return str(client(aws, "lambda").create_function(
        FunctionName=name, Runtime="python3.12", Role=role["Role"]["Arn"], Handler="handler.handler",
        Code={"ZipFile": buf.getvalue()}, Timeout=timeout, MemorySize=256, Tags={HANDLER_TAG: "notify"})["FunctionArn"])


def test_deployed_function_gets_a_context_with_its_timeout_memory_and_a_request_id(local_aws: LocalAws,
                                                                                   lambdas: Path) -> None:
    arn = _deploy(local_aws, "ctx", timeout=30)
    first = delivery.invoke_handler(local_aws, "notify", {"sleep": 0.2}, function_name="ctx", lambdas_dir=lambdas)
    second = delivery.invoke_handler(local_aws, "notify", {}, function_name="ctx", lambdas_dir=lambdas)
    assert first.error is None, first.error
    assert 29_000 < first.result["left"] <= 30_000
    assert first.result["left_after"] <= first.result["left"] - 200  # the clock runs during the invocation
    assert (first.result["name"], first.result["arn"], first.result["memory"]) == ("ctx", arn, "256")
    assert first.result["request"] != second.result["request"]


def test_handler_past_its_timeout_fails_as_lambda_reports_it(local_aws: LocalAws, lambdas: Path) -> None:
    _deploy(local_aws, "slow", timeout=1)
    late = delivery.invoke_handler(local_aws, "notify", {"sleep": 1.3}, function_name="slow", lambdas_dir=lambdas)
    assert late.result is None
    assert isinstance(late.error, TimeoutError) and "Task timed out after 1.00 seconds" in str(late.error)
    assert getattr(late.error, "error_type", None) == "Sandbox.Timedout"  # what a Step Functions task sees
    in_time = delivery.invoke_handler(local_aws, "notify", {"sleep": 0.1}, function_name="slow", lambdas_dir=lambdas)
    assert in_time.error is None and in_time.result["left"] <= 1000


def test_handler_of_no_deployed_function_gets_no_context(local_aws: LocalAws, lambdas: Path) -> None:
    # a handler called directly (unit tests of a handler, a plain callable target) is not a deployed function
    assert delivery.invoke_handler(local_aws, "notify", {}, lambdas_dir=lambdas).result == {"context": None}
