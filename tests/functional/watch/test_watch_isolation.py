"""One job's failure is that job's (issue 20 item 3, defects 2, 3, 4): recorded, counted by reason, retried next run;
only what breaks the whole run fails it; overlapping runs never evaluate or act on a job twice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from profiler_support import put_profiler_output
from watch_support import (
    BUCKET,
    T0,
    TABLE,
    Recorder,
    WatchedJobsOnly,
    at,
    clients,
    create_job,
    profiled_job,
    publish,
    settings,
    tight,
    with_clients,
)

from smx_debug.contracts import (
    DEFAULT_NAMESPACE,
    EVALUATOR_TAG,
    JOB_ERRORS_METRIC,
    MANAGED_TAG,
    REASON_DIMENSION,
)
from smx_debug.local import LocalAws
from smx_debug.local.sagemaker.job_metrics import Scenario
from smx_debug.local.throttling import throttle
from smx_debug.simulate import Simulation, SimulationSpec
from smx_debug.watch import WatchedRule, WatchSpec, run_once
from smx_debug.watch.state import RUN_LEASE_KEY, CursorStore, RunReport

CPU = Scenario(kind="cpu_bottleneck", onset=10)
HEALTHY = Scenario()


def _evaluated(report: RunReport) -> list[str]:
    return sorted(j for j, o in report.outcomes.items() if o.status == "evaluated")


def _failed(report: RunReport) -> dict[str, list[str]]:
    return {j: [e.reason for e in o.errors] for j, o in report.outcomes.items() if o.status == "failed"}


# --- defect 2: the role may call ListTags only on watched jobs ---------------------------------------------------

def test_run_account_with_unwatched_jobs_calls_nothing_the_role_may_not(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    create_job(aws, "team-opted", tags={MANAGED_TAG: "TRUE", "smx-debug:on:CPUBottleneck": "stop notify"})
    create_job(aws, "other-team-1")
    create_job(aws, "other-team-2", tags={MANAGED_TAG: "false", "smx-debug:on:CPUBottleneck": "stop"})
    create_job(aws, "other-team-3", tags={MANAGED_TAG: " true"})  # not the opt-in value: no trimming
    for job in ("guarded-a", "team-opted", "other-team-1", "other-team-2", "other-team-3"):
        publish(aws, job, 0, 20, CPU)
    policy = WatchedJobsOnly(aws)
    recorder = Recorder()
    reports = [run_once(settings(), with_clients(aws, sagemaker=policy.client), recorder, now=at(m) + 5)
               for m in range(8, 18)]
    assert policy.denied == []
    assert sorted(recorder.jobs()) == ["guarded-a", "team-opted"]
    assert all(sorted(r.outcomes) == ["guarded-a", "team-opted"] for r in reports)


# --- defect 4 and item 3: throttling past the retries costs one job -----------------------------------------------

@pytest.mark.parametrize("action", ["ListTags", "DescribeTrainingJob"])
def test_run_one_job_throttled_past_the_retries_costs_that_job_only(aws: LocalAws, action: str) -> None:
    jobs = [f"guarded-{i:02d}" for i in range(31)]
    for job in jobs:
        create_job(aws, job)
        publish(aws, job, 0, 12, HEALTHY)
    few = with_clients(aws, sagemaker=tight(aws, "sagemaker"))
    with throttle("sagemaker", action, times=2) as throttled:  # both attempts of the first job's call
        report = run_once(settings(workers=1), few, Recorder(), now=at(12) + 5)
    assert throttled.count == 2
    assert _failed(report) == {"guarded-00": ["throttled"]}
    assert _evaluated(report) == jobs[1:]
    assert "ThrottlingException" in report.outcomes["guarded-00"].notes[0]
    assert "guarded-00" not in CursorStore(TABLE, clients(aws).dynamodb).load(jobs)  # tried again next run
    again = run_once(settings(), clients(aws), Recorder(), now=at(13) + 5)
    assert _evaluated(again) == jobs


def test_run_job_errors_put_by_reason_in_the_deployment_namespace(aws: LocalAws) -> None:
    for job in ("guarded-a", "guarded-b"):
        create_job(aws, job)
        publish(aws, job, 0, 12, HEALTHY)
    few = with_clients(aws, sagemaker=tight(aws, "sagemaker"))
    with throttle("sagemaker", "DescribeTrainingJob", times=2):
        run_once(settings(workers=1), few, Recorder(), now=at(12) + 5)
    cloudwatch = clients(aws).cloudwatch

    def total(dimensions: list[dict[str, str]]) -> float:  # exactly these dimensions, as CloudWatch matches them
        stat = {"Metric": {"Namespace": DEFAULT_NAMESPACE, "MetricName": JOB_ERRORS_METRIC, "Dimensions": dimensions},
                "Period": 60, "Stat": "Sum"}
        answer = cloudwatch.get_metric_data(MetricDataQueries=[{"Id": "q", "MetricStat": stat}], StartTime=T0,
                                            EndTime=T0 + timedelta(hours=1))
        return float(sum(answer["MetricDataResults"][0]["Values"]))

    assert total([{"Name": REASON_DIMENSION, "Value": "throttled"}]) == 1
    assert total([]) == 1  # all reasons together: the alarm's metric
    run_once(settings(), clients(aws), Recorder(), now=at(13) + 5)  # a clean run puts nothing
    assert total([]) == 1


# --- item 3: access denied, poisoned data, a bad watch spec, an action that fails ---------------------------------

def test_run_job_denied_by_its_policy_is_recorded_and_the_others_evaluated(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    create_job(aws, "guarded-b")
    publish(aws, "guarded-a", 0, 12, HEALTHY)
    publish(aws, "guarded-b", 0, 12, HEALTHY)
    policy = WatchedJobsOnly(aws, prefixes=("guarded-a",))  # a policy narrower than the deployment's prefixes
    report = run_once(settings(), with_clients(aws, sagemaker=policy.client), Recorder(), now=at(12) + 5)
    assert _failed(report) == {"guarded-b": ["access-denied"]}
    assert _evaluated(report) == ["guarded-a"]
    assert report.summary()["job_errors"] == {"access-denied": 1}


POISON = [b'{"Type": "cpu", "Name": "\\ud800", "Dimension": "CPUUtilization", "Value": 1.0, "NodeId": "algo-1", '
          b'"Timestamp": %d}',
          b"[" * 5000 + b"]" * 5000,
          b'{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": NaN, "NodeId": "algo-1", '
          b'"Timestamp": %d}']


def test_run_poisoned_profiler_output_fails_no_run_and_costs_no_other_job(aws: LocalAws) -> None:
    profiled_job(aws, "guarded-poisoned")
    create_job(aws, "guarded-plain")
    publish(aws, "guarded-poisoned", 0, 16, Scenario(vcpus=32, gpus=4))
    publish(aws, "guarded-plain", 0, 16, CPU)
    sim = Simulation(SimulationSpec(scenario="cpu_bottleneck", onset_s=600, job_start=T0, duration_s=16 * 60,
                                    nodes=1, cpus=32, gpus=4, interval_ms=500, seed=3, initialization_s=0))
    put_profiler_output(aws, BUCKET, "guarded-poisoned", sim, sim.minutes(),
                        tail=lambda minute: b"\n".join(line.replace(b"%d", str(minute + 30).encode())
                                                       for line in POISON) + b"\n")
    recorder = Recorder()
    reports = [run_once(settings(), clients(aws), recorder, now=at(m) + 5) for m in range(8, 16)]
    assert all(_evaluated(r) == ["guarded-plain", "guarded-poisoned"] for r in reports)
    assert all(not o.errors for r in reports for o in r.outcomes.values())  # the reader skipped the lines
    note = reports[-1].outcomes["guarded-poisoned"].notes[0]
    assert note.startswith("profiler output: ") and "strings with lone surrogates" in note and "NaN numbers" in note
    assert sorted(recorder.jobs()) == ["guarded-plain", "guarded-poisoned"]


class _BrokenOutput:
    """An S3 client whose reads under one prefix fail the way no AWS call does (output no reader survives)."""

    def __init__(self, s3: Any, prefix: str) -> None:
        self.s3, self.prefix = s3, prefix

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)

    def get_object(self, **kwargs: Any) -> Any:
        if str(kwargs.get("Key", "")).startswith(self.prefix):
            raise ValueError("poisoned beyond what the reader skips")
        return self.s3.get_object(**kwargs)


def test_run_profiler_output_the_reader_cannot_survive_is_bad_data_and_cloudwatch_judges(aws: LocalAws) -> None:
    profiled_job(aws, "guarded-broken")
    create_job(aws, "guarded-ok")
    publish(aws, "guarded-broken", 0, 16, Scenario(kind="cpu_bottleneck", onset=10, vcpus=32, gpus=4))
    publish(aws, "guarded-ok", 0, 16, HEALTHY)
    aws.client("s3").put_object(Bucket=BUCKET, Key="debugger/guarded-broken/profiler-output/system/incremental/"
                                "2026112308/1795420800.algo-1.json", Body=b"{}\n")
    broken = with_clients(aws, s3=_BrokenOutput(clients(aws).s3, "debugger/guarded-broken/"))
    recorder = Recorder()
    reports = [run_once(settings(), broken, recorder, now=at(m) + 5) for m in range(8, 16)]
    assert all(_evaluated(r) == ["guarded-broken", "guarded-ok"] for r in reports)
    assert {r.summary()["job_errors"]["bad-data"] for r in reports} == {1}
    assert "CloudWatch host averages used instead" in reports[-1].outcomes["guarded-broken"].notes[0]
    assert recorder.jobs() == ["guarded-broken"]  # judged on CloudWatch, stopped like any other job


def test_run_rule_failing_on_one_jobs_data_costs_that_job_only(aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> None:
    from smx_debug.evaluate.registry import REGISTRY

    original = REGISTRY["LossNotDecreasing"]

    def chokes_on_poison(data: Any, params: Any) -> Any:  # a rule defect that one job's values reach
        if (data.scalars["value"] > 1e6).any():
            raise ZeroDivisionError("float division by zero")
        return original(data, params)

    monkeypatch.setitem(REGISTRY, "LossNotDecreasing", chokes_on_poison)
    create_job(aws, "guarded-a")
    create_job(aws, "guarded-b")
    publish(aws, "guarded-a", 0, 20, Scenario(kind="loss_plateau", onset=10))
    publish(aws, "guarded-b", 0, 20, Scenario(kind="loss_plateau", onset=10, loss_metrics=("train:loss",)))
    from smx_debug.local.cloudwatch.metric_data import put_datapoints

    put_datapoints(aws, "/aws/sagemaker/TrainingJobs", "validation:loss", {"TrainingJobName": "guarded-b"},
                   [T0 + timedelta(minutes=m, seconds=30) for m in range(21)], [1e9] * 21)
    recorder = Recorder()
    reports = [run_once(settings(), clients(aws), recorder, now=at(m) + 5) for m in range(8, 18)]
    assert all(_failed(r) == {"guarded-b": ["bad-data"]} for r in reports)
    assert recorder.jobs() == ["guarded-a"]
    assert "evaluating its rules failed (bad-data)" in reports[-1].outcomes["guarded-b"].notes[0]
    assert CursorStore(TABLE, clients(aws).dynamodb).load(["guarded-b"])["guarded-b"].through is None


def test_run_bad_watch_spec_is_that_jobs_error_the_defaults_guard_it_and_it_is_read_again(aws: LocalAws) -> None:
    spec = WatchSpec(rules=(WatchedRule(name="CPU-strict", rule="CPUBottleneck", parameters={"threshold": 20}),))
    s3 = aws.client("s3")
    s3.put_object(Bucket=BUCKET, Key=spec.key, Body=b"{not json")  # a damaged object where the spec should be
    create_job(aws, "team-job", tags={MANAGED_TAG: "true", EVALUATOR_TAG: spec.key})
    create_job(aws, "guarded-b")
    publish(aws, "team-job", 0, 30, CPU)
    publish(aws, "guarded-b", 0, 30, HEALTHY)
    recorder = Recorder()
    first = run_once(settings(), clients(aws), recorder, now=at(9) + 5)
    assert first.summary()["job_errors"] == {"watch-spec": 1}
    assert _evaluated(first) == ["guarded-b", "team-job"]  # the default rules guard it meanwhile
    assert "not JSON" in first.outcomes["team-job"].notes[0]
    s3.put_object(Bucket=BUCKET, Key=spec.key, Body=spec.to_json().encode())  # repaired
    second = run_once(settings(), clients(aws), recorder, now=at(10) + 5)
    assert second.summary()["job_errors"] == {}
    cursor = CursorStore(TABLE, clients(aws).dynamodb).load(["team-job"])["team-job"]
    assert [r["name"] for r in cursor.info["rules"]] == ["CPU-strict", "CPUBottleneck", "LossNotDecreasing"]


# --- only what breaks the whole run fails it ----------------------------------------------------------------------

@pytest.mark.parametrize(("service", "action", "field"), [
    ("sagemaker", "ListTrainingJobs", "sagemaker"),  # jobs cannot be listed
    ("dynamodb", "BatchGetItem", "dynamodb"),  # cursors cannot be read
])
def test_run_jobs_or_cursors_unreadable_fails_the_invocation_and_frees_the_lease(
    aws: LocalAws, service: str, action: str, field: str
) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 12, HEALTHY)
    few = with_clients(aws, **{field: tight(aws, service)})
    with throttle(service, action, times=2), pytest.raises(ClientError, match=r"Throttling|Rate exceeded"):
        run_once(settings(), few, Recorder(), now=at(11) + 5)
    assert _evaluated(run_once(settings(), clients(aws), Recorder(), now=at(11) + 20)) == ["guarded-a"]


def test_run_search_failing_keeps_recent_opted_in_jobs_and_decides_new_ones_next_run(aws: LocalAws) -> None:
    create_job(aws, "team-a", tags={MANAGED_TAG: "true"})
    create_job(aws, "guarded-p")
    for job in ("team-a", "guarded-p"):
        publish(aws, job, 0, 14, HEALTHY)
    run_once(settings(), clients(aws), Recorder(), now=at(9) + 5)
    create_job(aws, "team-new", tags={MANAGED_TAG: "true"})
    publish(aws, "team-new", 0, 14, HEALTHY)
    few = with_clients(aws, sagemaker=tight(aws, "sagemaker"))
    with throttle("sagemaker", "Search", times=2):
        report = run_once(settings(), few, Recorder(), now=at(10) + 5)
    assert _evaluated(report) == ["guarded-p", "team-a"]
    assert [e.reason for e in report.errors] == ["throttled"]
    assert report.summary()["job_errors"] == {"throttled": 1}
    later = run_once(settings(), clients(aws), Recorder(), now=at(11) + 5)
    assert _evaluated(later) == ["guarded-p", "team-a", "team-new"]


# --- overlapping runs --------------------------------------------------------------------------------------------

def test_run_overlapping_runs_never_evaluate_or_act_on_a_job_twice(aws: LocalAws) -> None:
    jobs = ["guarded-a", "guarded-b", "guarded-c"]
    for job in jobs:
        create_job(aws, job)
        publish(aws, job, 0, 30, CPU)
    recorder = Recorder()
    for m in range(8, 14):  # nothing fires before minute 14
        run_once(settings(), clients(aws), recorder, now=at(m) + 5)
    second: list[RunReport] = []
    started: list[bool] = []

    def responder(job: str, triggers: Any, *, deadline: Any = None, description: Any = None) -> Any:
        if not started:  # the next run starts while this one is between reading and saving the cursors
            started.append(True)
            second.append(run_once(settings(), clients(aws), responder, now=at(14) + 35))
        return recorder(job, triggers)

    first = run_once(settings(), clients(aws), responder, now=at(14) + 5)
    assert sorted(recorder.jobs()) == jobs  # each job acted on once
    assert second[0].outcomes == {} and "holds the run lease" in str(second[0].skipped)
    assert _evaluated(first) == jobs
    for m in range(15, 19):  # the fired rules were saved: never handed over again
        run_once(settings(), clients(aws), recorder, now=at(m) + 5)
    assert sorted(recorder.jobs()) == jobs


def test_run_lease_left_by_a_killed_run_expires_after_lease_seconds(aws: LocalAws) -> None:
    create_job(aws, "guarded-a")
    publish(aws, "guarded-a", 0, 14, HEALTHY)
    from smx_debug.actions.ledger import Ledger

    killed = Ledger(clients(aws).dynamodb, TABLE, clock=lambda: at(10), lease_seconds=90)
    assert killed.claim(RUN_LEASE_KEY, {"run_at": at(10)})  # then Lambda killed that run
    blocked = run_once(settings(), clients(aws), Recorder(), now=at(11))
    assert blocked.skipped is not None and blocked.outcomes == {}
    assert _evaluated(run_once(settings(), clients(aws), Recorder(), now=at(12))) == ["guarded-a"]
