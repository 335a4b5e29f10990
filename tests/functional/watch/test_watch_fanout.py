"""The evaluator's fan-out on the local AWS: shards through an SQS queue, evaluated with the per-job isolation,
cursors and job leases; a slow or failing shard costs only its own jobs; no job is evaluated twice at once."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from botocore.exceptions import ClientError
from test_watch_fleet_sink import _minutes
from watch_support import BUCKET, TABLE, Recorder, at, clients, create_job, publish, settings, with_clients

from smx_debug.actions.ledger import Ledger
from smx_debug.contracts import JOB_ERRORS_METRIC, MANAGED_TAG, REASON_DIMENSION, job_lease_key
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.local.sagemaker.other_team import PREFIX
from smx_debug.watch import run_once
from smx_debug.watch.discover import WatchedJob
from smx_debug.watch.handler import decode_shard, encode_shard, handle_shards, queue_sender

CPU = Scenario(kind="cpu_bottleneck", onset=10)
HEALTHY = Scenario()
JOBS = [f"guarded-{c}" for c in "abcde"]


def _jobs(aws: LocalAws, scenario: Scenario = CPU) -> None:
    for job in JOBS:
        create_job(aws, job)
        publish(aws, job, 0, 30, scenario)


def _queue(aws: LocalAws) -> str:
    return str(aws.client("sqs").create_queue(QueueName="shards", Attributes={"VisibilityTimeout": "360"})["QueueUrl"])


def _event(aws: LocalAws, url: str) -> dict[str, Any]:
    """Every shard on the queue as Lambda's SQS event (one record per message)."""
    sqs, records = aws.client("sqs"), []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages"):
        records += [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                     "attributes": m["Attributes"], "eventSource": "aws:sqs"} for m in batch]
    return {"Records": records}


def _shard_jobs(event: Mapping[str, Any]) -> list[list[str]]:
    return [[j.name for j in decode_shard(r["body"])[1]] for r in event["Records"]]


def _clock(minute: float) -> Any:
    return lambda: at(minute)


def _scheduled_run(aws: LocalAws, jobs_per_invocation: int) -> tuple[Any, str]:
    """The five watched jobs and the shard queue, then one scheduled run at minute 8: its report, the queue's URL."""
    _jobs(aws)
    url = _queue(aws)
    config = settings(jobs_per_invocation=jobs_per_invocation)
    report = run_once(config, clients(aws), Recorder(), now=at(8) + 5,
                      shards=queue_sender(aws.client("sqs"), url, config.jobs_per_invocation))
    return report, url


def test_fanout_run_above_jobs_per_invocation_sends_disjoint_shards_and_evaluates_nothing(aws: LocalAws) -> None:
    report, url = _scheduled_run(aws, jobs_per_invocation=2)
    assert (report.watched, report.shards, report.outcomes) == (5, 3, {})
    shards = _shard_jobs(_event(aws, url))
    assert sorted(len(s) for s in shards) == [1, 2, 2]
    assert sorted(j for s in shards for j in s) == JOBS  # each watched job in exactly one shard


def test_fanout_run_at_jobs_per_invocation_evaluates_itself(aws: LocalAws) -> None:
    report, url = _scheduled_run(aws, jobs_per_invocation=5)
    assert report.shards == 0 and sorted(report.outcomes) == JOBS
    assert _event(aws, url) == {"Records": []}


def test_fanout_shards_evaluate_every_job_once_and_act_once(aws: LocalAws) -> None:
    _jobs(aws)
    url, recorder = _queue(aws), Recorder()
    config = settings(jobs_per_invocation=2)
    sender = queue_sender(aws.client("sqs"), url, config.jobs_per_invocation)
    for minute in range(8, 17):  # every minute a run sends shards and the shards are evaluated
        run_once(config, clients(aws), recorder, now=at(minute) + 5, shards=sender)
        answer = handle_shards(_event(aws, url), config, clients(aws), recorder, clock=_clock(minute + 0.2))
        assert answer["batchItemFailures"] == [] and len(answer["shards"]) == 3
        assert all(s["held"] == [] and s["failed"] == {} for s in answer["shards"])
        assert sum(s["evaluated"] for s in answer["shards"]) == len(JOBS)  # disjoint shards: each job once
    assert sorted(recorder.jobs()) == JOBS  # the CPU bottleneck of each job acted on once


def test_fanout_job_held_by_a_slow_shard_is_left_to_it_and_evaluated_later(aws: LocalAws) -> None:
    _jobs(aws, HEALTHY)
    config = settings(jobs_per_invocation=2)
    slow = Ledger(clients(aws).dynamodb, TABLE, clock=lambda: at(9), lease_seconds=config.lease_seconds)
    assert slow.claim(job_lease_key("guarded-b"), {"run_at": at(9)})  # a slow shard is still evaluating it
    shard = [WatchedJob.of({"TrainingJobName": j, "TrainingJobArn": f"arn:{j}"}, {}) for j in ("guarded-a", "guarded-b")]
    event = {"Records": [{"messageId": "m1", "body": encode_shard(shard, at(9)), "eventSource": "aws:sqs",
                          "attributes": {"SentTimestamp": str(int(at(9) * 1000))}}]}
    (summary,) = handle_shards(event, config, clients(aws), Recorder(), clock=_clock(9.1))["shards"]
    assert (summary["evaluated"], summary["held"]) == (1, ["guarded-b"])
    later = dict(event, Records=[dict(event["Records"][0], attributes={"SentTimestamp": str(int(at(11) * 1000))})])
    (summary,) = handle_shards(later, config, clients(aws), Recorder(), clock=_clock(11))["shards"]  # lease expired
    assert (summary["evaluated"], summary["held"]) == (2, [])


