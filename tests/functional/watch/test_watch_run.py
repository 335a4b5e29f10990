"""The evaluator end to end on the local AWS: discovery, incremental reads, rules, the responder (recorded here;
tests/functional/watch/test_watch_actions.py goes through the real action path)."""

from __future__ import annotations

import json

import pytest
from botocore.config import Config
from watch_support import BUCKET, TABLE, Recorder, at, clients, create_job, publish, settings

from smx_debug import local
from smx_debug.contracts import EVALUATOR_TAG, MANAGED_TAG
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.local.throttling import throttle
from smx_debug.rules.watch_spec import WatchedRule, WatchSpec
from smx_debug.watch import run_once
from smx_debug.watch.state import CursorStore, RunReport

CPU = Scenario(kind="cpu_bottleneck", onset=10)
PLATEAU = Scenario(kind="loss_plateau", onset=10)
HEALTHY = Scenario()


def _runs(aws: LocalAws, minutes: range, recorder: Recorder, **changes: object) -> list[RunReport]:
    return [run_once(settings(**changes), clients(aws), recorder, now=at(m) + 5) for m in minutes]


def _first_trigger_minute(aws: LocalAws, job: str, minutes: range, recorder: Recorder) -> float | None:
    for m in minutes:
        report = run_once(settings(), clients(aws), recorder, now=at(m) + 5)
        if job in report.outcomes and report.outcomes[job].triggers:
            return m + 5 / 60
    return None


@pytest.mark.parametrize(("scenario", "rule"), [(CPU, "CPUBottleneck"), (PLATEAU, "LossNotDecreasing")])
def test_run_job_watched_by_prefix_triggers_once_within_five_minutes_of_onset(
    aws: LocalAws, scenario: Scenario, rule: str
) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 30, scenario)
    recorder = Recorder()
    fired_at = _first_trigger_minute(aws, "guarded-a", range(6, 30), recorder)
    assert fired_at is not None
    assert fired_at - scenario.onset <= 5
    assert [(job, [t.rule for t in ts]) for job, ts in recorder.calls] == [("guarded-a", [rule])]
    assert recorder.calls[0][1][0].kind == ("profiler" if rule == "CPUBottleneck" else "debugger")


def test_run_healthy_job_never_triggers(aws: LocalAws) -> None:
    create_job(aws, "guarded-ok", hosts=2)
    publish(aws, "guarded-ok", 0, 40, HEALTHY, hosts=2)
    recorder = Recorder()
    reports = _runs(aws, range(3, 40), recorder)
    assert recorder.calls == []
    assert all(r.outcomes["guarded-ok"].status == "evaluated" for r in reports)


@pytest.mark.parametrize("value", ["true", "True", "TRUE"])
def test_run_job_watched_by_opt_in_tag_triggers(aws: LocalAws, value: str) -> None:
    create_job(aws, "tagged-job", tags={MANAGED_TAG: value})
    publish(aws, "tagged-job", 0, 20, CPU)
    recorder = Recorder()
    _runs(aws, range(8, 18), recorder)
    assert recorder.jobs() == ["tagged-job"]


