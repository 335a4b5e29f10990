"""The evaluator through the real action path on the local AWS: verify, ledger, metric, message, one stop."""

from __future__ import annotations

from typing import Any

import pytest
from watch_support import Recorder, action_env, at, clients, create_job, messages, publish

from smx_debug import local
from smx_debug.contracts import METRIC_NAME, SOURCE_EVALUATOR, stop_key
from smx_debug.local import LocalAws
from smx_debug.local.clients import client as cached_client
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.watch import run_once
from smx_debug.watch.act import action_responder
from smx_debug.watch.handler import EvaluatorRuntime, handle_invocation
from smx_debug.watch.settings import EvaluatorSettings

CPU = Scenario(kind="cpu_bottleneck", onset=10)


def _runtime(aws: LocalAws, env: dict[str, str]) -> Any:
    from smx_debug.actions import Runtime

    return Runtime.from_env(env, clients=lambda service: cached_client(aws, service))


@pytest.mark.parametrize(("job", "tags"), [
    ("guarded-nodebugger", {}),  # watched by prefix; the deployment's default actions stop it
    ("team-job", {"smx-debug:managed": "True", "smx-debug:on:CPUBottleneck": "stop notify"}),  # by tag
])
def test_evaluator_stops_a_job_without_debugger_once_and_says_it_decided(
    aws: LocalAws, job: str, tags: dict[str, str]
) -> None:
    env = action_env(aws, SMX_DEFAULT_ACTIONS="stop notify" if not tags else "notify")
    create_job(aws, job, tags=tags)
    publish(aws, job, 0, 30, CPU)
    runtime = _runtime(aws, env)
    settings = EvaluatorSettings.from_env(env)
    responder = action_responder(runtime)
    stopped_at = None
    for m in range(8, 20):
        report = run_once(settings, clients(aws), responder, now=at(m) + 5)
        if report.triggers and stopped_at is None:
            stopped_at = m
            assert report.outcomes[job].response is not None
    assert stopped_at is not None and stopped_at - CPU.onset <= 5
    assert local.stop_calls(aws, job) == 1
    record = cached_client(aws, "dynamodb").get_item(
        TableName=env["SMX_LEDGER_TABLE"], Key={"pk": {"S": stop_key(job)}}
    )["Item"]
    assert record["state"]["S"] == "done"
    sent = messages(aws, env)
    assert len(sent) == 1
    assert SOURCE_EVALUATOR in sent[0]["Message"] and "CPUBottleneck" in sent[0]["Message"]
    metrics = cached_client(aws, "cloudwatch").list_metrics(Namespace="SmxDebug", MetricName=METRIC_NAME)["Metrics"]
    assert {tuple(sorted(d["Value"] for d in m["Dimensions"])) for m in metrics} == {
        (), ("CPUBottleneck",), ("CPUBottleneck", job),
    }


def test_evaluator_handler_runs_one_scheduled_invocation(aws: LocalAws) -> None:
    env = action_env(aws)
    create_job(aws, "guarded-a")
    runtime = EvaluatorRuntime(
        settings=EvaluatorSettings.from_env(env), clients=clients(aws), responder=Recorder(),
    )
    summary = handle_invocation({"source": "aws.scheduler"}, None, runtime=runtime)
    assert summary["handler"] == "evaluator"
    assert summary["running"] == 5 and summary["watched"] == 1  # 4 of another team run beside it (conftest)
    assert summary["seconds"] >= 0


@pytest.mark.parametrize("missing", ["SMX_ACCOUNT", "AWS_REGION"])
def test_evaluator_without_account_or_region_fails_its_cold_start(aws: LocalAws, missing: str) -> None:
    from smx_debug.errors import ConfigError

    env = {k: v for k, v in action_env(aws).items() if k != missing}
    env.pop("AWS_DEFAULT_REGION", None)
    with pytest.raises(ConfigError) as info:
        action_responder(_runtime(aws, env))
    assert info.value.field == missing