class _CursorsDown:
    """A DynamoDB client whose BatchGetItem fails for cursors of ``jobs`` (as if their partition were down)."""

    def __init__(self, real: Any, jobs: Sequence[str]) -> None:
        self._real, self._jobs = real, set(jobs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def batch_get_item(self, RequestItems: Mapping[str, Any]) -> Any:
        keys = {k["pk"]["S"] for spec in RequestItems.values() for k in spec["Keys"]}
        if keys & self._jobs:
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "BatchGetItem")
        return self._real.batch_get_item(RequestItems=RequestItems)


def test_fanout_failing_shard_costs_only_its_own_jobs(aws: LocalAws) -> None:
    _jobs(aws, HEALTHY)
    config = settings(jobs_per_invocation=2)
    down = with_clients(aws, dynamodb=_CursorsDown(clients(aws).dynamodb, ["guarded-c"]))
    shards = {"ok": ["guarded-a", "guarded-b"], "broken": ["guarded-c", "guarded-d"]}
    event = {"Records": [
        {"messageId": m, "eventSource": "aws:sqs", "attributes": {"SentTimestamp": str(int(at(9) * 1000))},
         "body": encode_shard([WatchedJob(j, f"arn:{j}", {}) for j in jobs], at(9))} for m, jobs in shards.items()]}
    answer = handle_shards(event, config, down, Recorder(), clock=_clock(9.1))
    assert answer["batchItemFailures"] == [{"itemIdentifier": "broken"}]  # SQS redelivers that message only
    ok, broken = answer["shards"]
    assert ok["evaluated"] == 2 and broken["evaluated"] == 0
    assert broken["failed"] == {"guarded-c": ["aws-error"], "guarded-d": ["aws-error"]}
    stats = aws.client("cloudwatch").get_metric_statistics(
        Namespace=config.metric_namespace, MetricName=JOB_ERRORS_METRIC,
        Dimensions=[{"Name": REASON_DIMENSION, "Value": "aws-error"}],
        StartTime=at(8), EndTime=at(11), Period=60, Statistics=["Sum"])["Datapoints"]
    assert sum(d["Sum"] for d in stats) == 2  # the broken shard's two jobs, counted
    # its leases were released: the next run evaluates those jobs
    again = handle_shards({"Records": [dict(event["Records"][1], attributes={"SentTimestamp": str(int(at(10) * 1000))})]},
                          config, clients(aws), Recorder(), clock=_clock(10))
    assert again["batchItemFailures"] == [] and again["shards"][0]["evaluated"] == 2


def test_fanout_overlapping_shards_never_evaluate_or_act_on_a_job_twice(aws: LocalAws) -> None:
    _jobs(aws)
    config = settings(jobs_per_invocation=5)
    for minute in range(8, 14):  # nothing fires before minute 14
        run_once(config, clients(aws), Recorder(), now=at(minute) + 5)
    recorder, second = Recorder(), []
    body = encode_shard([WatchedJob(j, f"arn:{j}", {}) for j in JOBS], at(14))
    event = {"Records": [{"messageId": "m", "body": body, "eventSource": "aws:sqs",
                          "attributes": {"SentTimestamp": str(int(at(14) * 1000))}}]}

    def responder(job: str, triggers: Any, *, deadline: Any = None, description: Any = None) -> Any:
        if not second:  # a duplicate of the shard (two runs, a redelivery) starts while this one acts
            second.append(handle_shards(event, config, clients(aws), recorder, clock=_clock(14.1)))
        return recorder(job, triggers)

    first = handle_shards(event, config, clients(aws), responder, clock=_clock(14.05))
    assert first["shards"][0]["evaluated"] == 5
    assert second[0]["shards"][0]["evaluated"] == 0 and second[0]["shards"][0]["held"] == JOBS
    assert sorted(recorder.jobs()) == JOBS  # each job acted on once


def test_fanout_stale_shard_is_dropped_and_a_malformed_one_fails(aws: LocalAws) -> None:
    _jobs(aws, HEALTHY)
    config = settings(jobs_per_invocation=2)
    stale = {"messageId": "old", "eventSource": "aws:sqs", "attributes": {"SentTimestamp": str(int(at(7) * 1000))},
             "body": encode_shard([WatchedJob("guarded-a", "arn:a", None)], at(7))}
    bad = {"messageId": "bad", "eventSource": "aws:sqs", "attributes": {}, "body": json.dumps({"v": 9})}
    answer = handle_shards({"Records": [stale, bad]}, config, clients(aws), Recorder(), clock=_clock(9))
    assert answer["batchItemFailures"] == [{"itemIdentifier": "bad"}]  # its maxReceiveCount -> the DLQ
    assert answer["shards"][0]["stale"] == 120.0 and "version 9" in answer["shards"][1]["rejected"]


