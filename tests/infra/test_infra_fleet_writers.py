"""The evaluator's fan-out and the fleet dataset's writers in the stack: the shard queue (encrypted, TLS only, a
dead-letter queue), its event source mapping (batch size, maximum concurrency, partial batch failures), the fleet
collector (schedule that never overlaps, least privilege), the handlers' verdict-log grant, and the new keys."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match
from helpers_infra import Synth, actions_of, function_statements, functions_by_handler, logical_id, only

from infra.config import config_from_context
from smx_debug.contracts import FLEET_INBOX_PREFIX, FLEET_PREFIX
from smx_debug.errors import ConfigError


def _resources(statement: dict[str, Any]) -> list[str]:
    resource = statement["Resource"]
    return [json.dumps(r) for r in (resource if isinstance(resource, list) else [resource])]


def test_fanout_shard_queue_encrypted_tls_only_with_the_stacks_dead_letter_queue(synth_cached: Synth) -> None:
    template, stack = synth_cached()
    assert stack.evaluator_fanout is not None
    queue = logical_id(stack, stack.evaluator_fanout.queue)
    props = template.find_resources("AWS::SQS::Queue")[queue]["Properties"]
    assert props["KmsMasterKeyId"] == {"Fn::GetAtt": [logical_id(stack, stack.key), "Arn"]}
    assert props["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [logical_id(stack, stack.dead_letters),
                                                                             "Arn"]}, "maxReceiveCount": 3}
    assert props["VisibilityTimeout"] == 6 * 60 and props["MessageRetentionPeriod"] == 3600
    template.has_resource_properties("AWS::SQS::QueuePolicy", {
        "Queues": [{"Ref": queue}],
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like(
            {"Action": "sqs:*", "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})


@pytest.mark.parametrize(("concurrency", "per_invocation"), [(5, 200), (40, 120)])
def test_fanout_mapping_feeds_the_evaluator_with_bounded_concurrency(synth: Synth, concurrency: int,
                                                                     per_invocation: int) -> None:
    template, stack = synth(evaluator={"enabled": True, "max_concurrency": concurrency, "rate_minutes": 2,
                                       "jobs_per_invocation": per_invocation})
    assert stack.evaluator is not None and stack.evaluator_fanout is not None
    evaluator = logical_id(stack, stack.evaluator.function)
    queue = logical_id(stack, stack.evaluator_fanout.queue)
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "FunctionName": {"Ref": evaluator}, "EventSourceArn": {"Fn::GetAtt": [queue, "Arn"]}, "BatchSize": 1,
        "ScalingConfig": {"MaximumConcurrency": concurrency}, "FunctionResponseTypes": ["ReportBatchItemFailures"]})
    env = template.find_resources("AWS::Lambda::Function")[evaluator]["Properties"]["Environment"]["Variables"]
    assert (env["SMX_SHARD_QUEUE_URL"], env["SMX_JOBS_PER_INVOCATION"], env["SMX_RATE_MINUTES"]) == (
        {"Ref": queue}, str(per_invocation), "2")
    assert "ReservedConcurrentExecutions" not in template.find_resources("AWS::Lambda::Function")[evaluator][
        "Properties"]  # a new account refuses any reservation: the mapping bounds the fan-out
    # the poller's three actions and the run's SendMessage, on the shard queue only (not purge, not visibility)
    sqs = [s for s in function_statements(template, "evaluator") if any(a.startswith("sqs:") for a in actions_of([s]))]
    on_queue = [s for s in sqs if _resources(s) == [json.dumps({"Fn::GetAtt": [queue, "Arn"]})]]
    assert actions_of(on_queue) == {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                                    "sqs:SendMessage"}
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ApproximateAgeOfOldestMessage", "Threshold": 120,
        "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]})


def test_fleet_collector_runs_on_a_schedule_that_never_overlaps(synth_cached: Synth) -> None:
    template, stack = synth_cached(watch_prefixes=["exp-"])
    collector = functions_by_handler(template)["fleet_collector"]
    props = template.find_resources("AWS::Lambda::Function")[collector]["Properties"]
    assert (props["Timeout"], props["MemorySize"], props["Runtime"]) == (300, 1024, "python3.14")
    assert props["Environment"]["Variables"] == {
        "SMX_FLEET_BUCKET": {"Ref": logical_id(stack, stack.storage.bucket)}, "SMX_WATCH_PREFIXES": "exp-",
        "SMX_OPT_IN_TAG": "smx-debug:managed", "SMX_EVALUATOR_APPENDS": "true"}
    template.has_resource_properties("AWS::Events::Rule", {
        "ScheduleExpression": "rate(1 hour)",
        "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [collector, "Arn"]},
                                       "RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}})]})
    template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "FunctionName": {"Ref": collector}, "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60})


def test_fleet_collector_least_privilege(synth_cached: Synth) -> None:
    template, stack = synth_cached(watch_prefixes=["exp-"])
    statements = function_statements(template, "fleet_collector")
    assert actions_of(statements) == {
        "sagemaker:Search", "cloudwatch:GetMetricData", "s3:GetObject", "s3:PutObject", "s3:DeleteObject",
        "s3:ListBucket", "sqs:SendMessage", "kms:GenerateDataKey", "kms:Decrypt", "logs:CreateLogStream",
        "logs:PutLogEvents"}
    bucket = logical_id(stack, stack.storage.bucket)
    for statement in statements:
        actions, resources = actions_of([statement]), " ".join(_resources(statement))
        if actions & {"s3:PutObject"}:
            assert actions == {"s3:GetObject", "s3:PutObject"} and f"/{FLEET_PREFIX}*" in resources
        if actions & {"s3:DeleteObject"}:
            assert actions == {"s3:GetObject", "s3:DeleteObject"} and f"/{FLEET_INBOX_PREFIX}*" in resources
        if "s3:ListBucket" in actions:
            assert statement["Condition"] == {"StringLike": {"s3:prefix": [f"{FLEET_PREFIX}*", f"{FLEET_INBOX_PREFIX}*"]}}
        if any(a.startswith("s3:") for a in actions):
            assert bucket in resources
        if statement["Resource"] == "*":
            assert actions == {"sagemaker:Search", "cloudwatch:GetMetricData"}


def test_fleet_verdict_log_handlers_may_only_put_in_the_inbox(synth_cached: Synth) -> None:
    template, _ = synth_cached()
    for handler in ("rule_metrics", "stop_training", "notify"):
        s3 = [s for s in function_statements(template, handler) if any(a.startswith("s3:") for a in actions_of([s]))]
        assert actions_of(s3) == {"s3:PutObject"}, handler
        assert all(f"/{FLEET_INBOX_PREFIX}verdicts/*" in " ".join(_resources(s)) for s in s3), handler


def test_fleet_off_no_collector_no_verdict_log(synth_cached: Synth) -> None:
    template, _ = synth_cached(fleet="false")
    assert "fleet_collector" not in functions_by_handler(template)
    for resource in template.find_resources("AWS::Lambda::Function").values():
        assert "SMX_FLEET_BUCKET" not in resource["Properties"]["Environment"]["Variables"]
    only(template, "AWS::Lambda::EventSourceMapping")  # the evaluator's fan-out does not need the dataset


@pytest.mark.parametrize(("context", "field"), [
    ({"evaluator": {"max_concurrency": 1}}, "evaluator.max_concurrency"),
    ({"evaluator": {"max_concurrency": 1001}}, "evaluator.max_concurrency"),
    ({"evaluator": '{"jobs_per_invocation": 0}'}, "evaluator.jobs_per_invocation"),
    ({"evaluator": {"jobs_per_invocation": 501}}, "evaluator.jobs_per_invocation"),
    ({"fleet": {"collector_rate_minutes": 5}}, "fleet.collector_rate_minutes"),
    ({"fleet": '{"collector_rate_minutes": 2000}'}, "fleet.collector_rate_minutes"),
])
def test_config_fanout_and_collector_keys_bad_value_names_the_key(context: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_context(context)
    assert refused.value.field == field and field in str(refused.value)
