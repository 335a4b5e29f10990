"""Each value of the evaluator's walk is decoded and validated once (issue 32): the environment, the watch spec,
the rules in a job's cursor, a new job's description, and the triggers handed to the action core."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from watch_support import BUCKET, Recorder, action_env, at, clients, create_job, publish, settings

from smx_debug import actions, tags
from smx_debug.contracts import EVALUATOR_TAG, MANAGED_TAG
from smx_debug.local import LocalAws
from smx_debug.local.clients import client as cached_client
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.rules.watch_spec import WatchedRule, WatchSpec
from smx_debug.watch import run_once

CPU = Scenario(kind="cpu_bottleneck", onset=10)


def _count_everywhere(monkeypatch: pytest.MonkeyPatch, original: Callable[..., Any], calls: Counter[str]) -> None:
    """Replace ``original`` in every loaded smx_debug module that imported it by name, counting its calls."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[original.__name__] += 1
        return original(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("smx_debug") and getattr(module, original.__name__, None) is original:
            monkeypatch.setattr(module, original.__name__, counted)


def test_evaluator_runtime_reads_the_watch_rule_once_per_cold_start(
    aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from smx_debug.watch.handler import EvaluatorRuntime

    env = action_env(aws)
    calls: Counter[str] = Counter()
    _count_everywhere(monkeypatch, tags.watch_rule_from_env, calls)
    runtime = EvaluatorRuntime.from_env(env)
    assert calls["watch_rule_from_env"] == 1
    assert runtime.settings.watch_prefixes == ("guarded-",)


def test_discovery_watch_spec_of_a_new_job_is_decoded_once(aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WatchSpec(rules=(WatchedRule(name="CPU-strict", rule="CPUBottleneck", parameters={"threshold": 20}),))
    aws.client("s3").put_object(Bucket=BUCKET, Key=spec.key, Body=spec.to_json().encode())
    create_job(aws, "planned-job", tags={MANAGED_TAG: "true", EVALUATOR_TAG: spec.key})
    publish(aws, "planned-job", 0, 10, Scenario())
    run_settings = settings(default_rules=WatchSpec())  # decoded before the run, as the cold start does
    decoded: list[str] = []
    original = WatchSpec.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[WatchSpec], text: str | bytes, **kwargs: Any) -> WatchSpec:
        decoded.append(str(kwargs.get("source")))
        return original(cls, text, **kwargs)

    monkeypatch.setattr(WatchSpec, "from_json", classmethod(counted))
    report = run_once(run_settings, clients(aws), Recorder(), now=at(9))
    assert report.outcomes["planned-job"].notes == []
    assert decoded == [f"s3://{BUCKET}/{spec.key}"]


def test_run_rules_of_a_cursor_are_built_once_per_rule_and_run(aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 20, Scenario())
    run_once(settings(), clients(aws), Recorder(), now=at(8) + 5)  # discovers the job: its rules in its cursor
    built: list[str] = []
    original = WatchedRule.__post_init__

    def counted(self: WatchedRule) -> None:
        built.append(self.name)
        original(self)

    run_settings = settings()  # the deployment's default rules, decoded at the cold start
    monkeypatch.setattr(WatchedRule, "__post_init__", counted)
    report = run_once(run_settings, clients(aws), Recorder(), now=at(9) + 5)
    assert report.outcomes["guarded-a"].status == "evaluated"
    assert sorted(built) == ["CPUBottleneck", "LossNotDecreasing"]  # the two default rules, once each


def test_run_triggers_are_the_action_cores_triggers(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 20, CPU)
    recorder = Recorder()
    found = [t for m in range(8, 20) for t in run_once(settings(), clients(aws), recorder, now=at(m) + 5).triggers]
    assert found, "the CPU bottleneck fires"
    assert all(type(t) is actions.Trigger for t in found)  # one Trigger: nothing converts it on the way to act
    assert [t for _, ts in recorder.calls for t in ts] == found


def test_evaluator_new_job_that_triggers_in_its_first_run_is_described_once(aws: LocalAws) -> None:
    from smx_debug.actions import Runtime
    from smx_debug.watch.act import action_responder

    env = action_env(aws, SMX_DEFAULT_ACTIONS="stop")
    create_job(aws, "guarded-late")
    publish(aws, "guarded-late", 0, 20, CPU)
    sagemaker = cached_client(aws, "sagemaker")
    described: list[str] = []
    original = sagemaker.describe_training_job

    def counted(**kwargs: Any) -> Any:
        described.append(kwargs["TrainingJobName"])
        return original(**kwargs)

    responder = action_responder(Runtime.from_env(env, clients=lambda service: cached_client(aws, service)))
    sagemaker.describe_training_job = counted
    try:
        report = run_once(settings(), clients(aws), responder, now=at(19) + 5)  # first seen with the fault on
    finally:
        del sagemaker.describe_training_job
    assert [t.rule for t in report.triggers] == ["CPUBottleneck"]
    assert report.outcomes["guarded-late"].response is not None
    assert report.outcomes["guarded-late"].response["stop"]["outcome"] == "stopped"
    assert described == ["guarded-late"]  # discover's DescribeTrainingJob; the act step verifies on it


def test_run_rule_configurations_are_checked_against_the_catalog_once(
    aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    from smx_debug.rules import configured
    from smx_debug.watch import evaluate

    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 20, Scenario())
    run_settings = settings()
    run_once(run_settings, clients(aws), Recorder(), now=at(8) + 5)  # discovers the job: its rules in its cursor
    getattr(getattr(evaluate, "_configured", None), "cache_clear", lambda: None)()
    checked: list[str] = []
    original = configured.configured_rule

    def counted(rule: str, **kwargs: Any) -> Any:
        checked.append(str(kwargs.get("name")))
        return original(rule, **kwargs)

    monkeypatch.setattr(evaluate, "configured_rule", counted)
    for minute in (9, 10, 11):
        assert run_once(run_settings, clients(aws), Recorder(), now=at(minute) + 5).outcomes["guarded-a"].status == \
            "evaluated"
    assert sorted(checked) == ["CPUBottleneck", "LossNotDecreasing"]  # once each, not once a run