def test_run_unwatched_job_with_bad_metrics_is_never_touched(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    create_job(aws, "someone-else", tags={MANAGED_TAG: "false"})
    publish(aws, "guarded-a", 0, 20, HEALTHY)
    publish(aws, "someone-else", 0, 20, CPU)
    recorder = Recorder()
    reports = _runs(aws, range(8, 18), recorder)
    assert recorder.calls == []
    assert all("someone-else" not in r.outcomes for r in reports)
    # it is never read either: the healthy job's 7 metrics are all a run requests
    assert {r.metrics_requested for r in reports} == {7}
    assert local.stop_calls(aws, "someone-else") == 0


def test_run_job_that_finished_between_runs_is_not_evaluated(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 9, HEALTHY)
    recorder = Recorder()
    first = run_once(settings(), clients(aws), recorder, now=at(9) + 5)
    assert first.outcomes["guarded-a"].status == "evaluated"
    local.set_training_job_status(aws, "guarded-a", "Completed")
    publish(aws, "guarded-a", 10, 20, CPU)  # bad data arriving late must not act on a finished job
    later = _runs(aws, range(10, 20), recorder)
    assert recorder.calls == []
    assert all(r.watched == 0 and not r.outcomes for r in later)  # another team's jobs still run (conftest)


def test_run_job_without_metrics_reports_missing_data_and_does_not_stop(aws: LocalAws) -> None:
    create_job(aws, "guarded-silent")
    recorder = Recorder()
    report = run_once(settings(), clients(aws), recorder, now=at(12))
    outcome = report.outcomes["guarded-silent"]
    assert outcome.status == "no data"
    assert "no CloudWatch instance metrics for guarded-silent" in outcome.notes[0]
    assert recorder.calls == []
    early = run_once(settings(), clients(aws), recorder, now=at(3))  # just started: not yet a problem
    assert early.outcomes["guarded-silent"].notes == []


def test_run_throttled_get_metric_data_is_retried(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 20, CPU)
    recorder = Recorder()
    _runs(aws, range(8, 12), recorder)
    with throttle("cloudwatch", "GetMetricData", times=2) as throttled:
        reports = _runs(aws, range(12, 16), recorder)
    assert throttled.count == 2
    assert all(r.outcomes["guarded-a"].status == "evaluated" for r in reports)
    assert recorder.jobs() == ["guarded-a"]


def test_run_throttling_beyond_retries_fails_one_call_and_the_run_completes_for_the_others(aws: LocalAws) -> None:
    create_job(aws, "guarded-known")
    publish(aws, "guarded-known", 0, 20, CPU)
    recorder = Recorder()
    run_once(settings(), clients(aws), recorder, now=at(9) + 5)  # known: its next read starts at its cursor
    create_job(aws, "guarded-new")  # new: reads its whole window, so it is in another GetMetricData call
    publish(aws, "guarded-new", 0, 20, CPU)
    few = clients(aws)
    tight = type(few)(
        sagemaker=few.sagemaker, dynamodb=few.dynamodb, s3=few.s3,
        cloudwatch=aws.client("cloudwatch", config=Config(retries={"mode": "standard", "total_max_attempts": 2})),
    )
    with throttle("cloudwatch", "GetMetricData", times=2):  # both attempts of the first call (the new job's)
        report = run_once(settings(workers=1), tight, recorder, now=at(14) + 5)  # one call at a time: in order
    assert report.outcomes["guarded-new"].status == "failed"
    assert [e.reason for e in report.outcomes["guarded-new"].errors] == ["throttled"]
    assert "Throttling" in report.outcomes["guarded-new"].notes[0]
    assert report.outcomes["guarded-known"].status == "evaluated"
    assert recorder.jobs() == ["guarded-known"]
    store = CursorStore(TABLE, clients(aws).dynamodb)
    assert store.load(["guarded-new"])["guarded-new"].through is None  # read again next run
    again = run_once(settings(), clients(aws), recorder, now=at(15) + 5)
    assert again.outcomes["guarded-new"].status == "evaluated"
    assert recorder.jobs() == ["guarded-known", "guarded-new"]


def test_run_plan_with_two_configurations_of_one_rule_evaluates_both(aws: LocalAws) -> None:
    spec = WatchSpec(rules=(
        WatchedRule(name="CPU-strict", rule="CPUBottleneck", parameters={"threshold": 20}),
        WatchedRule(name="CPU-lax", rule="CPUBottleneck", parameters={"threshold": 90}),
    ))
    aws.client("s3").put_object(Bucket=BUCKET, Key=spec.key, Body=spec.to_json().encode())
    create_job(aws, "planned-job", tags={MANAGED_TAG: "true", EVALUATOR_TAG: spec.key})
    # a milder bottleneck: 2 of every 5 minutes bad from minute 10 on
    bad = {10, 13, 15, 18, 20, 23}
    for m in range(0, 40):
        publish(aws, "planned-job", m, m, CPU if m in bad else HEALTHY)
    recorder = Recorder()
    reports = _runs(aws, range(8, 30), recorder, default_rules=WatchSpec())
    assert [t.rule for _, ts in recorder.calls for t in ts] == ["CPU-strict"]
    cursor = CursorStore(TABLE, clients(aws).dynamodb).load(["planned-job"])["planned-job"]
    assert [r["name"] for r in cursor.info["rules"]] == ["CPU-strict", "CPU-lax"]
    assert set(cursor.fired) == {"CPU-strict"}
    assert all(r.outcomes["planned-job"].notes == [] for r in reports)


def test_run_spec_tag_naming_a_missing_object_is_reported_and_defaults_apply(aws: LocalAws) -> None:
    key = WatchSpec(rules=(WatchedRule(name="x", rule="CPUBottleneck"),)).key
    create_job(aws, "guarded-a", tags={EVALUATOR_TAG: key})
    publish(aws, "guarded-a", 0, 20, CPU)
    recorder = Recorder()
    report = run_once(settings(), clients(aws), recorder, now=at(9))
    assert any("cannot be read (NoSuchKey)" in n for n in report.outcomes["guarded-a"].notes)
    _runs(aws, range(10, 16), recorder)
    assert recorder.jobs() == ["guarded-a"]  # the deployment's default CPUBottleneck still guards it


def test_run_second_run_reads_only_the_new_minutes(aws: LocalAws) -> None:
    for i in range(3):
        create_job(aws, f"guarded-{i}", hosts=4)
        publish(aws, f"guarded-{i}", 0, 30, HEALTHY, hosts=4)
    recorder = Recorder()
    first, second = _runs(aws, range(20, 22), recorder)
    per_job = 4 * 5 + 2
    assert first.metrics_requested == second.metrics_requested == 3 * per_job
    assert first.get_metric_data_calls == second.get_metric_data_calls == 1
    assert first.datapoints == 3 * per_job * 11  # the whole window (LossNotDecreasing's: 11 minutes)
    assert second.datapoints == 3 * per_job * 3  # the new minute plus a 2-minute overlap
    item = clients(aws).dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "guarded-0"}})["Item"]
    assert len(item["data"]["B"]) < 8000
    assert json.loads(item["info"]["S"])["hosts"] == 4


