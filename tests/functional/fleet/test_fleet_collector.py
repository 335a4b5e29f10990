"""The fleet collector on the local AWS: every job's metadata, the unwatched jobs' CloudWatch minutes, the verdict
log compacted from the inbox; idempotent on reruns and redelivered inbox objects; each job's failure its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow.parquet as pq
import pytest

from smx_debug import local
from smx_debug.actions.verdict_log import inbox_key
from smx_debug.contracts import FLEET_INBOX_PREFIX, FLEET_STATE_KEY, MANAGED_TAG
from smx_debug.fleet.collector import CollectorClients, CollectorSettings, collect_fleet
from smx_debug.fleet.s3_boto import stack_root
from smx_debug.local import LocalAws
from smx_debug.local.clients import client
from smx_debug.local.cloudwatch import metric_data
from smx_debug.local.sagemaker import job_metrics
from smx_debug.local.sagemaker.job_metrics import Scenario

BUCKET = "fleet-guard"
T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
NOW = (T0 + timedelta(minutes=30)).timestamp()


@pytest.fixture
def aws(local_aws: LocalAws) -> Iterator[LocalAws]:
    local.install(local_aws)
    metric_data.install()
    job_metrics.install()
    client(local_aws, "s3").create_bucket(Bucket=BUCKET,
                                          CreateBucketConfiguration={"LocationConstraint": local_aws.region})
    yield local_aws


def _job(aws: LocalAws, name: str, tags: dict[str, str], *, instance: str = "ml.g5.2xlarge", hosts: int = 2) -> None:
    client(aws, "sagemaker").create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                                "TrainingInputMode": "File"},
        RoleArn=local.execution_role(aws), OutputDataConfig={"S3OutputPath": "s3://o/o"},
        ResourceConfig={"InstanceType": instance, "InstanceCount": hosts, "VolumeSizeInGB": 5},
        StoppingCondition={"MaxRuntimeInSeconds": 36000}, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    local.set_training_job_status(aws, name, "InProgress")
    job_metrics.set_start_time(aws, name, T0)
    job_metrics.publish_minutes(aws, name, start=T0, first=0, last=28, hosts=hosts,
                                scenario=Scenario(kind="cpu_bottleneck", onset=10, gpus=1, vcpus=8))


def _clients(aws: LocalAws) -> CollectorClients:
    return CollectorClients(sagemaker=client(aws, "sagemaker"), cloudwatch=client(aws, "cloudwatch"),
                            s3=client(aws, "s3"))


def _table(aws: LocalAws, table: str) -> pd.DataFrame:
    root = stack_root(BUCKET, client(aws, "s3"))
    frames = []
    for info in root.files(table):
        with root.filesystem.open_input_file(info.path) as f:
            frames.append(pq.read_table(f).to_pandas())
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _inbox(aws: LocalAws, job: str, rows: list[dict[str, object]], *, now: float, body: bytes | None = None) -> str:
    key = inbox_key(job, rows, now=now)
    data = body if body is not None else "".join(json.dumps(r) + "\n" for r in rows).encode()
    client(aws, "s3").put_object(Bucket=BUCKET, Key=key, Body=data)
    return key


def _row(job: str, event: str, action: str | None, verdict: str, time: str) -> dict[str, object]:
    return {"job": job, "rule": "CPUBottleneck", "rule_type": "CPUBottleneck", "event": event, "verdict": verdict,
            "action": action, "source": "smx-debug evaluator", "time": time, "detail": None}


def test_collector_writes_every_job_and_leaves_watched_minutes_to_the_evaluator(aws: LocalAws) -> None:
    _job(aws, "guarded-a", {"team": "vision"})                    # watched by prefix: the evaluator's minutes
    _job(aws, "research-b", {"team": "research"})                 # unwatched: the collector's minutes
    _job(aws, "research-c", {MANAGED_TAG: "true", "team": "nlp"})  # opted in: the evaluator's
    settings = CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",), evaluator_appends=True)
    report = collect_fleet(settings, _clients(aws), now=NOW)
    assert (report.jobs, report.metadata_written, report.left_to_evaluator, report.minutes_jobs) == (3, 3, 2, 1)
    jobs = _table(aws, "training_jobs").set_index("job")
    assert jobs.loc["research-b", ["team", "instance_type", "instance_count", "gpus_per_instance"]].tolist() == [
        "research", "ml.g5.2xlarge", 2, 1]
    minutes = _table(aws, "system_minutes")
    assert set(minutes["job"]) == {"research-b"} and set(minutes["source"]) == {"cloudwatch"}
    # the first run reads the minutes of the last first_read_hours up to the settled minute (29 minutes, 2 hosts)
    gpu = minutes[minutes["dimension"] == "GPUUtilization"]
    assert len(gpu) == 2 * 29 and set(gpu["devices"]) == {1}
    # without an evaluator, the collector writes every job's minutes
    alone = collect_fleet(CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",)), _clients(aws), now=NOW)
    assert alone.left_to_evaluator == 0 and set(_table(aws, "system_minutes")["job"]) == {
        "guarded-a", "research-b", "research-c"}


def test_collector_rerun_rewrites_nothing_new_and_doubles_no_row(aws: LocalAws) -> None:
    _job(aws, "research-b", {"team": "research"})
    settings = CollectorSettings(bucket=BUCKET)
    collect_fleet(settings, _clients(aws), now=NOW)
    before = _table(aws, "system_minutes")
    job_metrics.publish_minutes(aws, "research-b", start=T0, first=29, last=29, hosts=2,
                                scenario=Scenario(kind="cpu_bottleneck", onset=10, gpus=1, vcpus=8))
    again = collect_fleet(settings, _clients(aws), now=NOW + 60)
    after = _table(aws, "system_minutes")
    assert again.metadata_written == 0  # unchanged job: its metadata row is not rewritten
    assert len(after) == len(before) + 2 * 5  # the new minute (2 hosts x 5 metrics); the overlap replaced
    assert not after.duplicated(["job", "node", "minute", "source", "name", "dimension"]).any()
    state = json.loads(client(aws, "s3").get_object(Bucket=BUCKET, Key=FLEET_STATE_KEY)["Body"].read())
    assert state["through"] == int(NOW + 60 - 60) // 60 * 60 and list(state["jobs"]) == ["research-b"]


def test_collector_compacts_the_inbox_idempotently_and_counts_damaged_lines(aws: LocalAws) -> None:
    _job(aws, "guarded-a", {})
    rows = [_row("guarded-a", "trigger", None, "IssuesFound", "2026-11-23T08:14:00.000+00:00"),
            _row("guarded-a", "action", "stop", "stopped", "2026-11-23T08:14:02.000+00:00")]
    _inbox(aws, "guarded-a", rows, now=NOW - 600)
    _inbox(aws, "guarded-a", rows[:1], now=NOW - 300)  # a redelivered event: the same trigger again
    _inbox(aws, "guarded-a", rows[1:], now=NOW - 200,
           body=b"not json\n" + json.dumps(rows[1]).encode() + b"\n" + b'{"job": "guarded-a", "ru')
    settings = CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",), evaluator_appends=True)
    report = collect_fleet(settings, _clients(aws), now=NOW)
    assert report.inbox_objects == 3
    assert report.appended.skipped == {"verdict lines not JSON": 1, "verdict lines cut mid-write": 1}
    verdicts = _table(aws, "verdicts")
    assert sorted(zip(verdicts["event"], verdicts["action"].fillna("-"), strict=True)) == [
        ("action", "stop"), ("trigger", "-")]
    left = client(aws, "s3").list_objects_v2(Bucket=BUCKET, Prefix=FLEET_INBOX_PREFIX).get("Contents", [])
    assert left == []  # compacted objects are deleted
    _inbox(aws, "guarded-a", rows, now=NOW)  # the same rows once more: still one row each
    collect_fleet(settings, _clients(aws), now=NOW + 60)
    assert len(_table(aws, "verdicts")) == 2


def test_collector_debugger_triggers_come_from_rule_statuses(aws: LocalAws) -> None:
    _job(aws, "research-b", {})
    local.set_rule_statuses(aws, "research-b", debug=[local.rule_status("LossNotDecreasing", "IssuesFound", step=5)])
    collect_fleet(CollectorSettings(bucket=BUCKET), _clients(aws), now=NOW)
    verdicts = _table(aws, "verdicts")
    assert verdicts[["job", "rule", "event", "source"]].values.tolist() == [
        ["research-b", "LossNotDecreasing", "trigger", "SageMaker Debugger"]]


# -- poisoned objects (issue 29, items 13 and 14): skipped, counted by reason, quarantined; the next run goes on ----

QUARANTINE = "smx-debug/fleet/_quarantine/"


def _keys(aws: LocalAws) -> list[str]:
    pages = client(aws, "s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return sorted(o["Key"] for page in pages for o in page.get("Contents") or [])


def _quarantined(aws: LocalAws) -> dict[str, bytes]:
    s3 = client(aws, "s3")
    return {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in _keys(aws) if k.startswith(QUARANTINE)}


def _poisoned(field: str, value: str) -> bytes:
    row = _row("guarded-a", "trigger", None, "IssuesFound", "2026-11-23T08:20:00.000+00:00")
    return json.dumps({**row, field: value}).encode()  # json.dumps escapes a lone surrogate as \udc80


@pytest.mark.parametrize(("line", "reason"), [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "verdict lines nested too deep", id="nested-100000-deep"),
    pytest.param(_poisoned("job", "guarded-\udc80"), "verdict lines not a valid row", id="lone-surrogate-job"),
    pytest.param(_poisoned("rule", "CPU\udc80"), "verdict lines not a valid row", id="lone-surrogate-rule"),
    pytest.param(_poisoned("detail", "\udc80"), "verdict lines not a valid row", id="lone-surrogate-detail"),
    pytest.param(_poisoned("job", "../../../outside"), "verdict lines not a valid row", id="job-dot-dot"),
    pytest.param(_poisoned("job", "guarded-a\u0000x"), "verdict lines not a valid row", id="job-nul"),
    pytest.param(_poisoned("rule", "CPU\nBottleneck"), "verdict lines not a valid row", id="rule-two-lines"),
    pytest.param(b"\xff\xfe not UTF-8", "verdict lines not UTF-8", id="not-utf-8"),
])
def test_collector_poisoned_inbox_line_is_counted_quarantined_and_the_rest_appended(aws: LocalAws, line: bytes,
                                                                                    reason: str) -> None:
    _job(aws, "guarded-a", {})
    good = _row("guarded-a", "trigger", None, "IssuesFound", "2026-11-23T08:14:00.000+00:00")
    body = json.dumps(good).encode() + b"\n" + line + b"\n"
    key = _inbox(aws, "guarded-a", [good], now=NOW - 600, body=body)
    stop = _row("guarded-a", "action", "stop", "stopped", "2026-11-23T08:14:02.000+00:00")
    clean = _inbox(aws, "guarded-a", [stop], now=NOW - 300)  # a clean object beside it: compacted and deleted
    settings = CollectorSettings(bucket=BUCKET, watch_prefixes=("guarded-",), evaluator_appends=True)
    report = collect_fleet(settings, _clients(aws), now=NOW)
    assert report.appended.skipped == {reason: 1} and report.failed == {}
    assert report.inbox_objects == 2 and report.quarantined == [key]
    assert sorted(_table(aws, "verdicts")[["job", "rule", "event"]].values.tolist()) == [
        ["guarded-a", "CPUBottleneck", "action"], ["guarded-a", "CPUBottleneck", "trigger"]]
    # the object's bytes are kept whole under the quarantine prefix; nothing is left in the inbox
    assert list(_quarantined(aws).values()) == [body] and next(iter(_quarantined(aws))).endswith(key)
    assert not any(k.startswith(FLEET_INBOX_PREFIX) for k in _keys(aws)) and clean != key
    # every key the run wrote is a table file, the state or the quarantine: no '..' segment, no NUL
    assert all(k.startswith(("smx-debug/fleet/training_jobs/", "smx-debug/fleet/system_minutes/",
                             "smx-debug/fleet/verdicts/", FLEET_STATE_KEY, QUARANTINE)) for k in _keys(aws))
    assert not [k for k in _keys(aws) if "/../" in k or "\x00" in k]
    again = collect_fleet(settings, _clients(aws), now=NOW + 60)
    assert (again.inbox_objects, again.quarantined, again.appended.skipped, again.failed) == (0, [], {}, {})


def _state(aws: LocalAws, body: bytes) -> None:
    client(aws, "s3").put_object(Bucket=BUCKET, Key=FLEET_STATE_KEY, Body=body)


def _saved_state(aws: LocalAws) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(
        client(aws, "s3").get_object(Bucket=BUCKET, Key=FLEET_STATE_KEY)["Body"].read())
    return loaded


END = int(NOW - 60) // 60 * 60  # the settled minute the run at NOW reads up to


@pytest.mark.parametrize(("body", "reason"), [
    pytest.param(json.dumps({"through": END - 300, "jobs": ["research-b"]}).encode(), "jobs is not an object of fingerprints",
                 id="jobs-a-list"),
    pytest.param(json.dumps({"through": END - 300, "jobs": {"research-b": 7}}).encode(), "jobs is not an object of fingerprints",
                 id="jobs-fingerprint-a-number"),
    pytest.param(json.dumps({"through": 10**20, "jobs": {}}).encode(), "through is not a minute up to now",
                 id="through-10-to-the-20"),
    pytest.param(json.dumps({"through": -60, "jobs": {}}).encode(), "through is not a minute up to now",
                 id="through-negative"),
    pytest.param(json.dumps({"through": -(10**20), "jobs": {}}).encode(), "through is not a minute up to now",
                 id="through-minus-10-to-the-20"),
    pytest.param(json.dumps({"through": True, "jobs": {}}).encode(), "through is not a minute up to now",
                 id="through-a-boolean"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, "not JSON", id="nested-100000-deep"),
    pytest.param(b"{\"through\": ", "not JSON", id="cut-mid-write"),
    pytest.param(b"[1, 2]", "not a JSON object", id="a-list"),
])
def test_collector_poisoned_state_is_quarantined_and_the_run_reads_as_a_first_run(aws: LocalAws, body: bytes,
                                                                                  reason: str) -> None:
    _job(aws, "research-b", {})
    _state(aws, body)
    settings = CollectorSettings(bucket=BUCKET)
    report = collect_fleet(settings, _clients(aws), now=NOW)
    assert report.appended.skipped == {f"collector state quarantined ({reason})": 1} and report.failed == {}
    assert report.quarantined == [FLEET_STATE_KEY] and list(_quarantined(aws).values()) == [body]
    assert report.metadata_written == 1 and report.minutes_jobs == 1  # what the state no longer tells is redone
    assert _saved_state(aws)["through"] == END and list(_saved_state(aws)["jobs"]) == ["research-b"]  # type: ignore[call-overload]
    again = collect_fleet(settings, _clients(aws), now=NOW + 60)
    assert (again.quarantined, again.appended.skipped, again.failed, again.metadata_written) == ([], {}, {}, 0)
