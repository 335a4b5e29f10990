"""The evaluator inside its Lambda timeout: a run starts a job, and the action core an action, only while its worst
case still fits in what is left of the invocation, keeping a margin to save cursors, release leases and put job
errors. Jobs it could not start keep their cursors, are counted (``out-of-time``) and go first next run.

Every call of the action path (DescribeTrainingJob, the ledger's DynamoDB calls, PutMetricData, StopTrainingJob,
Publish) takes ``ANSWER`` seconds of a fake clock that also drives the Lambda context's
``get_remaining_time_in_millis``, as in tests/unit/actions/test_actions_deadline.py. Without the bound, four
bottlenecked jobs' actions took 4 x ~13 calls x 3 s in one 60 s invocation: Lambda would have killed it holding
claims, with no cursor saved, and the next run would have redone the same work.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from lambda_support import Clock, Context, Slow
from watch_support import TABLE, Recorder, action_env, at, clients, create_job, publish, settings

from smx_debug import local
from smx_debug.actions.ledger import DONE
from smx_debug.actions.runtime import Deadline
from smx_debug.contracts import JOB_ERRORS_METRIC, REASON_DIMENSION
from smx_debug.local import LocalAws
from smx_debug.local.clients import client as cached_client
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario, publish_minutes
from smx_debug.watch import run_once
from smx_debug.watch.act import action_responder
from smx_debug.watch.handler import EvaluatorRuntime, handle_invocation
from smx_debug.watch.settings import EvaluatorSettings
from smx_debug.watch.state import CursorStore

TIMEOUT = 60.0
ANSWER = 3.0
JOBS = [f"guarded-{c}" for c in "abcd"]
CPU = Scenario(kind="cpu_bottleneck", onset=2)  # wall-clock aligned jobs: bottlenecked well before the run
LATE = Scenario(kind="cpu_bottleneck", onset=10)  # fires by minute 15, not at minute 8


def _now_aligned_jobs(aws: LocalAws, names: Sequence[str]) -> None:
    """Jobs started 14 minutes ago (wall clock: the scheduled entry point's run reads "now" from it), CPU-bottlenecked
    from their minute 2 on, with data published a few minutes ahead so a minute boundary does not matter."""
    start = datetime.fromtimestamp(time.time() // 60 * 60 - 14 * 60, UTC)
    for name in names:
        create_job(aws, name)
        job_metrics.set_start_time(aws, name, start)
        publish_minutes(aws, name, start=start, first=0, last=17, scenario=CPU)


def _live_claims(aws: LocalAws, table: str) -> list[str]:
    items = cached_client(aws, "dynamodb").scan(TableName=table)["Items"]
    return sorted(i["pk"]["S"] for i in items if i.get("state", {}).get("S") not in (None, DONE))


def test_handler_little_time_left_starts_only_what_fits_and_later_runs_act_on_every_job_once(aws: LocalAws) -> None:
    from smx_debug.actions import Runtime

    env = action_env(aws)
    _now_aligned_jobs(aws, JOBS)
    clock = Clock()
    actions = Runtime.from_env(env, clients=lambda service: Slow(cached_client(aws, service), clock, ANSWER))
    runtime = EvaluatorRuntime(settings=EvaluatorSettings.from_env(env), clients=clients(aws),
                               responder=action_responder(actions))
    summaries: list[dict[str, Any]] = []
    for _ in range(12):
        context = Context(clock, TIMEOUT)
        started = clock.now
        summaries.append(handle_invocation({"source": "aws.events"}, context, runtime=runtime))
        elapsed = clock.now - started
        assert elapsed < TIMEOUT, f"invocation {len(summaries)} took {elapsed:g} s of a {TIMEOUT:g} s timeout"
        assert _live_claims(aws, env["SMX_LEDGER_TABLE"]) == []  # nothing left claimed to be killed with
        if all(local.stop_calls(aws, job) for job in JOBS):
            break
    first = summaries[0]
    assert first["job_errors"].get("out-of-time", 0) >= 1, first
    cut = [job for job, reasons in first["failed"].items() if "out-of-time" in reasons]
    assert cut and set(cut) <= set(JOBS)
    assert all(local.stop_calls(aws, job) == 1 for job in JOBS), [local.stop_calls(aws, j) for j in JOBS]
    metrics = cached_client(aws, "cloudwatch").list_metrics(Namespace="SmxDebug", MetricName=JOB_ERRORS_METRIC)
    reasons = {d["Value"] for m in metrics["Metrics"] for d in m["Dimensions"] if d["Name"] == REASON_DIMENSION}
    assert "out-of-time" in reasons


def _deadline(clock: Clock, left: float, call_seconds: float = 24.0) -> Deadline:
    ends = clock.now + left
    return Deadline(lambda: max(0.0, ends - clock.now) * 1000, call_seconds)


class SlowRecorder(Recorder):
    """A responder whose acting takes ``seconds`` of the clock (the action core's calls, not bounded here)."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds
        self.deadlines: list[float] = []

    def __call__(self, job: str, triggers: Sequence[Any], *, deadline: Deadline | None = None,
                 description: Any = None) -> Any:
        self.deadlines.append(deadline.left() if deadline is not None else float("inf"))
        self.clock.now += self.seconds
        return super().__call__(job, triggers)


def test_run_jobs_cut_for_time_keep_their_cursors_and_finished_ones_are_saved(aws: LocalAws) -> None:
    for job in JOBS:
        create_job(aws, job)
        publish(aws, job, 0, 30, LATE)
    config = settings()
    run_once(config, clients(aws), Recorder(), now=at(8) + 5)  # every job known, nothing fired yet
    store = CursorStore(TABLE, clients(aws).dynamodb)
    before = store.load(JOBS)
    clock = Clock()
    responder = SlowRecorder(clock, seconds=15.0)
    # 24 s of 60 kept to finish; each job's actions take 15 s: the first two jobs start, the third does not fit
    report = run_once(config, clients(aws), responder, now=at(15) + 5, deadline=_deadline(clock, 60.0))
    acted = responder.jobs()
    assert len(acted) == 2, report.summary()
    cut = sorted(set(JOBS) - set(acted))
    assert report.summary()["failed"] == {job: ["out-of-time"] for job in cut}
    assert report.error_counts() == {"out-of-time": 2}
    assert all(left <= 60.0 - 24.0 for left in responder.deadlines)  # the action core never sees the margin
    after = store.load(JOBS)
    assert all(after[j].through == (at(15) + 5 - 60) // 60 * 60 and after[j].fired for j in acted)  # progress saved
    assert all(after[j].through == before[j].through and not after[j].fired for j in cut)  # tried again
    assert _live_claims(aws, TABLE) == []  # every job lease released

    again = SlowRecorder(clock, seconds=15.0)
    run_once(config, clients(aws), again, now=at(15) + 35, deadline=_deadline(clock, 60.0))
    assert sorted(again.jobs()) == cut  # the jobs furthest behind go first


def test_run_with_no_time_for_one_call_claims_nothing_and_counts_every_job(aws: LocalAws) -> None:
    for job in JOBS[:2]:
        create_job(aws, job)
        publish(aws, job, 0, 30, LATE)
    clock = Clock()
    responder = SlowRecorder(clock, seconds=1.0)
    report = run_once(settings(), clients(aws), responder, now=at(15) + 5, deadline=_deadline(clock, 30.0))
    assert responder.calls == []
    assert report.error_counts() == {"out-of-time": 2}
    assert CursorStore(TABLE, clients(aws).dynamodb).load(JOBS[:2]) == {}
    assert _live_claims(aws, TABLE) == []


@pytest.mark.parametrize("left", [None, 3600.0])
def test_run_with_time_enough_evaluates_every_job(aws: LocalAws, left: float | None) -> None:
    for job in JOBS:
        create_job(aws, job)
        publish(aws, job, 0, 30, LATE)
    clock = Clock()
    responder = SlowRecorder(clock, seconds=10.0)
    deadline = None if left is None else _deadline(clock, left)
    report = run_once(settings(), clients(aws), responder, now=at(15) + 5, deadline=deadline)
    assert sorted(responder.jobs()) == JOBS and report.error_counts() == {}


def test_shard_jobs_cut_for_time_are_job_errors_not_a_batch_failure_and_the_next_schedule_evaluates_them(
    aws: LocalAws,
) -> None:
    from smx_debug.watch.discover import WatchedJob
    from smx_debug.watch.handler import encode_shard, handle_shards

    sagemaker = clients(aws).sagemaker
    jobs = []
    for job in JOBS:
        create_job(aws, job)
        publish(aws, job, 0, 30, LATE)
        arn = sagemaker.describe_training_job(TrainingJobName=job)["TrainingJobArn"]
        jobs.append(WatchedJob(name=job, arn=arn))
    config = settings(jobs_per_invocation=4)

    def event(minute: float) -> dict[str, Any]:
        body = encode_shard(jobs, at(minute))
        return {"Records": [{"messageId": f"m{minute}", "body": body, "eventSource": "aws:sqs",
                             "attributes": {"SentTimestamp": str(int(at(minute) * 1000))}}]}

    clock = Clock()
    responder = SlowRecorder(clock, seconds=15.0)
    answer = handle_shards(event(15.1), config, clients(aws), responder, clock=lambda: at(15.1),
                           deadline=_deadline(clock, 60.0))
    # a redelivery after the visibility timeout would come as a stale shard and be dropped: the next schedule
    # sends these jobs again, furthest behind first
    assert answer["batchItemFailures"] == []
    (shard,) = answer["shards"]
    cut = sorted(j for j, reasons in shard["failed"].items() if reasons == ["out-of-time"])
    assert len(responder.jobs()) == 2 and len(cut) == 2 and shard["job_errors"] == {"out-of-time": 2}
    again = SlowRecorder(clock, seconds=15.0)
    handle_shards(event(15.6), config, clients(aws), again, clock=lambda: at(15.6), deadline=_deadline(clock, 60.0))
    assert sorted(again.jobs()) == cut