def test_run_action_failure_costs_that_job_only_and_is_tried_again_next_minute(aws: LocalAws) -> None:
    from botocore.exceptions import ClientError

    create_job(aws, "guarded-a")
    create_job(aws, "guarded-b")
    publish(aws, "guarded-a", 0, 20, CPU)
    publish(aws, "guarded-b", 0, 20, CPU)
    recorder = Recorder()
    calls: list[str] = []

    def flaky(job: str, triggers: object, *, deadline: object = None, description: object = None) -> dict[str, str]:
        calls.append(job)
        if job == "guarded-a" and calls.count("guarded-a") == 1:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "StopTrainingJob")
        return recorder(job, triggers)  # type: ignore[arg-type]

    _runs(aws, range(8, 14), recorder)  # nothing fires before minute 14
    report = run_once(settings(), clients(aws), flaky, now=at(14) + 5)  # the invocation does not fail
    failed = report.outcomes["guarded-a"]
    assert (failed.status, [e.reason for e in failed.errors]) == ("failed", ["throttled"])
    assert "acting on ['CPUBottleneck'] failed (throttled)" in failed.notes[-1]
    assert report.outcomes["guarded-b"].triggers  # the other job was handled in the same run
    assert report.summary()["job_errors"] == {"throttled": 1}
    assert recorder.jobs() == ["guarded-b"]
    again = run_once(settings(), clients(aws), flaky, now=at(15) + 5)  # the failed trigger is tried again
    assert [j for j, o in again.outcomes.items() if o.triggers] == ["guarded-a"]
    assert recorder.jobs() == ["guarded-b", "guarded-a"]
