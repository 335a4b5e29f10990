"""Issue 12's smaller defects, each checked on the synthesized template: health alarms, KMS grants that only
use data keys, no hard-coded partition, the retrain wiring, timeouts the runtime accepts, the history budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers_infra import Synth, functions_by_handler
from infra_delivery import Template, allowed

from infra.config import config_from_context
from smx_debug.actions.settings import Settings
from smx_debug.contracts import EXECUTION_EVENT_SOURCE, SFN_HISTORY_LIMIT, Env, retrain_history_events
from smx_debug.errors import ConfigError

# The functions that run rule actions (a rule may say `retrain`): the Debugger-event one and the evaluator.
STARTERS = {"stop_training", "evaluator"}
FULL = {"watch_prefixes": ["exp-"], "alarm_rules": ["VanishingGradient"], "default_actions": ["notify", "stop"]}


@pytest.fixture(scope="module")
def full(synth_cached: Synth) -> Template:
    template, _ = synth_cached(**FULL)
    return Template(template.to_json())


def _people_topic(t: Template) -> str:
    return next(k for k, p in t.of_type("AWS::SNS::Topic") if p.get("DisplayName") == "smx-debug")


def test_health_alarms_watch_the_dlq_every_function_and_retraining(full: Template) -> None:
    people = _people_topic(full)
    watched: set[tuple[str, str, str | None]] = set()
    for _, props in full.of_type("AWS::CloudWatch::Alarm"):
        if props.get("Namespace") == "SmxDebug":
            continue  # the rule alarms (test_infra_stack)
        assert props["AlarmActions"] == [{"Ref": people}]  # straight to people, not through `notify`
        backlog = props.get("MetricName") == "ApproximateAgeOfOldestMessage"  # the evaluator's shards wait
        assert props["Threshold"] == (60 if backlog else 1) and props["TreatMissingData"] == "notBreaching"
        metrics = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m] or [props]
        for metric in metrics:
            dimension = full.logical_of(metric["Dimensions"][0]["Value"])
            watched.add((metric["Namespace"], metric["MetricName"], dimension))
    (queue, _), = [(k, p) for k, p in full.of_type("AWS::SQS::Queue") if p.get("QueueName") == "SmxDebugGuard-dlq"]
    (machine, _), = full.of_type("AWS::StepFunctions::StateMachine")
    functions = {k for k, _ in full.of_type("AWS::Lambda::Function")}
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", queue) in watched
    assert {d for ns, name, d in watched if (ns, name) == ("AWS/Lambda", "Errors")} == functions
    assert {name for ns, name, d in watched if ns == "AWS/States" and d == machine} == {
        "ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}


def test_roles_get_data_keys_only(full: Template) -> None:
    for role, _ in full.of_type("AWS::IAM::Role"):
        for statement in full.role_policy(role):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            kms = {a for a in actions if a.startswith("kms:")}
            assert kms <= {"kms:GenerateDataKey", "kms:Decrypt"}, (role, statement)
    for _, props in full.of_type("AWS::KMS::Key"):
        for statement in props["KeyPolicy"]["Statement"]:
            if "Service" in statement["Principal"]:
                assert statement["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"], statement


@pytest.mark.parametrize("context", [{}, FULL, {"sagemaker_execution_role_pattern": "arn:aws-cn:iam::*:role/Sm*"}],
                         ids=["defaults", "full", "cn-pattern"])
def test_no_hard_coded_partition(synth_cached: Synth, context: dict[str, Any]) -> None:
    template, _ = synth_cached(**context)
    text = json.dumps(template.to_json())
    # ("aws:" starts global condition keys, also inside kms:EncryptionContext:aws:sqs:arn)
    assert '"arn:aws' not in text and ":aws:" not in text.replace('"aws:', "").replace("EncryptionContext:aws:", "")


def test_only_the_rule_action_handlers_start_the_retraining_state_machine(full: Template) -> None:
    (machine, _), = full.of_type("AWS::StepFunctions::StateMachine")
    machine_arn = full.resolve.ref(machine)
    fns = functions_by_handler_of(full)
    for handler, logical in fns.items():
        props = full.resources[logical]["Properties"]
        role = str(full.logical_of(props["Role"]))
        statements = full.role_policy(role)
        env = full.resolve(props["Environment"]["Variables"])
        may_start = allowed(statements, "states:StartExecution", machine_arn)
        assert may_start == (handler in STARTERS), handler
        # notify also gets the ARN, to check the execution events it reports (no states:* permission).
        assert (env.get(Env.STATE_MACHINE_ARN) == machine_arn) == (handler in {*STARTERS, "notify"}), handler
        other = machine_arn.replace("SmxDebugGuard-retraining", "someone-else")
        assert not allowed(statements, "states:StartExecution", other)


def test_executions_no_step_can_report_go_to_notify(full: Template) -> None:
    (machine, _), = full.of_type("AWS::StepFunctions::StateMachine")
    notify = functions_by_handler_of(full)["notify"]
    ended = [p for _, p in full.of_type("AWS::Events::Rule")
             if p.get("EventPattern", {}).get("source") == [EXECUTION_EVENT_SOURCE]]
    assert len(ended) == 1
    pattern = full.resolve(ended[0]["EventPattern"])
    assert pattern == {"source": ["aws.states"], "detail-type": ["Step Functions Execution Status Change"],
                       "detail": {"status": ["TIMED_OUT", "ABORTED"], "stateMachineArn": [full.resolve.ref(machine)]}}
    assert [full.logical_of(t["Arn"]) for t in ended[0]["Targets"]] == [notify]
    assert all("DeadLetterConfig" in t for t in ended[0]["Targets"])


def functions_by_handler_of(t: Template) -> dict[str, str]:
    out = {}
    for logical, props in t.of_type("AWS::Lambda::Function"):
        out[{tag["Key"]: tag["Value"] for tag in props["Tags"]}["smx-debug:handler"]] = logical
    return out


def test_function_settings_are_accepted_by_the_runtime(full: Template) -> None:
    """The runtime refuses retries that do not fit half the timeout and leases that do not outlast it."""
    for handler, logical in functions_by_handler_of(full).items():
        props = full.resources[logical]["Properties"]
        env = full.resolve(props["Environment"]["Variables"])
        if handler not in ("rule_metrics", "stop_training", "notify", "retrain"):
            continue  # the evaluator reads its own settings (infra/components/evaluator.py)
        settings = Settings.from_env({**env, "AWS_REGION": "us-west-2"})
        assert settings.function_timeout == props["Timeout"], handler
        assert settings.lease_seconds > props["Timeout"] >= 2 * settings.call_budget, handler
        assert settings.account == "111122223333"


def test_history_budget_refused_at_synth_naming_the_key() -> None:
    # Issue 12: wait_seconds=10 with the default day of runtime reached 25,000 events in about 8 hours.
    with pytest.raises(ConfigError, match=r"retraining\.wait_seconds: polling every 10 s .* at least") as caught:
        config_from_context({"retraining": {"wait_seconds": 10}})
    assert caught.value.field == "retraining.wait_seconds"
    assert "at least 32 " in str(caught.value)
    assert "use at least 32 s" in (Path(__file__).resolve().parents[2] / "docs" / "infra.md").read_text()
    accepted = config_from_context({"retraining": {"wait_seconds": 10, "max_runtime_seconds": 3600}}).retraining
    assert retrain_history_events(wait_seconds=accepted.wait_seconds, max_runtime_seconds=accepted.max_runtime_seconds,
                                  max_retraining=accepted.max_retraining) <= SFN_HISTORY_LIMIT
    # Retraining disabled: nothing to bound.
    config_from_context({"retraining": {"enabled": False, "wait_seconds": 10}})


def test_functions_by_handler_helper_agrees(synth_cached: Synth) -> None:
    template, _ = synth_cached(**FULL)
    assert functions_by_handler(template) == functions_by_handler_of(Template(template.to_json()))
