"""smx_debug.local.awslambda.invoke: handlers run in-process as Lambda would run them (no Docker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from smx_debug.local import LocalAws, deliver_event
from smx_debug.local.awslambda import invoke as delivery

HANDLER = '''
import os
CALLS = []

def notify(event, context):
    if event.get("fail"):
        raise RuntimeError("boom")
    CALLS.append(event)
    return {"calls": len(CALLS), "mode": os.environ.get("MODE"), "function": os.environ["AWS_LAMBDA_FUNCTION_NAME"],
            "endpoint": os.environ.get("AWS_ENDPOINT_URL")}

stop_training = notify
'''


@pytest.fixture
def lambdas(tmp_path: Path, local_aws: LocalAws) -> Path:
    (tmp_path / "actions").mkdir()  # the action handlers' one entry module (contracts.handler_entry)
    (tmp_path / "actions" / "handler.py").write_text(HANDLER)
    delivery.reset_handlers(local_aws)
    return tmp_path


def test_invoke_handler_runs_warm_with_its_environment_and_captures_errors(local_aws: LocalAws,
                                                                           lambdas: Path) -> None:
    first = delivery.invoke_handler(local_aws, "notify", {}, {"MODE": "a"}, function_name="fn", lambdas_dir=lambdas)
    again = delivery.invoke_handler(local_aws, "notify", {}, {"MODE": "a"}, function_name="fn", lambdas_dir=lambdas)
    changed = delivery.invoke_handler(local_aws, "notify", {}, {"MODE": "b"}, function_name="fn", lambdas_dir=lambdas)
    assert (first.function, first.handler, first.error) == ("fn", "notify", None)
    assert first.result == {"calls": 1, "mode": "a", "function": "fn", "endpoint": local_aws.endpoint_url}
    assert again.result["calls"] == 2  # warm: the same module while the environment is unchanged
    assert changed.result["calls"] == 1  # a new environment is a cold start
    failed = delivery.invoke_handler(local_aws, "notify", {"fail": True}, lambdas_dir=lambdas)
    assert isinstance(failed.error, RuntimeError) and failed.result is None
    missing = delivery.invoke_handler(local_aws, "absent", {}, lambdas_dir=lambdas)
    assert "does not exist" in str(missing.error)


def test_deliver_event_with_handlers_runs_them_in_handler_order(local_aws: LocalAws, lambdas: Path) -> None:
    seen: list[Any] = []
    deliveries = deliver_event(
        local_aws,
        {"detail": {}},
        {"notify": {"MODE": "n"}, "custom": lambda event, _ctx: seen.append(event) or "ok",
         "stop_training": {"MODE": "s"}},
        lambdas_dir=lambdas,
    )
    assert [d.handler for d in deliveries] == ["stop_training", "notify", "custom"]
    assert [d.result["mode"] if isinstance(d.result, dict) else d.result for d in deliveries] == ["s", "n", "ok"]
    assert seen == [{"detail": {}}]