def _record(message: str, body: str, minute: float = 9) -> dict[str, Any]:
    return {"messageId": message, "body": body, "eventSource": "aws:sqs",
            "attributes": {"SentTimestamp": str(int(at(minute) * 1000))}}


def _job(aws: LocalAws, name: str, tags: Mapping[str, str] | None = None) -> WatchedJob:
    arn = aws.client("sagemaker").describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return WatchedJob(name, arn, tags)


def _items(aws: LocalAws) -> list[str]:
    return sorted(i["pk"]["S"] for i in aws.client("dynamodb").scan(TableName=TABLE)["Items"])


def test_fanout_shard_naming_an_unwatched_job_reads_and_writes_nothing_of_it(aws: LocalAws) -> None:
    _jobs(aws, HEALTHY)
    other = f"{PREFIX}untagged"  # another team's running job with metrics: no watched prefix, not opted in
    config = settings(jobs_per_invocation=2, fleet_bucket=BUCKET)
    for tags in (None, {}):  # tags unknown (as for a job watched by prefix), or read by Search without the opt-in
        shard = [_job(aws, "guarded-a", tags), _job(aws, other, tags)]
        answer = handle_shards({"Records": [_record("m", encode_shard(shard, at(9)))]}, config, clients(aws),
                               Recorder(), clock=_clock(9.1))
        assert answer["batchItemFailures"] == []  # the watched job's evaluation stands
        (summary,) = answer["shards"]
        assert (summary["evaluated"], summary["unwatched"]) == (1, [other])
    assert _items(aws) == ["guarded-a"]  # no cursor, no lease for the unwatched job
    minutes = _minutes(aws)
    assert set(minutes["job"]) == {"guarded-a"}  # its fleet minutes: none


def test_fanout_shard_of_an_opted_in_job_is_evaluated(aws: LocalAws) -> None:
    create_job(aws, "team-x", tags={MANAGED_TAG: "TRUE"})  # watched by its opt-in tag only
    publish(aws, "team-x", 0, 30, HEALTHY)
    _jobs(aws, HEALTHY)
    url = _queue(aws)
    config = settings(jobs_per_invocation=2)
    report = run_once(config, clients(aws), Recorder(), now=at(9), shards=queue_sender(aws.client("sqs"), url, 2))
    assert (report.watched, report.shards) == (6, 3)
    answer = handle_shards(_event(aws, url), config, clients(aws), Recorder(), clock=_clock(9.1))
    assert answer["batchItemFailures"] == []
    assert sum(s["evaluated"] for s in answer["shards"]) == 6
    assert [s["unwatched"] for s in answer["shards"]] == [[], [], []]


@pytest.mark.parametrize("run", ["NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400])
def test_fanout_shard_with_a_run_not_finite_is_that_records_failure(aws: LocalAws, run: str) -> None:
    _jobs(aws, HEALTHY)
    config = settings(jobs_per_invocation=2)
    good = encode_shard([_job(aws, "guarded-a")], at(9))
    bad = good.replace(f'"run":{at(9)!r}', f'"run":{run}')
    assert bad != good
    answer = handle_shards({"Records": [_record("bad", bad), _record("good", good)]}, config, clients(aws),
                           Recorder(), clock=_clock(9.1))
    assert answer["batchItemFailures"] == [{"itemIdentifier": "bad"}]
    assert "run" in answer["shards"][0]["rejected"] and answer["shards"][1]["evaluated"] == 1
    assert _items(aws) == ["guarded-a"]


def test_fanout_shard_nested_100000_deep_is_that_records_failure(aws: LocalAws) -> None:
    _jobs(aws, HEALTHY)
    config = settings(jobs_per_invocation=2)
    good = encode_shard([_job(aws, "guarded-a")], at(9))
    deep = "[" * 100_000 + "]" * 100_000
    answer = handle_shards({"Records": [_record("deep", deep), _record("good", good)]}, config, clients(aws),
                           Recorder(), clock=_clock(9.1))
    assert answer["batchItemFailures"] == [{"itemIdentifier": "deep"}]
    assert "not JSON" in answer["shards"][0]["rejected"] and answer["shards"][1]["evaluated"] == 1


def test_fanout_shard_naming_a_job_twice_is_that_records_failure(aws: LocalAws) -> None:
    _jobs(aws, HEALTHY)
    body = encode_shard([_job(aws, "guarded-a")] * 2, at(9))
    answer = handle_shards({"Records": [_record("twice", body)]}, settings(jobs_per_invocation=2), clients(aws),
                           Recorder(), clock=_clock(9.1))
    assert answer["batchItemFailures"] == [{"itemIdentifier": "twice"}]
    assert "twice" in answer["shards"][0]["rejected"] and _items(aws) == []
